"""The image locks (``snnbench/locks/requirements-*.txt``): one parser, for gpu_setup and for
docker/verify_stack.py.

A lock is ``uv pip compile`` output: exact ``name==version`` pins, each followed by indented
``# via`` notes naming the pins that require it, then, after :data:`OUTSIDE_MARKER`, the pins
the resolver could not take. :func:`parse_lock` reads the pins (anything but an exact ``==`` pin
is an error), which section each is in, and the dependency graph of the ``# via`` notes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from snnbench.gpu_setup._packaging import InvalidRequirement, Requirement, canonicalize_name

#: the GPU image's lock, shipped as package data (``snnbench/locks/requirements-gpu.txt``) and
#: found through :mod:`importlib.resources`: in a checkout (``python -m snnbench.gpu_setup``
#: before snnbench is installed) and in an installed wheel alike
DEFAULT_LOCK = Path(str(files("snnbench.locks").joinpath("requirements-gpu.txt")))
#: the line ``make docker-lock`` writes before the pins the resolver could not take
OUTSIDE_MARKER = "# >>> installed outside the resolver"

#: never installed or replaced here: the machine's own torch, JAX and CUDA stack (a pin from the
#: lock would be wrong for it), and declared dependencies no adapter imports (heavy, or harmful:
#: samna's PyPI stub pip-installs itself at import, lava-nc does not import on Python >= 3.11)
_PROVIDED = re.compile(
    r"^(torch|torchvision|torchaudio|triton|jax|jaxlib|jax-cuda\d+-(plugin|pjrt)|nvidia-(?!ml-py$).*"
    r"|cuda-toolkit|cuda-bindings|cupy(-cuda\d+x)?)$"
)
NOT_NEEDED = frozenset({"tensorboard", "scienceplots", "requests", "samna", "lava-nc", "pytest",
                        "unittest2"})


def canonical(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return str(canonicalize_name(name))


def provided_by_machine(name: str) -> bool:
    """True for distributions gpu_setup never installs (the machine's torch/JAX/CUDA)."""
    return bool(_PROVIDED.match(canonical(name)))


@dataclass(frozen=True)
class Pin:
    """One ``name==version`` line of a lock file."""

    name: str  #: canonical distribution name (PEP 503)
    version: str
    outside_resolver: bool  #: listed after :data:`OUTSIDE_MARKER`


@dataclass(frozen=True)
class Lock:
    """Pins of a ``uv pip compile`` lock and its dependency graph (from the ``# via`` notes)."""

    pins: Mapping[str, str]  #: canonical name → version, in the lock's order
    parents: Mapping[str, frozenset[str]]  #: canonical name → the pins that require it
    outside: frozenset[str] = frozenset()  #: pins after :data:`OUTSIDE_MARKER`

    def entries(self) -> list[Pin]:
        """Every pin, in the lock's order."""
        return [Pin(name, version, name in self.outside) for name, version in self.pins.items()]

    def children(self, name: str) -> set[str]:
        """The pins that ``name`` requires (directly)."""
        return {child for child, parents in self.parents.items() if name in parents}

    def closure(self, roots: Iterable[str]) -> list[str]:
        """``roots`` and everything they require, transitively, minus what the machine
        provides and what no adapter needs; sorted. Unpinned names are kept (and reported by
        :func:`pin` when installed)."""
        seen: set[str] = set()
        todo = [canonical(r) for r in roots]
        while todo:
            name = todo.pop()
            if name in seen or provided_by_machine(name) or name in NOT_NEEDED:
                continue
            seen.add(name)
            todo.extend(self.children(name))
        return sorted(seen)

    def pin(self, name: str) -> str:
        """``name==version`` from the lock, or the bare name when the lock does not pin it."""
        version = self.pins.get(canonical(name))
        return f"{canonical(name)}=={version}" if version else canonical(name)


_VIA = re.compile(r"^#\s*(?:via\s+)?([A-Za-z0-9][A-Za-z0-9._-]*)(\s|$)")


def parse_lock(text: str, source: str = "lock") -> Lock:
    """A lock's pins, their section and their ``# via`` parents.

    Raises ValueError (``<source>:<line>: not an exact pin: ...``) for a line that is neither
    a comment nor an exact ``==`` pin without a marker or URL.
    """
    pins: dict[str, str] = {}
    parents: dict[str, set[str]] = {}
    outside: set[str] = set()
    current: str | None = None
    in_outside = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith(OUTSIDE_MARKER):
            in_outside, current = True, None
            continue
        if not line:
            continue
        if line.startswith("#"):
            via = _VIA.match(line)
            if current and raw.startswith((" ", "\t")) and via and via[1] != "via":
                parents[current].add(canonical(via[1]))
            continue
        try:
            req = Requirement(line.split(" #", 1)[0])
        except InvalidRequirement as exc:
            raise ValueError(f"{source}:{number}: not an exact pin: {line} ({exc})") from exc
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or req.marker or req.url:
            raise ValueError(f"{source}:{number}: not an exact pin: {line}")
        current = canonical(req.name)
        pins[current] = specs[0].version
        parents.setdefault(current, set())
        if in_outside:
            outside.add(current)
    return Lock(pins, {k: frozenset(v) for k, v in parents.items()}, frozenset(outside))


def read_lock(path: Path) -> Lock:
    """:func:`parse_lock` of the file at ``path`` (errors name the file and line)."""
    return parse_lock(path.read_text(), str(path))

"""What ``list``'s probes found, kept per user and reused while nothing it depends on changed.

A probe (:mod:`snnbench.probe`) imports one adapter's library in a process of its own: seconds
each, half a minute for every adapter. Its answer depends only on what is installed, on the
adapter's code and on the machine, so it is kept in a cache entry keyed by exactly that:

* the adapter's name and entry point, and the interpreter that probed it;
* the installed versions of the distributions the adapter depends on: its library, the
  distribution that registers it, its framework's (``torch``; ``jax``, ``jaxlib``), those it
  names in :attr:`~snnbench.adapter.Adapter.depends_on`, and everything these require (extras
  aside), read from the installed metadata without importing anything;
* snnbench's version, and the size and modification time of the files that define the
  adapter's class (a change to an adapter in a checkout is seen at once);
* the machine: its host name, its NVIDIA device files and the variables that choose devices.

A changed key re-probes that adapter alone; ``list --refresh`` re-probes every one. Entries are
plain JSON written atomically (never pickle: a cache file must never run code); one that is
damaged, foreign or of another key is ignored and replaced. The folder is
``$SNNBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/snnbench`` (``~/.cache/snnbench``), under
``probes/``. A cache that cannot be written is no error: the probe's answer is used as it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import inspect
import json
import os
import platform
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from snnbench import __version__
from snnbench.host.libenv import BuiltEnvironment
from snnbench.records.fileio import WriteError, atomic_write_json, parse_json, read_regular
from snnbench.registry import AdapterEntry

#: the variable naming the cache folder (tests point it at a temporary one)
CACHE_DIR_VAR = "SNNBENCH_CACHE_DIR"
#: what a cache entry says it is: another value is a foreign file, ignored
FORMAT = "snnbench-probe-cache/1"
#: an entry larger than this is no entry snnbench wrote (a probe's answer is a few KiB)
MAX_ENTRY_BYTES = 1 << 20
#: distributions every adapter of a framework depends on, beside its library
FRAMEWORK_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "torch": ("torch",), "jax": ("jax", "jaxlib"),
}
#: variables that change which devices a probe sees (a CUDA-only variant's availability)
DEVICE_VARS = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "JAX_PLATFORMS",
               "JAX_PLATFORM_NAME", "TRITON_INTERPRET")


def cache_dir() -> Path:
    """``$SNNBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/snnbench`` (``~/.cache/snnbench``)."""
    if os.environ.get(CACHE_DIR_VAR):
        return Path(os.environ[CACHE_DIR_VAR]).expanduser().absolute()
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return (Path(root) / "snnbench").absolute()


def _norm(name: str) -> str:
    """A distribution name in one spelling (``dm-haiku``, ``dm_haiku``, ``DM.Haiku`` alike)."""
    return re.sub(r"[-_.]+", "_", name).lower()


class Installed:
    """The distributions one interpreter sees, by normalised name (the first on its path
    wins, as for an import); metadata is read only for the ones a key needs."""

    def __init__(self, paths: list[str] | None = None) -> None:
        self._dists: dict[str, importlib.metadata.Distribution] = {}
        found = (importlib.metadata.distributions() if paths is None
                 else importlib.metadata.distributions(path=paths))
        for dist in found:
            # the folder's name gives the name without reading the metadata file
            name = getattr(dist, "_normalized_name", None) or dist.metadata["Name"] or ""
            self._dists.setdefault(_norm(name), dist)
        self._closures: dict[str, dict[str, str]] = {}

    @classmethod
    def of(cls, python: str) -> Installed:
        """What ``python`` sees: this interpreter's path, or a library environment's own
        ``site-packages`` before this one's (:mod:`snnbench.host.libenv` layers it so)."""
        if not python or python == sys.executable:
            return cls()
        root = Path(python).parent.parent
        major, minor = sys.version_info[:2]
        site = root / "lib" / f"python{major}.{minor}" / "site-packages"
        return cls([str(site), *sys.path])

    def versions(self, roots: Iterable[str]) -> dict[str, str]:
        """Normalised name → version of ``roots`` and of everything they require (extras
        aside); a root that is not installed maps to ""."""
        out: dict[str, str] = {}
        for root in roots:
            out.update(self._closure(_norm(root)))
        return dict(sorted(out.items()))

    def _closure(self, root: str) -> dict[str, str]:
        if root in self._closures:
            return self._closures[root]
        from packaging.requirements import InvalidRequirement, Requirement

        seen: dict[str, str] = {}
        todo = [root]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            dist = self._dists.get(name)
            seen[name] = dist.version if dist is not None else ""
            for text in (dist.requires or []) if dist is not None else []:
                try:
                    requirement = Requirement(text)
                except InvalidRequirement:
                    continue
                marker = requirement.marker
                if marker is None or marker.evaluate({"extra": ""}):
                    todo.append(_norm(requirement.name))
        self._closures[root] = seen
        return seen


def _code_stamps(cls: type) -> list[list[Any]]:
    """Path, size and modification time of each file defining ``cls`` and its bases (the
    probe's code too): an adapter edited in a checkout keeps snnbench's version."""
    files: dict[str, None] = {}
    for klass in cls.__mro__:
        if klass.__module__ in ("builtins", "abc"):
            continue
        with contextlib.suppress(TypeError, OSError):
            files[inspect.getfile(klass)] = None
    files[str(Path(__file__).with_name("probe.py"))] = None
    stamps: list[list[Any]] = []
    for name in files:
        try:
            info = os.stat(name)
        except OSError:
            stamps.append([name, None, None])
            continue
        stamps.append([name, info.st_size, info.st_mtime_ns])
    return stamps


def machine() -> dict[str, Any]:
    """What of the machine a probe's answer depends on (a CUDA variant's availability)."""
    try:
        devices = sorted(p.name for p in Path("/dev").glob("nvidia*"))
    except OSError:
        devices = []
    return {"host": platform.node(), "devices": devices,
            "vars": {v: os.environ[v] for v in DEVICE_VARS if v in os.environ}}


class ProbeCache:
    """Probe answers by adapter and interpreter (module docstring); ``refresh`` ignores what
    is stored (every lookup misses) and stores the new answers."""

    def __init__(self, root: Path | None = None, refresh: bool = False) -> None:
        self.root = (root or cache_dir()) / "probes"
        self.refresh = refresh
        self._installed: dict[str, Installed] = {}
        self._machine = machine()

    def key(self, entry: AdapterEntry, python: str = "") -> dict[str, Any] | None:
        """What ``entry``'s probe under ``python`` depends on; None when it cannot be told
        (the adapter's class did not load): such an answer is never cached."""
        cls = entry.adapter_class
        if cls is None:
            return None
        python = python or sys.executable
        try:
            if python not in self._installed:
                self._installed[python] = Installed.of(python)
            roots = [cls.library, entry.distribution, *FRAMEWORK_DISTRIBUTIONS.get(
                cls.framework, ()), *cls.depends_on]
            packages = self._installed[python].versions(r for r in roots if r)
            key: dict[str, Any] = {
                "adapter": entry.name, "target": entry.target, "python": python,
                "snnbench": __version__, "code": _code_stamps(cls), "packages": packages,
                "machine": self._machine,
            }
            # the form it has once read back from JSON, so that the two compare equal
            normal: dict[str, Any] = json.loads(json.dumps(key, sort_keys=True))
            return normal
        except Exception:  # odd metadata: probe it, as if there were no cache
            return None

    def _path(self, name: str, python: str) -> Path:
        digest = hashlib.sha256(f"{name}\0{python or sys.executable}".encode()).hexdigest()
        return self.root / f"{digest[:32]}.json"

    def get(self, entry: AdapterEntry, python: str = "") -> dict[str, Any] | None:
        """The stored answer for ``entry`` under ``python`` when its key still holds."""
        if self.refresh:
            return None
        key = self.key(entry, python)
        if key is None:
            return None
        try:
            data = parse_json(read_regular(self._path(entry.name, python), MAX_ENTRY_BYTES,
                                           follow=False).decode("utf-8"))
        except (OSError, ValueError):  # none yet, damaged, not a file: probe again
            return None
        if not (isinstance(data, dict) and data.get("format") == FORMAT
                and data.get("key") == key):
            return None
        text = data.get("result")
        try:
            # kept as the probe's own JSON text: its fields in the probe's order (the entry's
            # own are sorted), so that `list --json` prints the same either way
            result = parse_json(text) if isinstance(text, str) else None
        except ValueError:
            return None
        if (not isinstance(result, dict) or result.get("name") != entry.name
                or not isinstance(result.get("available"), bool)):
            return None
        return result

    def known(self, entry: AdapterEntry, environment: BuiltEnvironment | None = None,
              ) -> dict[str, Any] | None:
        """The answer for ``entry`` (in ``environment``, a library environment built for it;
        None: this interpreter's) that needs no probe, or None: a plugin whose class did not
        load and an environment that could not be built are unavailable, and a stored answer
        whose key still holds is that answer."""
        if entry.adapter_class is None:
            return {"available": False, "reason": entry.error,
                    "variants": [], "library": "", "version": None}
        if environment is not None and environment.error:
            return {"available": False, "variants": [], "library": "", "version": None,
                    "reason": f"environment could not be built: {environment.error}"}
        return self.get(entry, environment.python if environment is not None else "")

    def put(self, entry: AdapterEntry, python: str, result: dict[str, Any]) -> bool:
        """Store a probe's answer; False when it cannot be (no key, an unwritable folder)."""
        key = self.key(entry, python)
        if key is None:
            return False
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self._path(entry.name, python),
                              {"format": FORMAT, "key": key, "result": json.dumps(result)})
        except (OSError, WriteError):  # a cache is never worth a failed command
            return False
        return True

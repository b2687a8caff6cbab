"""Set up the GPU-only parts of snnbench's stack on a machine that already has a CUDA torch.

``make gpu-setup`` runs this file, and so does the Docker GPU stage (docker/Dockerfile): one
recipe in both places. It uses only the standard library and ``pip``, so it runs before
snnbench is installed (``python snnbench/gpu_setup.py ...``), against any interpreter
(``--python``). It never replaces what the machine already has (torch, triton, JAX, flax, CUDA
wheels, CuPy...): it installs what is missing, at the versions of the GPU image's lock
(snnbench/locks/requirements-gpu.txt), builds the two CUDA sources, and checks each library.

    python snnbench/gpu_setup.py install [--wheelhouse DIR] [--arch-list 9.0]   # set up
    python snnbench/gpu_setup.py check                                          # report only
    python snnbench/gpu_setup.py install --dry-run                              # the plan
    python snnbench/gpu_setup.py probe > box.json        # this machine's facts, as JSON
    python snnbench/gpu_setup.py download --dest DIR --machine box.json  # a wheelhouse for it

Per library (one line each on stdout, ``ok: ...`` or ``FAILED: <reason>``; progress on stderr):

* sinabs-exodus and SpikingJelly's native CUDA operators are compiled against the installed
  torch (``--no-build-isolation``), for ``TORCH_CUDA_ARCH_LIST`` (``--arch-list``, else the
  environment, else the visible GPUs);
* JAX's CUDA plugin (``jax-cudaNN-plugin`` and ``-pjrt``) at the installed jaxlib's version;
* lava-dl alone, ``--no-deps --ignore-requires-python`` (its wheel declares Python < 3.11); with
  a GPU visible, its CUDA extension is compiled now (torch caches it for every later process);
* the CuPy wheel for the CUDA major of torch (or nvcc): ``cupy-cuda12x`` / ``cupy-cuda13x``;
* what each library imports at run time (spyx: grain, portpicker, nir, optax...), only where
  the library does not import already.

A machine without network installs from a folder (``--wheelhouse DIR``: ``pip --no-index
--find-links DIR``) holding the wheels, the SpikingJelly sdist and the sinabs-exodus source
(an sdist, or a checkout folder named ``sinabs-exodus*``); ``download`` fills such a folder on a
machine with network. Exit status: 0 (failures are lines of the report), 2 for a misuse,
1 with ``--strict`` when a library is not ok (the Docker build uses that).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

try:
    from packaging.version import InvalidVersion, Version
except ModuleNotFoundError:  # a bare GPU box, before anything is installed: pip's own copy
    from pip._vendor.packaging.version import (  # type: ignore[assignment]
        InvalidVersion,
        Version,
    )

ROOT = Path(__file__).resolve().parents[1]


def _default_lock() -> Path:
    """The GPU image's lock, shipped as package data (``snnbench/locks/requirements-gpu.txt``).

    Read through :mod:`importlib.resources` so that an installed wheel finds it; run as a
    script from a checkout before snnbench is installed (the Docker GPU stage), the file beside
    this one is the same file.
    """
    try:
        from importlib.resources import files

        return Path(str(files("snnbench.locks").joinpath("requirements-gpu.txt")))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent / "locks" / "requirements-gpu.txt"


DEFAULT_LOCK = _default_lock()
#: the line ``make docker-lock`` writes before the pins the resolver could not take
OUTSIDE_MARKER = "# >>> installed outside the resolver"
#: what a check or the probe prints before its JSON answer
MARKER = "SNNBENCH-GPU-SETUP "
#: SpikingJelly 2.0's pyproject.toml requires this setuptools to build (with its native ops)
MIN_SETUPTOOLS = Version("77.0.3")

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
    return re.sub(r"[-_.]+", "-", name).lower()


def provided_by_machine(name: str) -> bool:
    """True for distributions this script never installs (the machine's torch/JAX/CUDA)."""
    return bool(_PROVIDED.match(canonical(name)))


# ------------------------------------------------------------------------------ the lock


@dataclass(frozen=True)
class Lock:
    """Pins of a ``uv pip compile`` lock and its dependency graph (from the ``# via`` notes)."""

    pins: Mapping[str, str]  #: canonical name → version
    parents: Mapping[str, frozenset[str]]  #: canonical name → the pins that require it
    outside: frozenset[str] = frozenset()  #: pins after :data:`OUTSIDE_MARKER`

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


def parse_lock(text: str) -> Lock:
    """Read a lock's ``name==version`` lines and their ``# via`` parents."""
    pins: dict[str, str] = {}
    parents: dict[str, set[str]] = {}
    outside: set[str] = set()
    current: str | None = None
    in_outside = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(OUTSIDE_MARKER):
            in_outside, current = True, None
            continue
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)", raw)
        if match:
            current = canonical(match[1])
            pins[current] = match[2]
            parents.setdefault(current, set())
            if in_outside:
                outside.add(current)
            continue
        via = re.match(r"^#\s*(?:via\s+)?([A-Za-z0-9][A-Za-z0-9._-]*)(\s|$)", line)
        if current and raw.startswith((" ", "\t")) and via and via[1] != "via":
            parents[current].add(canonical(via[1]))
    return Lock(pins, {k: frozenset(v) for k, v in parents.items()}, frozenset(outside))


# --------------------------------------------------------------------------- the machine

#: run in the target interpreter: its facts as one JSON line (imports torch when installed)
PROBE_CODE = r"""
import json, os, re, shutil, subprocess, sys, sysconfig
import importlib.metadata as md
facts = {"python": sys.executable, "python_version": "%d.%d.%d" % sys.version_info[:3],
         "purelib": sysconfig.get_paths()["purelib"], "installed": {}, "gpus": [],
         "torch": None, "torch_cuda": None, "torch_error": None, "cuda_home": None,
         "nvcc": None, "cxx": None, "jaxlib": None, "scripts": sysconfig.get_paths()["scripts"]}
for dist in md.distributions():
    name = dist.metadata["Name"]
    if name:
        facts["installed"].setdefault(re.sub(r"[-_.]+", "-", name).lower(), dist.version)
try:
    import torch
    facts["torch"] = str(torch.__version__)
    facts["torch_cuda"] = torch.version.cuda
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(i)
            facts["gpus"].append({"name": torch.cuda.get_device_name(i),
                                  "capability": "%d.%d" % (major, minor)})
    from torch.utils.cpp_extension import CUDA_HOME
    facts["cuda_home"] = CUDA_HOME
except Exception as exc:
    facts["torch_error"] = "%s: %s" % (type(exc).__name__, exc)
home = facts["cuda_home"] or os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
nvcc = os.path.join(home, "bin", "nvcc") if home else shutil.which("nvcc")
if nvcc and os.path.exists(nvcc):
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                             timeout=60).stdout
        found = re.search(r"release (\d+\.\d+)", out)
        facts["nvcc"] = found.group(1) if found else None
    except Exception:
        pass
facts["cxx"] = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
facts["jaxlib"] = facts["installed"].get("jaxlib")
print("SNNBENCH-GPU-SETUP " + json.dumps(facts))
"""


@dataclass(frozen=True)
class Machine:
    """Facts about the target interpreter and its machine (from :data:`PROBE_CODE`)."""

    python: str
    python_version: str = "3.12.0"
    installed: Mapping[str, str] = field(default_factory=dict)
    torch: str | None = None
    torch_cuda: str | None = None  #: "13.0" for a cu130 build, None for a CPU build
    torch_error: str | None = None
    gpus: tuple[Mapping[str, str], ...] = ()  #: [{"name": ..., "capability": "9.0"}]
    cuda_home: str | None = None
    nvcc: str | None = None  #: nvcc's release, "13.0"
    cxx: str | None = None
    jaxlib: str | None = None
    purelib: str = ""
    scripts: str = ""  #: the environment's bin folder (pip's ninja lives there)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Machine:
        """From the probe's JSON (unknown keys are ignored: newer probes may add facts)."""
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        values["installed"] = {canonical(k): v for k, v in data.get("installed", {}).items()}
        values["gpus"] = tuple(data.get("gpus", ()))
        return cls(**values)

    def summary(self) -> str:
        """One line: python, torch and its CUDA, nvcc, GPUs, jax."""
        torch = (f"torch {self.torch} (CUDA {self.torch_cuda or 'none: a CPU build'})"
                 if self.torch else f"no torch ({self.torch_error or 'not installed'})")
        gpus = ", ".join(f"{g['name']} ({g['capability']})" for g in self.gpus) or "none visible"
        jax = self.installed.get("jax")
        return (f"python {self.python_version} ({self.python}); {torch}; nvcc "
                f"{self.nvcc or 'not found'}; GPU: {gpus}; jax {jax or 'not installed'}")


def probe(python: str) -> Machine:
    """The facts of ``python``'s environment (runs :data:`PROBE_CODE` in it)."""
    out = subprocess.run([python, "-c", PROBE_CODE], capture_output=True, text=True,
                         timeout=600, stdin=subprocess.DEVNULL)
    for line in reversed(out.stdout.splitlines()):
        if line.startswith(MARKER):
            return Machine.from_dict(json.loads(line[len(MARKER):]))
    raise SetupError(f"cannot probe {python}: {tail(out.stderr or out.stdout)}")


def bare_machine(lock: Lock, python_version: str | None = None) -> Machine:
    """A machine with nothing installed but the lock's CUDA and JAX: what ``download`` plans
    for when it is not given the target's facts (``--machine``)."""
    toolkit = lock.pins.get("cuda-toolkit") or lock.pins.get("nvidia-cuda-runtime")
    cuda = ".".join(toolkit.split(".")[:2]) if toolkit else None
    version = python_version or f"{sys.version_info[0]}.{sys.version_info[1]}"
    return Machine(python=sys.executable, python_version=version, torch_cuda=cuda,
                   jaxlib=lock.pins.get("jaxlib"))


def cuda_major(machine: Machine) -> int | None:
    """The CUDA major every CUDA wheel must match: torch's, else nvcc's."""
    version = machine.torch_cuda or machine.nvcc
    return Version(version).major if version else None


def cupy_distribution(machine: Machine) -> str | None:
    """``cupy-cuda12x`` / ``cupy-cuda13x`` for this machine's CUDA, None if it has none."""
    major = cuda_major(machine)
    return f"cupy-cuda{major}x" if major is not None and major >= 11 else None


def arch_list(machine: Machine, requested: str | None,
              environ: Mapping[str, str] | None = None) -> str | None:
    """``TORCH_CUDA_ARCH_LIST`` for the source builds: ``requested``, else the environment's,
    else the visible GPUs' compute capabilities (``"9.0"``), else None."""
    env = os.environ if environ is None else environ
    if requested:
        return requested
    if env.get("TORCH_CUDA_ARCH_LIST"):
        return env["TORCH_CUDA_ARCH_LIST"]
    caps = sorted({g["capability"] for g in machine.gpus}, key=Version)
    return ";".join(caps) or None


def path_env(machine: Machine, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``PATH`` with the target environment's bin folder first: pip's ``ninja`` is there, and
    torch's extension builder finds ninja only on ``PATH`` (the venv need not be activated)."""
    env = os.environ if environ is None else environ
    path = env.get("PATH", "")
    if not machine.scripts or machine.scripts in path.split(os.pathsep):
        return {}
    return {"PATH": machine.scripts + (os.pathsep + path if path else "")}


def older_than(version: str, minimum: Version) -> bool:
    """True when ``version`` (PEP 440) is below ``minimum``; an unreadable version counts as old."""
    try:
        return Version(version) < minimum
    except InvalidVersion:
        return True


def build_blocker(machine: Machine, archs: str | None) -> str | None:
    """Why a CUDA extension cannot be compiled here, or None."""
    if machine.torch is None:
        return f"torch does not import ({machine.torch_error or 'not installed'})"
    if machine.torch_cuda is None:
        return f"torch {machine.torch} is a CPU build: a CUDA torch is needed"
    if machine.nvcc is None:
        return "nvcc not found: install the CUDA toolkit or set CUDA_HOME"
    if Version(machine.nvcc).major != Version(machine.torch_cuda).major:
        return f"nvcc is CUDA {machine.nvcc} but torch is built for CUDA {machine.torch_cuda}"
    if machine.cxx is None:
        return "no C++ compiler (c++/g++) on PATH"
    if not archs:
        return "no GPU visible and no architecture given: pass --arch-list (e.g. 9.0)"
    return None


# ---------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Options:
    """How to install: where packages come from, which libraries, build settings."""

    wheelhouse: Path | None = None  #: offline: pip --no-index --find-links this folder
    online: bool = False  #: with a wheelhouse, still use the index too
    arch_list: str | None = None
    max_jobs: int = 0  #: 0: MAX_JOBS from the environment, else the CPU count
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    force: bool = False
    exodus_source: Path | None = None
    spikingjelly_source: Path | None = None


@dataclass(frozen=True)
class Command:
    """One subprocess: argv, environment overrides, a time limit."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 1800.0

    def shell(self) -> str:
        """The command as a shell line, environment first."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (env + " " if env else "") + shlex.join(self.argv)


@dataclass(frozen=True)
class Step:
    """One library: what to run to set it up, and the check that says whether it works."""

    name: str
    check: str  #: Python run in the target interpreter; prints MARKER + {"ok", "detail"}
    commands: tuple[Command, ...] = ()
    note: str = ""  #: the decision, shown in the dry run (e.g. which CuPy, which arch list)
    blocked: str | None = None  #: why it cannot be set up here (then nothing is run)
    check_timeout_s: float = 600.0


@dataclass(frozen=True)
class Context:
    """Everything a step's plan depends on."""

    machine: Machine
    lock: Lock
    options: Options
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    root: Path = ROOT

    def pip(self, *args: str, no_deps: bool = True) -> tuple[str, ...]:
        """``python -m pip install`` with this run's package sources."""
        argv = [self.machine.python, "-m", "pip", "install", "--disable-pip-version-check"]
        if no_deps:
            argv.append("--no-deps")
        if self.options.wheelhouse is not None:
            if not self.options.online:
                argv.append("--no-index")
            argv += ["--find-links", str(self.options.wheelhouse)]
        return (*argv, *args)

    def missing(self, names: Iterable[str]) -> list[str]:
        """The names not installed (at any version) in the target environment."""
        return [n for n in names if canonical(n) not in self.machine.installed]

    def install_missing(self, roots: Iterable[str]) -> tuple[Command, ...]:
        """One ``pip install --no-deps`` of the lock's pins that the closure of ``roots``
        lacks here (nothing when all are installed)."""
        wanted = self.missing(self.lock.closure(roots))
        return (Command(self.pip(*(self.lock.pin(n) for n in wanted))),) if wanted else ()

    def build_env(self, archs: str) -> dict[str, str]:
        """Environment for a CUDA source build."""
        jobs = self.options.max_jobs or int(self.environ.get("MAX_JOBS", "0") or 0) or (
            os.cpu_count() or 1)
        env = {"TORCH_CUDA_ARCH_LIST": archs, "MAX_JOBS": str(jobs)}
        # nvcc compiles the architectures of one file in parallel
        env["NVCC_APPEND_FLAGS"] = self.environ.get("NVCC_APPEND_FLAGS", "--threads 0")
        if self.machine.cuda_home and not self.environ.get("CUDA_HOME"):
            env["CUDA_HOME"] = self.machine.cuda_home
        return env

    def source(self, dist: str, given: Path | None) -> Path | None:
        """A source folder for ``dist``: given, or ``<wheelhouse>/<dist>*/`` with a setup."""
        if given is not None:
            return given
        if self.options.wheelhouse is None:
            return None
        for path in sorted(self.options.wheelhouse.glob(f"{dist}*")):
            if path.is_dir() and ((path / "setup.py").exists()
                                  or (path / "pyproject.toml").exists()):
                return path
        return None


# Checks: each prints MARKER + {"ok": bool, "detail": str}. They run in the target interpreter
# (which may not have snnbench), so they import only the library, as the adapters do.
_CHECK_HEAD = """
import contextlib, importlib, importlib.metadata as md, json, os, sys, time
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]  # `python -c` from a checkout would import its snnbench/ uninstalled
def done(ok, detail):
    print("SNNBENCH-GPU-SETUP " + json.dumps({"ok": bool(ok), "detail": str(detail)}))
    sys.exit(0)
def ver(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "?"
def gpu():
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False
try:
"""
_CHECK_TAIL = """
except SystemExit:
    raise
except BaseException as exc:
    done(False, "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[0]))
"""


def check_code(body: str) -> str:
    """A check program: ``body`` (indented into a try block) calls ``done(ok, detail)``."""
    indented = "\n".join("    " + line for line in body.strip("\n").splitlines())
    return _CHECK_HEAD + indented + "\n" + _CHECK_TAIL


def _import_check(modules: Sequence[str], dist: str, pre: str = "") -> str:
    imports = "\n".join(f"importlib.import_module({m!r})" for m in modules)
    return check_code(f"{pre}\n{imports}\ndone(True, ver({dist!r}))")


def plan_build_tools(ctx: Context) -> Step:
    """setuptools ≥ 77.0.3 (SpikingJelly's build), wheel, ninja (parallel and JIT builds)."""
    wanted = ctx.missing(["setuptools", "wheel", "ninja"])
    have = ctx.machine.installed.get("setuptools")
    if have and older_than(have, MIN_SETUPTOOLS):
        wanted.append("setuptools")
    commands = (Command(ctx.pip(*(ctx.lock.pin(n) for n in wanted))),) if wanted else ()
    minimum = str(MIN_SETUPTOOLS)
    check = check_code(f"""
import shutil
# the target environment need not have `packaging`: compare the release numbers
low = tuple(int(p) for p in ver("setuptools").split(".")[:3] if p.isdigit())
if low < {MIN_SETUPTOOLS.release!r}:
    done(False, "setuptools %s is older than {minimum}" % ver("setuptools"))
import wheel
ninja = shutil.which("ninja")
if ninja is None:
    done(False, "no ninja on PATH (torch needs it to compile extensions)")
done(True, "setuptools %s, wheel %s, ninja %s" % (ver("setuptools"), ver("wheel"), ninja))
""")
    return Step("build-tools", check, commands, note=f"missing or too old: {wanted or 'none'}")


HARNESS_ROOTS = ("numpy", "scipy", "pandas", "pyarrow", "typer", "rich", "matplotlib", "psutil",
                 "nvidia-ml-py", "packaging", "uv", "ruptures")
#: per step, what its library's import and run need besides the machine's torch/JAX (the lock's
#: graph adds their own requirements). tests/test_gpu_setup.py runs each adapter with only
#: these visible. SpikingJelly and lava-dl themselves are installed by their own commands.
ROOTS: dict[str, tuple[str, ...]] = {
    "build-tools": ("setuptools", "wheel", "ninja"),
    "harness": HARNESS_ROOTS,
    "snntorch": ("snntorch",),
    "norse": ("norse", "nir", "nirtorch"),
    "spikingjelly": ("loguru", "tqdm", "h5py", "matplotlib", "scipy", "packaging"),
    "sinabs": ("sinabs", "pbr", "nir", "nirtorch", "matplotlib"),
    "rockpool": ("rockpool",),
    "dm-haiku": ("dm-haiku",),
    "brainstate": ("brainstate", "braintools"),
    "spyx": ("spyx",),
    "lava-dl": ("opencv-python-headless", "h5py", "ninja"),
    "cupy": ("cuda-pathfinder",),
}


def plan_harness(ctx: Context) -> Step:
    """snnbench itself and the harness' dependencies.

    From a checkout, snnbench is installed editable from it; from an installed wheel (no
    ``pyproject.toml`` above this file), the installed snnbench is the one checked.
    """
    commands = ctx.install_missing(ROOTS["harness"])
    if not (ctx.root / "pyproject.toml").exists():
        check = _import_check(["snnbench.cli", "pynvml", "numpy", "scipy", "pandas", "pyarrow"],
                              "snnbench")
        return Step("harness", check, commands)
    commands += (Command(ctx.pip("--no-build-isolation", "-e", str(ctx.root))),)
    # an snnbench installed from elsewhere (an older copy in site-packages) would run instead
    # of this checkout's: only this checkout's counts
    check = _import_check(["snnbench.cli", *("pynvml", "numpy", "scipy", "pandas", "pyarrow")],
                          "snnbench", pre=f"""
import snnbench
where = os.path.dirname(os.path.realpath(snnbench.__file__))
if where != os.path.realpath({str(ctx.root / "snnbench")!r}):
    done(False, "snnbench imports from %s, not from this checkout" % where)
""")
    return Step("harness", check, commands)


def _library(name: str, modules: Sequence[str], pre: str = "") -> Callable[[Context], Step]:
    def plan(ctx: Context) -> Step:
        return Step(name, _import_check(modules, name, pre), ctx.install_missing(ROOTS[name]))

    plan.__doc__ = f"{name}: install what its import needs ({', '.join(ROOTS[name])}), if missing."
    return plan


_HIDE_SAMNA = "sys.modules.setdefault('samna', None)"


def plan_spikingjelly(ctx: Context) -> Step:
    """SpikingJelly from source with its native CUDA operators (``SJ_BUILD_NATIVE_CUDA=1``)."""
    machine = ctx.machine
    archs = arch_list(machine, ctx.options.arch_list, ctx.environ)
    version = ctx.lock.pins.get("spikingjelly", "")
    blocked = build_blocker(machine, archs)
    installed = machine.installed.get("spikingjelly", "")
    if installed.startswith("0."):
        blocked = (f"SpikingJelly {installed} is a legacy release (native operators arrived in "
                   "2.0); leave it, or uninstall it to build 2.x")
    deps = ctx.install_missing(ROOTS["spikingjelly"])
    source = ctx.source("spikingjelly", ctx.options.spikingjelly_source)
    target = (str(source),) if source else ("--no-binary", "spikingjelly", ctx.lock.pin(
        "spikingjelly"))
    build = Command(ctx.pip("--no-build-isolation", "--force-reinstall", *target),
                    {**ctx.build_env(archs or ""), "SJ_BUILD_NATIVE_CUDA": "1"})
    check = check_code("""
import importlib.util, torch
import spikingjelly.activation_based.neuron
spec = importlib.util.find_spec("spikingjelly._ops.lif._C")
if spec is None:
    done(False, "SpikingJelly %s has no native CUDA operators (not built with "
         "SJ_BUILD_NATIVE_CUDA=1)" % ver("spikingjelly"))
info = json.loads(open(os.path.join(os.path.dirname(spec.origin), "_native_build.json")).read())
if info["torch_version"] != str(torch.__version__) or info["cuda_version"] != torch.version.cuda:
    done(False, "native operators built for torch %s / CUDA %s, running %s / %s: rebuild" % (
        info["torch_version"], info["cuda_version"], torch.__version__, torch.version.cuda))
where = "archs %s" % info.get("torch_cuda_arch_list")
if gpu():
    from spikingjelly._ops import native_loader
    if not native_loader._native_available("spikingjelly._ops.lif", 0):
        done(False, "native LIF operator does not run on this GPU (%s)" % where)
    where += ", runs on " + torch.cuda.get_device_name(0)
done(True, "%s, native CUDA operators for torch %s (%s)" % (ver("spikingjelly"),
                                                          info["torch_version"], where))
""")
    note = (f"build spikingjelly {version or installed} from "
            f"{source or 'its sdist'} for TORCH_CUDA_ARCH_LIST={archs}")
    return Step("spikingjelly", check, (*deps, build), note=note, blocked=blocked,
                check_timeout_s=300)


def plan_exodus(ctx: Context) -> Step:
    """sinabs-exodus compiled against the installed torch (``--no-build-isolation``)."""
    machine = ctx.machine
    archs = arch_list(machine, ctx.options.arch_list, ctx.environ)
    source = ctx.source("sinabs-exodus", ctx.options.exodus_source)
    target = (str(source),) if source else ("--no-binary", "sinabs-exodus",
                                            ctx.lock.pin("sinabs-exodus"))
    build = Command(ctx.pip("--no-build-isolation", "--force-reinstall", *target),
                    ctx.build_env(archs or ""))
    check = check_code("""
import torch
import sinabs.exodus.layers, exodus_cuda
if not gpu():
    done(True, "%s (exodus_cuda imports; no GPU visible to run it)" % ver("sinabs-exodus"))
from sinabs.exodus.layers import LIF
out = LIF(tau_mem=10.0).cuda()(torch.full((2, 8, 4), 0.5, device="cuda"))
torch.cuda.synchronize()
done(True, "%s, runs on %s" % (ver("sinabs-exodus"), torch.cuda.get_device_name(0)))
""")
    note = f"build sinabs-exodus from {source or 'its sdist'} for TORCH_CUDA_ARCH_LIST={archs}"
    return Step("sinabs-exodus", check, (build,), note=note,
                blocked=build_blocker(machine, archs), check_timeout_s=300)


def plan_jax_cuda(ctx: Context) -> Step:
    """JAX's CUDA plugin and PJRT at the installed jaxlib's version (the machine's JAX is kept)."""
    machine = ctx.machine
    major = cuda_major(machine)
    blocked = None
    commands: tuple[Command, ...] = ()
    if machine.jaxlib is None:
        blocked = "jax/jaxlib are not installed (this script keeps the machine's JAX)"
    elif major is None:
        blocked = "no CUDA found (torch is a CPU build and there is no nvcc)"
    names = (f"jax-cuda{major}-plugin", f"jax-cuda{major}-pjrt")
    if not blocked and any(machine.installed.get(n) != machine.jaxlib for n in names):
        commands = (Command(ctx.pip(*(f"{n}=={machine.jaxlib}" for n in names))),)
    expect_gpu = bool(machine.gpus)
    check = check_code(f"""
import jax
names = (str(n.metadata["Name"] or "").replace("_", "-").lower() for n in md.distributions())
plugins = sorted(d for d in names if d.startswith("jax-cuda") and d.endswith("-plugin"))
if not plugins:
    done(False, "no JAX CUDA plugin installed: JAX runs on the CPU")
try:
    gpus = jax.devices("gpu")
except RuntimeError as exc:
    if {expect_gpu!r}:
        done(False, "JAX sees no GPU (torch does): %s" % str(exc).splitlines()[0])
    done(True, "jax %s, %s %s (no GPU visible here)" % (jax.__version__, plugins[0],
                                                         ver(plugins[0])))
done(True, "jax %s, %s %s, sees %s" % (jax.__version__, plugins[0], ver(plugins[0]),
                                       gpus[0].device_kind))
""")
    note = f"{names[0]}=={machine.jaxlib}" if major else "no CUDA"
    return Step("jax-cuda", check, commands, note=note, blocked=blocked)


def plan_spyx(ctx: Context) -> Step:
    """spyx and what ``import spyx`` needs (flax.nnx, grain, portpicker, nir, optax...)."""
    step = _library("spyx", ("spyx",), pre="""
import jax
try:
    import flax.nnx
except Exception as exc:
    done(False, "flax %s does not import with jax %s (%s: %s): a flax release made for this "
         "jax is needed; this script keeps the machine's flax" % (
             ver("flax"), jax.__version__, type(exc).__name__, exc))
""")(ctx)
    return replace(step, note="flax: kept as installed" if "flax" in ctx.machine.installed
                   else f"flax: {ctx.lock.pin('flax')} (not installed)")


def plan_lava_dl(ctx: Context) -> Step:
    """lava-dl alone (``--no-deps --ignore-requires-python``) plus what its import needs; with a
    GPU, its CUDA extension is compiled now and cached by torch for every later process."""
    commands: tuple[Command, ...] = ()
    if "lava-dl" not in ctx.machine.installed:
        commands = (Command(ctx.pip("--ignore-requires-python", ctx.lock.pin("lava-dl"))),)
    commands += ctx.install_missing(ROOTS["lava-dl"])
    check = check_code("""
import types
try:
    import torchvision
except Exception:  # a torchvision built for another torch: stubs, as the adapter does
    for key in [m for m in sys.modules if m.split(".")[0] == "torchvision"]:
        del sys.modules[key]
    for key in ("torchvision", "torchvision.ops", "torchvision.transforms"):
        sys.modules[key] = types.ModuleType(key)
with contextlib.redirect_stdout(sys.stderr):
    import lava.lib.dl.slayer as slayer
if not gpu():
    done(True, "%s (no GPU visible: its CUDA extension compiles at first use)" % ver("lava-dl"))
start = time.perf_counter()
slayer.neuron.dynamics.leaky_integrator.Accelerated.leaky_integrator
from torch.utils.cpp_extension import _get_build_directory
where = _get_build_directory("dynamics", False)
done(True, "%s, CUDA extension ready in %.0f s (cached in %s)" % (
    ver("lava-dl"), time.perf_counter() - start, where))
""")
    return Step("lava-dl", check, commands, check_timeout_s=1200)


def plan_cupy(ctx: Context) -> Step:
    """The CuPy wheel for this CUDA major (SpikingJelly 0.0.0.0.x's CuPy backend)."""
    machine = ctx.machine
    dist = cupy_distribution(machine)
    blocked = None
    commands: tuple[Command, ...] = ()
    others = sorted(n for n in machine.installed
                    if re.fullmatch(r"cupy(-cuda\d+x)?", n) and n != dist)
    if dist is None:
        blocked = "no CUDA found (torch is a CPU build and there is no nvcc)"
    elif others:
        blocked = (f"{', '.join(others)} installed, but this machine's CUDA needs {dist}: "
                   f"uninstall {' '.join(others)} first")
    elif dist not in machine.installed:
        commands = (Command(ctx.pip(ctx.lock.pin(dist))),
                    *ctx.install_missing(ROOTS["cupy"]))
    check = check_code(f"""
if not gpu():  # an image build: no driver to load CuPy against, so only the install is checked
    wheel = {dist or "cupy"!r}
    if ver(wheel) == "?":
        done(False, "%s is not installed" % wheel)
    done(True, "%s %s (no GPU visible: not loaded here)" % (wheel, ver(wheel)))
import cupy
runtime = cupy.cuda.runtime.runtimeGetVersion()
detail = "cupy %s (CUDA runtime %d.%d)" % (cupy.__version__, runtime // 1000, runtime % 1000 // 10)
double = cupy.ElementwiseKernel("float32 x", "float32 y", "y = 2 * x", "snnbench_double")
if float(double(cupy.ones(4, dtype="float32")).sum()) != 8.0:
    done(False, "a CuPy kernel computed a wrong result")
done(True, detail + ", compiles and runs kernels")
""")
    source = f"CUDA {machine.torch_cuda} from torch" if machine.torch_cuda else (
        f"CUDA {machine.nvcc} from nvcc")
    return Step("cupy", check, commands, note=f"{dist} ({source})", blocked=blocked)


#: the libraries, in the order they are set up (sinabs before sinabs-exodus, jax before spyx)
PLANNERS: dict[str, Callable[[Context], Step]] = {
    "build-tools": plan_build_tools,
    "harness": plan_harness,
    "snntorch": _library("snntorch", ("snntorch",)),
    "norse": _library("norse", ("norse.torch",)),
    "spikingjelly": plan_spikingjelly,
    "sinabs": _library("sinabs", ("sinabs.layers",), pre=_HIDE_SAMNA),
    "sinabs-exodus": plan_exodus,
    "rockpool": _library("rockpool", ("rockpool.nn.modules.torch.lif_neuron_torch",),
                         pre=_HIDE_SAMNA),
    "dm-haiku": _library("dm-haiku", ("haiku",)),
    "jax-cuda": plan_jax_cuda,
    "brainstate": _library("brainstate", ("brainstate", "braintools")),
    "spyx": plan_spyx,
    "lava-dl": plan_lava_dl,
    "cupy": plan_cupy,
}


def plan(ctx: Context) -> list[Step]:
    """The steps to run, in order, after ``--only`` / ``--skip``."""
    names = [n for n in PLANNERS if (not ctx.options.only or n in ctx.options.only)
             and n not in ctx.options.skip]
    return [PLANNERS[name](ctx) for name in names]


# ---------------------------------------------------------------------------- execution


class SetupError(Exception):
    """A misuse of this script (exit status 2); the message is one line."""


def tail(text: str, limit: int = 300) -> str:
    """The most telling line of a tool's output: the last error line, else the last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.match(r"^(ERROR|error|\w*Error|fatal|RuntimeError)", ln)]
    found = (errors or lines or [""])[-1]
    return found if len(found) <= limit else found[: limit - 1] + "…"


@dataclass(frozen=True)
class Outcome:
    """One library's line of the report."""

    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        """``name  ok: detail`` or ``name  FAILED: detail``."""
        return f"{self.name:<14} {'ok' if self.ok else 'FAILED'}: {self.detail}"


Runner = Callable[[Command, Path], tuple[int, str]]


def run_command(command: Command, log: Path) -> tuple[int, str]:
    """Run ``command``, appending its output to ``log``; (exit status, output)."""
    env = {**os.environ, **command.env}
    with open(log, "a") as out:
        out.write(f"$ {command.shell()}\n")
        out.flush()
        try:
            result = subprocess.run(command.argv, env=env, stdin=subprocess.DEVNULL,
                                    capture_output=True, text=True, timeout=command.timeout_s,
                                    start_new_session=True)
        except subprocess.TimeoutExpired as exc:
            text = (exc.stdout or "") if isinstance(exc.stdout, str) else ""
            out.write(text + f"\n[killed after {command.timeout_s:.0f} s]\n")
            return 124, text + f"\nERROR: no result within {command.timeout_s:.0f} s"
        out.write(result.stdout + result.stderr)
    return result.returncode, result.stdout + result.stderr


def run_check(python: str, step: Step, log: Path, runner: Runner = run_command,
              env: Mapping[str, str] | None = None) -> Outcome:
    """Run a step's check in the target interpreter."""
    code, output = runner(Command((python, "-c", step.check), dict(env or {}),
                                  timeout_s=step.check_timeout_s), log)
    for line in reversed(output.splitlines()):
        if line.startswith(MARKER):
            answer = json.loads(line[len(MARKER):])
            return Outcome(step.name, bool(answer["ok"]), str(answer["detail"]))
    return Outcome(step.name, False, f"the check crashed (exit {code}): {tail(output)}")


def execute(steps: Sequence[Step], python: str, log_dir: Path, mode: str, force: bool = False,
            runner: Runner = run_command, progress: Callable[[str], None] | None = None,
            env: Mapping[str, str] | None = None) -> list[Outcome]:
    """Set up (``mode="install"``) or only check (``"check"``) each step; one outcome each.

    ``env`` is added to every command's environment (the target's bin folder on ``PATH``).
    """
    say = progress or (lambda text: print(text, file=sys.stderr, flush=True))
    outcomes: list[Outcome] = []
    for step in steps:
        log = log_dir / f"{step.name}.log"
        if mode == "check":
            outcome = run_check(python, step, log, runner, env)
        else:
            outcome = _install(step, python, log, force, runner, say, env or {})
        print(outcome.line(), flush=True)
        outcomes.append(outcome)
    return outcomes


def _install(step: Step, python: str, log: Path, force: bool, runner: Runner,
             say: Callable[[str], None], env: Mapping[str, str]) -> Outcome:
    if not force:
        before = run_check(python, step, log, runner, env)
        if before.ok:
            return replace(before, detail=before.detail + " (already set up)")
    if step.blocked:
        return Outcome(step.name, False, step.blocked)
    for command in step.commands:
        say(f"[gpu-setup] {step.name}: {command.shell()}")
        start = time.perf_counter()
        code, output = runner(replace(command, env={**env, **command.env}), log)
        if code != 0:
            return Outcome(step.name, False, f"{tail(output)} (exit {code}; log: {log})")
        say(f"[gpu-setup] {step.name}: done in {time.perf_counter() - start:.0f} s")
    after = run_check(python, step, log, runner, env)
    if not after.ok:
        return replace(after, detail=f"{after.detail} (log: {log})")
    return after


# ------------------------------------------------------------------------------ download


def download_commands(ctx: Context, dest: Path, python_version: str,
                      platforms: Sequence[str]) -> tuple[list[Command], list[str]]:
    """``pip download`` commands for a wheelhouse serving ``ctx.machine`` (what it lacks), and
    notes for what pip cannot fetch. Runs where there is network, for another machine."""
    target = ["--dest", str(dest), "--python-version", python_version, "--only-binary=:all:",
              "--implementation", "cp", *(f"--platform={p}" for p in platforms)]
    base = (sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps")
    roots = {root for names in ROOTS.values() for root in names}
    wanted = ctx.missing(ctx.lock.closure(roots))
    commands = [Command((*base, *target, ctx.lock.pin(n))) for n in wanted]
    commands.append(Command((*base, *target, "--ignore-requires-python", ctx.lock.pin("lava-dl"))))
    major = cuda_major(ctx.machine)
    jaxlib = ctx.machine.jaxlib or ctx.lock.pins.get("jaxlib")
    if major and jaxlib:
        for name in (f"jax-cuda{major}-plugin", f"jax-cuda{major}-pjrt"):
            if ctx.machine.installed.get(name) != jaxlib:
                commands.append(Command((*base, *target, f"{name}=={jaxlib}")))
    cupy = cupy_distribution(ctx.machine)
    if cupy and cupy not in ctx.machine.installed:
        commands.append(Command((*base, *target, ctx.lock.pin(cupy))))
    # sources: SpikingJelly's sdist downloads anywhere; sinabs-exodus's metadata step needs a
    # CUDA torch, so pip cannot fetch its sdist on a CPU machine: its git tag is the same source
    commands.append(Command((*base, "--dest", str(dest), "--no-binary=:all:",
                             ctx.lock.pin("spikingjelly"))))
    exodus = ctx.lock.pins.get("sinabs-exodus", "2.0.0")
    notes = [
        f"sinabs-exodus {exodus}: pip cannot download its sdist without a CUDA torch (its "
        "setup.py builds the extension's metadata); bring its source instead: git clone "
        f"--depth 1 --branch v{exodus} https://github.com/synsense/sinabs-exodus "
        f"{dest}/sinabs-exodus-{exodus} (or `pip download --no-deps --no-binary=:all: "
        f"--no-build-isolation sinabs-exodus=={exodus}` on a machine with a CUDA torch)"]
    return commands, notes


#: run by :func:`pure_wheel_command`: build the wheel, keep it only if it is pure Python
_PURE_WHEEL = """
import glob, os, subprocess, sys
pin, dest = sys.argv[1], sys.argv[2]
before = set(glob.glob(os.path.join(dest, '*.whl')))
code = subprocess.call([sys.executable, '-m', 'pip', 'wheel', '--no-deps',
                        '--disable-pip-version-check', '-q', '-w', dest, pin])
impure = [w for w in set(glob.glob(os.path.join(dest, '*.whl'))) - before
          if not w.endswith('-none-any.whl')]
for w in impure:
    os.remove(w)
if impure:
    sys.exit('not pure Python: ' + ', '.join(os.path.basename(w) for w in impure))
sys.exit(code)
"""


def pure_wheel_command(command: Command) -> tuple[str, ...]:
    """For ``command`` (a binary-only ``pip download`` for another platform), a command that
    builds the project's wheel from its sdist here and keeps it only if it is pure Python."""
    argv = list(command.argv)
    return (sys.executable, "-c", _PURE_WHEEL, argv[-1], argv[argv.index("--dest") + 1])


# ---------------------------------------------------------------------------------- main


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gpu_setup.py", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("mode", nargs="?", default="install",
                        choices=("install", "check", "probe", "download"),
                        help="install (default): set up what is missing, then check; check: "
                             "the report only; probe: this machine's facts as JSON; download: "
                             "fill a wheelhouse (--dest) for the machine of --machine")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter to set up (default: this one)")
    parser.add_argument("--lock", type=Path, default=DEFAULT_LOCK,
                        help="versions to install (default: snnbench/locks/requirements-gpu.txt)")
    parser.add_argument("--wheelhouse", type=Path,
                        help="install offline from this folder (wheels, sdists, source folders)")
    parser.add_argument("--online", action="store_true",
                        help="with --wheelhouse: also use the package index")
    parser.add_argument("--arch-list", help="TORCH_CUDA_ARCH_LIST for the CUDA builds, e.g. 9.0 "
                        "(default: $TORCH_CUDA_ARCH_LIST, else the visible GPUs)")
    parser.add_argument("--max-jobs", type=int, default=0, help="parallel compile jobs")
    parser.add_argument("--only", default="", help=f"comma list of: {', '.join(PLANNERS)}")
    parser.add_argument("--skip", default="", help="comma list of libraries to leave alone")
    parser.add_argument("--force", action="store_true", help="rebuild even what already works")
    parser.add_argument("--exodus-source", type=Path, help="a sinabs-exodus source folder")
    parser.add_argument("--spikingjelly-source", type=Path, help="a SpikingJelly source folder")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when a library is not ok (for image builds)")
    parser.add_argument("--log-dir", type=Path, help="full logs (default: build/gpu-setup)")
    parser.add_argument("--machine", type=Path,
                        help="plan for the facts in this JSON (from `probe`) instead of probing")
    parser.add_argument("--dest", type=Path, help="download: the wheelhouse folder to fill")
    parser.add_argument("--python-version", help="download: the target's Python (default: "
                        "--machine's, else this one's)")
    parser.add_argument("--platform", action="append",
                        help="download: wheel platform tags (default: manylinux x86_64)")
    return parser.parse_args(argv)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in PLANNERS]
    if unknown:
        raise SetupError(f"unknown library {', '.join(unknown)} (known: {', '.join(PLANNERS)})")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    args = _arguments(argv)
    try:
        return _main(args)
    except SetupError as exc:
        print(f"gpu-setup: {exc}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    if args.mode == "probe":
        print(json.dumps(_machine_dict(probe(args.python)), indent=2))
        return 0
    if not args.lock.is_file():
        raise SetupError(f"no lock file at {args.lock}")
    for path in (args.wheelhouse, args.exodus_source, args.spikingjelly_source):
        if path is not None and not path.exists():
            raise SetupError(f"{path} does not exist")
    if args.mode == "download" and args.dest is None:
        raise SetupError("download needs --dest DIR")
    options = Options(wheelhouse=args.wheelhouse, online=args.online, arch_list=args.arch_list,
                      max_jobs=args.max_jobs, only=_names(args.only), skip=_names(args.skip),
                      force=args.force, exodus_source=args.exodus_source,
                      spikingjelly_source=args.spikingjelly_source)
    lock = parse_lock(args.lock.read_text())
    if args.machine is not None:
        try:
            machine = Machine.from_dict(json.loads(args.machine.read_text()))
        except (OSError, ValueError, TypeError) as exc:
            raise SetupError(f"cannot read machine facts from {args.machine}: {exc}") from exc
    elif args.mode == "download":
        machine = bare_machine(lock, args.python_version)
    else:
        machine = probe(args.python)
    ctx = Context(machine, lock, options)
    if args.mode == "download":
        return _download(ctx, args)
    print(f"# gpu-setup: {machine.summary()}", flush=True)
    steps = plan(ctx)
    if args.dry_run:
        for step in steps:
            print(f"{step.name:<14} {step.note}".rstrip())
            if step.blocked:
                print(f"  cannot set up here: {step.blocked}")
                continue
            for command in step.commands:
                print(f"  $ {command.shell()}")
        return 0
    log_dir = args.log_dir or _default_log_dir()
    log_dir.mkdir(parents=True, exist_ok=True)
    outcomes = execute(steps, machine.python, log_dir, args.mode, force=args.force,
                       env=path_env(machine))
    ok = sum(o.ok for o in outcomes)
    print(f"# {ok} of {len(outcomes)} ok; logs in {log_dir}", flush=True)
    if args.strict and ok < len(outcomes):
        for outcome in outcomes:  # an image build keeps no log folder: show what failed
            log = log_dir / f"{outcome.name}.log"
            if not outcome.ok and log.exists():
                lines = log.read_text(errors="replace").splitlines()[-60:]
                print(f"--- {log} (last {len(lines)} lines)", *lines, sep="\n", file=sys.stderr)
        return 1
    return 0


def _download(ctx: Context, args: argparse.Namespace) -> int:
    version = args.python_version or ".".join(ctx.machine.python_version.split(".")[:2])
    platforms = args.platform or ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64",
                                  "manylinux2014_x86_64"]
    commands, notes = download_commands(ctx, args.dest, version, platforms)
    failed = 0
    for command in commands:
        if args.dry_run:
            print(f"$ {command.shell()}")
            continue
        result = subprocess.run(command.argv, capture_output=True, text=True)
        what = command.argv[-1]
        if result.returncode != 0 and "--only-binary=:all:" in command.argv:
            # a pure-Python project that publishes only an sdist (norse, rockpool): build its
            # wheel here, since the offline machine may lack the sdist's build backend
            result = subprocess.run(pure_wheel_command(command), capture_output=True,
                                    text=True)
        print(f"{what:<40} {'ok' if result.returncode == 0 else 'FAILED: ' + tail(result.stderr)}",
              flush=True)
        failed += result.returncode != 0
    for note in notes:
        print(f"note: {note}")
    return 1 if args.strict and failed else 0


def _machine_dict(machine: Machine) -> dict[str, Any]:
    return dataclasses.asdict(machine)


def _default_log_dir() -> Path:
    # a checkout keeps its logs in build/; an installed wheel must not write into site-packages
    if (ROOT / "pyproject.toml").exists():
        wanted = ROOT / "build" / "gpu-setup"
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        wanted = Path(cache) / "snnbench" / "gpu-setup"
    try:
        wanted.mkdir(parents=True, exist_ok=True)
        return wanted
    except OSError:  # an installed copy of this file, in a read-only site-packages
        return Path(tempfile.mkdtemp(prefix="snnbench-gpu-setup-"))


if __name__ == "__main__":
    sys.exit(main())

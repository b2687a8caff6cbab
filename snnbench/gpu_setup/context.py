"""What a plan is made of: the options, a command, a step and its check program, the context
every step's plan reads, and the roots of each library's install list."""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from snnbench.gpu_setup._packaging import Version
from snnbench.gpu_setup.lock import Lock, canonical
from snnbench.gpu_setup.machine import Machine

#: the checkout this package sits in (``pip install -e`` target of the harness step)
ROOT = Path(__file__).resolve().parents[2]
#: SpikingJelly 2.0's pyproject.toml requires this setuptools to build (with its native ops)
MIN_SETUPTOOLS = Version("77.0.3")

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


def import_check(modules: Sequence[str], dist: str, pre: str = "") -> str:
    """A check that ``pre`` runs, then ``modules`` import; ok with ``dist``'s version."""
    imports = "\n".join(f"importlib.import_module({m!r})" for m in modules)
    return check_code(f"{pre}\n{imports}\ndone(True, ver({dist!r}))")



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


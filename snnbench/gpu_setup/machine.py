"""The machine being set up: its facts (probed in the target interpreter, or read from the JSON
``probe`` printed), and the decisions that follow from them alone (CUDA major, CuPy wheel,
architectures, whether a CUDA extension can be built)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from snnbench.errors import shown
from snnbench.gpu_setup._packaging import InvalidVersion, Version
from snnbench.gpu_setup.common import MARKER, SetupError, tail
from snnbench.gpu_setup.lock import Lock, canonical

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
    if name and dist.version:  # a broken install's metadata may lack either
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
    def from_dict(cls, data: Any) -> Machine:
        """From the probe's JSON (unknown keys are ignored: newer probes may add facts).

        Raises ValueError (one line, naming the fact) for anything but a JSON object whose
        known facts have the probe's types: a hand-edited or damaged file is refused here,
        not met later as a crash of the plan.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"expected a JSON object (the output of `probe`), not "
                             f"{type(data).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        if not isinstance(values.get("python"), str):
            raise ValueError(f"'python' must be the interpreter's path, not "
                             f"{shown(values.get('python'))}")
        for key, value in values.items():
            if key in _TEXT and not isinstance(value, str):
                raise ValueError(f"{key!r} must be a string, not {shown(value)}")
            if key in _OPTIONAL_TEXT and not isinstance(value, (str, type(None))):
                raise ValueError(f"{key!r} must be a string or null, not {shown(value)}")
            if key in _VERSIONS and isinstance(value, str):
                _version(repr(key), value)
        installed = data.get("installed", {})
        if not isinstance(installed, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in installed.items()):
            raise ValueError(f"'installed' must map names to version strings, not "
                             f"{shown(installed)}")
        values["installed"] = {canonical(k): v for k, v in installed.items()}
        gpus = data.get("gpus", [])
        if not isinstance(gpus, list) or not all(
                isinstance(g, Mapping) and isinstance(g.get("name"), str)
                and isinstance(g.get("capability"), str) for g in gpus):
            raise ValueError(f"'gpus' must be a list of objects with a name and a capability, "
                             f"not {shown(gpus)}")
        for gpu in gpus:
            _version("a GPU's capability", gpu["capability"])
        values["gpus"] = tuple(gpus)
        return cls(**values)

    def summary(self) -> str:
        """One line: python, torch and its CUDA, nvcc, GPUs, jax."""
        torch = (f"torch {self.torch} (CUDA {self.torch_cuda or 'none: a CPU build'})"
                 if self.torch else f"no torch ({self.torch_error or 'not installed'})")
        gpus = ", ".join(f"{g['name']} ({g['capability']})" for g in self.gpus) or "none visible"
        jax = self.installed.get("jax")
        return (f"python {self.python_version} ({self.python}); {torch}; nvcc "
                f"{self.nvcc or 'not found'}; GPU: {gpus}; jax {jax or 'not installed'}")


#: facts that are always strings, may be null, or must read as versions (the plan parses them)
_TEXT = frozenset({"python", "python_version", "purelib", "scripts"})
_OPTIONAL_TEXT = frozenset({"torch", "torch_cuda", "torch_error", "cuda_home", "nvcc", "cxx",
                            "jaxlib"})
_VERSIONS = frozenset({"python_version", "torch_cuda", "nvcc", "jaxlib"})


def _version(what: str, text: str) -> None:
    try:
        Version(text)
    except InvalidVersion:
        raise ValueError(f"{what} must be a version, not {shown(text)}") from None


def probe(python: str) -> Machine:
    """The facts of ``python``'s environment (runs :data:`PROBE_CODE` in it).

    Raises :class:`SetupError` when ``python`` cannot be run or gives no facts.
    """
    try:
        out = subprocess.run([python, "-c", PROBE_CODE], capture_output=True, text=True,
                             timeout=600, stdin=subprocess.DEVNULL)
    except OSError as exc:  # not there, not executable, not a program
        raise SetupError(f"cannot run --python {python}: {exc.strerror or exc}") from None
    except subprocess.TimeoutExpired:
        raise SetupError(f"cannot probe {python}: no answer within 600 s") from None
    for line in reversed(out.stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                return Machine.from_dict(json.loads(line[len(MARKER):]))
            except (ValueError, RecursionError) as exc:
                raise SetupError(f"cannot probe {python}: {exc}") from None
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


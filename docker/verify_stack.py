"""Check that the installed Python stack is exactly the one a lock file pins, and that it loads.

docker/Dockerfile runs this as the last step of each image (no GPU is visible while building),
so an image whose stack drifted from its lock, or whose compiled extensions do not load, fails
to build instead of producing numbers. ``make docker-verify`` runs it again with the GPU and
``--require-device``. Each finding is one line; the exit status is 1 if any check failed.

    python docker/verify_stack.py --lock snnbench/locks/requirements-gpu.txt --target gpu

Checks: every pinned distribution is installed at its pinned version and nothing unpinned is
installed (``--allow-unlocked`` relaxes the latter); every registered adapter's library is
pinned and imports (torchvision for real where it is installed); for ``gpu``, the CUDA
major.minor of torch, nvcc, the base image and the JAX plugin agree, no wheel of another CUDA
major is installed, and sinabs-exodus and SpikingJelly's native operators were built against
this torch.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.metadata as metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

# the lock's names, kept here under the names this script always had
from snnbench.gpu_setup.lock import OUTSIDE_MARKER as OUTSIDE_MARKER, Pin, read_lock as lock_file

#: distributions allowed without a pin: the project itself
UNPINNED_OK = frozenset({"snnbench"})
#: the adapter entry-point group (the same as snnbench.registry's)
ADAPTER_GROUP = "snnbench.adapters"
#: ``*-cuNN`` / ``cupy-cudaNNx`` / ``jax-cudaNN-*`` distribution names carry a CUDA major
_CUDA_MAJOR_IN_NAME = (
    re.compile(r"^nvidia-.+-cu(\d+)$"),
    re.compile(r"^cupy-cuda(\d+)x$"),
    re.compile(r"^jax-cuda(\d+)-(?:plugin|pjrt)$"),
)


def read_lock(path: Path) -> list[Pin]:
    """The pins of a lock file, in its order; anything but an exact ``==`` pin is an error.

    The one lock parser is snnbench's (snnbench.gpu_setup.lock, which gpu_setup plans from):
    this script runs only where snnbench is installed (each image's last step, after step
    ``project``; ``make docker-verify``), and it imports snnbench already (the lava-dl
    adapter's torchvision stand-in).
    """
    return lock_file(path).entries()


def pin_matches(pin_version: str, installed: str) -> bool:
    """PEP 440 ``==``: a pin without a local label (``2.13.0``) accepts ``2.13.0+cpu``."""
    try:
        return Version(installed) in SpecifierSet(f"=={pin_version}")
    except InvalidVersion:
        return installed == pin_version


def installed_distributions() -> dict[str, str]:
    """Canonical name → version of every distribution importable from this interpreter."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:  # a half-removed install can leave a nameless dist-info behind
            found.setdefault(canonicalize_name(name), dist.version)
    return found


def check_versions(
    pins: Iterable[Pin], installed: dict[str, str], allow_unlocked: bool = False
) -> list[str]:
    """Problems: pins not installed or at another version, and unpinned installs."""
    problems: list[str] = []
    pinned = set()
    for pin in pins:
        pinned.add(pin.name)
        have = installed.get(pin.name)
        if have is None:
            problems.append(f"{pin.name}=={pin.version} is pinned but not installed")
        elif not pin_matches(pin.version, have):
            problems.append(f"{pin.name}: pinned {pin.version}, installed {have}")
    if not allow_unlocked:
        extra = sorted(set(installed) - pinned - UNPINNED_OK)
        problems.extend(f"{name}=={installed[name]} is installed but not pinned" for name in extra)
    return problems


def cuda_majors_in_names(names: Iterable[str]) -> dict[str, int]:
    """Distribution name → the CUDA major its name declares (others are left out)."""
    majors: dict[str, int] = {}
    for name in names:
        for pattern in _CUDA_MAJOR_IN_NAME:
            match = pattern.match(name)
            if match:
                majors[name] = int(match.group(1))
    return majors


def major_minor(version: str) -> tuple[int, int]:
    """``"13.0.3"`` → ``(13, 0)``."""
    parts = re.findall(r"\d+", version)
    if len(parts) < 2:
        raise ValueError(f"not a CUDA version: {version!r}")
    return int(parts[0]), int(parts[1])


@dataclass(frozen=True)
class AdapterLibrary:
    """What an adapter needs importable: its distribution and its import name."""

    adapter: str
    library: str  #: canonical distribution name
    module: str


def adapter_libraries() -> list[AdapterLibrary]:
    """The installed snnbench's adapters (entry points), each with its library and module."""
    found: list[AdapterLibrary] = []
    for ep in sorted(metadata.entry_points(group=ADAPTER_GROUP), key=lambda e: e.name):
        cls = ep.load()
        library = canonicalize_name(getattr(cls, "library", "") or "snnbench")
        module = getattr(cls, "module", "") or library.replace("-", "_")
        found.append(AdapterLibrary(ep.name, library, module))
    return found


class Report:
    """Collects one line per check; ``failed`` decides the exit status."""

    def __init__(self) -> None:
        self.failed = 0

    def ok(self, what: str) -> None:
        print(f"ok    {what}", flush=True)

    def fail(self, what: str) -> None:
        self.failed += 1
        print(f"FAIL  {what}", flush=True)

    def run(self, what: str, check: Callable[[], str | None]) -> None:
        """Run ``check``; it returns a detail for the ok line, or raises to fail."""
        try:
            detail = check()
        except Exception as exc:  # a check must report, never abort the others
            self.fail(f"{what}: {type(exc).__name__}: {exc}")
        else:
            self.ok(f"{what}" + (f" ({detail})" if detail else ""))


def _import(module: str) -> str | None:
    if module.split(".")[0] == "rockpool":
        # rockpool imports samna when present; the images do not install its self-installing
        # PyPI stub, and this keeps the check offline even where it is installed.
        sys.modules.setdefault("samna", None)  # type: ignore[arg-type]
    imported = importlib.import_module(module)
    return getattr(imported, "__version__", None)


def _import_lava_dl(module: str) -> str | None:
    from snnbench.adapters.lava_dl import _ensure_torchvision

    _ensure_torchvision()
    return _import(module)


def check_imports(report: Report, pins: Sequence[Pin], target: str) -> None:
    """Every adapter's library is pinned (or CUDA-only on the CPU image) and imports."""
    pinned = {pin.name for pin in pins}
    seen: set[str] = set()
    for entry in adapter_libraries():
        if entry.library not in pinned | UNPINNED_OK:
            if target == "cpu" and entry.library == "sinabs-exodus":
                report.ok(f"adapter {entry.adapter}: {entry.library} is CUDA-only, not in the "
                          "CPU image (the adapter reports itself unavailable)")
                continue
            report.fail(f"adapter {entry.adapter}: library {entry.library} is not pinned")
            continue
        if entry.module in seen:
            continue
        seen.add(entry.module)
        if entry.library == "lava-dl" and target == "cpu":
            # the adapter's own import path: slayer imports torchvision's detection helpers,
            # which the CPU image does not have, so the adapter puts stubs in first
            report.run(f"import {entry.module} (adapter {entry.adapter}, its torchvision stubs)",
                       functools.partial(_import_lava_dl, entry.module))
            continue
        report.run(f"import {entry.module} (adapter {entry.adapter})",
                   functools.partial(_import, entry.module))
    if target == "gpu" or "torchvision" in installed_distributions():
        # where torchvision is installed (the GPU image: a CUDA build from PyPI, matching the
        # CUDA torch), it must load for real, not stubbed
        report.run("import torchvision (a build matching torch)", lambda: _import("torchvision"))
    else:
        report.ok("torchvision is not installed (the CPU image: PyPI has only CUDA builds; "
                  "no adapter uses it, and the lava-dl adapter stubs what slayer imports)")


def _nvcc_release() -> str:
    nvcc = shutil.which("nvcc") or str(Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"),
                                            "bin", "nvcc"))
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"release (\d+\.\d+)", out)
    if not match:
        raise RuntimeError(f"cannot read the release from: {out.strip()!r}")
    return match.group(1)


def check_cuda_stack(report: Report, installed: dict[str, str]) -> None:
    """One CUDA major.minor for torch, nvcc, the base image; one major for every CUDA wheel."""
    import torch

    torch_cuda = torch.version.cuda
    if torch_cuda is None:
        report.fail(f"torch {torch.__version__} is not a CUDA build")
        return
    want = major_minor(torch_cuda)
    report.ok(f"torch {torch.__version__} built for CUDA {torch_cuda}")

    def same(label: str, version: str) -> str:
        if major_minor(version) != want:
            raise RuntimeError(f"{label} is CUDA {version}, torch is {torch_cuda}")
        return version

    report.run("nvcc matches torch's CUDA", lambda: same("nvcc", _nvcc_release()))
    base = os.environ.get("CUDA_VERSION")  # set by the nvidia/cuda base image
    if base:
        report.run("base image CUDA matches torch's", lambda: same("the base image", base))
    majors = cuda_majors_in_names(installed)
    others = {name: major for name, major in majors.items() if major != want[0]}
    if others:
        report.fail(f"wheels for another CUDA major than {want[0]}: {sorted(others)}")
    else:
        report.ok(f"all {len(majors)} CUDA-suffixed wheels are for CUDA {want[0]}")
    plugin = f"jax-cuda{want[0]}-plugin"
    if plugin in installed:
        report.ok(f"{plugin} {installed[plugin]} installed")
    else:
        report.fail(f"{plugin} is not installed: JAX would run on the CPU")


def check_extensions(report: Report) -> None:
    """sinabs-exodus and SpikingJelly's native operators load and were built for this torch."""
    import torch

    report.run("import exodus_cuda (sinabs-exodus, built in the image)",
               lambda: getattr(importlib.import_module("exodus_cuda"), "__file__", None))

    def spikingjelly_native() -> str:
        spec = importlib.util.find_spec("spikingjelly._ops.lif._C")
        if spec is None or spec.origin is None:
            raise RuntimeError("spikingjelly._ops.lif._C is missing: not built with "
                               "SJ_BUILD_NATIVE_CUDA=1")
        info = json.loads(Path(spec.origin).with_name("_native_build.json").read_text())
        if info["torch_version"] != str(torch.__version__):
            raise RuntimeError(f"built against torch {info['torch_version']}")
        if info["cuda_version"] != torch.version.cuda:
            raise RuntimeError(f"built against CUDA {info['cuda_version']}")
        torch.ops.load_library(spec.origin)  # type: ignore[no-untyped-call]
        return f"torch {info['torch_version']}, {info.get('torch_cuda_arch_list')}"

    report.run("SpikingJelly native LIF operator", spikingjelly_native)


def check_device(report: Report) -> None:
    """With a GPU: torch, JAX and both compiled extensions run on it."""
    import torch

    def torch_gpu() -> str:
        x = torch.ones(64, 64, device="cuda")
        torch.cuda.synchronize()
        if float((x @ x).sum()) != 64.0**3:
            raise RuntimeError("wrong matmul result")
        return torch.cuda.get_device_name(0)

    def jax_gpu() -> str:
        import jax

        devices = jax.devices()
        if devices[0].platform != "gpu":
            raise RuntimeError(f"JAX runs on {devices}")
        return str(devices[0])

    def exodus_gpu() -> str:
        from sinabs.exodus.layers import LIF

        lif = LIF(tau_mem=10.0).cuda()
        out = lif(torch.full((2, 8, 4), 0.5, device="cuda"))
        torch.cuda.synchronize()
        return f"{int(out.sum())} spikes"

    def spikingjelly_gpu() -> str:
        from spikingjelly._ops import native_loader

        if not native_loader._native_available("spikingjelly._ops.lif", 0):
            raise RuntimeError("native LIF operator unavailable on this GPU (see the log)")
        return "native CUDA LIF selected"

    for what, check in (("torch on the GPU", torch_gpu), ("JAX on the GPU", jax_gpu),
                        ("sinabs-exodus on the GPU", exodus_gpu),
                        ("SpikingJelly native CUDA on the GPU", spikingjelly_gpu)):
        report.run(what, check)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the checks; 0 when all pass."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lock", type=Path, required=True, help="requirements-*.txt to check")
    parser.add_argument("--target", choices=("gpu", "cpu"), required=True)
    parser.add_argument("--allow-unlocked", action="store_true",
                        help="do not fail on installed distributions that the lock lacks")
    parser.add_argument("--skip-imports", action="store_true",
                        help="check versions (and CUDA) only")
    parser.add_argument("--require-device", action="store_true",
                        help="gpu: also run torch, JAX and the extensions on the GPU")
    args = parser.parse_args(argv)

    report = Report()
    pins = read_lock(args.lock)
    installed = installed_distributions()
    problems = check_versions(pins, installed, allow_unlocked=args.allow_unlocked)
    for problem in problems:
        report.fail(problem)
    if not problems:
        report.ok(f"{len(pins)} pins of {args.lock} installed at exactly those versions")
    if args.target == "gpu":
        check_cuda_stack(report, installed)
    else:
        report.run("torch is the CPU build", lambda: _cpu_torch())
    if not args.skip_imports:
        check_imports(report, pins, args.target)
        if args.target == "gpu":
            check_extensions(report)
    if args.require_device:
        check_device(report)
    print(f"{report.failed} check(s) failed" if report.failed else "all checks passed")
    return 1 if report.failed else 0


def _cpu_torch() -> str:
    import torch

    if torch.version.cuda is not None:
        raise RuntimeError(f"torch {torch.__version__} is built for CUDA {torch.version.cuda}")
    return str(torch.__version__)


if __name__ == "__main__":
    sys.exit(main())

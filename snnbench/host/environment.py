"""The environment manifest: machine, GPU, versions and git state recorded with every run.

Everything here must work on a machine with no GPU and none of the benchmarked libraries: a
missing piece reads as absent (empty list, None), never as a crash.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil

import snnbench
from snnbench.host import nvml

# the one masking of credentials, re-exported where it was first defined
from snnbench.host.masking import (
    MASK as MASK,
    SECRET_MARKERS as SECRET_MARKERS,
    looks_secret as looks_secret,
    masked_env_vars,
)

#: distributions whose versions every manifest records (None when not installed)
TRACKED_PACKAGES: tuple[str, ...] = (
    "torch",
    "triton",
    "numpy",
    "snntorch",
    "norse",
    "spikingjelly",
    "sinabs",
    "sinabs-exodus",
    "lava-dl",
    "rockpool",
    "jax",
    "jaxlib",
    "dm-haiku",
    "spyx",
    "flax",
    "brainstate",
    "braintools",
    "nvidia-ml-py",
    "cupy-cuda12x",
    "cupy-cuda13x",
)


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution, without importing it."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, falling back to platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


#: CPU features that change what the CPU kernels can do (vector width, 16-bit and matrix units):
#: a virtual machine may hide the model name ("AMD EPYC"), and then only these tell an AVX2 host
#: from an AVX-512 one, whose fused scan and GEMMs run at other speeds
CPU_ISA_FLAGS: tuple[str, ...] = (
    "sse4_2", "avx", "f16c", "fma", "avx2", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
    "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2",
)


def cpu_isa(cpuinfo: str | None = None) -> list[str] | None:
    """The :data:`CPU_ISA_FLAGS` the CPU has, in that order, from /proc/cpuinfo's ``flags``
    (x86) or ``Features`` (Arm) line; None where there is no such file."""
    try:
        text = Path("/proc/cpuinfo").read_text() if cpuinfo is None else cpuinfo
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            have = set(line.split(":", 1)[1].split())
            return [flag for flag in CPU_ISA_FLAGS if flag in have]
    return None


def nvidia_gpus() -> list[dict[str, Any]]:
    """NVIDIA GPUs seen by NVML; an empty list when there is no driver or no GPU."""
    try:
        pynvml = nvml.init()
    except nvml.NvmlUnavailable:  # no package, no driver: no NVIDIA GPU here
        return []
    try:
        driver = nvml.text(pynvml.nvmlSystemGetDriverVersion())
        try:
            cuda_raw = int(pynvml.nvmlSystemGetCudaDriverVersion())
            cuda = f"{cuda_raw // 1000}.{(cuda_raw % 1000) // 10}"
        except Exception:
            cuda = None
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            gpus.append(
                {
                    "index": index,
                    "name": nvml.text(pynvml.nvmlDeviceGetName(handle)),
                    "driver": driver,
                    "cuda": cuda,
                    "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
                }
            )
        return gpus
    except Exception:
        return []
    finally:
        nvml.shutdown(pynvml)


def git_state(repo: Path | None = None) -> dict[str, Any]:
    """Commit and dirty flag of the snnbench checkout, or nulls outside a git checkout."""
    root = repo or Path(snnbench.__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
        return {"git_commit": commit, "git_dirty": bool(dirty)}
    except (OSError, subprocess.SubprocessError):
        # inside the Docker image there is no .git: the build records the commit instead
        built = os.environ.get("SNNBENCH_GIT_COMMIT", "")
        if built and built != "unknown":
            return {"git_commit": built.removesuffix("-dirty"),
                    "git_dirty": built.endswith("-dirty")}
        return {"git_commit": None, "git_dirty": None}


def container_image() -> dict[str, str | None] | None:
    """The Docker image a containerised run used (set by docker/docker.mk), else None."""
    # compose passes unset variables as empty strings
    tag = os.environ.get("SNNBENCH_IMAGE_TAG") or None
    digest = os.environ.get("SNNBENCH_IMAGE_DIGEST") or None
    if not tag and not digest:
        return None
    return {"tag": tag, "digest": digest,
            "repo_digests": os.environ.get("SNNBENCH_IMAGE_REPO_DIGESTS") or None}


#: prefixes of environment variables that change what a run measures (threads, allocators,
#: compilers, GEMM paths, visible devices), reviewed one by one: each belongs to a runtime a
#: case uses. Broad prefixes shared with other tools are not here (``TF_`` is also
#: Terraform's, with its tokens; ``NVIDIA_`` also holds API keys): their variables that
#: matter are named in :data:`ENV_NAMES`.
ENV_PREFIXES: tuple[str, ...] = (
    "SNNBENCH_", "OMP_", "MKL_", "OPENBLAS_", "KMP_", "GOMP_", "MALLOC_", "CUDA_", "CUBLAS_",
    "CUBLASLT_", "CUDNN_", "TRITON_", "TORCH_", "TORCHINDUCTOR_", "TORCHDYNAMO_", "PYTORCH_",
    "XLA_", "JAX_", "CUPY_", "NCCL_",
)
#: single variables that change a measurement, recorded by exact name
ENV_NAMES: frozenset[str] = frozenset({
    "LD_PRELOAD", "NVIDIA_TF32_OVERRIDE", "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES", "TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS",
})


def records_variable(name: str) -> bool:
    """True for a variable that can change a measurement (by :data:`ENV_NAMES` or
    :data:`ENV_PREFIXES`)."""
    return name in ENV_NAMES or name.startswith(ENV_PREFIXES)


def relevant_env_vars(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment variables that can change a measurement, credentials masked (by
    name, and inside values: URL passwords, ``--password=…``)."""
    env = os.environ if environ is None else environ
    return masked_env_vars({k: env[k] for k in sorted(env) if records_variable(k)})


def collect_environment() -> dict[str, Any]:
    """Everything about this machine and its software that a result depends on."""
    memory = psutil.virtual_memory()
    return {
        "snnbench": {"version": snnbench.__version__, **git_state()},
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "os": platform.platform(),
        "hostname_hash": _hostname_hash(),
        "cpu": {
            "model": cpu_model(),
            "isa": cpu_isa(),
            "cores_logical": psutil.cpu_count(logical=True),
            "cores_physical": psutil.cpu_count(logical=False),
            "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        },
        "ram_bytes": int(memory.total),
        "gpus": nvidia_gpus(),
        "packages": package_versions(),
        "image": container_image(),
        "env_vars": relevant_env_vars(),
    }


def _hostname_hash() -> str:
    """A short hash of the host name: tells machines apart without publishing the name."""
    import hashlib

    return hashlib.sha1(platform.node().encode()).hexdigest()[:10]

"""Where a case runs on one machine: CPU sets for ``--jobs``, GPUs (by NVML UUID) for ``--gpus``.

CUDA numbers GPUs fastest-first by default, nvidia-smi and NVML by PCI bus: index 0 can be two
different GPUs. A case is therefore pinned by UUID (``CUDA_VISIBLE_DEVICES=GPU-…``), with
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so that anything that still counts agrees with NVML.

NVML is passed in (``nvml``) so the tests can use a fake; by default it is ``pynvml``.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from snnbench.executors.base import ExecutorError
from snnbench.host import nvml


@dataclass(frozen=True)
class Slot:
    """One place a case can run on this host: its CPUs, its GPU, the environment that pins it."""

    index: int
    cpus: tuple[int, ...] = ()
    gpu_uuid: str = ""
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Gpu:
    """A GPU as NVML sees it."""

    index: int
    uuid: str
    name: str
    #: the CPUs nearest to it (NVML's affinity), empty when NVML cannot tell
    cpus: tuple[int, ...] = ()


def hostname() -> str:
    """This machine's name, as every record and machine record names it."""
    return socket.gethostname()


def available_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def cpu_slots(jobs: int, cpus: Sequence[int] | None = None) -> list[Slot]:
    """``jobs`` slots, each with its own contiguous share of ``cpus`` (the rest unused)."""
    cpus = tuple(available_cpus() if cpus is None else cpus)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ExecutorError(f"--jobs must be a positive integer, got {jobs!r}")
    if jobs > len(cpus):
        raise ExecutorError(f"--jobs {jobs} needs at least {jobs} CPU cores; this process may "
                            f"use {len(cpus)}")
    share = len(cpus) // jobs
    return [Slot(i, cpus=cpus[i * share:(i + 1) * share]) for i in range(jobs)]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _mask_to_cpus(words: Sequence[int], word_bits: int = 64) -> tuple[int, ...]:
    return tuple(w * word_bits + b for w, word in enumerate(words) for b in range(word_bits)
                 if int(word) >> b & 1)


@contextlib.contextmanager
def _nvml(lib: Any | None) -> Iterator[Any]:
    try:
        opened = nvml.init(lib)
    except nvml.NvmlUnavailable as exc:
        if exc.missing:
            raise ExecutorError("--gpus needs NVML (the nvidia-ml-py package)") from exc
        raise ExecutorError(f"--gpus: NVML sees no NVIDIA GPU here ({exc.__cause__})") from exc
    try:
        yield opened
    finally:
        nvml.shutdown(opened)


def list_gpus(nvml: Any | None = None) -> list[Gpu]:
    """Every GPU NVML sees, in NVML (PCI bus) order; raises :class:`ExecutorError` if none."""
    with _nvml(nvml) as lib:
        gpus = []
        ncpu = os.cpu_count() or 1
        for index in range(int(lib.nvmlDeviceGetCount())):
            handle = lib.nvmlDeviceGetHandleByIndex(index)
            try:
                words = lib.nvmlDeviceGetCpuAffinity(handle, (ncpu + 63) // 64)
                near = _mask_to_cpus(list(words))
            except Exception:  # not supported on every platform
                near = ()
            gpus.append(Gpu(index, _text(lib.nvmlDeviceGetUUID(handle)),
                            _text(lib.nvmlDeviceGetName(handle)), near))
        return gpus


def gpu_slots(selection: Sequence[str], bind_cpus: bool = False,
              nvml: Any | None = None) -> list[Slot]:
    """One slot per selected GPU (an NVML index or a UUID), pinned by UUID."""
    gpus = list_gpus(nvml)
    if not selection:
        raise ExecutorError("--gpus is empty")
    known = ", ".join(f"{g.index} ({g.name}, {g.uuid})" for g in gpus) or "none"
    chosen: list[Gpu] = []
    for item in selection:
        item = item.strip()
        match = [g for g in gpus if item in (str(g.index), g.uuid, g.uuid.removeprefix("GPU-"))]
        if not match:
            raise ExecutorError(f"--gpus: no GPU {item!r} on this machine (NVML sees: {known})")
        if match[0] in chosen:
            raise ExecutorError(f"--gpus names GPU {item!r} twice")
        chosen.append(match[0])
    allowed = set(available_cpus())
    slots = []
    for i, gpu in enumerate(chosen):
        cpus = tuple(c for c in gpu.cpus if c in allowed) if bind_cpus else ()
        env = (("CUDA_DEVICE_ORDER", "PCI_BUS_ID"), ("CUDA_VISIBLE_DEVICES", gpu.uuid))
        slots.append(Slot(i, cpus=cpus, gpu_uuid=gpu.uuid, env=env))
    return slots


def visible_gpu_uuid(nvml: Any | None = None, environ: dict[str, str] | None = None) -> str:
    """The UUID(s) of the GPU(s) this process was given (Slurm, Ray), "" when unknown.

    ``CUDA_VISIBLE_DEVICES`` holds indices (Slurm, Ray) or UUIDs; indices are mapped through
    NVML, which counts like ``CUDA_DEVICE_ORDER=PCI_BUS_ID``.
    """
    env = os.environ if environ is None else environ
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if not visible:
        return ""
    if all(v.startswith(("GPU-", "MIG-")) for v in visible):
        return ",".join(visible)
    try:
        gpus = {str(g.index): g.uuid for g in list_gpus(nvml)}
    except ExecutorError:
        return ""
    return ",".join(gpus.get(v, "") for v in visible if gpus.get(v))

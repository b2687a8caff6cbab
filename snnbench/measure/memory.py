"""Peak-memory probes, one per kind of device, reset before each measured phase.

- CUDA with torch: the caching allocator's ``max_memory_allocated`` (reset per phase);
- JAX on GPU: ``Device.memory_stats()['peak_bytes_in_use']``, which JAX cannot reset — that is
  one reason each case runs in its own process;
- CPU: the process's peak resident set (VmHWM), reset through ``/proc/self/clear_refs``; the
  reported ``peak_mem_bytes`` is its growth over the baseline taken after imports, so the
  interpreter and libraries themselves are not counted.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path
from typing import Protocol


class MemoryProbe(Protocol):
    """Measures the peak memory of a region: ``reset()`` before, ``peak_bytes()`` after."""

    name: str

    def reset(self) -> None:
        """Start a new peak."""

    def peak_bytes(self) -> int | None:
        """Peak bytes since the last reset (None when unknown)."""


def current_rss_bytes() -> int:
    """The process's resident set size now."""
    rss = _proc_status_bytes("VmRSS")
    if rss is not None:
        return rss
    import psutil

    return int(psutil.Process().memory_info().rss)


def _proc_status_bytes(field: str) -> int | None:
    """A size in /proc/self/status (``VmRSS``, ``VmHWM``) in bytes; None where there is none."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _vm_hwm_bytes() -> int:
    hwm = _proc_status_bytes("VmHWM")
    if hwm is not None:
        return hwm
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale


class RssProbe:
    """Peak resident set of this process (Linux VmHWM), resettable where the kernel allows."""

    name = "rss"

    def __init__(self) -> None:
        self.resettable = True

    def reset(self) -> None:
        try:
            # "5" resets the peak RSS (VmHWM) to the current RSS (Linux ≥ 4.0)
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            self.resettable = False

    def peak_bytes(self) -> int | None:
        return _vm_hwm_bytes()


class TorchCudaProbe:
    """Peak bytes held by torch's CUDA caching allocator."""

    name = "torch-cuda"

    def __init__(self, device: str = "cuda") -> None:
        import torch

        self._torch = torch
        self._device = torch.device(device)

    def reset(self) -> None:
        self._torch.cuda.synchronize(self._device)
        self._torch.cuda.reset_peak_memory_stats(self._device)

    def peak_bytes(self) -> int | None:
        self._torch.cuda.synchronize(self._device)
        return int(self._torch.cuda.max_memory_allocated(self._device))


class JaxProbe:
    """JAX's device peak (not resettable: the value covers the whole process so far)."""

    name = "jax"

    def reset(self) -> None:
        """JAX offers no peak reset; one process per case keeps the figure per case."""

    def peak_bytes(self) -> int | None:
        import jax

        stats = jax.devices()[0].memory_stats()
        if not stats:
            return None
        peak = stats.get("peak_bytes_in_use")
        return int(peak) if peak is not None else None


def probe_for(framework: str, device: str) -> MemoryProbe:
    """The probe that measures ``framework`` on ``device``."""
    if device == "cuda" and framework == "torch":
        return TorchCudaProbe(device)
    if device == "cuda" and framework == "jax":
        return JaxProbe()
    return RssProbe()

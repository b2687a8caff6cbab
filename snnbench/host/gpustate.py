"""The GPU's SM clock, temperature and power, read from NVML around a case.

A GPU idles at a low clock (an H100 at 345 MHz) and boosts under load (to 1980 MHz); the
warm-up waits for the boost (:meth:`GpuState.at_boost`), and a clock that falls while the
phases are timed (heat or a power cap: throttling) makes every later sample slower, which
:func:`throttle_warning` reports in the row's ``warning`` column.

NVML is opened through :mod:`snnbench.host.nvml`, as everywhere else (tests replace its ``load``
with a fake). Where NVML is absent, :func:`open_monitor` returns None and
nothing is recorded; a field NVML cannot read is NaN, never a crash.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import asdict, dataclass, fields
from typing import Any

from snnbench.host import nvml as nvml_lib

#: the SM clock is "at boost" from this fraction of its maximum on
BOOST_FRACTION = 0.95
#: a fall of the SM clock by more than this fraction during the timed phases is throttling
THROTTLE_DROP = 0.05


@dataclass(frozen=True)
class GpuState:
    """One reading of the GPU (NaN where NVML could not read a field)."""

    sm_clock_mhz: float = math.nan
    max_sm_clock_mhz: float = math.nan
    temperature_c: float = math.nan
    power_w: float = math.nan

    def at_boost(self) -> bool:
        """True when the SM clock is within :data:`BOOST_FRACTION` of its maximum."""
        return (math.isfinite(self.sm_clock_mhz) and math.isfinite(self.max_sm_clock_mhz)
                and self.sm_clock_mhz >= BOOST_FRACTION * self.max_sm_clock_mhz)

    def to_dict(self) -> dict[str, float]:
        """Plain data (NaN becomes null in JSON)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> GpuState | None:
        """Inverse of :meth:`to_dict`; None for no reading (a null field reads as NaN, a key
        it does not know is ignored).

        Standard library only: the worker imports this module, and
        :class:`snnbench.measure.measurement.MeasurementInfo` validates its readings through it.
        """
        if not isinstance(data, dict):
            return None
        return cls(**{f.name: math.nan if data.get(f.name) is None else float(data[f.name])
                      for f in fields(cls)})


class GpuMonitor:
    """Reads :class:`GpuState` of one GPU; :meth:`close` shuts NVML down again."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self._nvml = nvml
        self._handle = handle

    def _read(self, name: str, *args: Any) -> float:
        try:
            return float(getattr(self._nvml, name)(self._handle, *args))
        except (self._nvml.NVMLError, AttributeError, TypeError, ValueError):
            return math.nan

    def read(self) -> GpuState:
        """The GPU's state now."""
        nvml = self._nvml
        sm = getattr(nvml, "NVML_CLOCK_SM", 1)
        return GpuState(
            sm_clock_mhz=self._read("nvmlDeviceGetClockInfo", sm),
            max_sm_clock_mhz=self._read("nvmlDeviceGetMaxClockInfo", sm),
            temperature_c=self._read("nvmlDeviceGetTemperature",
                                     getattr(nvml, "NVML_TEMPERATURE_GPU", 0)),
            power_w=self._read("nvmlDeviceGetPowerUsage") / 1000.0,  # milliwatts
        )

    def at_boost(self) -> bool:
        """True when the SM clock is at its boost level now (two NVML reads: called per
        warm-up step)."""
        sm = getattr(self._nvml, "NVML_CLOCK_SM", 1)
        return GpuState(sm_clock_mhz=self._read("nvmlDeviceGetClockInfo", sm),
                        max_sm_clock_mhz=self._read("nvmlDeviceGetMaxClockInfo", sm)).at_boost()

    def close(self) -> None:
        """Shut NVML down (balanced with the init in :func:`open_monitor`)."""
        if self._handle is not None:
            self._handle = None
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()


def _visible_gpu(environ: dict[str, str] | os._Environ[str]) -> str:
    """The first entry of ``CUDA_VISIBLE_DEVICES`` (the GPU a worker's ``cuda`` is), or ""."""
    visible = [v.strip() for v in environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    return visible[0] if visible and visible[0] else ""


def open_monitor(device: str, environ: dict[str, str] | None = None) -> GpuMonitor | None:
    """A monitor of the GPU this process computes on, or None (a CPU case, no NVML, no GPU).

    The GPU is the first of ``CUDA_VISIBLE_DEVICES`` (a UUID, as the runner pins cases, or an
    index in PCI bus order, as Slurm and Ray give them), else NVML device 0.
    """
    if device != "cuda":
        return None
    try:
        nvml = nvml_lib.init()
    except nvml_lib.NvmlUnavailable:
        return None
    gpu = _visible_gpu(os.environ if environ is None else environ)
    try:
        if gpu.startswith(("GPU-", "MIG-")):
            handle = nvml.nvmlDeviceGetHandleByUUID(gpu)
        else:
            handle = nvml.nvmlDeviceGetHandleByIndex(int(gpu) if gpu.isdigit() else 0)
    except nvml.NVMLError:
        nvml_lib.shutdown(nvml)
        return None
    return GpuMonitor(nvml, handle)


def throttle_warning(before: GpuState | None, after: GpuState | None) -> str:
    """A warning that says what to do when the SM clock fell while the phases were timed.

    One clause without "; " (the summary joins a row's warnings with it).
    """
    if before is None or after is None:
        return ""
    start, end = before.sm_clock_mhz, after.sm_clock_mhz
    if not (math.isfinite(start) and math.isfinite(end)) or end >= (1 - THROTTLE_DROP) * start:
        return ""
    heat = [f"{after.temperature_c:.0f} °C" if math.isfinite(after.temperature_c) else "",
            f"{after.power_w:.0f} W" if math.isfinite(after.power_w) else ""]
    state = ", ".join(h for h in heat if h)
    return (
        f"throttled: the SM clock fell from {start:.0f} to {end:.0f} MHz while this case was "
        f"timed{f' ({state})' if state else ''}: let the GPU cool between cases, check its "
        "cooling and power cap, or lock its clocks (nvidia-smi --lock-gpu-clocks)"
    )

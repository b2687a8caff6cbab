"""GPU energy of a timed region, from NVML's cumulative energy counter.

``nvmlDeviceGetTotalEnergyConsumption`` returns the energy the board has used since the driver
was loaded, in millijoules (Volta and newer; older boards answer ``NOT_SUPPORTED``). The energy of
a region is the difference of two readings. What that number is, and is not:

* It is **whole-board** energy: GPU and memory, idle/static power included, and any other process
  on the same GPU. It is not attributable to single kernels. Run nothing else on the GPU.
* The driver refreshes the counter periodically, not per kernel, so a short region is quantised
  (a region shorter than the refresh period can read 0 J). :func:`measure_energy` therefore
  repeats the step until the region spans at least ``min_time_s`` (default
  :data:`MIN_REGION_S` = 1 s) and reports energy **per step** and the average power.
* NVML numbers devices in PCI bus order; CUDA does too only with
  ``CUDA_DEVICE_ORDER=PCI_BUS_ID``. Pass the NVML index of the GPU the worker uses.

Where NVML is absent (no driver, no GPU, the ``nvidia-ml-py`` package missing) or the board
lacks the counter, :func:`energy_available` is False and :func:`measure_energy` returns None: the
harness then writes no energy rows, never zeros and never a crash.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from snnbench.host import nvml as nvml_lib
from snnbench.host.nvml import NvmlUnavailable

#: the shortest region worth metering: well above the counter's refresh period, so the
#: quantisation error of one reading is a small share of the energy measured
MIN_REGION_S = 1.0
#: upper bound on steps in one metered region (a guard against a 0 s calibration estimate)
MAX_STEPS = 1_000_000


class EnergyUnavailable(NvmlUnavailable):
    """NVML or its energy counter cannot be used here; the message says why."""


@dataclass(frozen=True)
class EnergyReading:
    """Energy and wall time between :meth:`EnergyMeter.start` and :meth:`EnergyMeter.stop`."""

    joules: float
    seconds: float

    @property
    def average_w(self) -> float:
        """Average board power over the region (NaN for a zero-length region)."""
        return self.joules / self.seconds if self.seconds > 0 else math.nan


@dataclass(frozen=True)
class EnergyResult:
    """What :func:`measure_energy` found: ``steps`` steps in one region of ``region_s``."""

    joules_per_step: float
    average_power_w: float
    steps: int
    region_s: float
    joules: float


class EnergyMeter:
    """Meter one region at a time on one GPU::

        with EnergyMeter(device_index=0) as meter:
            meter.start()
            ...                      # run the work, then synchronize the device
            reading = meter.stop()   # EnergyReading(joules, seconds)

    Opening raises :class:`EnergyUnavailable` when NVML cannot be initialised or the board has
    no energy counter. The caller must synchronize the device before :meth:`stop`, or the
    region ends before the work does.
    """

    def __init__(
        self, device_index: int = 0, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.device_index = device_index
        self._clock = clock
        self._nvml: Any = None
        self._handle: Any = None
        self._start: tuple[int, float] | None = None

    def open(self) -> EnergyMeter:
        """Initialise NVML and check the counter can be read; idempotent."""
        if self._handle is not None:
            return self
        try:
            nvml = nvml_lib.init()
        except NvmlUnavailable as exc:  # not installed, LibraryNotFound, DriverNotLoaded, ...
            raise EnergyUnavailable(str(exc)) from exc
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(self.device_index)
            nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        except nvml.NVMLError as exc:  # NotSupported (pre-Volta), InvalidArgument (index)
            nvml_lib.shutdown(nvml)
            raise EnergyUnavailable(
                f"no energy counter on NVML device {self.device_index}: {exc}"
            ) from exc
        self._nvml, self._handle = nvml, handle
        return self

    def close(self) -> None:
        """Shut NVML down (balanced with :meth:`open`)."""
        if self._handle is not None:
            self._handle = None
            self._nvml.nvmlShutdown()

    def __enter__(self) -> EnergyMeter:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def read_mj(self) -> int:
        """The raw counter: millijoules since the driver was loaded."""
        if self._handle is None:
            raise EnergyUnavailable("EnergyMeter is not open")
        try:
            return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except self._nvml.NVMLError as exc:
            raise EnergyUnavailable(f"energy counter read failed: {exc}") from exc

    def start(self) -> None:
        """Begin a region (call after synchronizing the device)."""
        self._start = (self.read_mj(), self._clock())

    def stop(self) -> EnergyReading:
        """End the region begun by :meth:`start` (call after synchronizing the device)."""
        if self._start is None:
            raise RuntimeError("EnergyMeter.stop() without start()")
        energy_mj, t0 = self._start
        self._start = None
        now_mj, t1 = self.read_mj(), self._clock()
        return EnergyReading(joules=(now_mj - energy_mj) / 1000.0, seconds=t1 - t0)


def energy_available(device_index: int = 0) -> bool:
    """True when NVML works here and device ``device_index`` has an energy counter."""
    try:
        EnergyMeter(device_index).open().close()
    except EnergyUnavailable:
        return False
    return True


def measure_energy(
    step: Callable[[], None],
    sync: Callable[[], None],
    min_time_s: float = MIN_REGION_S,
    *,
    device_index: int = 0,
    max_steps: int = MAX_STEPS,
    clock: Callable[[], float] = time.perf_counter,
) -> EnergyResult | None:
    """Energy per ``step()`` averaged over one region of at least ``min_time_s`` seconds.

    One calibration step (also a warm-up) estimates the step time; then steps run back to back
    in the metered region, with ``sync()`` only between batches, until the region spans
    ``min_time_s`` (or ``max_steps`` steps). Returns None when energy cannot be measured here
    (no NVML, no counter, a failed read) or the counter did not advance (a region too short for
    its refresh period): the caller then records no energy, never a zero.
    """
    if min_time_s <= 0:
        raise ValueError(f"min_time_s must be > 0, got {min_time_s}")
    try:
        meter = EnergyMeter(device_index, clock).open()
    except EnergyUnavailable:
        return None
    try:
        sync()
        t0 = clock()
        step()
        sync()
        per_step = max(clock() - t0, 1e-9)

        steps = 0
        meter.start()
        region_t0 = clock()
        elapsed = 0.0
        while elapsed < min_time_s and steps < max_steps:
            # a batch sized to fill the remaining time; sync only once per batch
            remaining = min_time_s - elapsed
            batch = max(1, min(max_steps - steps, math.ceil(remaining / per_step)))
            for _ in range(batch):
                step()
            sync()
            steps += batch
            elapsed = clock() - region_t0
            per_step = max(elapsed / steps, 1e-9)
        reading = meter.stop()
    except EnergyUnavailable:
        return None
    finally:
        meter.close()
    if reading.joules <= 0 or reading.seconds <= 0:
        return None
    return EnergyResult(
        joules_per_step=reading.joules / steps,
        average_power_w=reading.average_w,
        steps=steps,
        region_s=reading.seconds,
        joules=reading.joules,
    )

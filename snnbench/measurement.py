"""How a case was measured: timer, its resolution, warm-up, block sizes and GPU state.

The worker fills one :class:`MeasurementInfo` and stores it in ``CaseRecord.measurement``
(:meth:`MeasurementInfo.to_dict`); the tables read it back with :meth:`MeasurementInfo.from_dict`.
That dict may hold keys written by other parts of the harness: they are kept as they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from snnbench.gpustate import GpuState, throttle_warning


@dataclass
class MeasurementInfo:
    """What the worker records about how it timed one case."""

    #: ``host``, ``cuda-event`` or ``jax-block`` (see :mod:`snnbench.timing`); "" if untimed
    timer: str = ""
    #: median time of an empty timed region (the timer's overhead), seconds
    timer_null_s: float = math.nan
    warmup_steps: int = 0
    warmup_s: float = 0.0
    #: why the warm-up ended: ``boost``, ``stable`` or ``cap``
    warmup_stop: str = ""
    #: phase → iterations per sample
    block_size: dict[str, int] = field(default_factory=dict)
    #: phase → why its block is 1 although one iteration is below the timer's resolution
    block_note: dict[str, str] = field(default_factory=dict)
    #: the GPU before the warm-up, before the first timed phase, and after the last one
    gpu_idle: GpuState | None = None
    gpu_before: GpuState | None = None
    gpu_after: GpuState | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data, merged into ``CaseRecord.measurement``."""
        return {
            "timer": self.timer,
            "timer_null_s": self.timer_null_s,
            "warmup_steps": self.warmup_steps,
            "warmup_s": self.warmup_s,
            "warmup_stop": self.warmup_stop,
            "block_size": dict(self.block_size),
            "block_note": dict(self.block_note),
            "gpu_idle": self.gpu_idle.to_dict() if self.gpu_idle else None,
            "gpu_before": self.gpu_before.to_dict() if self.gpu_before else None,
            "gpu_after": self.gpu_after.to_dict() if self.gpu_after else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MeasurementInfo:
        """Read back :meth:`to_dict` (from a record of any age: missing keys take defaults)."""
        null = data.get("timer_null_s")
        return cls(
            timer=str(data.get("timer") or ""),
            timer_null_s=math.nan if null is None else float(null),
            warmup_steps=int(data.get("warmup_steps") or 0),
            warmup_s=float(data.get("warmup_s") or 0.0),
            warmup_stop=str(data.get("warmup_stop") or ""),
            block_size={str(k): int(v) for k, v in (data.get("block_size") or {}).items()},
            block_note={str(k): str(v) for k, v in (data.get("block_note") or {}).items()},
            gpu_idle=GpuState.from_dict(data.get("gpu_idle")),
            gpu_before=GpuState.from_dict(data.get("gpu_before")),
            gpu_after=GpuState.from_dict(data.get("gpu_after")),
        )

    def store(self, measurement: dict[str, Any]) -> None:
        """Write these fields into a record's ``measurement`` dict, keeping its other keys."""
        measurement.update(self.to_dict())

    @property
    def warning(self) -> str:
        """What went wrong with the measurement conditions (a throttled GPU), or ""."""
        return throttle_warning(self.gpu_before, self.gpu_after)

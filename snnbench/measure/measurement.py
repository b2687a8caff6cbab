"""How a case was measured: timer, its resolution, warm-up, block sizes and GPU state.

The worker fills one :class:`MeasurementInfo` and stores it in ``CaseRecord.measurement``
(:meth:`MeasurementInfo.to_dict`); the tables read it back with :meth:`MeasurementInfo.from_dict`.
That dict may hold keys written by other parts of the harness: they are kept as they are, and
:meth:`MeasurementInfo.from_dict` ignores them. Both go through the contract's pydantic
TypeAdapter (built on first use, as for the record itself).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, ConfigDict, PlainSerializer, PlainValidator

from snnbench.host.gpustate import GpuState, throttle_warning
from snnbench.records.validation import dump, validate


def _or(default: Any) -> BeforeValidator:
    """A null value on disk means ``default``."""
    return BeforeValidator(lambda value: default if value is None else value)


#: a reading of the GPU, or None; read through :meth:`GpuState.from_dict` (NaN for a null
#: field, None for no reading)
Reading = Annotated[GpuState | None, PlainValidator(GpuState.from_dict),
                    PlainSerializer(lambda s: None if s is None else s.to_dict())]


@dataclass
class MeasurementInfo:
    """What the worker records about how it timed one case."""

    # unknown keys are ignored: ``CaseRecord.measurement`` holds keys of other parts of the
    # harness beside these, and a record of a newer minor may hold more
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="ignore")

    #: ``host``, ``cuda-event`` or ``jax-block`` (see :mod:`snnbench.measure.timing`); "" if untimed
    timer: Annotated[str, _or("")] = ""
    #: median time of an empty timed region (the timer's overhead), seconds (null: NaN)
    timer_null_s: Annotated[float, _or(math.nan)] = math.nan
    warmup_steps: Annotated[int, _or(0)] = 0
    warmup_s: Annotated[float, _or(0.0)] = 0.0
    #: why the warm-up ended: ``boost``, ``stable`` or ``cap``
    warmup_stop: Annotated[str, _or("")] = ""
    #: phase → iterations per sample
    block_size: Annotated[dict[str, int], _or({})] = field(default_factory=dict)
    #: phase → why its block is 1 although one iteration is below the timer's resolution
    block_note: Annotated[dict[str, str], _or({})] = field(default_factory=dict)
    #: the GPU before the warm-up, before the first timed phase, and after the last one
    gpu_idle: Reading = None
    gpu_before: Reading = None
    gpu_after: Reading = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data, merged into ``CaseRecord.measurement``."""
        return dump(self)

    @classmethod
    def from_dict(cls, data: Any, source: str = "measurement") -> MeasurementInfo:
        """Read back :meth:`to_dict` (from a record of any age: missing keys take defaults,
        unknown ones are ignored); :class:`snnbench.records.contract.ContractError` names what is
        wrong."""
        return validate(cls, data or {}, source, "measurement")

    def store(self, measurement: dict[str, Any]) -> None:
        """Write these fields into a record's ``measurement`` dict, keeping its other keys."""
        measurement.update(self.to_dict())

    @property
    def warning(self) -> str:
        """What went wrong with the measurement conditions (a throttled GPU), or ""."""
        return throttle_warning(self.gpu_before, self.gpu_after)

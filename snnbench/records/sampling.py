"""How long and how often each phase of a case is sampled, and how long a case may take:
settings every layer shares.

The config reads them (``[run]``), a job carries them to its worker, and the timing loops
follow them; they stand here, on their own, so that none of those needs the others. The checked
numeric types their fields are declared with (:data:`Positive`, :data:`Count`,
:data:`Seconds`) serve the ``[run]`` table's other fields too: a field says what it accepts
where it is declared, and the check words the "must be ..., got ..." of the one-line error.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import PlainValidator

from snnbench.errors import shown

#: seconds a case may run once its preparation is done (``[run] timeout_s``, a job's timeout)
TIMEOUT_S = 900.0
#: seconds a worker may spend preparing (library import, first-use extension builds) before
#: its case starts (``[run] prepare_timeout_s``)
PREPARE_TIMEOUT_S = 1800.0
#: time steps of the short pre-timing equivalence check, and of ``verify`` (the case's own T
#: when shorter)
VERIFY_TIME_STEPS = 50


# -- checked field types ---------------------------------------------------------------------
def is_int(value: Any) -> bool:
    """An int that is not a bool (``True`` is no count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_seconds(value: Any) -> bool:
    """A finite number ≥ 0 that is not a bool."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def check(ok: Callable[[Any], bool], wording: str) -> PlainValidator:
    """A field check: a value for which ``ok`` holds, else ValueError("must be {wording}, got
    {value}"), which the settings' reader puts the key's name in front of."""
    def validate(value: Any) -> Any:
        if not ok(value):
            raise ValueError(f"must be {wording}, got {shown(value)}")
        return value
    return PlainValidator(validate)


Positive = Annotated[int, check(lambda v: is_int(v) and v >= 1, "a positive integer")]
Count = Annotated[int, check(lambda v: is_int(v) and v >= 0, "an integer ≥ 0")]
Seconds = Annotated[float, check(is_seconds, "a finite number ≥ 0")]


@dataclass(frozen=True)
class MeasureSettings:
    """How long and how often to sample each phase.

    The ``[run]`` table (:class:`snnbench.sweep.config.RunSettings`) inherits these fields, so their
    meaning, defaults and checks are declared here alone.
    """

    #: at least this many timed samples per phase
    repeats: Positive = 9
    #: never more than this many
    max_repeats: Positive = 200
    #: keep sampling while a phase's timed total is below this
    min_time_s: Seconds = 0.5
    #: warm-up steps (forward + backward) before any phase: at least this many...
    warmup: Count = 2
    #: ...and at least this long in total
    warmup_s: Seconds = 0.2
    #: then more, until the GPU clock is at boost or the step time is stable, but never past
    #: this many seconds of warm-up in all (the minimum above is always done)
    warmup_max_s: Seconds = 2.0
    #: most iterations one sample may time (1: never block)
    max_block: Positive = 1000

    def __post_init__(self) -> None:
        if self.repeats < 1:
            raise ValueError(f"repeats must be ≥ 1, got {self.repeats}")
        if self.max_repeats < self.repeats:
            raise ValueError("max_repeats must be ≥ repeats")
        if (self.warmup < 0 or self.warmup_s < 0 or self.min_time_s < 0
                or self.warmup_max_s < 0):
            raise ValueError("warm-up and minimum time must be ≥ 0")
        if self.max_block < 1:
            raise ValueError(f"max_block must be ≥ 1, got {self.max_block}")

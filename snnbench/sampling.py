"""How long and how often each phase of a case is sampled, and how long a case may take:
settings every layer shares.

The config reads them (``[run]``), a job carries them to its worker, and the timing loops
follow them; they stand here, on their own, so that none of those needs the others.
"""

from __future__ import annotations

from dataclasses import dataclass

#: seconds a case may run once its preparation is done (``[run] timeout_s``, a job's timeout)
TIMEOUT_S = 900.0
#: seconds a worker may spend preparing (library import, first-use extension builds) before
#: its case starts (``[run] prepare_timeout_s``)
PREPARE_TIMEOUT_S = 1800.0
#: time steps of the short pre-timing equivalence check, and of ``verify`` (the case's own T
#: when shorter)
VERIFY_TIME_STEPS = 50


@dataclass(frozen=True)
class MeasureSettings:
    """How long and how often to sample each phase."""

    #: at least this many timed samples per phase
    repeats: int = 9
    #: never more than this many
    max_repeats: int = 200
    #: keep sampling while a phase's timed total is below this
    min_time_s: float = 0.5
    #: warm-up steps (forward + backward) before any phase: at least this many...
    warmup: int = 2
    #: ...and at least this long in total
    warmup_s: float = 0.2
    #: then more, until the GPU clock is at boost or the step time is stable, but never past
    #: this many seconds of warm-up in all (the minimum above is always done)
    warmup_max_s: float = 2.0
    #: most iterations one sample may time (1: never block)
    max_block: int = 1000

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

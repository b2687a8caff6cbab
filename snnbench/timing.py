"""Device-synchronized timing loops: warm-up, adaptive repeats, raw samples.

Every timed region ends with ``model.synchronize()`` before the clock is read, so a figure is
never a kernel-launch time. Gradients are dropped before every sample, so no sample
accumulates into another.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from snnbench.adapter import Model

Clock = Callable[[], float]


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

    def __post_init__(self) -> None:
        if self.repeats < 1:
            raise ValueError(f"repeats must be ≥ 1, got {self.repeats}")
        if self.max_repeats < self.repeats:
            raise ValueError("max_repeats must be ≥ repeats")
        if self.warmup < 0 or self.warmup_s < 0 or self.min_time_s < 0:
            raise ValueError("warm-up and minimum time must be ≥ 0")


def time_once(model: Model, phase: str, clock: Clock = time.perf_counter) -> float:
    """One clean, synchronized sample of ``phase`` in seconds."""
    model.zero_grad()
    if phase == "forward":
        model.synchronize()
        start = clock()
        handle = model.forward()
        model.synchronize()
        elapsed = clock() - start
        del handle
    elif phase == "backward":
        handle = model.forward()
        model.synchronize()
        start = clock()
        model.backward(handle)
        model.synchronize()
        elapsed = clock() - start
        del handle
    elif phase == "step":
        model.synchronize()
        start = clock()
        model.step()
        model.synchronize()
        elapsed = clock() - start
    else:
        raise ValueError(f"unknown phase {phase!r}")
    return elapsed


def warm_up(model: Model, settings: MeasureSettings, clock: Clock = time.perf_counter) -> int:
    """Run steps until both the count and the time of the warm-up are reached; returns count."""
    count = 0
    start = clock()
    while count < settings.warmup or (clock() - start) < settings.warmup_s:
        time_once(model, "step", clock)
        count += 1
    return count


def sample_phase(
    model: Model, phase: str, settings: MeasureSettings, clock: Clock = time.perf_counter
) -> list[float]:
    """Raw samples of ``phase``: ``repeats`` at least, more while under ``min_time_s``."""
    time_once(model, phase, clock)  # settle phase-specific caches (e.g. captured graphs)
    samples: list[float] = []
    total = 0.0
    while len(samples) < settings.repeats or (
        total < settings.min_time_s and len(samples) < settings.max_repeats
    ):
        value = time_once(model, phase, clock)
        samples.append(value)
        total += value
    return samples

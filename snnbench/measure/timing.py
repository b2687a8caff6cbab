"""Device-synchronized timing loops: timers, warm-up until stable, blocked samples.

A :class:`Timer` brackets a timed region with two marks and reads the time between them:

* ``host`` — ``perf_counter`` read after ``model.synchronize()``. Every sample carries the cost
  and jitter of one synchronize and one clock read (the *null region*).
* ``cuda-event`` — a ``torch.cuda.Event`` recorded on the stream at each mark; the time between
  two events is measured by the GPU itself, so no synchronize or host clock enters the figure.
  Used for torch models on CUDA.
* ``jax-block`` — the host clock around ``jax.block_until_ready`` (JAX has no public events):
  the host timer's semantics, named apart so rows say which framework's wait was timed.

A sample times ``k`` iterations back to back and stores the per-iteration time (blocked
autorange, as ``torch.utils.benchmark`` does): ``k`` is 1 unless one iteration is shorter than
:data:`RESOLUTION_FACTOR` times the timer's null-region time, which is measured per case. The
backward phase needs an untimed forward before each backward: on device events each backward is
bracketed by its own pair of events and the spans are summed; on a host timer every mark
synchronizes, so a block would gain nothing and ``k`` stays 1 (the reason is recorded).

Gradients are dropped before every iteration, so no iteration accumulates into another.
"""

from __future__ import annotations

import math
import statistics
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from snnbench.plugin import Model
from snnbench.records.sampling import MeasureSettings as MeasureSettings  # its home before

Clock = Callable[[], float]
TimerKind = Literal["host", "cuda-event", "jax-block"]
TIMER_KINDS: tuple[str, ...] = ("host", "cuda-event", "jax-block")

#: a block must last at least this many null regions, so that the timer's own overhead and
#: jitter are ≤ 0.1 % of a sample (torch.utils.benchmark asks for 1e-4 and a minimum time)
RESOLUTION_FACTOR = 1000
#: never make one block longer than this, whatever the null region (a loaded host can have a
#: null region of 100 µs: 1000× that is already 0.1 s)
BLOCK_MAX_S = 0.1
#: null regions timed to estimate the timer's resolution (their median is kept)
NULL_SAMPLES = 25
#: single iterations timed to estimate one iteration's time before choosing k
CALIBRATION_SAMPLES = 5
#: warm-up is stable when the medians of the last two windows of this many steps...
STABLE_WINDOW = 5
#: ...differ by less than this fraction
STABLE_TOLERANCE = 0.02

WarmupStop = Literal["boost", "stable", "cap"]


# -- timers ------------------------------------------------------------------------------------
class Timer(ABC):
    """Marks the ends of timed regions and reads the time between two marks."""

    kind: ClassVar[str] = ""
    #: True when taking a mark waits for the device (a host clock): regions of a block cannot
    #: then be summed without paying a synchronize per region
    marks_synchronize: ClassVar[bool] = True

    @abstractmethod
    def mark(self) -> Any:
        """A point in the device's work queue (for a host timer: the clock once it is idle)."""

    @abstractmethod
    def seconds(self, start: Any, end: Any) -> float:
        """Seconds between two marks, once the work before ``end`` is done."""


class HostTimer(Timer):
    """``clock()`` read after ``synchronize()``: the device's queue is empty at each mark."""

    kind = "host"

    def __init__(self, synchronize: Callable[[], None], clock: Clock = time.perf_counter) -> None:
        self._synchronize = synchronize
        self._clock = clock

    def mark(self) -> float:
        self._synchronize()
        return self._clock()

    def seconds(self, start: Any, end: Any) -> float:
        return float(end) - float(start)


class JaxBlockTimer(HostTimer):
    """The host clock around ``jax.block_until_ready`` (what ``JaxModel.synchronize`` does)."""

    kind = "jax-block"


class CudaEventTimer(Timer):
    """CUDA events recorded on the current stream; the GPU measures the time between them.

    ``new_event`` makes an event with timing enabled (``torch.cuda.Event(enable_timing=True)``;
    a seam the tests replace). Only the end mark of a region is waited for, outside the
    region. Work a library runs on another stream without joining the current one would not
    be inside the region: such a model returns ``"host"`` from ``Model.timer_kind``.
    """

    kind = "cuda-event"
    marks_synchronize = False

    def __init__(self, new_event: Callable[[], Any]) -> None:
        self._new_event = new_event

    def mark(self) -> Any:
        event = self._new_event()
        event.record()
        return event

    def seconds(self, start: Any, end: Any) -> float:
        end.synchronize()
        return float(start.elapsed_time(end)) / 1000.0  # elapsed_time is in milliseconds


def default_timer_kind(framework: str, device: str) -> TimerKind:
    """The timer for a framework on a device: events for torch on CUDA, else a host clock."""
    if framework == "jax":
        return "jax-block"
    if framework == "torch" and device == "cuda":
        return "cuda-event"
    return "host"


def make_timer(kind: str, model: Model, clock: Clock = time.perf_counter) -> Timer:
    """The :class:`Timer` named ``kind`` for ``model``."""
    if kind == "host":
        return HostTimer(model.synchronize, clock)
    if kind == "jax-block":
        return JaxBlockTimer(model.synchronize, clock)
    if kind == "cuda-event":
        import torch

        return CudaEventTimer(
            lambda: torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        )
    raise ValueError(f"unknown timer {kind!r} (one of {', '.join(TIMER_KINDS)})")


def null_region_s(timer: Timer, samples: int = NULL_SAMPLES) -> float:
    """Median time of an empty region: the overhead (and scale of the jitter) of one sample."""
    values = []
    for _ in range(samples):
        start = timer.mark()
        values.append(timer.seconds(start, timer.mark()))
    return max(0.0, statistics.median(values))


# -- one sample ------------------------------------------------------------------------------------
def time_block(model: Model, phase: str, timer: Timer, k: int = 1) -> float:
    """One sample of ``phase``: ``k`` iterations back to back, returned per iteration (s).

    Handles are dropped as soon as an iteration is done, so a block's peak memory is that of
    one iteration. ``zero_grad`` runs before every iteration; from the second on it is inside
    the region (a few host assignments, overlapped with device work).
    """
    if k < 1:
        raise ValueError(f"a block needs k ≥ 1 iterations, got {k}")
    model.zero_grad()
    if phase == "forward":
        start = timer.mark()
        for _ in range(k):
            handle = model.forward()
            del handle
        total = timer.seconds(start, timer.mark())
    elif phase == "backward":
        if k > 1 and timer.marks_synchronize:
            raise ValueError("a blocked backward needs a timer whose marks do not synchronize")
        # each backward needs a fresh forward, which must stay outside the region: one pair
        # of marks per backward, the spans summed (device events: no synchronize between)
        spans = []
        for i in range(k):
            if i:
                model.zero_grad()
            handle = model.forward()
            begin = timer.mark()
            model.backward(handle)
            spans.append((begin, timer.mark()))
            del handle
        total = sum(timer.seconds(begin, end) for begin, end in spans)
    elif phase == "step":
        start = timer.mark()
        for i in range(k):
            if i:
                model.zero_grad()
            model.step()
        total = timer.seconds(start, timer.mark())
    else:
        raise ValueError(f"unknown phase {phase!r}")
    return total / k


# -- choosing k ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Block:
    """How many iterations each sample of a phase times, and why when it could not block."""

    size: int
    #: why ``size`` is 1 although one iteration is below the timer's resolution ("" if not)
    note: str = ""


def choose_block_size(per_iteration_s: float, null_s: float, max_block: int,
                      max_block_s: float = BLOCK_MAX_S) -> int:
    """The number of iterations per sample: 1 when one iteration lasts at least
    :data:`RESOLUTION_FACTOR` null regions, else enough to reach that, capped by ``max_block``
    and by ``max_block_s`` seconds per block (but never below 1)."""
    target = RESOLUTION_FACTOR * null_s
    if max_block <= 1 or per_iteration_s >= target:
        return 1
    if per_iteration_s <= 0:
        return max_block
    # (less a hair, so that a ratio of 50.000000001 from float clock arithmetic is 50)
    k = min(max_block, math.ceil(target / per_iteration_s - 1e-6))
    return max(1, min(k, math.floor(max_block_s / per_iteration_s)))


def calibrate(model: Model, phase: str, timer: Timer, null_s: float,
              settings: MeasureSettings) -> Block:
    """Choose ``k`` for ``phase`` from single-iteration samples (the first settles caches).

    One iteration is estimated as the fastest of :data:`CALIBRATION_SAMPLES` single samples
    (a busy host only ever adds time: a preempted sample must not make k too small) less the
    null region; blocks are only formed when that is below the timer's resolution.
    """
    time_block(model, phase, timer)  # settle phase-specific caches (e.g. captured graphs)
    single = min(time_block(model, phase, timer) for _ in range(CALIBRATION_SAMPLES))
    k = choose_block_size(max(single - null_s, 0.0), null_s, settings.max_block)
    if k > 1 and phase == "backward" and timer.marks_synchronize:
        return Block(1, f"one backward is below {RESOLUTION_FACTOR}× the {timer.kind} timer's "
                        "null region, but each needs an untimed forward before it, and a "
                        "host timer cannot leave that out of a block: k = 1")
    return Block(k)


@dataclass(frozen=True)
class PhaseSamples:
    """Raw per-iteration samples of one phase and the block that produced them."""

    times: list[float]
    block: Block


def sample_phase(model: Model, phase: str, settings: MeasureSettings,
                 timer: Timer | None = None, null_s: float = 0.0) -> PhaseSamples:
    """Raw samples of ``phase``: ``repeats`` at least, more while under ``min_time_s``.

    Each sample is the per-iteration time of a block of ``k`` iterations (:func:`calibrate`);
    the timed total counts every iteration.
    """
    timer = timer or HostTimer(model.synchronize)
    block = calibrate(model, phase, timer, null_s, settings)
    samples: list[float] = []
    total = 0.0
    while len(samples) < settings.repeats or (
        total < settings.min_time_s and len(samples) < settings.max_repeats
    ):
        value = time_block(model, phase, timer, block.size)
        samples.append(value)
        total += value * block.size
    return PhaseSamples(samples, block)


# -- warm-up -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WarmUp:
    """What the warm-up did: steps, seconds, and why it stopped."""

    steps: int
    seconds: float
    #: ``boost``: the GPU's SM clock reached its boost level; ``stable``: the step time's
    #: rolling median settled; ``cap``: ``warmup_max_s`` ran out first
    stop: WarmupStop


def is_stable(times: list[float], window: int = STABLE_WINDOW,
              tolerance: float = STABLE_TOLERANCE) -> bool:
    """True when the medians of the last two disjoint windows of ``times`` differ by less
    than ``tolerance`` (relative to the earlier one)."""
    if len(times) < 2 * window:
        return False
    earlier = statistics.median(times[-2 * window:-window])
    latest = statistics.median(times[-window:])
    return earlier > 0 and abs(latest - earlier) < tolerance * earlier


def warm_up(model: Model, settings: MeasureSettings, timer: Timer | None = None,
            at_boost: Callable[[], bool] | None = None,
            clock: Clock = time.perf_counter) -> WarmUp:
    """Run steps until the minimum warm-up (``warmup`` steps and ``warmup_s`` seconds) is done
    and then until the GPU is at boost clock (``at_boost``, from NVML), or the step time is
    stable (:func:`is_stable`), or ``warmup_max_s`` seconds have passed."""
    timer = timer or HostTimer(model.synchronize, clock)
    times: list[float] = []
    start = clock()
    while True:
        elapsed = clock() - start
        if len(times) >= settings.warmup and elapsed >= settings.warmup_s:
            if at_boost is not None and at_boost():
                return WarmUp(len(times), elapsed, "boost")
            if is_stable(times):
                return WarmUp(len(times), elapsed, "stable")
            if elapsed >= settings.warmup_max_s:
                return WarmUp(len(times), elapsed, "cap")
        times.append(time_block(model, "step", timer))

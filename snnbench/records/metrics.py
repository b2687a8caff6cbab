"""The metrics registry: every metric a worker may record, with what the rest of snnbench needs
to know about it.

A metric is one :class:`Metric`: its name (the ``metric`` column of a run folder), unit, the
labels tables give it, how a value reads, and how the regression gate treats it. Adding a metric
is the worker's code that measures it plus one entry in :data:`METRICS`; the run folder's unit
column (:mod:`snnbench.records.schema`), the report's tables, ``snnbench compare`` and ``snnbench
history`` read this registry instead of naming metrics themselves.

A metric the registry does not know (a run written by a newer snnbench, a hand-made row) still
reads: :func:`metric` gives it a neutral entry (its own name as label, no unit, never gated).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

#: how the gate judges a metric: ``interval`` (the bootstrap interval of the ratio of medians
#: against the factor, :mod:`snnbench.gate.interval`), ``threshold`` (one value a side against
#: ``mem_threshold`` and the device's floor), ``count`` (a deterministic count: its ratio
#: against ``count_factor``, no interval, :func:`snnbench.gate.interval.judge_count`) or ``info``
#: (ratio shown, never gating)
GateKind = Literal["interval", "threshold", "count", "info"]
Better = Literal["lower", "higher"]


def time_unit(values: Sequence[float]) -> tuple[float, str]:
    """(factor, unit) so that ``seconds * factor`` reads well for the largest value."""
    finite = [v for v in values if math.isfinite(v) and v > 0]
    top = max(finite) if finite else 1.0
    for factor, unit in ((1.0, "s"), (1e3, "ms"), (1e6, "µs")):
        if top * factor >= 1.0:
            return factor, unit
    return 1e9, "ns"


def byte_unit(values: Sequence[float]) -> tuple[float, str]:
    """(factor, unit) for byte counts: GiB, MiB or KiB."""
    finite = [v for v in values if math.isfinite(v) and v > 0]
    top = max(finite) if finite else 1.0
    for power, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if top >= 2**power:
            return 1.0 / 2**power, unit
    return 1.0, "bytes"


def format_seconds(value: float) -> str:
    """``0.01234`` → ``"12.3 ms"``; NaN → ``"—"``."""
    if not math.isfinite(value):
        return "—"
    factor, unit = time_unit([abs(value)])
    return f"{value * factor:.3g} {unit}"


def format_bytes(value: float) -> str:
    """``3 * 2**30`` → ``"3 GiB"``; NaN → ``"—"``."""
    if not math.isfinite(value):
        return "—"
    factor, unit = byte_unit([value])
    return f"{value * factor:.3g} {unit}"


def _plain(spec: str, unit: str) -> Callable[[float], str]:
    """A formatter writing ``format(value, spec)`` then the unit (when there is one)."""
    def fmt(value: float) -> str:
        return f"{format(value, spec)} {unit}".strip()
    return fmt


@dataclass(frozen=True)
class Metric:
    """One metric: how it is named, read and gated."""

    name: str
    unit: str
    #: column title in the report's per-case table (and the metric's name in prose)
    label: str
    #: value → text; NaN is handled by :meth:`format`
    formatter: Callable[[float], str]
    #: the compact name in ``snnbench compare``'s terminal table
    short: str = ""
    #: which way is good: the gate's ``threshold`` rule fails a change the other way
    better: Better = "lower"
    gate: GateKind = "info"
    #: phases the gate rule applies to (None: every phase); elsewhere the metric is ``info``
    gate_phases: tuple[str, ...] | None = None
    #: listed in the report's "other metrics per case" table
    per_case: bool = False
    #: drawn by ``snnbench history`` (a speed or a peak, not a per-case fact)
    history: bool = False

    def format(self, value: float) -> str:
        """The value with a readable unit; NaN and infinities read ``"—"``."""
        return self.formatter(value) if math.isfinite(value) else "—"

    @property
    def short_label(self) -> str:
        """:attr:`short`, or the metric's name where no short name is given."""
        return self.short or self.name

    def gate_for(self, phase: str) -> GateKind:
        """The gate rule for this metric in ``phase`` (``info`` outside :attr:`gate_phases`)."""
        if self.gate_phases is not None and phase not in self.gate_phases:
            return "info"
        return self.gate


_TIMED: Final = ("forward", "backward", "step")

#: every known metric, in the order tables list them
METRICS: Final[dict[str, Metric]] = {m.name: m for m in (
    Metric("time_s", "s", "time", format_seconds, short="time", gate="interval", gate_phases=_TIMED,
           history=True),
    Metric("peak_mem_bytes", "bytes", "peak mem", format_bytes, short="peak mem",
           gate="threshold",
           per_case=True, history=True),
    Metric("peak_rss_bytes", "bytes", "peak RSS", format_bytes, short="peak RSS", per_case=True,
           history=True),
    Metric("energy_j", "J", "energy/step", _plain(".4g", "J"), short="energy", per_case=True,
           history=True),
    Metric("power_w", "W", "power", _plain(".4g", "W"), short="power", per_case=True),
    Metric("samples_per_s", "samples/s", "samples/s", _plain(".4g", "samples/s"),
           short="samples/s", better="higher", per_case=True),
    Metric("prepare_s", "s", "prepare", format_seconds),
    Metric("build_s", "s", "build", format_seconds, per_case=True),
    Metric("first_call_s", "s", "first call", format_seconds, per_case=True),
    Metric("firing_rate", "spikes/neuron/step", "firing rate", _plain(".4f", ""),
           per_case=True),
    Metric("instructions", "Ir", "instructions", _plain(",.0f", "Ir"), short="instr",
           gate="count", gate_phases=_TIMED),
    Metric("synops_per_step", "ops/step", "SynOps/step", _plain(",.0f", "ops/step"),
           per_case=True),
)}


def metric(name: str) -> Metric:
    """The registry's entry for ``name``; an unknown metric gets a neutral, ungated entry."""
    found = METRICS.get(name)
    if found is not None:
        return found
    return Metric(name, "", name, _plain(".4g", ""))


def format_value(value: float, name: str) -> str:
    """A value of metric ``name`` as text with its unit (seconds and bytes scaled)."""
    return metric(name).format(value)


#: metric name → unit, as written in each row's ``unit`` column
UNITS: Final[dict[str, str]] = {m.name: m.unit for m in METRICS.values()}
#: metrics the gate judges (in some phase)
GATED: Final[tuple[str, ...]] = tuple(m.name for m in METRICS.values() if m.gate != "info")

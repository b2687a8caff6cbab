"""The verdict of :func:`snnbench.gate.compare.compare` as data: the marks a compared pair can get,
each :class:`Pair`, and the :class:`Comparison` with its state and exit code.

:mod:`snnbench.gate.compare` computes it from two run folders; :mod:`snnbench.gate.compare_output`
says how it reads. Both stand on this module, so how a verdict reads needs no run folder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np

from snnbench.records import schema
from snnbench.records.contract import adapter_label
from snnbench.workload import DEFAULT_KIND

Mark = Literal[
    # a side measured faster than its device's floor (snnbench.records.roofline): a defect to fix
    "impossible",
    "new_failure",
    "regression",
    "fixed",
    "inconclusive",
    "improved",
    "not_comparable",
    "added",
    "removed",
    "still_failing",
    "same",
    "not_run",
    "info",
]
#: marks in the order they are listed (worst first): the order of the ``Mark`` literal
MARK_ORDER: tuple[str, ...] = get_args(Mark)
#: marks that fail the gate (exit code 1)
FAILING_MARKS: frozenset[str] = frozenset({"impossible", "new_failure", "regression"})
#: marks of a pair whose numbers were actually compared by a gating rule
COMPARED_MARKS: frozenset[str] = frozenset({"regression", "improved", "inconclusive", "same"})
#: samples a side below which one process cannot give an interval at all (a percentile
#: bootstrap of fewer resamples only repeats the few values it has)
MIN_SAMPLES = 5
#: exit codes of the three verdicts; 2 stays for usage errors and unusable input
EXIT_PASS, EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_UNUSABLE = 0, 1, 3, 2

_DEVICE = schema.CASE_KEY.index("device")
CaseKey = tuple[Any, ...]


@dataclass(frozen=True)
class Pair:
    """One compared (case, phase, metric), or one case-level row (phase and metric "")."""

    key: CaseKey
    phase: str
    metric: str
    mark: Mark
    baseline: float = math.nan
    candidate: float = math.nan
    #: candidate / baseline medians
    ratio: float = math.nan
    p_value: float = math.nan
    #: "identical" (the same samples on both sides), "paired" (replicates that ran side by
    #: side, their medians), "paired-min" (the same, their fastest samples), "student" (process
    #: medians, snnbench.gate.interval), "bootstrap" (one process a side), "ci99", "threshold",
    #: "none" (no interval) or "" (not a measurement)
    test: str = ""
    baseline_status: str = ""
    candidate_status: str = ""
    note: str = ""
    #: the interval of the ratio (time pairs)
    ci_low: float = math.nan
    ci_high: float = math.nan
    #: processes (replicates) behind each side, 0 where unknown
    baseline_processes: int = 0
    candidate_processes: int = 0
    #: processes a side that would resolve an inconclusive pair (0: none would, or not asked)
    replicates_needed: int = 0

    @property
    def interval_text(self) -> str:
        """``[0.95, 1.08]`` or "" without an interval."""
        if not (math.isfinite(self.ci_low) and math.isfinite(self.ci_high)):
            return ""
        return f"[{self.ci_low:.2f}, {self.ci_high:.2f}]"

    @property
    def case(self) -> dict[str, Any]:
        """The case key as a dict keyed by :data:`snnbench.records.schema.CASE_KEY`."""
        return dict(zip(schema.CASE_KEY, self.key, strict=True))

    @property
    def label(self) -> str:
        """``adapter``, ``adapter:variant`` or ``adapter@environment``."""
        case = self.case
        return adapter_label(str(case["adapter"]), str(case["variant"]),
                             str(case.get("environment", "")))

    @property
    def case_text(self) -> str:
        """The case without the adapter, e.g. ``cpu float32 n=64 B=4 T=20 L=1 subtract``."""
        return schema.case_text(self.case)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready record (NaN → None): the case in its own kind's columns (a
        ``linear-lif`` pair as it always was: no ``kind``, no column of another kind)."""
        case = self.case
        kind = str(case.get(schema.KIND) or DEFAULT_KIND)
        others = set(schema.case_size()) - set(schema.case_size((kind,)))
        if kind == DEFAULT_KIND:
            others.add(schema.KIND)
        out: dict[str, Any] = {k: v for k, v in case.items() if k not in others}
        out.update(phase=self.phase, metric=self.metric, mark=self.mark)
        for name in ("baseline", "candidate", "ratio", "p_value", "ci_low", "ci_high"):
            value = getattr(self, name)
            out[name] = value if math.isfinite(value) else None
        out.update(test=self.test, baseline_status=self.baseline_status,
                   candidate_status=self.candidate_status, note=self.note,
                   baseline_processes=self.baseline_processes,
                   candidate_processes=self.candidate_processes,
                   replicates_needed=self.replicates_needed or None)
        return out


@dataclass
class Comparison:
    """The result of :func:`compare`: every pair, the manifest warnings and the verdict."""

    baseline: Path
    candidate: Path
    baseline_run_id: str
    candidate_run_id: str
    factor: float
    mem_threshold: float
    #: the time intervals are two-sided at 1 − alpha
    alpha: float
    #: the time floor (seconds) and memory floor (bytes) in effect, per device
    time_floors: dict[str, float] = field(default_factory=dict)
    mem_floors: dict[str, float] = field(default_factory=dict)
    pairs: list[Pair] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: the environments compared (baseline, candidate), None when environments are matched
    environments: tuple[str, str] | None = None
    #: the bootstrap's seed: the same runs and seed give the same verdict
    seed: int = 0
    #: the factor of the ``count`` rule (deterministic counts: instructions): a ratio above it
    #: fails, below 1 / it is improved
    count_factor: float = 1.02
    #: the only metrics that gate (``--metric``), the others shown as info; None: all
    gated_metrics: tuple[str, ...] | None = None
    #: the between-process spread the user stated (0.3: ±30 %), None when not stated
    process_spread: float | None = None
    #: both sides come from one run: replicate i of each ran side by side (paired)
    paired: bool = False
    #: the largest spread noise produced in a run whose manifest says it was noisy (None when
    #: neither was): a time regression or improvement must be larger
    noise_spread: float | None = None

    @property
    def same_versions(self) -> bool:
        """False when two environments are compared: their library versions differ by design."""
        return self.environments is None

    def time_floor(self, key: CaseKey) -> float:
        """The time floor (seconds) for the device of case ``key``."""
        return self.time_floors.get(str(key[_DEVICE]), self.time_floors["cpu"])

    def mem_floor(self, key: CaseKey) -> float:
        """The memory floor (bytes) for the device of case ``key``."""
        return self.mem_floors.get(str(key[_DEVICE]), self.mem_floors["cpu"])

    @property
    def sides_text(self) -> str:
        """``baseline RUN → candidate RUN``, with the compared environments when chosen."""
        b_env, c_env = (f" [{e}]" for e in self.environments) if self.environments else ("", "")
        return (f"baseline {self.baseline_run_id}{b_env} → candidate "
                f"{self.candidate_run_id}{c_env}")

    @property
    def regressions(self) -> list[Pair]:
        """Pairs that fail the gate (regressions and new failures)."""
        return [p for p in self.pairs if p.mark in FAILING_MARKS]

    @property
    def compared(self) -> list[Pair]:
        """Pairs whose numbers went through a gating rule (time or memory)."""
        return [p for p in self.pairs if p.mark in COMPARED_MARKS]

    def time_pairs(self, phase: str | None = None) -> list[Pair]:
        """Compared time pairs, optionally of one phase."""
        return [p for p in self.compared
                if p.metric == "time_s" and (phase is None or p.phase == phase)]

    def geomean_ratio(self, phase: str | None = None) -> float:
        """Geometric mean of candidate/baseline median time ratios (NaN when there are none)."""
        ratios = [p.ratio for p in self.time_pairs(phase) if math.isfinite(p.ratio) and p.ratio > 0]
        return float(np.exp(np.mean(np.log(ratios)))) if ratios else math.nan

    def counts(self) -> dict[str, int]:
        """Number of pairs per mark, in :data:`MARK_ORDER`."""
        found = {m: sum(1 for p in self.pairs if p.mark == m) for m in MARK_ORDER}
        return {m: n for m, n in found.items() if n}

    @property
    def inconclusive(self) -> list[Pair]:
        """Pairs whose interval straddles the factor."""
        return [p for p in self.pairs if p.mark == "inconclusive"]

    @property
    def one_process(self) -> bool:
        """True when some time pair rests on one process on a side (no --replicates)."""
        return any(0 < min(p.baseline_processes, p.candidate_processes) < 2
                   and p.test != "identical" for p in self.time_pairs())

    @property
    def replicates_needed(self) -> int | None:
        """Processes a side that would resolve every inconclusive pair that more processes can
        resolve (None when there is no such pair)."""
        counts = [p.replicates_needed for p in self.inconclusive if p.replicates_needed]
        return max(counts) if counts else None

    @property
    def state(self) -> Literal["pass", "fail", "inconclusive", "nothing comparable"]:
        """The verdict's state: fail (a regression or new failure) over nothing comparable over
        inconclusive over pass."""
        if self.regressions:
            return "fail"
        if not self.compared:
            return "nothing comparable"
        return "inconclusive" if self.inconclusive else "pass"

    @property
    def exit_code(self) -> int:
        """0 pass; 1 fail (a regression or a new failure); 3 inconclusive; 2 nothing was
        comparable."""
        return {"pass": EXIT_PASS, "fail": EXIT_FAIL, "inconclusive": EXIT_INCONCLUSIVE,
                "nothing comparable": EXIT_UNUSABLE}[self.state]

    @property
    def verdict(self) -> str:
        """One line: what the exit code means here."""
        state = self.state
        if state == "fail":
            counts = self.counts()
            parts = [f"{counts[m]} {what}" for m, what in
                     (("regression", "regressed metric(s)"), ("new_failure", "new failure(s)"),
                      ("impossible", "impossible measurement(s)"))
                     if m in counts]
            return "FAIL: " + ", ".join(parts)
        if state == "nothing comparable":
            return "NOTHING COMPARABLE: no case was measured on both sides with the same versions"
        rests = " (the verdict rests on one process each)" if self.one_process else ""
        if state == "inconclusive":
            needed = self.replicates_needed
            more = (f"about {needed} replicates a side (--replicates {needed}) would resolve it"
                    if needed else "more replicates alone would not resolve it (see the notes)")
            return (f"INCONCLUSIVE: {len(self.inconclusive)} of {len(self.compared)} compared "
                    f"pairs straddle the factor {self.factor:g}; {more}{rests}")
        return f"PASS: no regression in {len(self.compared)} compared pairs{rests}"

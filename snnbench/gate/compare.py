"""``snnbench compare``: a noise-aware regression gate between two run folders.

Rows are joined on the case key (:data:`snnbench.records.schema.CASE_KEY`: adapter, variant, device,
environment and ``case_id``, the spec's hash, with the size and network columns that say the
case in words), the phase and the metric: two precisions or surrogates of one size are two
cases, never pooled. Each joined pair gets
one *mark*; which rule judges a metric (``interval``, ``threshold`` or ``info``) is the metric's
entry in the registry (:mod:`snnbench.records.metrics`). This module computes the verdict only; how
it reads (text, Markdown, JSON) is :mod:`snnbench.report.export`, one exporter per format; the
verdict's data (:class:`Pair`, :class:`Comparison`, the marks) is :mod:`snnbench.gate.verdict`.

time (``time_s`` of forward, backward, step)
    a tri-state gate on the ratio candidate/baseline of the pooled medians
    (:mod:`snnbench.gate.interval`): with two or more processes a side (the ``replicate`` column of
    ``samples.parquet``) Student's t over the processes' medians, with one a hierarchical
    bootstrap of the samples, gives a two-sided (1 − ``alpha``) interval of the ratio.
    ``regression`` (fail) when the whole interval lies above
    ``factor``; ``inconclusive`` when it straddles the factor (the note says how many
    replicates would resolve it); ``same`` (pass) when it lies below the factor, ``improved``
    when below 1/``factor`` too. Without raw samples the 99 % CIs of the two medians bound the
    ratio instead (``ci99``); with fewer than :data:`MIN_SAMPLES` samples and one process a
    side there is no interval (``none``): ``inconclusive``. With one process a side the
    interval lacks the spread between processes and the verdict says it rests on one process
    each. A time floor (``time_floor_s``, off by default) is a last resort for baselines taken
    on another day: a median difference below it is ``same`` whatever the interval.
instructions (``instructions`` of forward, backward, step; the ``count`` rule)
    deterministic counts (:mod:`snnbench.measure.callgrind`): no interval, the ratio against
    ``count_factor`` (1.02): ``regression`` above it, ``improved`` below 1/``count_factor``,
    else ``same``. ``gated_metrics`` (``--metric instructions``) gates only the metrics named,
    e.g. instructions alone on a shared runner whose wall times cannot resolve a few per cent.
memory (``peak_mem_bytes``, the ``threshold`` rule)
    ``regression`` when candidate > baseline · (1 + ``mem_threshold``), ``improved`` when
    candidate < baseline / (1 + ``mem_threshold``) (the other way round for a metric where
    higher is better), else ``same`` (one peak per phase, no
    samples to test). A change smaller than the device's memory floor
    (:data:`MEM_FLOOR_BYTES`) is ``same`` whatever its ratio: on CPU the peak is resident-set
    growth, page- and allocator-granular, where identical runs differ by megabytes.
case status
    ok → error/oom/timeout/lost/mismatch is ``new_failure`` (fails the gate, whatever the versions:
    an upgrade that breaks a case is what the gate is for); the reverse is ``fixed``; failed on
    both sides is ``still_failing``; a case on one side only is ``added`` or ``removed``.
comparability
    a different ``library_version`` makes the case ``not_comparable``; so does a different
    ``case_id`` (the spec hash) where one case of each side reads alike (the same adapter,
    size and network columns) and nothing else pairs them, and a case measured on one side
    only because the other side skipped it or found its library unavailable.
library environments
    the environment is part of the key: ``snntorch@0.9.4`` is compared with ``snntorch@0.9.4``.
    ``environments=("snntorch@0.9.4", "snntorch@1.0.0")`` compares one environment of the
    baseline with another of the candidate instead (the same run folder may be both): only
    their rows, joined without the environment, and a different library version is the point
    rather than a reason not to compare. ``base`` names the base environment.

harness probes
    the ``null`` adapter measures the harness, not a library: its time and memory pairs are
    ``info`` (ratio shown, never gating); a null case that newly fails still fails the gate.

Other metrics (energy, power, RSS, setup times, throughput, firing rate, SynOps) are listed as
``info`` with their ratio; they never fail the gate. Differences between the two manifests (GPU,
driver, CPU, package versions, settings) become warnings. :attr:`Comparison.exit_code` is 0
(pass), 1 (fail: a regression or new failure), 3 (inconclusive: no failure, but an interval
straddles the factor) or 2 (nothing was comparable, as for unusable input).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from snnbench.errors import UserError
from snnbench.gate import interval as gate
from snnbench.gate.compare_warnings import (
    manifest_warnings as manifest_warnings,
    placement_warnings,
)
from snnbench.gate.interval import RatioInterval
from snnbench.gate.verdict import (
    COMPARED_MARKS as COMPARED_MARKS,
    EXIT_FAIL as EXIT_FAIL,
    EXIT_INCONCLUSIVE as EXIT_INCONCLUSIVE,
    EXIT_PASS as EXIT_PASS,
    EXIT_UNUSABLE as EXIT_UNUSABLE,
    FAILING_MARKS as FAILING_MARKS,
    MARK_ORDER as MARK_ORDER,
    MIN_SAMPLES as MIN_SAMPLES,
    CaseKey as CaseKey,
    Comparison as Comparison,
    Mark as Mark,
    Pair as Pair,
)
from snnbench.records import schema
from snnbench.records.metrics import (
    GATED,
    GateKind,
    format_seconds,
    format_value,
    metric as metric_info,
)
from snnbench.records.roofline import IMPOSSIBLE_NOTE
from snnbench.store.overhead import PROBES
from snnbench.store.rundir import Run, RunDirError, load_run
from snnbench.store.storage import label_networks

#: The last-resort time floor per device: off (0). The interval of the gate measures the noise
#: between processes, so a floor is not needed to keep identical runs from failing; pass
#: ``time_floor_s`` (``--time-floor-ms``) only against a baseline taken on another day or
#: machine without replicates, where nothing measured the noise (docs/report-compare.md).
TIME_FLOOR_S: dict[str, float] = {"cpu": 0.0, "cuda": 0.0}
#: Peak-memory differences below these are ``same``, per device. CPU: 1.5 × the largest
#: difference between the same identical runs (6.2 MiB, JAX's resident set), rounded up. CUDA:
#: allocator peaks were identical to the byte between two H100 runs; 1 MiB leaves room for
#: library workspaces.
MEM_FLOOR_BYTES: dict[str, float] = {"cpu": 10 * 2**20, "cuda": 2**20}


class CompareError(UserError, ValueError):
    """Impossible thresholds or floors; one line."""


#: the time rule in one sentence (``compare --help`` and docs/report-compare.md say it too)
TIME_RULE = (
    "A time regression or improvement needs evidence of the spread between processes: "
    "replicates on both sides (paired replicate by replicate within one interleaved run) or a "
    "stated --process-spread, and, when a run was noisy and its replicates were not paired, a "
    "change larger than the largest spread its noise produced; otherwise the pair is at most "
    "inconclusive, and identical samples always pass.")

#: how ``environments`` names the base environment (its rows have environment "")
BASE_ENVIRONMENT = "base"
#: the case key's text columns (the others are the size's numbers)
_TEXT_KEYS = frozenset(c for c in schema.CASE_KEY if c in schema.summary_types(None)[2])
#: where the identity's columns sit in the case key (samples are joined on the identity)
_IDENTITY = tuple(schema.CASE_KEY.index(c) for c in schema.CASE_IDENTITY)
_CASE_ID = schema.CASE_KEY.index("case_id")


# ---------------------------------------------------------------------------------- compare


@dataclass
class _Case:
    status: str
    message: str
    library_version: str
    case_id: str
    rows: pd.DataFrame
    #: the clock that timed it (``host``, ``cuda-event``...; "" where the run does not say)
    timer: str = ""


def _key_value(column: str, value: Any) -> Any:
    if column in _TEXT_KEYS:
        return str(value)
    number = float(value)
    if math.isnan(number):
        return None  # a column the case's kind has not (NaN never equals itself)
    return int(number) if math.isfinite(number) and number.is_integer() else number


def _key(row: pd.Series) -> CaseKey:
    return tuple(_key_value(c, row[c]) for c in schema.CASE_KEY)


def _identity(key: CaseKey) -> tuple[Any, ...]:
    return tuple(key[i] for i in _IDENTITY)


def _cases(run: Run) -> dict[CaseKey, _Case]:
    out: dict[CaseKey, _Case] = {}
    for _, rows in run.summary.groupby(list(schema.CASE_KEY), sort=False, dropna=False):
        first = rows.iloc[0]
        statuses = set(rows["status"])
        # a case's status is its worst row's: one failed row fails the case
        failed = sorted(statuses & schema.FAILED_STATUSES)
        status = failed[0] if failed else ("ok" if statuses == {"ok"} else sorted(statuses)[0])
        bad = rows[rows["status"] == status]
        out[_key(first)] = _Case(
            status=status,
            message=str(bad.iloc[0]["message"]),
            library_version=str(first["library_version"]),
            case_id=str(first["case_id"]),
            rows=rows,
            timer=next((str(t) for t in rows["timer"] if t), ""),
        )
    return out


#: raw samples of one (case, phase, metric): replicate index → that process's finite samples
#: (a process whose samples are all NaN keeps an empty array: it is damaged data, not absent)
Processes = dict[int, np.ndarray]


def _impossible_side(b_row: pd.Series, c_row: pd.Series) -> str:
    """Why a pair is a measurement defect: the side(s) measured faster than the device's floor
    (:mod:`snnbench.records.roofline`); "" when neither was."""
    sides = [f"{side} {format_seconds(float(row['median']))} < floor "
             f"{format_seconds(float(row['floor_s']))}"
             for side, row in (("baseline", b_row), ("candidate", c_row))
             if bool(row.get("impossible", False))]
    return f"{'; '.join(sides)}: {IMPOSSIBLE_NOTE}" if sides else ""


def _samples(run: Run) -> dict[tuple[Any, ...], Processes]:
    if run.samples is None or run.samples.empty:
        return {}
    # samples carry the case's identity, not its words: joined on adapter, ..., case_id
    cols = [*schema.CASE_IDENTITY, "phase", "metric"]
    out: dict[tuple[Any, ...], Processes] = {}
    for _, rows in run.samples.groupby(cols, sort=False):
        first = rows.iloc[0]
        key = (*(str(first[c]) for c in schema.CASE_IDENTITY), str(first["phase"]),
               str(first["metric"]))
        groups: Processes = {}
        # runs written before replicates (or by hand) may leave the column empty: process 0
        for replicate, one in rows.groupby(rows["replicate"].fillna(0), sort=True):
            values = one["value"].to_numpy(float)
            groups[int(replicate)] = values[np.isfinite(values)]
        out[key] = groups
    return out


def _check_samples(run: Run, samples: dict[tuple[Any, ...], Processes]) -> None:
    """Refuse a run whose summary does not match its raw samples: each summary median must be
    the median of the pooled samples (within rounding), and no time may be negative. Damaged or
    edited data (samples × 3 beside an unchanged summary, negated medians, samples all NaN
    beside a finite median) would otherwise be judged as a measurement."""
    where = run.path / (schema.SUMMARY_PARQUET if (run.path / schema.SUMMARY_PARQUET).is_file()
                        else schema.SUMMARY_CSV)
    for _, row in run.summary.iterrows():
        metric, median = str(row["metric"]), float(row["median"])
        # the samples' key: the case's identity (see _samples)
        key = (*(str(row[c]) for c in schema.CASE_IDENTITY), str(row["phase"]), metric)
        what = f"{row['adapter']} {row['phase']} {metric}"
        if metric_info(metric).unit == "s" and median < 0:
            raise RunDirError(f"{where}: {what} has a negative median ({median:g}): the folder "
                              "is damaged")
        groups = samples.get(key)
        if groups is None or str(row["status"]) != "ok":
            continue
        pooled = np.concatenate(list(groups.values())) if groups else np.array([])
        if metric_info(metric).unit == "s" and (pooled < 0).any():
            raise RunDirError(f"{run.path / schema.SAMPLES_PARQUET}: {what} has negative "
                              "samples: the folder is damaged")
        if not math.isfinite(median) and not pooled.size:
            continue  # nothing measured, said so on both sides (no positive median to judge)
        found = float(np.median(pooled)) if pooled.size else math.nan
        if not (math.isfinite(found) and math.isclose(found, median, rel_tol=1e-6,
                                                      abs_tol=1e-300)):
            raise RunDirError(
                f"{where}: the median of {what} ({median:g}) does not match its samples in "
                f"{schema.SAMPLES_PARQUET} ({found:g}): the folder is damaged or was edited")


def _identical(bs: Processes, cs: Processes) -> bool:
    """The same processes with the same samples on both sides (a run compared with itself)."""
    return bs.keys() == cs.keys() and all(np.array_equal(bs[r], cs[r]) for r in bs)


def _interval(
    key: CaseKey, phase: str, b: pd.Series, c: pd.Series,
    samples: tuple[Processes | None, Processes | None], rule: Comparison,
) -> tuple[RatioInterval | None, str, str]:
    """The ratio's interval, how it was found and, without one, why: ``identical`` (the same
    samples on both sides: the point 1), ``paired`` from replicates that ran side by side (one
    interleaved run), ``student`` from the process medians (two or more processes a side),
    ``bootstrap`` from the raw samples of one process a side, ``ci99`` from the medians' 99 %
    CIs when there are no raw samples, else ``none``."""
    bs, cs = samples
    confidence = 1.0 - rule.alpha
    if bs is not None and cs is not None:
        b_groups = {r: g for r, g in bs.items() if len(g)}
        c_groups = {r: g for r, g in cs.items() if len(g)}
        if not b_groups or not c_groups:
            return None, "none", "no finite sample on one side"
        n_samples = (sum(map(len, b_groups.values())), sum(map(len, c_groups.values())))
        if _identical(bs, cs):
            return RatioInterval(1.0, 1.0, 1.0, (len(b_groups), len(c_groups)), n_samples,
                                 confidence), "identical", ""
        both = sorted(b_groups.keys() & c_groups.keys())
        if rule.paired and len(both) >= 2:
            try:
                interval, test = _paired([b_groups[r] for r in both],
                                         [c_groups[r] for r in both], rule)
            except ValueError as exc:
                return None, "none", str(exc)
            return interval, test, ""
        b_list, c_list = list(b_groups.values()), list(c_groups.values())
        enough = all(len(side) >= 2 or n >= MIN_SAMPLES
                     for side, n in zip((b_list, c_list), n_samples, strict=True))
        if not enough:
            return None, "none", (f"fewer than {MIN_SAMPLES} samples and one process a side: "
                                  "no interval (raise the repeat count, or --replicates)")
        seed = gate.pair_seed(rule.seed, *key, phase)
        try:
            interval = gate.ratio_interval(b_list, c_list, confidence=confidence, seed=seed)
        except ValueError as exc:
            return None, "none", f"no interval: {exc}"
        return interval, "bootstrap" if interval.one_process else "student", ""
    lo_b, hi_b = float(b["ci99_low"]), float(b["ci99_high"])
    lo_c, hi_c = float(c["ci99_low"]), float(c["ci99_high"])
    if all(math.isfinite(v) and v > 0 for v in (lo_b, hi_b, lo_c, hi_c)):
        # the widest ratio the two medians' intervals allow; pooled rows: one process each
        processes = (int(_number(b, "replicates", 1)), int(_number(c, "replicates", 1)))
        samples_n = (int(_number(b, "n_samples", 0)), int(_number(c, "n_samples", 0)))
        return RatioInterval(float(c["median"]) / float(b["median"]), lo_c / hi_b, hi_c / lo_b,
                             processes, samples_n, 0.99), "ci99", ""
    return None, "none", (f"fewer than {MIN_SAMPLES} samples and one process a side: no "
                          "interval (raise the repeat count, or --replicates)")


def _paired(base: list[np.ndarray], cand: list[np.ndarray],
            rule: Comparison) -> tuple[RatioInterval, str]:
    """The paired interval and its test: the processes' medians (``paired``) or, when those
    leave the verdict open, their fastest samples (``paired-min``), each at ``alpha / 2``
    (Bonferroni: asking twice errs at most ``alpha``). A machine that slows one whole process
    of a few widens the medians' interval; the fastest samples stay put (gate's docstring). The
    two disagreeing on a verdict (one decisive, the other decisive the other way, or ``same``
    against a change) gives their hull: inconclusive, never a verdict either contradicts."""
    confidence = 1.0 - rule.alpha / 2.0
    medians = gate.paired_interval(base, cand, confidence=confidence)
    fastest = gate.paired_interval(base, cand, confidence=confidence, statistic="min")
    by_median, by_min = gate.judge(medians, rule.factor), gate.judge(fastest, rule.factor)
    if by_min == "inconclusive" or by_median == by_min:
        return medians, "paired"
    if by_median == "inconclusive":
        return fastest, "paired-min"
    hull = dataclasses.replace(medians, low=min(medians.low, fastest.low),
                               high=max(medians.high, fastest.high))
    return hull, "paired"


def _number(row: pd.Series, name: str, default: float) -> float:
    value = float(row[name]) if name in row.index else math.nan
    return value if math.isfinite(value) else default


def _compare_metric(
    key: CaseKey,
    b: pd.Series,
    c: pd.Series,
    samples: tuple[Processes | None, Processes | None],
    rule: Comparison,
) -> Pair:
    phase, metric = str(b["phase"]), str(b["metric"])
    bm, cm = float(b["median"]), float(c["median"])

    def pair(mark: Mark, ratio: float = math.nan, test: str = "", note: str = "",
             interval: RatioInterval | None = None, needed: int = 0) -> Pair:
        extra: dict[str, Any] = {}
        if interval is not None:
            extra = dict(ci_low=interval.low, ci_high=interval.high,
                         baseline_processes=interval.processes[0],
                         candidate_processes=interval.processes[1])
        return Pair(key, phase, metric, mark, baseline=bm, candidate=cm, ratio=ratio,
                    test=test, baseline_status="ok", candidate_status="ok", note=note,
                    replicates_needed=needed, **extra)

    rule_kind = _rule_kind(metric, phase, rule)
    if not (math.isfinite(bm) and math.isfinite(cm)) or bm <= 0:
        mark: Mark = "not_comparable" if rule_kind != "info" else "info"
        return pair(mark, note="no positive median on both sides")
    ratio = cm / bm
    if rule_kind == "interval":
        interval, test, why = _interval(key, phase, b, c, samples, rule)
        if interval is None:
            return pair("inconclusive", ratio, test, note=why)
        mark, note, needed = _time_mark(interval, test, rule)
        floor = rule.time_floor(key)
        if mark != "same" and abs(cm - bm) < floor:
            note = (f"would be {mark}, but the medians differ by less than the "
                    f"{format_value(floor, metric)} time floor")
            mark = "same"
        elif mark == "inconclusive" and not note:
            needed = gate.replicates_needed(interval, rule.factor) or 0
            note = _straddle_note(interval, rule, needed)
        return pair(mark, ratio, test, note, interval, needed)
    if rule_kind == "count":
        return pair(gate.judge_count(ratio, rule.count_factor), ratio, test="count")
    if rule_kind == "threshold":
        return pair(_threshold_mark(bm, cm, rule.mem_threshold, rule.mem_floor(key),
                                    metric_info(metric).better), ratio, test="threshold")
    return pair("info", ratio)


def _rule_kind(metric: str, phase: str, rule: Comparison) -> GateKind:
    """The registry's rule for ``metric`` in ``phase``; ``info`` for a metric the comparison
    does not gate (``gated_metrics``)."""
    if rule.gated_metrics is not None and metric not in rule.gated_metrics:
        return "info"
    return metric_info(metric).gate_for(phase)


def check_gated_metrics(names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` if every one is a metric the gate can judge; else a :class:`CompareError`
    naming the ones it cannot."""
    bad = [n for n in names if n not in GATED]
    if bad or not names:
        raise CompareError(f"--metric takes gated metrics ({', '.join(GATED)}); got "
                           f"{', '.join(bad) or 'none'}")
    return names


#: tests whose interval holds the spread between processes (or needs none)
_BETWEEN_PROCESSES = frozenset({"identical", "paired", "paired-min", "student"})
#: tests whose interval measured the noise of the run it judges (pairs that ran side by side)
_NOISE_MEASURED = frozenset({"identical", "paired", "paired-min"})


def _time_mark(interval: RatioInterval, test: str,
               rule: Comparison) -> tuple[Mark, str, int]:
    """The time mark of ``interval`` under the gate's evidence rules, a note when a rule held
    a verdict back (see :data:`TIME_RULE`), and the replicates a side that would settle it."""
    if not interval.finite:
        return "inconclusive", ("the interval is not finite (samples of 0 or an extreme "
                                "--alpha): it decides nothing"), 0
    between = test in _BETWEEN_PROCESSES
    judged = interval
    if not between and rule.process_spread is not None:
        judged = interval.widened(rule.process_spread)
    mark: Mark = gate.judge(judged, rule.factor)
    if mark in ("regression", "improved") and not between and rule.process_spread is None:
        sides = ("one process a side" if interval.one_process
                 else "no raw samples of the processes")
        return "inconclusive", (
            f"would be {mark} ({sides}): samples inside one process cannot show how far a "
            f"whole process drifts; run --replicates {gate.MIN_SUGGESTED} or more, or state "
            "--process-spread"), gate.MIN_SUGGESTED
    # paired replicates ran side by side in the noisy run itself: their interval has measured
    # the noise that does not cancel; other intervals must outdo the noise the run produced
    if (mark in ("regression", "improved") and rule.noise_spread is not None
            and test not in _NOISE_MEASURED
            and gate.judge(judged.widened(rule.noise_spread), rule.factor) != mark):
        return "inconclusive", (
            f"would be {mark}, but a run was noisy and its noise reached "
            f"{rule.noise_spread:.0%}: the change is not larger than that"), 0
    if judged is not interval and mark == "inconclusive" and gate.judge(
            interval, rule.factor) != "inconclusive":
        return mark, (f"straddles {rule.factor:g} once widened by the stated process spread "
                      f"±{rule.process_spread:.0%}"), 0
    return mark, "", 0


def _straddle_note(interval: RatioInterval, rule: Comparison, needed: int) -> str:
    """Why an interval straddles the factor, and whether more replicates would settle it."""
    if needed:
        return (f"the interval straddles {rule.factor:g}: about {needed} replicates a side "
                "would resolve it")
    if abs(math.log(interval.ratio / rule.factor)) < 0.005:
        return (f"the ratio sits on the factor {rule.factor:g}: more replicates would not "
                "resolve it")
    return (f"the interval straddles {rule.factor:g}: more than {gate.MAX_SUGGESTED} replicates "
            f"a side would be needed at alpha {rule.alpha:g}")


def _threshold_mark(bm: float, cm: float, threshold: float, floor: float,
                    better: str) -> Mark:
    """One value a side: a change below ``floor`` is ``same``; past the relative ``threshold``
    it is a regression or an improvement, by the metric's good direction."""
    if abs(cm - bm) < floor:
        return "same"
    if cm > bm * (1.0 + threshold):
        return "regression" if better == "lower" else "improved"
    if cm < bm / (1.0 + threshold):
        return "improved" if better == "lower" else "regression"
    return "same"


def _case_pairs(
    key: CaseKey,
    b: _Case,
    c: _Case,
    samples: tuple[dict[tuple[Any, ...], Processes], dict[tuple[Any, ...], Processes]],
    rule: Comparison,
) -> list[Pair]:
    def case_row(mark: Mark, note: str) -> list[Pair]:
        if key[schema.CASE_KEY.index("adapter")] in PROBES and mark in FAILING_MARKS:
            # a harness probe that failed is shown, never gated: it measures no library
            note = f"harness probe, not gated (would be {mark.replace('_', ' ')}): {note}"
            mark = "info"
        return [Pair(key, "", "", mark, baseline_status=b.status, candidate_status=c.status,
                     note=note)]

    b_failed, c_failed = b.status in schema.FAILED_STATUSES, c.status in schema.FAILED_STATUSES
    if b.status == "ok" and c_failed:
        return case_row("new_failure", c.message)
    if b_failed and c.status == "ok":
        return case_row("fixed", f"was: {b.message}")
    if b_failed and c_failed:
        return case_row("still_failing", c.message)
    if b.status != "ok" or c.status != "ok":
        if b.status == c.status:
            return case_row("not_run", c.message)
        side, other = ("baseline", b) if b.status != "ok" else ("candidate", c)
        return case_row("not_comparable", f"{side} {other.status}: {other.message}")
    if rule.same_versions and b.library_version != c.library_version:
        return case_row(
            "not_comparable",
            f"library version {b.library_version or '?'} → {c.library_version or '?'}",
        )
    if b.timer and c.timer and b.timer != c.timer:
        # a host clock counts a synchronize per sample that device events leave out
        return case_row("not_comparable", f"timer {b.timer} → {c.timer}: time the baseline "
                                          "again with this snnbench")
    if b.case_id != c.case_id:
        return case_row(
            "not_comparable", f"case spec changed (case_id {b.case_id or '?'} → {c.case_id or '?'})"
        )

    out: list[Pair] = []
    b_rows = {(str(r["phase"]), str(r["metric"])): r for _, r in b.rows.iterrows()}
    c_rows = {(str(r["phase"]), str(r["metric"])): r for _, r in c.rows.iterrows()}
    for pm in sorted(b_rows.keys() | c_rows.keys(), key=_phase_metric_order):
        if pm not in b_rows or pm not in c_rows:
            where = "candidate" if pm in c_rows else "baseline"
            row = c_rows.get(pm, b_rows.get(pm))
            assert row is not None
            median = float(row["median"])
            out.append(Pair(key, pm[0], pm[1], "info", note=f"only in the {where}",
                            baseline=median if where == "baseline" else math.nan,
                            candidate=median if where == "candidate" else math.nan,
                            baseline_status="ok", candidate_status="ok"))
            continue
        raw = (samples[0].get((*_identity(key), *pm)),
               samples[1].get((*_identity(key), *pm)))
        pair = _compare_metric(key, b_rows[pm], c_rows[pm], raw, rule)
        defect = _impossible_side(b_rows[pm], c_rows[pm])
        if defect:
            # faster than the device allows: a defect of the measurement, never a result to
            # pass, improve or regress on
            pair = dataclasses.replace(pair, mark="impossible", note=defect)
        if key[schema.CASE_KEY.index("adapter")] in PROBES and pair.mark != "info":
            # the harness's own time: shown, never a library's regression
            pair = dataclasses.replace(pair, mark="info", note=(
                f"harness probe, not gated (would be {pair.mark.replace('_', ' ')})"))
        out.append(pair)
    return out


def _phase_metric_order(pm: tuple[str, str]) -> tuple[int, str, str]:
    order = {p: i for i, p in enumerate((*schema.TIMED_PHASES, "setup", "case"))}
    return order.get(pm[0], len(order)), pm[1], pm[0]


def _joined_cases(
    b_cases: dict[CaseKey, _Case], c_cases: dict[CaseKey, _Case],
) -> list[tuple[CaseKey, _Case | None, _Case | None]]:
    """The cases of both sides by key, in key order. A baseline case and a candidate case
    left alone that read alike but for ``case_id`` (one each: the spec changed where no
    column shows it, such as a field added to the spec) are one pair under the candidate's
    key, which :func:`_case_pairs` calls not comparable."""
    alone_b = [k for k in b_cases if k not in c_cases]
    alone_c = [k for k in c_cases if k not in b_cases]

    def words(key: CaseKey) -> CaseKey:
        return key[:_CASE_ID] + key[_CASE_ID + 1:]

    pairs: dict[CaseKey, CaseKey] = {}  # candidate key → baseline key
    for c_key in alone_c:
        same_b = [k for k in alone_b if words(k) == words(c_key)]
        same_c = [k for k in alone_c if words(k) == words(c_key)]
        if len(same_b) == 1 and len(same_c) == 1:
            pairs[c_key] = same_b[0]
    paired_b = set(pairs.values())
    out: list[tuple[CaseKey, _Case | None, _Case | None]] = []
    for key in sorted(b_cases.keys() | c_cases.keys(), key=lambda k: tuple(map(str, k))):
        if key in paired_b:
            continue
        if key in pairs:
            out.append((key, b_cases[pairs[key]], c_cases[key]))
        else:
            out.append((key, b_cases.get(key), c_cases.get(key)))
    return out


def _run_noise(run: Run) -> float:
    """The largest spread noise produced in ``run``: over its ok time rows of the timed phases,
    the larger of the spread between replicate medians and IQR / median (0 when unknown)."""
    # the harness probes time nothing (a no-op's spread says little of the network's)
    rows = run.summary[(run.summary["metric"] == "time_s") & (run.summary["status"] == "ok")
                       & run.summary["phase"].isin(schema.TIMED_PHASES)
                       & ~run.summary["adapter"].isin(PROBES)]
    spreads = [0.0]
    for _, row in rows.iterrows():
        median = float(row["median"])
        for value in (float(row["replicate_spread"]),
                      float(row["iqr"]) / median if median > 0 else math.nan):
            if math.isfinite(value):
                spreads.append(value)
    return max(spreads)


def _noise_spread(base: Run, cand: Run) -> float | None:
    """The largest noise spread of the runs whose manifest says they were noisy (None when
    neither was): a time verdict must exceed it (:data:`TIME_RULE`)."""
    noisy = [run for run in (base, cand) if isinstance(run.manifest.get("noise"), dict)
             and run.manifest["noise"].get("noisy")]
    return max(_run_noise(run) for run in noisy) if noisy else None


def environment_names(run: Run) -> list[str]:
    """The library environments of a run (``base`` for the base one), in table order."""
    names = dict.fromkeys(str(e) or BASE_ENVIRONMENT for e in run.summary["environment"])
    return list(names)


def only_environment(run: Run, name: str) -> Run:
    """``run`` reduced to the rows of environment ``name`` (``base``: the base environment),
    with the environment cleared so that the rows join those of another environment."""
    wanted = "" if name == BASE_ENVIRONMENT else name
    keep = run.summary["environment"] == wanted
    if not keep.any():
        raise RunDirError(f"{run.path} has no environment {name!r} (it has: "
                          f"{', '.join(environment_names(run))})")
    summary = run.summary[keep].assign(environment="")
    samples = run.samples
    if samples is not None:
        samples = samples[samples["environment"] == wanted].assign(environment="")
    return dataclasses.replace(run, summary=summary, samples=samples)
#: :func:`compare`'s numeric thresholds: the bound each lies above (``False``) or at or above
#: (``True``); ``alpha`` lies strictly between 0 and 1
THRESHOLD_BOUNDS: dict[str, tuple[float, bool]] = {
    "factor": (1.0, False), "count_factor": (1.0, False), "mem_threshold": (0.0, True),
    "time_floor_s": (0.0, True), "process_spread": (0.0, True), "mem_floor_bytes": (0.0, True),
}


def check_thresholds(given: Mapping[str, float | None],
                     names: Mapping[str, str] | None = None) -> None:
    """Refuse an impossible threshold of :func:`compare` in one line: NaN, an infinity, a
    value beyond its bound (:data:`THRESHOLD_BOUNDS`), an ``alpha`` outside (0, 1).

    ``given`` maps each parameter to its value (None: left out), in the order they are
    checked; ``names`` says how the caller's user names each (``--time-floor-ms``; the
    parameter's own name by default). A bound of 0 holds in any unit, so a floor may be given
    in the user's unit."""
    names = names or {}
    for key, value in given.items():
        if value is None:
            continue
        name = names.get(key, key)
        if key == "alpha":
            if not 0.0 < value < 1.0:
                raise CompareError(f"{name} must be between 0 and 1, got {value}")
            continue
        low, inclusive = THRESHOLD_BOUNDS[key]
        if not (math.isfinite(value) and (value >= low if inclusive else value > low)):
            bound = f"≥ {low:g}" if inclusive else f"> {low:g}"
            raise CompareError(f"{name} must be a finite number {bound}, got {value}")


def compare(
    baseline_dir: str | Path,
    candidate_dir: str | Path,
    factor: float = 1.10,
    mem_threshold: float = 0.05,
    alpha: float = 0.01,
    mem_floor_bytes: float | None = None,
    time_floor_s: float | None = None,
    environments: tuple[str, str] | None = None,
    seed: int = 0,
    count_factor: float = 1.02,
    gated_metrics: tuple[str, ...] | None = None,
    process_spread: float | None = None,
) -> Comparison:
    """Compare two run folders; see the module docstring for the rules.

    Time intervals are two-sided at 1 − ``alpha``, drawn with ``seed``.
    ``time_floor_s`` and ``mem_floor_bytes`` replace the per-device defaults
    (:data:`TIME_FLOOR_S`: off, :data:`MEM_FLOOR_BYTES`) for every device; 0 turns a floor off.
    ``environments`` (baseline's, candidate's) compares those two library environments.
    ``count_factor`` is the factor of deterministic counts (``instructions``);
    ``gated_metrics`` gates only those metrics (the others are info).
    ``process_spread`` states the spread between processes (0.3: ±30 %) for pairs with one
    process a side; without it their time verdict is at most ``inconclusive``.
    Raises :class:`~snnbench.store.rundir.RunDirError` when either folder is missing, empty,
    damaged, of another schema version or lacks a named environment, and :class:`CompareError` for
    impossible thresholds.
    """
    check_thresholds({"factor": factor, "count_factor": count_factor,
                      "mem_threshold": mem_threshold, "alpha": alpha,
                      "time_floor_s": time_floor_s, "process_spread": process_spread,
                      "mem_floor_bytes": mem_floor_bytes})
    if gated_metrics is not None:
        check_gated_metrics(gated_metrics)
    time_floors = (dict(TIME_FLOOR_S) if time_floor_s is None
                   else dict.fromkeys(TIME_FLOOR_S, time_floor_s))
    mem_floors = (dict(MEM_FLOOR_BYTES) if mem_floor_bytes is None
                  else dict.fromkeys(MEM_FLOOR_BYTES, mem_floor_bytes))
    base, cand = load_run(baseline_dir), load_run(candidate_dir)
    samples = (_samples(base), _samples(cand))
    _check_samples(base, samples[0])
    if cand.path.resolve() != base.path.resolve():
        _check_samples(cand, samples[1])
    noise_spread = _noise_spread(base, cand)  # over the whole runs, every environment
    if environments is not None:
        base = only_environment(base, environments[0])
        cand = only_environment(cand, environments[1])
        samples = (_samples(base), _samples(cand))
    # one network column over both sides: a field either side varies names the cases of both
    b_summary, c_summary = label_networks([base.summary, cand.summary])
    base = dataclasses.replace(base, summary=b_summary)
    cand = dataclasses.replace(cand, summary=c_summary)
    result = Comparison(
        baseline=base.path,
        candidate=cand.path,
        baseline_run_id=base.run_id,
        candidate_run_id=cand.run_id,
        factor=factor,
        mem_threshold=mem_threshold,
        alpha=alpha,
        time_floors=time_floors,
        mem_floors=mem_floors,
        warnings=manifest_warnings(base.manifest, cand.manifest) + placement_warnings(base, cand),
        environments=environments,
        seed=seed,
        count_factor=count_factor,
        gated_metrics=gated_metrics,
        process_spread=process_spread,
        # one run: replicate i of each side ran side by side (ABBA order), or is the same
        paired=base.run_id == cand.run_id,
        noise_spread=noise_spread,
    )
    b_cases, c_cases = _cases(base), _cases(cand)
    for key, b, c in _joined_cases(b_cases, c_cases):
        if c is None:
            assert b is not None
            result.pairs.append(Pair(key, "", "", "removed", baseline_status=b.status))
        elif b is None:
            result.pairs.append(Pair(key, "", "", "added", candidate_status=c.status))
        else:
            result.pairs.extend(_case_pairs(key, b, c, samples, result))
    if any(p.test == "none" for p in result.pairs):
        result.warnings.append(
            f"some time pairs have fewer than {MIN_SAMPLES} samples and one process a side: no "
            "interval, inconclusive (raise the repeat count, or use --replicates)"
        )
    if result.one_process:
        result.warnings.append(
            "the verdict rests on one process each: samples inside one process do not show the "
            "spread between processes (another layout, another core, another moment of a busy "
            f"machine); run both sides in one run with --replicates {gate.MIN_SUGGESTED} or more "
            "(ABBA order) for an honest interval"
        )
    return result

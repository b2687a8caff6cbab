"""The release gate's statistics: an interval for the ratio of medians that respects processes,
and a verdict in three states.

Samples taken inside one process are not independent: the process has its own allocator
layout, its own core placement, its own share of a busy machine. Two processes of the same
code differ by more than the samples inside either suggest, so a test that pools every sample
as if independent (Mann–Whitney on all of them) finds "significant" differences between
identical runs. With replicates the unit of evidence is the process. :func:`ratio_interval`
therefore draws a **hierarchical bootstrap**: it resamples the processes of each side with
replacement, then the samples inside each drawn process, and takes the ratio of the pooled
medians (candidate / baseline) of each draw. With one process a side that bootstrap's
percentile interval is the interval: only the second stage varies, and the interval knows
nothing of the spread between processes (the verdict then rests on one process each).

With a few processes a side the percentile bootstrap is too narrow: three processes give ten
distinct draws, the draws never leave the range of the process medians seen, and a 99 % interval
from them holds far less than 99 %. (In CI one comparison in ten of two identical versions at
three processes a side read as a regression: a no-op phase of 0.6 µs whose three candidate
processes all sat at 0.7–0.8 µs.) With two or more processes on each side the interval is
therefore Student's: the pooled ratio times/divided by ``exp(t · SE)``, where SE is Welch's
standard error of the difference of the sides' mean log process medians, at the
Welch–Satterthwaite degrees of freedom, and never below the bootstrap's own spread of the log
ratio (so that processes whose medians tie, as a coarse timer makes them, do not collapse the
interval to a point). At three processes a side t is 4.6 (99 %): a gate that is honest about
three processes is mostly inconclusive unless the change is large.

:func:`judge` turns the interval into a mark, in the spirit of SpikingJelly's benchmark gate
(pass / regression / inconclusive):

- ``regression`` (fail): the whole interval lies above the factor;
- ``inconclusive``: the interval straddles the factor;
- ``same`` or ``improved`` (pass): the whole interval lies below the factor (``improved`` when
  it lies below 1 / factor as well).

:func:`replicates_needed` says how many processes a side would narrow an inconclusive interval
enough to leave the factor: the interval's width falls as 1/√processes.

Within one interleaved run (``--replicates`` over two environments, ABBA order) replicate i
of the baseline and replicate i of the candidate ran side by side, under the same moment of the
machine. :func:`paired_interval` then takes the log ratio of their medians pair by pair, so that
the drift of the machine between pairs cancels instead of widening the interval, and puts
Student's t on those paired differences (n − 1 degrees of freedom). On a machine that slows a
whole process down (a busy loop sharing its core for the length of a case), one slowed process
in three pairs leaves the paired medians' interval wide ([0.09, 26.5] for a planted 2×); the
fastest sample of each process stays put (1.93–2.05 ms and 3.87–4.11 ms for that 2×: noise on
a CPU only adds time). ``statistic="min"`` pairs those fastest samples instead; the comparison
asks both statistics, each at half the error rate (Bonferroni), so that a run that asks twice
still errs at most ``1 - confidence`` of the time (snnbench.gate.compare).

The draws are seeded (:func:`pair_seed`): the same two runs always get the same verdict.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import t as student_t

#: bootstrap draws per pair: the 0.5 % and 99.5 % quantiles of 2000 draws move by a few %
#: of the interval's width from seed to seed
RESAMPLES = 2000
#: floats drawn at once (per chunk of draws): bounds the memory of large pairs to ~32 MB
_CHUNK_VALUES = 4_000_000
#: at most this many processes are suggested; above it the change sits on the factor itself
MAX_SUGGESTED = 100
#: with one process a side the interval lacks the spread between processes: suggest at least
#: this many, whatever the within-process interval says
MIN_SUGGESTED = 3

#: how :func:`ratio_interval` finds its interval, in the words a comparison's JSON rule gives
METHOD = ("paired student over replicate ratios within one run (process medians, or their "
          "fastest samples, each at alpha / 2); student over process medians; "
          "hierarchical bootstrap with one process a side")

GateMark = Literal["regression", "inconclusive", "same", "improved"]
#: what a process contributes to a paired interval: its median, or its fastest sample
PairStatistic = Literal["median", "min"]


@dataclass(frozen=True)
class RatioInterval:
    """Ratio candidate/baseline of the pooled medians, with its two-sided interval."""

    ratio: float
    low: float
    high: float
    #: processes (replicates) on each side: (baseline, candidate)
    processes: tuple[int, int]
    #: samples on each side: (baseline, candidate)
    samples: tuple[int, int]
    #: the interval's confidence level (0.99 for a 99 % interval)
    confidence: float
    #: True when the interval comes from paired replicates (:func:`paired_interval`)
    paired: bool = False

    @property
    def one_process(self) -> bool:
        """True when a side has a single process: the interval lacks the spread between them."""
        return min(self.processes) < 2

    @property
    def finite(self) -> bool:
        """True when the ratio and both ends are positive finite numbers (a NaN interval
        decides nothing)."""
        return all(math.isfinite(v) and v > 0 for v in (self.ratio, self.low, self.high))

    def widened(self, spread: float) -> RatioInterval:
        """The interval widened by a relative ``spread`` on each side (÷ and × ``1 + spread``):
        a between-process spread the samples could not see."""
        grow = 1.0 + spread
        return dataclasses.replace(self, low=self.low / grow, high=self.high * grow)


def pair_seed(seed: int, *parts: object) -> int:
    """A stable seed for one pair: ``seed`` mixed with a CRC of the pair's identity (Python's
    ``hash`` of a string changes from process to process, a CRC does not)."""
    text = "\x1f".join(map(str, parts)).encode()
    return (seed * 0x9E3779B1 + zlib.crc32(text)) % 2**63


def _padded(groups: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.array([len(g) for g in groups])
    table = np.full((len(groups), int(lengths.max())), np.nan)
    for i, g in enumerate(groups):
        table[i, : len(g)] = g
    return table, lengths


def bootstrap_medians(groups: Sequence[np.ndarray], draws: int,
                      rng: np.random.Generator) -> np.ndarray:
    """``draws`` medians of a two-stage resample of ``groups`` (one array per process):
    processes drawn with replacement, then each drawn process's samples with replacement,
    pooled. Processes keep their own sample counts."""
    table, lengths = _padded(groups)
    n_proc, width = table.shape
    equal = bool((lengths == width).all())
    out = np.empty(draws)
    chunk = max(1, _CHUNK_VALUES // (n_proc * width))
    for start in range(0, draws, chunk):
        size = min(chunk, draws - start)
        procs = rng.integers(0, n_proc, size=(size, n_proc))
        n_of = lengths[procs][..., None]  # (size, n_proc, 1)
        picks = (rng.random((size, n_proc, width)) * n_of).astype(np.int64)
        values = table[procs[..., None], picks]
        if not equal:  # a drawn process with fewer samples fills only its own count
            values[np.arange(width)[None, None, :] >= n_of] = np.nan
        flat = values.reshape(size, n_proc * width)
        out[start:start + size] = (np.median(flat, axis=1) if equal
                                   else np.nanmedian(flat, axis=1))
    return out


def _log_spread(groups: Sequence[np.ndarray]) -> tuple[float, int]:
    """The variance of the mean log process median of one side, and its degrees of freedom."""
    medians = np.array([float(np.median(g)) for g in groups])
    if not (medians > 0).all():
        raise ValueError("a process's median is not positive")
    logs = np.log(medians)
    return float(logs.var(ddof=1)) / len(logs), len(logs) - 1


def _between_processes_half_width(base: Sequence[np.ndarray], cand: Sequence[np.ndarray],
                                  floor_se: float, confidence: float) -> float:
    """The half-width (in log ratio) that the process medians of both sides allow: Welch's
    standard error of the difference of their mean logs, never below ``floor_se`` (what the
    samples inside the processes imply), times Student's t at the Welch–Satterthwaite degrees
    of freedom (the pooled ones when no side spreads at all)."""
    (var_b, df_b), (var_c, df_c) = _log_spread(base), _log_spread(cand)
    se2 = var_b + var_c
    df = (se2 ** 2 / (var_b ** 2 / df_b + var_c ** 2 / df_c)) if se2 > 0 else float(df_b + df_c)
    se = max(math.sqrt(se2), floor_se)
    return float(student_t.ppf(0.5 + confidence / 2.0, df)) * se


def ratio_interval(
    baseline: Sequence[np.ndarray],
    candidate: Sequence[np.ndarray],
    *,
    confidence: float = 0.99,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> RatioInterval:
    """The interval of median(candidate) / median(baseline), the pooled medians of each side.

    Each side is a list of sample arrays, one per process (replicate); empty arrays and NaNs
    are dropped. With one process on a side: the percentile interval at ``confidence`` of the
    hierarchical bootstrap. With two or more on each: the ratio times/divided by
    ``exp(t · SE)``, where SE is the larger of Welch's standard error of the log process
    medians and the bootstrap's own standard deviation of the log ratio (see the module
    docstring for why a percentile bootstrap over a handful of processes is not enough).
    Raises ValueError when a side has no sample or a non-positive median.
    """
    base = [g[np.isfinite(g)] for g in map(np.asarray, baseline)]
    cand = [g[np.isfinite(g)] for g in map(np.asarray, candidate)]
    base, cand = [g for g in base if len(g)], [g for g in cand if len(g)]
    if not base or not cand:
        raise ValueError("a side has no samples")
    b_med = float(np.median(np.concatenate(base)))
    c_med = float(np.median(np.concatenate(cand)))
    if not (b_med > 0 and c_med > 0):
        raise ValueError("a side's median is not positive")
    rng = np.random.default_rng(seed)
    ratio = c_med / b_med
    # a draw whose baseline median is 0 (a coarse timer's zeros) has no ratio: such draws
    # make the interval NaN (undecided), never a warning on stderr
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratios = bootstrap_medians(cand, resamples, rng) / bootstrap_medians(base, resamples, rng)
        usable = bool(np.isfinite(ratios).all() and (ratios > 0).all())
        if not usable:
            low = high = math.nan
        elif min(len(base), len(cand)) < 2:
            tail = (1.0 - confidence) / 2.0
            low, high = (float(q) for q in np.quantile(ratios, [tail, 1.0 - tail]))
        else:
            half = _between_processes_half_width(base, cand, float(np.std(np.log(ratios))),
                                                 confidence)
            low, high = ratio * math.exp(-half), ratio * math.exp(half)
    return RatioInterval(
        ratio=ratio,
        low=low,
        high=high,
        processes=(len(base), len(cand)),
        samples=(sum(map(len, base)), sum(map(len, cand))),
        confidence=confidence,
    )


def paired_interval(
    baseline: Sequence[np.ndarray],
    candidate: Sequence[np.ndarray],
    *,
    confidence: float = 0.99,
    statistic: PairStatistic = "median",
) -> RatioInterval:
    """The interval of the ratio from replicates that ran side by side: ``baseline[i]`` and
    ``candidate[i]`` are the samples of replicate i of each side (one interleaved run).

    Each pair gives the log ratio of its two processes' ``statistic`` (their medians, or their
    fastest samples: ``min``); the interval is their mean ±
    Student's t (n − 1 degrees of freedom) times their standard error, as a ratio. The
    drift of the machine from one pair to the next cancels within each pair. The ratio
    reported is the pooled medians' (as the tables show). Identical pairs give the point 1.
    Raises ValueError with fewer than two pairs or a process median that is not positive.
    """
    if len(baseline) != len(candidate) or len(baseline) < 2:
        raise ValueError("paired replicates need two or more pairs")
    base = [np.asarray(g, dtype=float) for g in baseline]
    cand = [np.asarray(g, dtype=float) for g in candidate]
    base = [g[np.isfinite(g)] for g in base]
    cand = [g[np.isfinite(g)] for g in cand]
    if not all(len(g) for g in (*base, *cand)):
        raise ValueError("a replicate has no samples")
    reduce = np.median if statistic == "median" else np.min
    b_medians = np.array([float(reduce(g)) for g in base])
    c_medians = np.array([float(reduce(g)) for g in cand])
    if not ((b_medians > 0).all() and (c_medians > 0).all()):
        raise ValueError(f"a replicate's {statistic} is not positive")
    diffs = np.log(c_medians) - np.log(b_medians)
    n = len(diffs)
    centre = float(diffs.mean())
    se = float(diffs.std(ddof=1)) / math.sqrt(n)
    half = float(student_t.ppf(0.5 + confidence / 2.0, n - 1)) * se if se > 0 else 0.0
    ratio = float(np.median(np.concatenate(cand))) / float(np.median(np.concatenate(base)))
    return RatioInterval(
        ratio=ratio,
        low=math.exp(centre - half),
        high=math.exp(centre + half),
        processes=(n, n),
        samples=(sum(map(len, base)), sum(map(len, cand))),
        confidence=confidence,
        paired=True,
    )


def judge(interval: RatioInterval, factor: float) -> GateMark:
    """The mark of one interval against ``factor`` (> 1): see the module docstring. An
    interval that is not finite (NaN ends) decides nothing: ``inconclusive``."""
    if not interval.finite:
        return "inconclusive"
    if interval.low > factor:
        return "regression"
    if interval.high >= factor:
        return "inconclusive"
    return "improved" if interval.high < 1.0 / factor else "same"


def _student(confidence: float, processes: int, paired: bool = False) -> float:
    """Student's t of a two-sided ``confidence`` interval from ``processes`` a side (the pooled
    degrees of freedom, 2·processes − 2; processes − 1 for as many pairs)."""
    df = processes - 1 if paired else 2 * processes - 2
    return float(student_t.ppf(0.5 + confidence / 2.0, df))


def replicates_needed(interval: RatioInterval, factor: float) -> int | None:
    """Processes per side that would bring an inconclusive interval off ``factor``.

    The ratio stays put while the interval's half-width on the factor's side shrinks: as
    1/√processes for the standard error, and, with two or more processes a side, as Student's
    t falls with the degrees of freedom (those of pairs for a paired interval). The smallest
    count whose half-width is smaller than the distance from the ratio to the factor, at
    least :data:`MIN_SUGGESTED` when a side had one process (whose interval lacks the spread
    between processes). None when the ratio sits on the factor, or more than
    :data:`MAX_SUGGESTED` would be needed: more processes do not settle it; the factor is the
    question.
    """
    if not interval.finite:
        return None
    log_ratio, log_factor = math.log(interval.ratio), math.log(factor)
    distance = abs(log_ratio - log_factor)
    edge = interval.low if interval.ratio > factor else interval.high
    half = abs(log_ratio - math.log(edge))
    have = min(interval.processes)
    if distance < 1e-12:
        return None
    if interval.one_process:
        needed = max(math.ceil(have * (half / distance) ** 2), have + 1, MIN_SUGGESTED)
        return needed if needed <= MAX_SUGGESTED else None
    paired = interval.paired
    unit = half / _student(interval.confidence, have, paired) * math.sqrt(have)
    for n in range(have + 1, MAX_SUGGESTED + 1):
        if _student(interval.confidence, n, paired) * unit / math.sqrt(n) < distance:
            return n
    return None


def judge_count(ratio: float, factor: float) -> GateMark:
    """The mark of a deterministic count's ratio (candidate / baseline) against ``factor``
    (> 1), with no interval: the same code counts the same instructions to ~0.1 %, so the
    ratio itself is the evidence. ``regression`` above ``factor``, ``improved`` below
    1 / ``factor``, else ``same``."""
    if ratio > factor:
        return "regression"
    return "improved" if ratio < 1.0 / factor else "same"

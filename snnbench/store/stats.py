"""Pure statistics over raw samples: the numbers every summary row carries.

The median is the headline (robust to the occasional slow sample a GC pause or a busy core
causes); IQR/median is the confidence signal, as in ``torch.utils.benchmark``: above 0.10 a
measurement is noisy, above 0.25 it is grossly so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

NOISY_IQR_RATIO = 0.10
GROSS_IQR_RATIO = 0.25
CI_LEVEL = 0.99


@dataclass(frozen=True)
class Summary:
    """Summary statistics of one metric's raw samples (quantiles by linear interpolation)."""

    n: int
    median: float
    q1: float
    q3: float
    iqr: float
    mean: float
    std: float
    min: float
    max: float
    ci99_low: float
    ci99_high: float
    outliers: int

    @property
    def iqr_ratio(self) -> float:
        """IQR / median (NaN when the median is 0)."""
        return self.iqr / self.median if self.median else math.nan

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields."""
        return asdict(self)


def median_ci(sorted_values: Sequence[float], level: float = CI_LEVEL) -> tuple[float, float]:
    """Distribution-free confidence interval of the median from order statistics.

    Uses the binomial(n, ½) distribution of the number of samples below the median: the
    interval [x_(j), x_(n-j+1)] covers the median with probability 1 - 2·P(B ≤ j-1). Returns
    (nan, nan) when even [min, max] does not reach ``level`` (n < 8 at 99 %).
    """
    # scipy.stats takes seconds to import on a busy machine: imported when first needed, so
    # that a run prints its first case before paying for it
    from scipy import stats as sps

    n = len(sorted_values)
    alpha = 1.0 - level
    if n == 0:
        return (math.nan, math.nan)
    # largest j (1-based) with 2·P(B ≤ j-1) ≤ alpha
    j = int(sps.binom.ppf(alpha / 2.0, n, 0.5))
    if sps.binom.cdf(j, n, 0.5) > alpha / 2.0:
        j -= 1
    # j is now the count of order statistics excluded from each side (P(B ≤ j) ≤ α/2)
    if j < 0:
        return (math.nan, math.nan)
    return (float(sorted_values[j]), float(sorted_values[n - 1 - j]))


def summarize(samples: Sequence[float]) -> Summary:
    """Summary of raw samples; an empty input gives all-NaN fields and n = 0."""
    values = np.asarray(samples, dtype=np.float64)
    n = int(values.size)
    if n == 0:
        nan = math.nan
        return Summary(0, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, 0)
    values = np.sort(values)
    q1, median, q3 = (float(q) for q in np.quantile(values, [0.25, 0.5, 0.75]))
    iqr = q3 - q1
    low_fence, high_fence = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    outliers = int(np.count_nonzero((values < low_fence) | (values > high_fence)))
    ci_low, ci_high = median_ci(values.tolist())
    return Summary(
        n=n,
        median=median,
        q1=q1,
        q3=q3,
        iqr=iqr,
        mean=float(values.mean()),
        std=float(values.std(ddof=1)) if n > 1 else 0.0,
        min=float(values[0]),
        max=float(values[-1]),
        ci99_low=ci_low,
        ci99_high=ci_high,
        outliers=outliers,
    )


def replicate_spread(medians: Sequence[float]) -> float:
    """Spread between replicates: (max − min) / median of the replicates' medians.

    The replicates are fresh processes of one case (``--replicates``); their medians differ by
    what one process hides (allocator state, clocks, memory layout). NaN for fewer than two
    finite medians or a median of 0.
    """
    values = np.asarray([m for m in medians if math.isfinite(m)], dtype=np.float64)
    if values.size < 2:
        return math.nan
    centre = float(np.median(values))
    return float(values.max() - values.min()) / centre if centre else math.nan


def within_spread(replicates: Sequence[Sequence[float]]) -> float:
    """Spread within one process: the median over replicates of each one's IQR / median
    (NaN when no replicate has a finite ratio). Comparable with :func:`replicate_spread`."""
    ratios = [summarize(values).iqr_ratio for values in replicates if len(values)]
    finite = [r for r in ratios if math.isfinite(r)]
    return float(np.median(finite)) if finite else math.nan


def replicate_warning(spread: float, within: float) -> str:
    """A warning when replicates differ by more than :data:`NOISY_IQR_RATIO` of the median
    and by more than a process's own spread ('' otherwise)."""
    if not math.isfinite(spread) or spread <= NOISY_IQR_RATIO:
        return ""
    if math.isfinite(within) and spread <= within:
        return ""
    inside = f"{within:.0%}" if math.isfinite(within) else "unknown"
    return (f"replicates differ: their medians span {spread:.0%} of the median (within one "
            f"process {inside}); the process matters, raise --replicates")


def noise_warning(summary: Summary) -> str:
    """A warning that says what to do when the spread is high, or '' when it is fine."""
    ratio = summary.iqr_ratio
    if math.isnan(ratio) or summary.n < 4:
        return ""
    if ratio > GROSS_IQR_RATIO:
        return (
            f"very noisy: IQR is {ratio:.0%} of the median; close other programs, pin the "
            "device clocks, or raise --repeats and warm-up"
        )
    if ratio > NOISY_IQR_RATIO:
        return f"noisy: IQR is {ratio:.0%} of the median; consider more --repeats or --warmup"
    return ""

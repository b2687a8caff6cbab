"""Who is fastest, and by how much: step-time ratios with intervals from the raw samples.

A report's headline (:func:`headline`) and its speed-up plot (:func:`speedups`) read the same
numbers: the median step time of each adapter label at each size (the workload's; the neuron
count of Linear+LIF: the summary's), and the interval of a ratio of two medians from a
bootstrap of the two cases' raw samples (:func:`snnbench.gate.interval.ratio_interval`, one process
a side: its percentile interval). The
interval says how far the samples of *this* run pin the ratio down; the spread between
processes and days is not in it (a run with replicates pools their samples). A run without
``samples.parquet`` gets the ratios without intervals (NaN ends), never an invented one.

The floor is a bound, not a library: it is never "the fastest". Harness probes are left out
by the caller (:func:`snnbench.store.overhead.is_probe`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from snnbench.gate.interval import ratio_interval
from snnbench.records.contract import adapter_label
from snnbench.records.schema import FLOOR, rows_workload
from snnbench.workload import row_workload_class

#: the adapter speed-ups are measured against
REFERENCE = "torch"
#: the intervals' confidence level
CONFIDENCE = 0.95
#: bootstrap draws per interval: a figure's whiskers, not a gate's verdict
RESAMPLES = 1000




@dataclass(frozen=True)
class Ratio:
    """``value`` = time(slower) / time(faster) of one pair at one size (the workload's
    :attr:`~snnbench.workload.Workload.size_param`), with its interval."""

    size: int
    label: str
    other: str
    value: float
    low: float
    high: float
    #: True when either side's step time carries a noise warning (IQR well above normal)
    noisy: bool

    @property
    def has_interval(self) -> bool:
        """True when both ends are finite (the run kept raw samples of both sides)."""
        return math.isfinite(self.low) and math.isfinite(self.high)

    def text(self) -> str:
        """``4.70× [4.10, 5.20]``, or ``4.70×`` without an interval."""
        if not self.has_interval:
            return f"{self.value:.2f}×"
        return f"{self.value:.2f}× [{self.low:.2f}, {self.high:.2f}]"


@dataclass(frozen=True)
class Fastest:
    """The fastest adapter at one size, against the runner-up and the reference."""

    size: int
    label: str
    median_s: float
    noisy: bool
    #: how much faster than the runner-up (None when it ran alone)
    runner_up: Ratio | None
    #: how much faster than :data:`REFERENCE` (None when it is the reference or torch is absent)
    reference: Ratio | None


def step_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The ok step-time rows of ``rows`` with a finite median, labelled (column ``label``)."""
    step = rows[(rows["phase"] == "step") & (rows["metric"] == "time_s")
                & (rows["status"] == "ok")]
    step = step[np.isfinite(step["median"].to_numpy(float))]
    labelled: pd.DataFrame = step.assign(label=[
        adapter_label(str(r["adapter"]), str(r["variant"]), str(r.get("environment", "") or ""))
        for _, r in step.iterrows()])
    return labelled


def step_samples(row: pd.Series, samples: pd.DataFrame | None) -> np.ndarray:
    """The raw step-time samples of a summary row's case (all replicates pooled)."""
    if samples is None or samples.empty:
        return np.array([])
    mask = ((samples["case_id"] == row["case_id"]) & (samples["adapter"] == row["adapter"])
            & (samples["variant"] == row["variant"]) & (samples["phase"] == "step")
            & (samples["metric"] == "time_s"))
    if "environment" in samples.columns:
        mask &= samples["environment"] == str(row.get("environment", "") or "")
    # the case id is the spec's hash, but a hand-made folder may reuse one: the size columns
    # keep each case's samples its own
    for column in ("device", *row_workload_class(row).key_columns):
        if column in samples.columns and column in row.index:
            mask &= samples[column] == row[column]
    values: np.ndarray = samples.loc[mask, "value"].to_numpy(float)
    finite: np.ndarray = values[np.isfinite(values)]
    return finite


def ratio(faster: pd.Series, slower: pd.Series, samples: pd.DataFrame | None,
          seed: int = 0) -> Ratio:
    """time(slower) / time(faster) of two step rows of one n, with a bootstrap interval."""
    value = float(slower["median"]) / float(faster["median"])
    low = high = math.nan
    fast, slow = step_samples(faster, samples), step_samples(slower, samples)
    if len(fast) >= 2 and len(slow) >= 2:
        try:
            found = ratio_interval([fast], [slow], confidence=CONFIDENCE,
                                   resamples=RESAMPLES, seed=seed)
        except ValueError:  # a side's median is 0 (a coarse timer): no interval
            pass
        else:
            # the ratio shown is the summaries' (the samples' own medians): its interval
            # always holds it
            low, high = min(found.low, value), max(found.high, value)
    noisy = bool(str(faster.get("warning", "")) or str(slower.get("warning", "")))
    size = int(faster[row_workload_class(faster).size_param])
    return Ratio(size, str(faster["label"]), str(slower["label"]), value, low, high, noisy)


def speedups(rows: pd.DataFrame, samples: pd.DataFrame | None,
             reference: str = REFERENCE) -> list[Ratio]:
    """Speed-up over ``reference``'s default variant of every other label, per n: the
    :class:`Ratio` ``time(reference) / time(label)`` (``label`` is the adapter's, ``other``
    the reference). Empty when the rows hold no reference step time."""
    step = step_rows(rows)
    size = rows_workload(rows).size_param
    out: list[Ratio] = []
    for n in sorted(int(v) for v in step[size].unique()):
        at = step[step[size] == n]
        ref = at[(at["adapter"] == reference) & at["variant"].isin(["default", ""])
                 & (at["environment"] == "")]
        if ref.empty:
            continue
        base = ref.sort_values("median", kind="stable").iloc[0]
        for _, row in at.sort_values("median", kind="stable").iterrows():
            if row["label"] == base["label"]:
                continue
            out.append(ratio(row, base, samples, seed=n))
    return out


def headline(rows: pd.DataFrame, samples: pd.DataFrame | None,
             reference: str = REFERENCE) -> list[Fastest]:
    """Per n (ascending): the fastest label (the floor and probes aside), by how much it beat
    the runner-up and the reference, with intervals."""
    step = step_rows(rows)
    step = step[step["adapter"] != FLOOR]
    size = rows_workload(rows).size_param
    out: list[Fastest] = []
    for n in sorted(int(v) for v in step[size].unique()):
        at = step[step[size] == n].sort_values("median", kind="stable")
        at = at.drop_duplicates("label")
        best = at.iloc[0]
        second = ratio(best, at.iloc[1], samples, seed=n) if len(at) > 1 else None
        ref = at[(at["adapter"] == reference) & at["variant"].isin(["default", ""])
                 & (at["environment"] == "")]
        versus = (ratio(best, ref.iloc[0], samples, seed=n + 1)
                  if not ref.empty and ref.iloc[0]["label"] != best["label"] else None)
        out.append(Fastest(n, str(best["label"]), float(best["median"]),
                           bool(str(best.get("warning", ""))), second, versus))
    return out

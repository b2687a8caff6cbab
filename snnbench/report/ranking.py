"""Who is fastest at each case of a run, and by how much: the answer a run ends with.

Per case, the libraries that ran are ranked by their median step time; the fastest is then
set against the next one and against plain PyTorch (``torch``), each as a ratio of medians
with its interval (:func:`snnbench.gate.interval.ratio_interval`: a bootstrap of the raw samples
with one process a side, Student's t over the process medians with replicates), as hyperfine ends
with "'fd' ran 6.14 ± 0.13 times faster than 'find'". The probes (``null``, the harness
overhead, and ``floor``, the GEMM floor) are not libraries: they are never ranked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from snnbench.gate.interval import pair_seed, ratio_interval
from snnbench.records.contract import adapter_label
from snnbench.records.schema import CASE_IDENTITY, NETWORK, rows_workload
from snnbench.store.overhead import PROBE_ADAPTERS
from snnbench.store.storage import Run
from snnbench.workload import row_workload_class

#: the library every other is best known against: the fastest is also set against it
BASELINE = "torch"
#: the intervals' confidence (as compare's default --alpha 0.01)
CONFIDENCE = 0.99
@dataclass(frozen=True)
class Entry:
    """One library's step time at one case."""

    label: str
    median_s: float
    iqr_s: float
    #: the raw step samples, one array per process (empty when the run kept none)
    processes: tuple[np.ndarray, ...] = ()


@dataclass(frozen=True)
class Speedup:
    """``faster`` ran ``ratio`` times faster than ``slower`` (median step time of ``slower``
    over that of ``faster``), with the interval [low, high] at ``confidence`` (NaN ends when
    the samples allow none)."""

    faster: str
    slower: str
    case: str
    ratio: float
    low: float = math.nan
    high: float = math.nan
    confidence: float = CONFIDENCE

    @property
    def has_interval(self) -> bool:
        """True when both ends of the interval are finite."""
        return math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def decided(self) -> bool:
        """True unless the interval reaches 1 (then the two are not told apart)."""
        return not self.has_interval or self.low > 1.0

    def sentence(self) -> str:
        """``fused ran 4.7× [4.1, 5.2] faster than torch at n=256``."""
        interval = f" [{_x(self.low)}, {_x(self.high)}]" if self.has_interval else ""
        text = (f"{self.faster} ran {_x(self.ratio)}×{interval} faster than {self.slower} at "
                f"{self.case}")
        if not self.decided:
            text += ": not told apart (the interval reaches 1×)"
        return text

    def to_dict(self) -> dict[str, Any]:
        """Typed fields for JSON (NaN as None)."""
        return {"case": self.case, "faster": self.faster, "slower": self.slower,
                "ratio": _number(self.ratio), "ratio_low": _number(self.low),
                "ratio_high": _number(self.high), "confidence": self.confidence,
                "decided": self.decided}


@dataclass
class CaseRanking:
    """One case: its libraries fastest first, and what the fastest is set against."""

    case: str
    case_id: str = ""
    ranked: list[Entry] = field(default_factory=list)
    speedups: list[Speedup] = field(default_factory=list)


def _x(value: float) -> str:
    """A ratio as the tables write it: two decimals below 10 (``4.70``), three significant
    digits below 100 (``12.3``), whole above (``104``)."""
    if value < 10:
        return f"{value:.2f}"
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _number(value: float) -> float | None:
    return value if math.isfinite(value) else None


def case_labels(summary: pd.DataFrame) -> dict[str, str]:
    """case_id → the shortest label that tells the run's cases apart (``n=256``; with the
    dtype, the reset... only when those vary): the workload's words
    (:meth:`~snnbench.workload.Workload.row_label`) of the columns that vary, then the
    network column when it varies."""
    cases = summary.drop_duplicates("case_id")
    workload = rows_workload(cases)

    def varies(column: str) -> bool:
        return column in cases.columns and cases[column].astype(str).nunique() > 1

    # the words of every kind the run holds (a folder of Linear+LIF and graph cases)
    parts = dict.fromkeys(c for cls in dict.fromkeys(row_workload_class(r)
                                                     for _, r in cases.iterrows())
                          for c, _ in cls.label_parts)
    varying = [c for c in parts if varies(c)] or [workload.size_param]
    labels: dict[str, str] = {}
    for _, row in cases.iterrows():
        words = [row_workload_class(row).row_label(row, varying)]
        if varies(NETWORK):
            words.append(str(row[NETWORK]))
        labels[str(row["case_id"])] = " ".join(w for w in words if w)
    return labels


def _step_samples(run: Run) -> dict[tuple[str, ...], tuple[np.ndarray, ...]]:
    """(adapter, variant, device, environment, case_id) → the step phase's time samples,
    one array per process."""
    samples = run.samples
    if samples is None or samples.empty:
        return {}
    step = samples[(samples["phase"] == "step") & (samples["metric"] == "time_s")]
    out: dict[tuple[str, ...], tuple[np.ndarray, ...]] = {}
    for key, rows in step.groupby(list(CASE_IDENTITY), sort=False, dropna=False):
        groups = [one["value"].to_numpy(float)
                  for _, one in rows.groupby(rows["replicate"].fillna(0), sort=True)]
        out[tuple(str(k) for k in key)] = tuple(g[np.isfinite(g)] for g in groups)
    return out


def rank_run(run: Run, seed: int = 0) -> list[CaseRanking]:
    """Per case (in the run's order), its ok libraries by median step time, fastest first,
    and the fastest against the next one and against :data:`BASELINE` (one case of a single
    library has no speed-up). Probes are left out."""
    summary = run.summary
    if summary.empty:
        return []
    labels = case_labels(summary)
    samples = _step_samples(run)
    step = summary[(summary["phase"] == "step") & (summary["metric"] == "time_s")
                   & (summary["status"] == "ok") & ~summary["adapter"].isin(list(PROBE_ADAPTERS))]
    out: list[CaseRanking] = []
    for case_id, rows in step.groupby("case_id", sort=False):
        entries: list[tuple[str, Entry]] = []
        for _, row in rows.iterrows():
            median = float(row["median"])
            if not (math.isfinite(median) and median > 0):
                continue
            key = tuple(str(row[c]) for c in CASE_IDENTITY)
            label = adapter_label(str(row["adapter"]), str(row["variant"]),
                                  str(row["environment"]))
            entries.append((str(row["adapter"]), Entry(label, median, float(row["iqr"]),
                                                       samples.get(key, ()))))
        entries.sort(key=lambda item: item[1].median_s)
        ranking = CaseRanking(labels.get(str(case_id), str(case_id)), str(case_id),
                              [entry for _, entry in entries])
        if len(entries) > 1:
            best = entries[0][1]
            against = [entries[1][1]]
            against += [e for adapter, e in entries[2:] if adapter == BASELINE][:1]
            ranking.speedups = [speedup(best, other, ranking.case, seed) for other in against]
        out.append(ranking)
    return out


def speedup(faster: Entry, slower: Entry, case: str, seed: int = 0) -> Speedup:
    """How many times faster ``faster`` ran than ``slower``, with its interval from their
    raw samples (none without samples, or with too few)."""
    ratio = slower.median_s / faster.median_s
    low = high = math.nan
    if _usable(faster.processes) and _usable(slower.processes):
        try:
            interval = ratio_interval(faster.processes, slower.processes,
                                      confidence=CONFIDENCE,
                                      seed=pair_seed(seed, faster.label, slower.label, case))
        except ValueError:
            pass
        else:
            if interval.finite:
                low, high = interval.low, interval.high
    return Speedup(faster.label, slower.label, case, ratio, low, high)


def _usable(processes: Sequence[np.ndarray]) -> bool:
    """Enough samples for an interval: two processes, or five samples in one."""
    sizes = [len(p) for p in processes if len(p)]
    return len(sizes) >= 2 or (len(sizes) == 1 and sizes[0] >= 5)

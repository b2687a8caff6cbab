"""The fused backend's performance targets, read off one run's summary.

The targets (docs/fused.md), each judged per case group and neuron count from the medians of
one run, so that every ratio compares adapters measured side by side:

* every device: the fastest fused variant is the fastest adapter (``floor`` aside);
* CUDA: its step time is at most 1.25× the ``floor`` for n ≥ 4096 and 2× below that; it is at
  least 3× faster than the best third-party library for n ≤ 2048; at n = 16384 its peak memory
  is at most half the ``torch`` reference's.

Only what the run measured is judged: a target whose rows are missing (no floor, no torch row,
no third-party library ok at that n) is not listed rather than counted as met.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from snnbench.records.contract import adapter_label
from snnbench.records.schema import FLOOR, GROUP_COLUMNS, group_title, rows_workload
from snnbench.store.overhead import is_probe

#: adapters that are not libraries being compared: ours, and the GEMM-only floor
FUSED = "fused"
#: libraries that are not third-party: snnbench's own and plain PyTorch (the reference)
OWN_LIBRARIES: frozenset[str] = frozenset({"snnbench", "torch"})
#: n from which the step must be within 1.25× the floor (2× below)
LARGE_N = 4096
#: n up to which fused must be 3× faster than every third-party library
SMALL_N = 2048
MEMORY_N = 16384


@dataclass(frozen=True)
class TargetCheck:
    """One target at one neuron count of one case group, with the figures behind the verdict."""

    group: str
    #: the case's size (the workload's size parameter: the neuron count of Linear+LIF)
    size: int
    target: str
    value: float
    limit: float
    met: bool
    detail: str


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _best(rows: pd.DataFrame) -> tuple[str, float] | None:
    if rows.empty:
        return None
    row = rows.sort_values("median", kind="stable").iloc[0]
    return (adapter_label(str(row["adapter"]), str(row["variant"]), str(row["environment"])),
            float(row["median"]))


def check_fused_targets(summary: pd.DataFrame) -> list[TargetCheck]:
    """The targets the run in ``summary`` (a summary table) can judge, in group and n order."""
    # a harness probe (``null``) is never "the fastest adapter"
    ok = summary[(summary["status"] == "ok") & ~is_probe(summary)]
    steps = ok[(ok["phase"] == "step") & (ok["metric"] == "time_s")]
    memory = ok[(ok["phase"] == "step") & (ok["metric"] == "peak_mem_bytes")]
    checks: list[TargetCheck] = []
    if not (steps["adapter"] == FUSED).any():
        return checks
    for _, group in steps.groupby(list(GROUP_COLUMNS), sort=True, dropna=False):
        d: dict[str, Any] = {c: group.iloc[0][c] for c in GROUP_COLUMNS}
        title = group_title(d)
        cuda = str(d["device"]).startswith("cuda")
        size = rows_workload(group).size_param
        for n in sorted(int(x) for x in group[size].unique()):
            rows = group[group[size] == n]
            fused = _best(rows[rows["adapter"] == FUSED])
            if fused is None:
                continue
            name, t = fused
            checks += _time_checks(title, n, name, t, rows, cuda)
            if cuda and n == MEMORY_N:
                checks += _memory_check(title, n, memory, d)
    return checks


def _time_checks(
    title: str, n: int, name: str, t: float, rows: pd.DataFrame, cuda: bool
) -> list[TargetCheck]:
    out: list[TargetCheck] = []
    others = _best(rows[~rows["adapter"].isin([FUSED, FLOOR])])
    if others is not None:
        other, t_other = others
        out.append(TargetCheck(title, n, "fastest adapter", t / t_other, 1.0, t < t_other,
                               f"{name} {_ms(t)} vs {other} {_ms(t_other)}"))
    if not cuda:
        return out
    floor = _best(rows[rows["adapter"] == FLOOR])
    if floor is not None:
        limit = 1.25 if n >= LARGE_N else 2.0
        ratio = t / floor[1]
        out.append(TargetCheck(title, n, f"step ≤ {limit:g}× floor", ratio, limit,
                               ratio <= limit, f"{name} {_ms(t)} vs floor {_ms(floor[1])}"))
    third = _best(rows[~rows["library"].isin(OWN_LIBRARIES)
                       & ~rows["adapter"].isin([FUSED, FLOOR])])
    if third is not None and n <= SMALL_N:
        speedup = third[1] / t
        out.append(TargetCheck(title, n, "≥ 3× faster than every third-party library",
                               speedup, 3.0, speedup >= 3.0,
                               f"{name} {_ms(t)} vs {third[0]} {_ms(third[1])}"))
    return out


def _memory_check(
    title: str, n: int, memory: pd.DataFrame, d: dict[str, Any]
) -> list[TargetCheck]:
    rows = memory[(memory[rows_workload(memory).size_param] == n)]
    for col, value in d.items():
        # a column of another workload kind is NaN on every row of this one: NaN matches NaN
        same = rows[col].isna() if pd.isna(value) else rows[col] == value
        rows = rows[same]
    fused = rows[rows["adapter"] == FUSED]
    torch_ref = rows[(rows["adapter"] == "torch") & (rows["variant"].isin(["", "default"]))]
    if fused.empty or torch_ref.empty:
        return []
    mem, ref = float(fused["median"].min()), float(torch_ref["median"].iloc[0])
    ratio = mem / ref
    return [TargetCheck(title, n, "peak memory ≤ 0.5× torch", ratio, 0.5, ratio <= 0.5,
                        f"fused {mem / 2**30:.2f} GiB vs torch {ref / 2**30:.2f} GiB")]

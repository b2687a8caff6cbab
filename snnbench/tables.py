"""Turn a summary table into the rows people read: one line per adapter × case.

Used by ``snnbench run`` (its closing table) and ``snnbench show``; the same rows render as a
rich terminal table or as Markdown.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from snnbench.preflight import BUSY_CORES
from snnbench.schema import TIMED_PHASES

NOISY_NOTE = "noisy (IQR > 10% of the median)"
#: a case whose GPU clock fell while it was timed (the warning column says how far, and why)
THROTTLED_NOTE = "GPU throttled while timed"
NOISE_HINT = (
    "noisy rows: close other programs, pin clocks, or raise --repeats/--warmup; "
    "the warning column of summary.csv says which phase"
)
#: a case timed while other processes kept this many cores busy (snnbench.preflight)
BUSY_NOTE = "busy machine: other processes used {:.1f} cores while it was timed"

#: case columns that, apart from neurons and the adapter, define one group of comparable rows
GROUP_COLUMNS: tuple[str, ...] = ("device", "dtype", "batch_size", "time_steps", "layers", "reset")


def group_title(row: Any) -> str:
    """"cpu, float32, B=16, T=100, layers=1, reset=zero" for a row (or mapping) of a group."""
    return (f"{row['device']}, {row['dtype']}, B={int(row['batch_size'])}, "
            f"T={int(row['time_steps'])}, layers={int(row['layers'])}, reset={row['reset']}")


HEADERS: tuple[str, ...] = (
    "adapter", "variant", "device", "dtype", "n", "B", "T", "reset", "surrogate", "slope",
    "detach reset", "bias", "input", "status",
    "forward ms", "backward ms", "step ms", "step peak MiB", "floor×", "spike match",
    "grad cos", "note",
)


def _ms(median: float, iqr: float) -> str:
    if median is None or math.isnan(median):
        return ""
    text = f"{median * 1e3:.3g}"
    if iqr is not None and not math.isnan(iqr) and median > 0:
        text += f"±{iqr / median:.0%}"
    return text


def spike_match_text(value: float) -> str:
    """"1" only for an exact match; otherwise rounded down, so 0.99996 never reads as 1."""
    if value is None or math.isnan(value):
        return ""
    if value == 1.0:
        return "1"
    return f"{math.floor(value * 1e5) / 1e5:.5f}"


def _num(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return format(value, fmt)


def case_rows(summary: pd.DataFrame) -> list[tuple[str, ...]]:
    """One display row per (adapter, variant, device, case), in the table's order.

    Times are medians in milliseconds with IQR/median as ±%; the note column carries the
    message of a non-ok case or the noise warning of an ok one.
    """
    from snnbench.rundir import adapter_label, with_added_columns

    keys = ["adapter", "variant", "device", "dtype", "neurons", "batch_size", "time_steps",
            "reset", "case_id", "environment"]
    rows: list[tuple[str, ...]] = []
    if summary.empty:
        return rows
    summary = with_added_columns(summary)
    for key, group in summary.groupby(keys, sort=False, dropna=False):
        adapter, variant, device, dtype, n, b, t, reset, _, environment = key
        # a library environment is part of the adapter's name: snntorch@0.9.4
        adapter = adapter_label(str(adapter), "", str(environment))
        first = group.iloc[0]
        cells: dict[str, str] = {}
        times = group[group["metric"] == "time_s"]
        by_phase = {str(r["phase"]): r for _, r in times.iterrows()}
        for phase in TIMED_PHASES:
            row = by_phase.get(phase)
            cells[phase] = "" if row is None else _ms(float(row["median"]), float(row["iqr"]))
        mem = group[(group["metric"] == "peak_mem_bytes") & (group["phase"] == "step")]
        mem_text = _num(float(mem["median"].iloc[0]) / 2**20, ".1f") if not mem.empty else ""
        floor = ""
        if "step" in by_phase:
            floor = _num(float(by_phase["step"]["floor_ratio"]), ".2f")
        # warnings are "; "-joined: the throttle warning gets a note of its own
        parts = [p for w in group["warning"] if w for p in str(w).split("; ")]
        noisy = any(not p.startswith("throttled:") for p in parts)
        throttled = any(p.startswith("throttled:") for p in parts)
        note = str(first["message"])
        if first["status"] == "ok":
            for flag, text in ((noisy, NOISY_NOTE), (throttled, THROTTLED_NOTE)):
                if flag:
                    note = f"{note}; {text}" if note else text
        busy = float(first["busy_cores"])
        if first["status"] == "ok" and busy >= BUSY_CORES:
            text = BUSY_NOTE.format(busy)
            note = f"{note}; {text}" if note else text
        rows.append((
            str(adapter), str(variant), str(device), _with_precision(str(dtype), first),
            str(n), str(b), str(t),
            str(reset), str(first["surrogate"]), _num(float(first["surrogate_slope"]), "g"),
            str(first["detach_reset"]), str(first["bias"]), str(first["input_kind"]),
            str(first["status"]), cells["forward"], cells["backward"],
            cells["step"], mem_text, floor, spike_match_text(float(first["spike_match"])),
            _num(float(first["grad_cosine"]), ".6f"), note,
        ))
    return rows


def _with_precision(dtype: str, row: Any) -> str:
    """The dtype cell, with the matmul precision when it is not plain (``float32 amp-bf16``)."""
    precision = str(row.get("matmul_precision", "") or "")
    return dtype if precision in ("", "strict") else f"{dtype} {precision}"


def markdown_table(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """A GitHub-flavoured Markdown table (pipes in cells escaped)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)

"""The timing table of a run, in its two layouts.

:func:`case_rows` is the wide one: a line per adapter × case with a column per phase, for
``snnbench run`` (its closing table) and ``snnbench show``. :func:`summary_table` is the long
one: a line per adapter × case × phase with the statistics (IQR, samples, spreads), for the
report and :func:`format_table`. Both read the summary rows in :func:`reading_order`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import pandas as pd

from snnbench.host.preflight import BUSY_CORES
from snnbench.records.contract import adapter_label
from snnbench.records.metrics import format_value
from snnbench.records.roofline import IMPOSSIBLE_NOTE
from snnbench.records.schema import (
    CASE_SIZE,
    FLOOR as FLOOR,
    GROUP_COLUMNS as GROUP_COLUMNS,
    KIND,
    TIMED_PHASES,
    case_text as case_text,
    group_title as group_title,
    rows_workload,
    table_kinds,
)
from snnbench.render import Table
from snnbench.render.formats import render
from snnbench.store.overhead import PROBE_ADAPTERS
from snnbench.store.storage import Run, with_added_columns
from snnbench.workload import DEFAULT_KIND, row_workload_class, workload_class
from snnbench.workload.base import json_float, json_int

NOISY_NOTE = "noisy (IQR > 10% of the median)"
#: a case whose GPU clock fell while it was timed (the warning column says how far, and why)
THROTTLED_NOTE = "GPU throttled while timed"
NOISE_HINT = (
    "noisy rows: close other programs, pin clocks, or raise --repeats/--warmup; "
    "the warning column of summary.csv says which phase"
)
#: a case timed while other processes kept this many cores busy (snnbench.host.preflight)
BUSY_NOTE = "busy machine: other processes used {:.1f} cores while it was timed"

#: the workload whose parameters the wide table shows (every run folder so far holds
#: ``linear-lif`` cases; :data:`snnbench.records.schema.NETWORK_COLUMNS` reads them the same way)
_WORKLOAD = workload_class(DEFAULT_KIND)

_BEFORE: tuple[str, ...] = ("adapter", "variant", "device", "dtype")
_AFTER: tuple[str, ...] = (
    "status", "forward ms", "backward ms", "step ms", "step peak MiB", "floor×", "spike match",
    "grad cos", "note",
)
#: the wide table's headers for a run of ``linear-lif`` cases (:func:`headers`: of any run)
HEADERS: tuple[str, ...] = (
    *_BEFORE, *(header for _, header in _WORKLOAD.shown_columns), *_AFTER)


def _shown(summary: pd.DataFrame) -> tuple[tuple[str, str], ...]:
    """The parameters the wide table shows for the kinds of ``summary``'s rows: each kind's
    :attr:`~snnbench.workload.Workload.shown_columns` in registry order, each column once (a
    row of a kind without one leaves its cell empty)."""
    present = set(summary[KIND]) if KIND in summary.columns else set()
    shown: dict[str, str] = {}
    for kind in table_kinds(str(k) for k in present if k):
        for column, header in workload_class(kind).shown_columns:
            shown.setdefault(column, header)
    return tuple(shown.items())


def headers(summary: pd.DataFrame) -> tuple[str, ...]:
    """The wide table's headers for ``summary`` (:data:`HEADERS` for linear-lif cases)."""
    return (*_BEFORE, *(header for _, header in _shown(summary)), *_AFTER)


def _ms(median: float, iqr: float) -> str:
    if median is None or math.isnan(median):
        return ""
    text = f"{median * 1e3:.3g}"
    if iqr is not None and not math.isnan(iqr) and median > 0:
        text += f"±{iqr / median:.0%}"
    return text


def spike_match_text(value: float) -> str:
    """The share of matching spikes in percent: "100 %" only for an exact match; otherwise
    rounded down, so 0.999996 reads "99.999 %", never 100 %."""
    if value is None or math.isnan(value):
        return ""
    if value == 1.0:
        return "100 %"
    return f"{math.floor(value * 1e5) / 1e3:.3f} %"


def _num(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return format(value, fmt)


_ROW_KEYS = ["adapter", "variant", *CASE_SIZE, "case_id", "environment"]


def _ranked_groups(summary: pd.DataFrame) -> list[tuple[tuple[Any, ...], pd.DataFrame]]:
    """The summary's (adapter, variant, device, case) groups, case by case in the run's order
    and, within a case, fastest first: ok libraries by median step time, then the rows that
    did not run or failed, then the probes (``null``, ``floor``)."""
    if summary.empty:
        return []
    summary = with_added_columns(summary)
    cases = {c: i for i, c in enumerate(dict.fromkeys(summary["case_id"]))}
    keyed: list[tuple[tuple[int, int, int, float], tuple[Any, ...], pd.DataFrame]] = []
    for key, group in summary.groupby(_ROW_KEYS, sort=False, dropna=False):
        first = group.iloc[0]
        step = group[(group["phase"] == "step") & (group["metric"] == "time_s")]
        median = float(step["median"].iloc[0]) if not step.empty else math.nan
        order = (cases[first["case_id"]], int(str(first["adapter"]) in PROBE_ADAPTERS),
                 int(first["status"] != "ok"), median if math.isfinite(median) else math.inf)
        keyed.append((order, key, group))
    keyed.sort(key=lambda item: item[0])  # stable: ties keep the run's order
    return [(key, group) for _, key, group in keyed]


def case_rows(summary: pd.DataFrame) -> list[tuple[str, ...]]:
    """One display row per (adapter, variant, device, case), case by case, fastest first
    (:func:`_ranked_groups`).

    Times are medians in milliseconds with IQR/median as ±%; the note column carries the
    message of a non-ok case or the noise warning of an ok one.
    """
    rows: list[tuple[str, ...]] = []
    shown = _shown(summary)
    for _, group in _ranked_groups(summary):
        first = group.iloc[0]
        # a library environment is part of the adapter's name: snntorch@0.9.4
        adapter = adapter_label(str(first["adapter"]), "", str(first["environment"]))
        variant, device, dtype = first["variant"], first["device"], first["dtype"]
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
        note = "; ".join(_notes(group))
        rows.append((
            str(adapter), str(variant), str(device), _with_precision(str(dtype), first),
            *(_WORKLOAD.cell_text(first.get(column, "")) for column, _ in shown),
            str(first["status"]), cells["forward"], cells["backward"],
            cells["step"], mem_text, floor, spike_match_text(float(first["spike_match"])),
            _num(float(first["grad_cosine"]), ".6f"), note,
        ))
    return rows


def case_table(summary: pd.DataFrame) -> Table:
    """:func:`case_rows` under :func:`headers`, as a table an exporter draws."""
    return Table(list(headers(summary)), [list(r) for r in case_rows(summary)])


def _notes(group: pd.DataFrame) -> list[str]:
    """The notes of one row of :func:`case_rows`: the case's message, then for an ok case
    whether it was noisy, throttled or timed on a busy machine; a phase measured below its
    device's floor first."""
    first = group.iloc[0]
    times = group[group["metric"] == "time_s"]
    # warnings are "; "-joined: the throttle warning gets a note of its own
    parts = [p for w in group["warning"] if w for p in str(w).split("; ")]
    noisy = any(not p.startswith("throttled:") for p in parts)
    throttled = any(p.startswith("throttled:") for p in parts)
    notes = [str(first["message"])] if first["message"] else []
    if first["status"] == "ok":
        notes += [text for flag, text in ((noisy, NOISY_NOTE), (throttled, THROTTLED_NOTE))
                  if flag]
    if "impossible" in times.columns:
        flagged = [str(r["phase"]) for _, r in times.iterrows() if bool(r["impossible"])]
        if flagged:
            notes.insert(0, f"impossible ({', '.join(flagged)}): {IMPOSSIBLE_NOTE}")
    busy = float(first["busy_cores"])
    if first["status"] == "ok" and busy >= BUSY_CORES:
        notes.append(BUSY_NOTE.format(busy))
    return notes


def typed_rows(summary: pd.DataFrame) -> list[dict[str, Any]]:
    """One record per (adapter, variant, device, case) in :func:`case_rows`' order, typed for
    ``snnbench show --format json``: numbers as numbers (None where absent), units in the
    field names (``step_ms_median``, ``step_peak_mem_mib``), flags as booleans. The schema
    is ``snnbench/schemas/show.schema.json``."""
    out: list[dict[str, Any]] = []
    for _, group in _ranked_groups(summary):
        first = group.iloc[0]
        adapter, variant, environment = first["adapter"], first["variant"], first["environment"]
        case_id, device, dtype = first["case_id"], first["device"], first["dtype"]
        record: dict[str, Any] = {
            "label": adapter_label(str(adapter), str(variant), str(environment)),
            "adapter": str(adapter), "variant": str(variant),
            "environment": str(environment), "library": str(first["library"]),
            "library_version": str(first["library_version"]),
            "probe": str(adapter) in PROBE_ADAPTERS,
            "case_id": str(case_id), "case": case_text(first),
            "device": str(device), "dtype": str(dtype),
            "matmul_precision": str(first.get("matmul_precision", "") or "") or "strict",
            # the network, as the workload types it (show.schema.json names its fields)
            **row_workload_class(first).typed_params(first),
            "status": str(first["status"]), "message": str(first["message"]),
            "replicates": json_int(first["replicates"]),
        }
        times = group[group["metric"] == "time_s"]
        by_phase = {str(r["phase"]): r for _, r in times.iterrows()}
        for phase in TIMED_PHASES:
            row = by_phase.get(phase)
            for stat in ("median", "iqr", "ci99_low", "ci99_high"):
                value = None if row is None else json_float(row[stat])
                record[f"{phase}_ms_{stat}"] = None if value is None else value * 1e3
            record[f"{phase}_samples"] = None if row is None else json_int(row["n_samples"])
        mem = group[(group["metric"] == "peak_mem_bytes") & (group["phase"] == "step")]
        mem_bytes = json_float(mem["median"].iloc[0]) if not mem.empty else None
        record["step_peak_mem_mib"] = None if mem_bytes is None else mem_bytes / 2**20
        record["step_floor_ratio"] = (json_float(by_phase["step"]["floor_ratio"])
                                      if "step" in by_phase else None)
        record["spike_match_fraction"] = json_float(first["spike_match"])
        record["grad_cosine"] = json_float(first["grad_cosine"])
        record["busy_cores"] = json_float(first["busy_cores"])
        record["notes"] = _notes(group)
        out.append(record)
    return out


def _with_precision(dtype: str, row: Any) -> str:
    """The dtype cell, with the matmul precision when it is not plain (``float32 amp-bf16``)."""
    precision = str(row.get("matmul_precision", "") or "")
    return dtype if precision in ("", "strict") else f"{dtype} {precision}"


_PHASE_ORDER = {p: i for i, p in enumerate(("forward", "backward", "step", "setup", "case", ""))}


def _ratio(value: float) -> str:
    return f"{value:.2f}×" if math.isfinite(value) else "—"


def reading_order(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in reading order: group, size (neurons), adapter (floor last), variant, phase,
    metric."""
    if frame.empty:
        return frame
    keyed = frame.assign(
        _floor=(frame["adapter"] == FLOOR).astype(int),
        _phase=frame["phase"].map(_PHASE_ORDER).fillna(len(_PHASE_ORDER)),
    )
    order = [*GROUP_COLUMNS, rows_workload(frame).size_param, "_floor", "adapter", "environment",
             "variant", "_phase", "metric"]
    return keyed.sort_values(order, kind="stable").drop(columns=["_floor", "_phase"])


def summary_table(
    run: Run, *, phases: Sequence[str] = TIMED_PHASES, metric: str = "time_s"
) -> Table:
    """Median time (with IQR) per adapter, variant, case and timed phase, plus non-ok cases.

    Columns: adapter, variant, case, phase, median, IQR (q1–q3 width), IQR/median, samples,
    × floor (median / the floor's step time), status, note (the status message for a failed or
    skipped case, else the statistics warning). A non-ok case is one row with "—" statistics.
    A run with replicates (``--replicates``) adds "between / within": the spread of the
    replicates' medians and the typical spread inside one process, both over the median.
    """
    frame = run.summary
    replicated = bool((pd.to_numeric(frame["replicates"], errors="coerce") > 1).any())
    timed = (frame["metric"] == metric) & frame["phase"].isin(list(phases))
    rows_out: list[list[str]] = []
    for _, row in reading_order(frame[timed | (frame["status"] != "ok")]).iterrows():
        med, iqr = float(row["median"]), float(row["iqr"])
        rel = f"{100 * iqr / med:.1f}%" if math.isfinite(iqr) and med > 0 else "—"
        samples = int(row["n_samples"]) if math.isfinite(float(row["n_samples"])) else 0
        # an ok case may carry a message too (timed despite a mismatch, --allow-mismatch)
        note = "; ".join(t for t in (str(row["message"]), str(row["warning"])) if t)
        floor = float(row["floor_ratio"]) if row["phase"] == "step" else math.nan
        rows_out.append(
            [
                adapter_label(str(row["adapter"]), "", str(row["environment"])),
                str(row["variant"]),
                case_text(row),
                str(row["phase"]) or "—",
                format_value(med, metric),
                format_value(iqr, metric),
                rel,
                str(samples) if samples else "—",
                _ratio(floor),
                *([_spreads(row)] if replicated else []),
                str(row["status"]),
                note,
            ]
        )
    headers = ["adapter", "variant", "case", "phase", "median", "IQR", "IQR/med", "samples",
               "× floor", *(["between / within"] if replicated else []), "status", "note"]
    return Table(headers, rows_out)


def _spreads(row: pd.Series) -> str:
    """``12% / 3%`` (between replicates / within one), "—" where unknown."""
    between, within = float(row["replicate_spread"]), float(row["within_spread"])
    if not math.isfinite(between):
        return "—"
    inside = f"{within:.0%}" if math.isfinite(within) else "—"
    return f"{between:.0%} / {inside} ({int(row['replicates'])}×)"


def format_table(run: Run, fmt: Literal["md", "text"] = "text") -> str:
    """:func:`summary_table` rendered as Markdown (``md``) or aligned plain text (``text``)."""
    return render(summary_table(run), fmt)

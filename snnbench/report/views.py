"""Table models of the CLI's views of results: ``show`` and ``verify``
(``list`` and ``env``: :mod:`snnbench.report.facts`).

Each function turns data the library produced into :class:`snnbench.render.Table` or
:class:`~snnbench.render.Document` objects; the CLI only picks the back-end that prints them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from snnbench.records.contract import CaseRecord, adapter_label
from snnbench.records.metrics import format_seconds
from snnbench.records.schema import TIMED_PHASES
from snnbench.render import Document, Footnotes, Table, count_groups
from snnbench.report.ranking import CONFIDENCE, CaseRanking
from snnbench.report.tables import NOISE_HINT, NOISY_NOTE, spike_match_text
from snnbench.workload import DEFAULT_KIND, Workload, workload_class

#: statuses of cases that did not run (for a reason, not a failure): listed apart, grouped
NOT_RUN: tuple[str, ...] = ("skipped", "unavailable")

def verify_headers(kind: type[Workload] | None = None) -> tuple[str, ...]:
    """The columns of ``verify``'s table for cases of ``kind`` (default: the default kind):
    the case's columns are the workload's (:attr:`~Workload.verify_columns`); a column
    holding one value on every row is shown once, in the table's title."""
    cls = kind or workload_class(DEFAULT_KIND)
    return ("adapter", "var", *(header for _, header in cls.verify_columns), "device",
            "exact", "status", "spikes", "1st diff", "cos dW", "rel err dW", "cos db", "note")


#: verify's columns for the default kind's cases
VERIFY_HEADERS: tuple[str, ...] = verify_headers()


def _name(row: Sequence[str]) -> str:
    """``adapter`` or ``adapter:variant`` of a display row (adapter, variant first)."""
    return row[0] if row[1] == "default" else f"{row[0]}:{row[1]}"


def not_run_lines(rows: Sequence[Sequence[str]], status_col: int, heading: str) -> list[str]:
    """Rows that did not run, grouped by adapter, status and reason (the row's last cell):
    ``heading (N cases):`` then ``  name [status ×count]: reason`` per group."""
    skipped = [r for r in rows if r[status_col] in NOT_RUN]
    if not skipped:
        return []
    grouped = count_groups(skipped, lambda r: (_name(r), r[status_col], r[-1]))
    return [heading.format(len(skipped)),
            *(f"  {name} [{status} ×{count}]: {reason}"
              for (name, status, reason), count in grouped.items())]


#: the compact per-case view's columns after the adapter: (title, right-aligned)
_RUN_COLUMNS: tuple[str, ...] = ("status", "step ms", "×best", "fwd ms", "bwd ms", "MiB",
                                 "floor×", "spikes", "grad cos")
#: what each column means, said once in the table's lead (only for the columns shown)
_LEGEND: dict[str, str] = {
    "step ms": "times: median ms ±IQR/median",
    "fwd ms": "fwd, bwd: the forward and backward phases",
    "×best": "×best = step time / the fastest library's",
    "MiB": "MiB = peak memory of the step phase",
    "floor×": "floor× = step time / GEMM floor",
    "spikes": "spikes = share of spikes equal to the reference's",
}
#: what a probe measures, for the line that sets the probes apart
_PROBE_WORDS: dict[str, str] = {"floor": "the GEMM floor", "null": "the harness overhead"}


def _time_cell(record: dict[str, Any], phase: str) -> str:
    """``0.614 ±11%``: the median in ms and IQR/median; a space between, so that a narrow
    terminal wraps the cell there instead of cutting a number."""
    median, iqr = record[f"{phase}_ms_median"], record[f"{phase}_ms_iqr"]
    if median is None:
        return ""
    text = f"{median:.3g}"
    if iqr is not None and median > 0:
        text += f" ±{iqr / median:.0%}"
    return text


def _spikes(record: dict[str, Any]) -> str:
    value = record["spike_match_fraction"]
    return "" if value is None else spike_match_text(value)


def case_title(record: dict[str, Any]) -> str:
    """A case in words, as every table, plot and series names it
    (:func:`snnbench.records.schema.case_text`: the workload's label, with the network fields that
    vary in the run): ``cpu float32 n=128 B=16 T=100 L=1 zero · surrogate=atan``."""
    return str(record["case"])


def _run_cells(record: dict[str, Any], best: float | None) -> list[str]:
    """The cells of one library's row, for :data:`_RUN_COLUMNS` (``best``: the case's fastest
    median step time in ms)."""
    median = record["step_ms_median"]
    ratio = ("" if best is None or record["status"] != "ok" or not median
             else f"{median / best:.2f}" if median / best < 10 else f"{median / best:.3g}")
    mem, floor, cosine = (record[k] for k in ("step_peak_mem_mib", "step_floor_ratio",
                                               "grad_cosine"))
    return [str(record["status"]), _time_cell(record, "step"), ratio,
            _time_cell(record, "forward"), _time_cell(record, "backward"),
            "" if mem is None else f"{mem:.1f}", "" if floor is None else f"{floor:.2f}",
            _spikes(record), "" if cosine is None else f"{cosine:.6f}"]


def _probe_caption(probes: list[dict[str, Any]]) -> str:
    """``probes, not libraries: floor 0.362 ms (the GEMM floor) · null 40 µs (...)``."""
    parts = []
    for record in probes:
        median = record["step_ms_median"]
        if record["status"] != "ok" or median is None:
            parts.append(f"{record['label']} {record['status']}")
            continue
        words = _PROBE_WORDS.get(record["adapter"], "a probe")
        parts.append(f"{record['label']} {format_seconds(median / 1e3)} a step ({words})")
    return "probes, not libraries: " + " · ".join(parts) if parts else ""


def run_document(run_name: str, records: list[dict[str, Any]],
                 rankings: Sequence[CaseRanking] = (), *, verbose: bool = False,
                 skipped_hint: str = "") -> Document:
    """``snnbench show`` (and the end of ``snnbench run``): one compact table per case, its
    libraries fastest first and the probes set apart below it, the notes numbered below the
    tables, then who is fastest at each case and by how much (``rankings``), and the cases
    that did not run: counted in one line naming ``skipped_hint`` (the command that lists
    them), or with ``verbose`` listed, grouped by reason.

    ``records`` are :func:`snnbench.report.tables.typed_rows`, in their order.
    """
    notes = Footnotes()
    cases: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record["status"] not in NOT_RUN:
            cases.setdefault(record["case_id"], []).append(record)
    shown: set[str] = set()
    tables: list[Table] = []
    for case in cases.values():
        libraries = [r for r in case if not r["probe"]]
        probes = [r for r in case if r["probe"]]
        title = case_title(case[0])
        best = min((r["step_ms_median"] for r in libraries
                    if r["status"] == "ok" and r["step_ms_median"]), default=None)
        rows = [[r["label"], *_run_cells(r, best)] for r in libraries]
        marks = [notes.mark("; ".join(r["notes"])) for r in libraries]
        columns = list(_RUN_COLUMNS)
        # constant columns carry no information in an 80-column terminal: say it once instead
        drop = {c for i, c in enumerate(columns, start=1) if all(not row[i] for row in rows)}
        if not verbose:
            # the forward and backward phases are the step's detail (--verbose, or md/json)
            drop.update(("fwd ms", "bwd ms"))
        if all(r["status"] == "ok" for r in libraries):
            drop.add("status")
        if all(r["spike_match_fraction"] in (None, 1.0) for r in libraries):
            drop.add("spikes")
            if any(r["spike_match_fraction"] == 1.0 for r in libraries):
                title += " — every verified adapter's spikes match the reference"
        keep = [i for i, c in enumerate(columns, start=1) if c not in drop]
        headers = ["adapter", *(columns[i - 1] for i in keep)]
        if any(marks):
            headers.append("#")
        table = Table(headers, [], title=title,
                      justify={columns[i - 1]: "right" for i in keep if columns[i - 1] != "status"},
                      caption=_probe_caption(probes))
        for row, mark, record in zip(rows, marks, libraries, strict=True):
            table.add_row([row[0], *(row[i] for i in keep), *([mark] if any(marks) else [])],
                          style="" if record["status"] == "ok" else "red")
        shown.update(headers)
        tables.append(table)
    legend = "; ".join(text for column, text in _LEGEND.items() if column in shown)
    doc = Document(lead=[f"run {run_name}" + (f" — {legend}" if legend else "")], tables=tables)
    doc.footnotes = notes.notes
    if any(NOISY_NOTE in n for n in notes.notes):
        doc.tail.append(f"  {NOISE_HINT}")
    doc.tail += answer_lines(rankings)
    not_run = [r for r in records if r["status"] in NOT_RUN]
    if verbose or not skipped_hint:
        doc.tail += not_run_records(not_run, "not run ({} cases):")
    elif not_run:
        doc.tail.append(f"{len(not_run)} case{'' if len(not_run) == 1 else 's'} not run "
                        f"(skipped or unavailable): {skipped_hint} lists them")
    return doc


def answer_lines(rankings: Sequence[CaseRanking]) -> list[str]:
    """The run's answer, one line per comparison: who is fastest at each case and by how
    much, with the interval (``fused ran 4.7× [4.1, 5.2] faster than torch at n=256``)."""
    sentences = [s.sentence() for case in rankings for s in case.speedups]
    alone = [f"{case.ranked[0].label} was the only library timed at {case.case}"
             for case in rankings if len(case.ranked) == 1]
    if not sentences and not alone:
        return []
    return [f"fastest (median step time; {CONFIDENCE:.0%} intervals):",
            *(f"  {line}" for line in [*sentences, *alone])]


def not_run_records(records: Sequence[dict[str, Any]], heading: str) -> list[str]:
    """:func:`not_run_lines` for typed records (:func:`snnbench.report.tables.typed_rows`)."""
    if not records:
        return []
    grouped = count_groups(records, lambda r: (r["label"], r["status"], r["message"]))
    return [heading.format(len(records)),
            *(f"  {name} [{status} ×{count}]: {reason}"
              for (name, status, reason), count in grouped.items())]


def _quartiles(samples: Sequence[float]) -> tuple[float, float, float] | None:
    """(q1, median, q3) of the finite samples, as the summary computes them; None for none.
    (Not :func:`snnbench.store.stats.summarize`: its interval needs scipy, which a busy machine
    takes seconds to import, and this line is the first number a run prints.)"""
    values = np.asarray(samples, dtype=np.float64)
    values = values[np.isfinite(values)]
    if not values.size:
        return None
    q1, median, q3 = (float(q) for q in np.quantile(values, [0.25, 0.5, 0.75]))
    return q1, median, q3


def case_line(name: str, case: str, record: CaseRecord,
              verbose: bool = False) -> tuple[str, str]:
    """The line a run prints as a case finishes, and its colour: for an ok case its median
    step time and IQR/median (``torch n=128 …: step 6.41 ms ±2%``; with ``verbose`` the
    forward and backward phases too), else its status and why."""
    status = record.status
    if status != "ok":
        color = "yellow" if status in NOT_RUN else "red"
        return f"{name} {case}: {status} — {record.message[:160]}", color
    phases = {phase: _quartiles(record.samples.get(phase, {}).get("time_s", []))
              for phase in TIMED_PHASES}
    step = phases["step"]
    if step is None:
        return f"{name} {case}: ok", "green"
    q1, median, q3 = step
    text = f"{name} {case}: step {format_seconds(median)}"
    if median > 0:
        text += f" ±{(q3 - q1) / median:.0%}"
    if record.adapter in _PROBE_WORDS:
        text += f" ({_PROBE_WORDS[record.adapter]})"
    parts = [f"{short} {format_seconds(found[1])}"
             for phase, short in (("forward", "fwd"), ("backward", "bwd"))
             if (found := phases[phase]) is not None]
    if parts and verbose:
        text += f" ({', '.join(parts)})"
    return text, "green"


def verify_document(rows: list[tuple[str, ...]], precision: str,
                    headers: tuple[str, ...] = VERIFY_HEADERS,
                    ) -> tuple[Document, list[tuple[str, ...]]]:
    """``snnbench verify``: the checks that ran as one table (columns with one value on every
    row go to its title), notes below, the checks not made grouped underneath; and the rows
    of the checks that ran. ``rows`` are :func:`verify_rows`, under ``headers``
    (:func:`verify_headers` of their kind)."""
    status_col = headers.index("status")
    checked = [r for r in rows if r[status_col] not in NOT_RUN]
    # columns with one value on every row go to the title, so the table fits 80 columns
    keep = [i for i, h in enumerate(headers[:-1])
            if h in ("adapter", "status", "spikes", "cos dW")
            or len({r[i] for r in checked}) > 1 or (h == "1st diff" and checked
                                                   and checked[0][i] != "none")]
    # a column empty on every row (a graph check has no ``rel err dW`` or ``cos db``) says
    # nothing: not "rel err dW=" in the title
    fixed = [f"{headers[i]}={checked[0][i]}" for i in range(len(headers) - 1)
             if checked and i not in keep and headers[i] not in ("1st diff",)
             and checked[0][i] != ""]
    shown = [f"precision={precision}"] if precision != "strict" else []
    title = "equivalence with the reference: " + " ".join([*fixed, *shown])
    # the notes' column only when a check has a note: an empty "#" column says nothing
    marked = any(row[-1] for row in checked)
    table = Table([*(headers[i] for i in keep), *(["#"] if marked else [])], [],
                  title=title)
    notes = Footnotes()
    for row in checked:
        table.add_row([*(row[i] for i in keep), *([notes.mark(row[-1])] if marked else [])],
                      style="red" if row[status_col] != "ok" else "")
    doc = Document(tables=[table] if checked else [], footnotes=notes.notes)
    doc.tail = not_run_lines(rows, status_col, "not checked ({} checks):")
    return doc, checked


def _fmt(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return format(value, fmt)


def verify_rows(records: list[CaseRecord]) -> list[tuple[str, ...]]:
    """Display rows for :func:`verify_headers` of the records' kind."""
    rows: list[tuple[str, ...]] = []
    for r in records:
        eq = r.equivalence or {}
        declared = ""
        if r.exact_dynamics is not None:
            # what the adapter claims: both exact, exact spikes only, or neither
            if r.exact_dynamics and r.exact_gradient:
                declared = "both"
            else:
                declared = "spikes" if r.exact_dynamics else "neither"
        rows.append((
            adapter_label(r.adapter, "", r.environment.name), r.variant,
            *r.workload.verify_cells(), r.device, declared, r.status,
            spike_match_text(float(eq["spike_match"])) if eq else "",
            "" if not eq else ("none" if eq.get("first_diff_step") is None
                               else str(eq["first_diff_step"])),
            _fmt(eq.get("grad_cosine"), ".6f"), _fmt(eq.get("grad_max_rel_err"), ".1e"),
            _fmt(eq.get("bias_grad_cosine"), ".6f"), r.message,
        ))
    return rows


#: the version of the JSON document ``snnbench show --format json`` prints (and ``run
#: --export-json`` writes); its schema ships as ``snnbench/schemas/show.schema.json``
SHOW_SCHEMA_VERSION = 1


def show_json(run_id: str, records: list[dict[str, Any]],
              rankings: Sequence[CaseRanking]) -> dict[str, Any]:
    """The typed JSON document of a run: its rows (:func:`snnbench.report.tables.typed_rows`) and
    who is fastest at each case, by how much (the ratios of :mod:`snnbench.report.ranking`)."""
    return {
        "schema_version": SHOW_SCHEMA_VERSION,
        "run_id": run_id,
        "rows": records,
        "fastest": [
            {"case": case.case, "case_id": case.case_id,
             "ranking": [entry.label for entry in case.ranked],
             "speedups": [s.to_dict() for s in case.speedups]}
            for case in rankings
        ],
    }

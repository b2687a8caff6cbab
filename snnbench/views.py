"""Table models of the CLI's own views: ``list``, ``env``, ``show`` and ``verify``.

Each function turns data the library produced into :class:`snnbench.render.Table` or
:class:`~snnbench.render.Document` objects; the CLI only picks the back-end that prints them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from snnbench.contract import CaseRecord, adapter_label
from snnbench.render import Document, Footnotes, Table, count_groups

#: statuses of cases that did not run (for a reason, not a failure): listed apart, grouped
NOT_RUN: tuple[str, ...] = ("skipped", "unavailable")

#: a column holding one value on every row is shown once, in the table's title
VERIFY_HEADERS: tuple[str, ...] = (
    "adapter", "var", "reset", "detach", "n", "T", "B", "L", "dtype", "surrogate", "slope",
    "bias", "input", "device", "exact", "status", "spikes", "1st diff", "cos dW", "rel err dW",
    "cos db", "note",
)


def adapters_table(results: list[dict[str, Any]], version: str) -> Table:
    """``snnbench list``: adapter, variants, library, version and status, one row a probe."""
    table = Table(["adapter", "variants", "library", "version", "status"], [],
                  title=f"snnbench {version}: adapters")
    for r in results:
        status = ("available" if r.get("available")
                  else f"unavailable: {r.get('reason', '')}")
        not_here = r.get("variants_unavailable") or {}
        if r.get("available") and not_here:
            status += "; not here: " + "; ".join(f"{v}: {why}" for v, why in not_here.items())
        variants = ", ".join(str(v) for v in r.get("variants") or [])
        table.add_row([str(r["name"]), variants, str(r.get("library") or ""),
                       str(r.get("version") or ""), status],
                      style="" if r.get("available") else "red")
    return table


def environment_facts_table(data: dict[str, Any]) -> Table:
    """``snnbench env``: one row per fact of :func:`snnbench.environment.collect_environment`."""
    table = Table(["key", "value"], [], title="environment", show_header=False)
    for key, value in data.items():
        if key == "packages":
            for pkg, ver in value.items():
                table.add_row([f"package {pkg}", ver or "not installed"])
        elif key == "gpus":
            if not value:
                table.add_row(["gpu", "absent (no NVIDIA driver/GPU seen by NVML)"])
            for gpu in value:
                table.add_row([f"gpu {gpu['index']}",
                               f"{gpu['name']}, driver {gpu['driver']}, CUDA {gpu['cuda']}, "
                               f"{gpu['memory_bytes'] / 2**30:.1f} GiB"])
        else:
            table.add_row([key, json.dumps(value) if isinstance(value, dict) else str(value)])
    return table


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


#: the compact per-case view's columns (after the adapter), and their short titles
_RUN_COLUMNS: tuple[str, ...] = ("status", "forward ms", "backward ms", "step ms",
                                 "step peak MiB", "floor×", "spike match", "grad cos")
_SHORT = {"forward ms": "fwd ms", "backward ms": "bwd ms", "step peak MiB": "MiB",
          "spike match": "spikes"}


def run_document(run_name: str, rows: list[tuple[str, ...]]) -> Document:
    """``snnbench show`` (and the end of ``snnbench run``): one compact table per case, the
    notes numbered below, cases not run grouped by reason underneath.

    ``rows`` are :func:`snnbench.tables.case_rows` for :data:`snnbench.tables.HEADERS`.
    """
    # imported here: `list` draws its table with this module, and the tables' module
    # imports pandas and scipy (seconds at start-up)
    from snnbench.tables import HEADERS, NOISE_HINT, NOISY_NOTE

    col = {name: HEADERS.index(name) for name in HEADERS}
    notes = Footnotes()
    cases: dict[str, list[tuple[str, ...]]] = {}
    for row in rows:
        if row[col["status"]] in NOT_RUN:
            continue
        label = (f"n={row[col['n']]} B={row[col['B']]} T={row[col['T']]} {row[col['dtype']]} "
                 f"reset={row[col['reset']]} {row[col['device']]}")
        # the rest of the network (runs before these columns leave them blank): two cases of
        # one size that differ only here must not read as one
        if row[col["surrogate"]]:
            label += (f" {row[col['surrogate']]}(slope {row[col['slope']]}) "
                      f"detach_reset={row[col['detach reset']]} bias={row[col['bias']]} "
                      f"input={row[col['input']]}")
        cases.setdefault(label, []).append(row)
    doc = Document(lead=[f"run {run_name} — times: median ms ±IQR/median; peak MiB of the step "
                         "phase; floor× = step time / GEMM floor"])
    for label, case in cases.items():
        title = label
        columns = _RUN_COLUMNS
        # constant columns carry no information in an 80-column terminal: say it once instead
        if all(r[col["status"]] == "ok" for r in case):
            columns = tuple(c for c in columns if c != "status")
        if all(r[col["spike match"]] in ("", "1") for r in case):
            columns = tuple(c for c in columns if c != "spike match")
            title = f"{label} — every verified adapter's spikes match the reference"
        if all(r[col["floor×"]] == "" for r in case):
            columns = tuple(c for c in columns if c != "floor×")
        # the gradient check stays visible: an approximate gradient is the row's caveat
        if all(r[col["grad cos"]] == "" for r in case):
            columns = tuple(c for c in columns if c != "grad cos")
        headers = ["adapter", *(_SHORT.get(c, c) for c in columns), "#"]
        table = Table(headers, [], title=title,
                      justify={_SHORT.get(c, c): "right" for c in columns if c != "status"})
        for row in case:
            table.add_row([_name(row), *(row[col[c]] for c in columns), notes.mark(row[-1])],
                          style="" if row[col["status"]] == "ok" else "red")
        doc.tables.append(table)
    doc.footnotes = notes.notes
    if any(NOISY_NOTE in n for n in notes.notes):
        doc.tail.append(f"  {NOISE_HINT}")
    doc.tail += not_run_lines(rows, col["status"], "not run ({} cases):")
    return doc


def verify_document(rows: list[tuple[str, ...]],
                    precision: str) -> tuple[Document, list[tuple[str, ...]]]:
    """``snnbench verify``: the checks that ran as one table (columns with one value on every
    row go to its title), notes below, the checks not made grouped underneath; and the rows
    of the checks that ran. ``rows`` are :func:`verify_rows`."""
    status_col = VERIFY_HEADERS.index("status")
    checked = [r for r in rows if r[status_col] not in NOT_RUN]
    # columns with one value on every row go to the title, so the table fits 80 columns
    keep = [i for i, h in enumerate(VERIFY_HEADERS[:-1])
            if h in ("adapter", "status", "spikes", "cos dW")
            or len({r[i] for r in checked}) > 1 or (h == "1st diff" and checked
                                                   and checked[0][i] != "none")]
    fixed = [f"{VERIFY_HEADERS[i]}={checked[0][i]}" for i in range(len(VERIFY_HEADERS) - 1)
             if checked and i not in keep and VERIFY_HEADERS[i] not in ("1st diff",)]
    shown = [f"precision={precision}"] if precision != "strict" else []
    title = "equivalence with the reference: " + " ".join([*fixed, *shown])
    table = Table([*(VERIFY_HEADERS[i] for i in keep), "#"], [], title=title)
    notes = Footnotes()
    for row in checked:
        table.add_row([*(row[i] for i in keep), notes.mark(row[-1])],
                      style="red" if row[status_col] != "ok" else "")
    doc = Document(tables=[table] if checked else [], footnotes=notes.notes)
    doc.tail = not_run_lines(rows, status_col, "not checked ({} checks):")
    return doc, checked


def _fmt(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return format(value, fmt)


def verify_rows(records: list[CaseRecord]) -> list[tuple[str, ...]]:
    """Display rows for :data:`VERIFY_HEADERS`."""
    from snnbench.tables import spike_match_text

    rows: list[tuple[str, ...]] = []
    for r in records:
        spec = r.spec
        eq = r.equivalence or {}
        declared = ""
        if r.exact_dynamics is not None:
            # what the adapter claims: both exact, exact spikes only, or neither
            if r.exact_dynamics and r.exact_gradient:
                declared = "both"
            else:
                declared = "spikes" if r.exact_dynamics else "neither"
        rows.append((
            adapter_label(r.adapter, "", r.environment.name), r.variant, spec.reset,
            "yes" if spec.detach_reset else "no", str(spec.neurons), str(spec.time_steps),
            str(spec.batch_size), str(spec.layers), spec.dtype, spec.surrogate,
            f"{spec.surrogate_slope:g}", "yes" if spec.bias else "no", spec.input_kind, r.device,
            declared, r.status,
            spike_match_text(float(eq["spike_match"])) if eq else "",
            "" if not eq else ("none" if eq.get("first_diff_step") is None
                               else str(eq["first_diff_step"])),
            _fmt(eq.get("grad_cosine"), ".6f"), _fmt(eq.get("grad_max_rel_err"), ".1e"),
            _fmt(eq.get("bias_grad_cosine"), ".6f"), r.message,
        ))
    return rows

"""The building blocks of a :class:`~snnbench.gate.compare.Comparison` as it reads: its pairs as
:class:`snnbench.render.Table` models, its counts, rule and geometric-mean lines, and the
terminal's rich view.

The verdict and every pair's mark are computed in :mod:`snnbench.gate.compare`; each output format
draws them from these blocks (:mod:`snnbench.report.export`: Markdown, JSON, the terminal).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.text import Text

from snnbench.gate.verdict import MARK_ORDER, Comparison, Pair
from snnbench.records import schema
from snnbench.records.metrics import (
    format_bytes,
    format_seconds,
    format_value,
    metric as metric_info,
)
from snnbench.render import Footnotes, Table
from snnbench.render.terminal import Look, to_rich as table_to_rich
from snnbench.workload import row_workload_class

#: marks left out of the terminal view unless asked, and folded away in Markdown
QUIET_MARKS: frozenset[str] = frozenset({"same", "not_run", "info"})

def _fmt(value: float, metric: str) -> str:
    return format_value(value, metric) if metric else "—"


def _sides(p: Pair) -> tuple[str, str]:
    """The baseline and candidate cells: the metric's values, or the case's statuses."""
    if not p.metric:
        return p.baseline_status or "—", p.candidate_status or "—"
    return _fmt(p.baseline, p.metric), _fmt(p.candidate, p.metric)


def _by_mark(pairs: Iterable[Pair]) -> list[Pair]:
    """Pairs in :data:`~snnbench.gate.verdict.MARK_ORDER` (worst first), stable within a mark."""
    order = {m: i for i, m in enumerate(MARK_ORDER)}
    return sorted(pairs, key=lambda p: order[p.mark])


def _processes_text(p: Pair) -> str:
    if not (p.baseline_processes and p.candidate_processes):
        return ""
    return f"{p.baseline_processes}+{p.candidate_processes} proc"


def _test_text(p: Pair) -> str:
    if p.test in ("student", "bootstrap"):
        return f"{p.interval_text} ({_processes_text(p)})"
    if p.test == "paired":
        return f"{p.interval_text} ({p.baseline_processes} pairs)"
    if p.test == "paired-min":
        return f"{p.interval_text} ({p.baseline_processes} pairs, fastest)"
    if p.test == "identical":
        return f"{p.interval_text} (identical samples)"
    if p.test == "ci99":
        return f"{p.interval_text} (99% CIs)"
    if p.test == "threshold":
        return "threshold"
    return p.test or ""


def _case_fields(pairs: Iterable[Pair] = ()) -> list[str]:
    """The columns a case is said in, in order: the label parts of its workloads (each kind
    of the pairs, in the order met; Linear+LIF for none), then the network fields either side
    varies (``network``: amp-bf16, surrogate=atan...; "" when none does)."""
    classes = list(dict.fromkeys(row_workload_class(p.case) for p in pairs))
    fields: dict[str, None] = {}
    for cls in classes or [row_workload_class({})]:
        fields.update(dict.fromkeys(column for column, _ in cls.label_parts))
    return [*fields, "network"]


def _varying(pairs: list[Pair]) -> list[str]:
    """Case fields (adapter and variant aside) that differ between ``pairs``; the size
    (n) always."""
    size = row_workload_class(pairs[0].case if pairs else {}).size_param
    return [f for f in _case_fields(pairs)
            if f == size or len({p.case.get(f, "") for p in pairs}) > 1]


def _case_of(p: Pair, fields: Iterable[str]) -> str:
    wanted = set(fields)
    text = row_workload_class(p.case).row_label(p.case, wanted)
    network = p.case.get("network", "") if "network" in wanted else ""
    return f"{text} · {network}" if network else text


def pairs_table(pairs: Iterable[Pair], fields: Iterable[str] | None = None) -> Table:
    """Pairs as a :class:`~snnbench.render.Table` (mark, adapter, case, what, medians, ratio).

    ``fields`` limits the case column to those case fields (default: all of them).
    """
    pairs = list(pairs)
    shown = list(fields) if fields is not None else _case_fields(pairs)
    rows = []
    for p in _by_mark(pairs):
        what = f"{p.phase}/{p.metric}" if p.metric else "case status"
        before, after = _sides(p)
        ratio = f"{p.ratio:.3f}×" if math.isfinite(p.ratio) else ""
        rows.append([p.mark.replace("_", " "), p.label, _case_of(p, shown), what, before, after,
                     ratio, _test_text(p), p.note])
    return Table(["mark", "adapter", "case", "what", "baseline", "candidate", "ratio",
                  "interval", "note"], rows)


def counts_text(cmp: Comparison) -> str:
    return ", ".join(f"{m.replace('_', ' ')}: {n}" for m, n in cmp.counts().items())


def geomean_line(cmp: Comparison) -> str:
    total = cmp.geomean_ratio()
    if not math.isfinite(total):
        return "Geometric mean time ratio: no comparable time pairs."
    per_phase = ", ".join(
        f"{ph} {cmp.geomean_ratio(ph):.3f}×"
        for ph in schema.TIMED_PHASES
        if math.isfinite(cmp.geomean_ratio(ph))
    )
    return (f"Geometric mean time ratio (candidate/baseline) over {len(cmp.time_pairs())} "
            f"comparable time pairs: {total:.3f}× ({per_phase})")


def _floors_text(floors: dict[str, float], fmt: Callable[[float], str],
                 devices: list[str]) -> str:
    return ", ".join(f"{fmt(floors.get(d, floors.get('cpu', 0.0)))} ({d})"
                     for d in devices)


def rule_line(cmp: Comparison) -> str:
    devices = sorted({str(p.case["device"]) for p in cmp.pairs}) or ["cpu"]
    floors = (f", last-resort floor {_floors_text(cmp.time_floors, format_seconds, devices)}"
              if any(cmp.time_floors.get(d, 0.0) > 0 for d in devices) else "")
    spread = (f"; stated process spread ±{cmp.process_spread:.0%}"
              if cmp.process_spread is not None else "")
    noise = (f"; a noisy run: unpaired changes within its noise ({cmp.noise_spread:.0%}) are "
             "at most inconclusive" if cmp.noise_spread is not None else "")
    return (f"Rule: time = {100 * (1 - cmp.alpha):g} % interval of the median ratio "
            "(Student's t over the replicate-by-replicate ratios within one run, of the "
            "processes' medians or, when those leave it open, their fastest samples, each at "
            "half the error rate; else over "
            "the processes' medians; with one process a side a hierarchical bootstrap of its "
            "samples, which alone never fails or improves; seed "
            f"{cmp.seed}): fail above {cmp.factor:g}, inconclusive across it, pass below"
            f"{floors}{spread}{noise}; memory regression = peak > "
            f"baseline × {1 + cmp.mem_threshold:g} and by ≥ "
            f"{_floors_text(cmp.mem_floors, format_bytes, devices)}.{_count_rule(cmp)}")


def _count_rule(cmp: Comparison) -> str:
    """The count rule and the gated metrics, where they matter ("" otherwise)."""
    text = ""
    if any(p.test == "count" for p in cmp.pairs):
        text += (f" Instructions: fail above {cmp.count_factor:g}× (deterministic counts, "
                 "no interval).")
    if cmp.gated_metrics is not None:
        text += f" Gated metrics: {', '.join(cmp.gated_metrics)} (the others are info)."
    return text


_SHORT_PHASE = {"forward": "fwd", "backward": "bwd"}
_SHORT_TEST = {"threshold": "thr", "none": "n/a", "count": "count"}
_STYLES = {
    "impossible": "bold red", "new_failure": "bold red", "regression": "bold red",
    "fixed": "green", "improved": "green",
    "inconclusive": "yellow", "not_comparable": "magenta", "added": "cyan", "removed": "cyan",
    "still_failing": "red", "same": "dim", "not_run": "dim", "info": "dim",
}


def terminal_pairs_table(pairs: Iterable[Pair], fields: Iterable[str]) -> Table:
    """The terminal's compact pairs table: short names, two-decimal ratios, notes numbered
    as footnotes; ``fields`` are the case fields shown in the case column."""
    table = Table(["mark", "adapter", "case", "what", "baseline", "candidate", "×", "interval",
                   "#"], [])
    notes = Footnotes()
    for p in _by_mark(pairs):
        if p.metric:
            what = f"{_SHORT_PHASE.get(p.phase, p.phase)} {metric_info(p.metric).short_label}"
        else:
            what = "status"
        before, after = _sides(p)
        test = p.interval_text or _SHORT_TEST.get(p.test, "")
        table.add_row([p.mark.replace("_", " "), p.label, _case_of(p, fields), what, before,
                       after, f"{p.ratio:.2f}" if math.isfinite(p.ratio) else "", test,
                       notes.mark(p.note)], style=_STYLES.get(p.mark, ""))
    table.footnotes = notes.notes
    return table


#: columns that may go, in this order, when the table is wider than the terminal: the verdict
#: (mark, ratio, interval) and what it is about (adapter, case, what) always print whole
_DROPPABLE = ("baseline", "candidate")


class _PairsView:
    """The pairs table, fitted to the width it is printed at: whole as a table when it fits;
    else without the medians (:data:`_DROPPABLE`); else one block per pair whose lines wrap at
    spaces only. A mark, ratio, interval or case is never cut (rich would shorten any column
    of a table too wide to ``2.…``)."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def _rich(self, headers: list[str]) -> RenderableType:
        keep = [self.table.headers.index(h) for h in headers]
        model = Table(headers, [[row[i] for i in keep] for row in self.table.rows],
                           styles=self.table.styles)
        return table_to_rich(model, Look(compact=True, no_wrap=True, collapse_padding=True))

    def _blocks(self) -> RenderableType:
        col = {h: i for i, h in enumerate(self.table.headers)}
        lines: list[Text] = []
        for index, row in enumerate(self.table.rows):
            cell = {h: row[i] for h, i in col.items()}
            head = " ".join(v for v in (cell["mark"], cell["×"] and f"{cell['×']}×",
                                        cell["interval"], cell["#"] and f"[{cell['#']}]") if v)
            style = self.table.row_style(index)
            lines.append(Text(head, style=style))
            about = " ".join(v for v in (cell["adapter"], cell["case"], cell["what"]) if v)
            lines.append(Text(f"  {about}"))
            lines.append(Text(f"  {cell['baseline']} → {cell['candidate']}", style="dim"))
        return Group(*lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        headers = list(self.table.headers)
        for drop in (None, *_DROPPABLE):
            if drop is not None:
                headers.remove(drop)
            view = self._rich(headers)
            # measured unbounded: rich clamps a measurement to the width it is given
            natural = console.measure(view, options=options.update_width(1_000_000)).maximum
            if natural <= options.max_width:
                yield view
                return
        yield self._blocks()


def to_rich(cmp: Comparison, *, show_all: bool = False) -> RenderableType:
    """A rich renderable (verdict, warnings, table) for the terminal.

    Unchanged/informational pairs are left out unless ``show_all``.
    """
    parts: list[RenderableType] = []
    style = {"pass": "bold green", "fail": "bold red", "inconclusive": "bold yellow",
             "nothing comparable": "bold yellow"}[cmp.state]
    parts.append(Text(cmp.verdict, style=style))
    parts.append(Text(f"{cmp.sides_text} ({counts_text(cmp)})"))
    parts.append(Text(geomean_line(cmp)))
    parts.append(Text(rule_line(cmp), style="dim"))
    for w in cmp.warnings:
        parts.append(Text(f"warning: {w}", style="yellow"))
    shown = [p for p in cmp.pairs if show_all or p.mark not in QUIET_MARKS]
    if shown:
        # fields equal on every shown row go into one line above the table: narrow terminals
        varying = _varying(shown)
        constant = [f for f in _case_fields(shown) if f not in varying]
        if constant:
            parts.append(Text("cases: " + _case_of(shown[0], constant), style="dim"))
        table = terminal_pairs_table(shown, varying)
        parts.append(_PairsView(table))
        parts += [Text(line) for line in Footnotes.numbered(table.footnotes)]
    hidden = len(cmp.pairs) - len(shown)
    if hidden:
        parts.append(Text(f"{hidden} unchanged or informational pairs not shown", style="dim"))
    return Group(*parts)

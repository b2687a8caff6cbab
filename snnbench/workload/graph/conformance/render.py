"""``nir-check``'s result as text: a terminal table that fits 80 columns, a Markdown table,
or JSON (:meth:`ConformanceReport.to_dict`)."""

from __future__ import annotations

import json
import textwrap

from snnbench.workload.graph.conformance.result import ConformanceReport, LibraryCheck

#: the formats ``--format`` takes
FORMATS: tuple[str, ...] = ("terminal", "json", "markdown")
#: the terminal table's width
WIDTH = 80
_COLUMNS = (("library", 13), ("version", 8), ("result", 20))


def heading(report: ConformanceReport) -> list[str]:
    """What the check ran: the graph, the reference's choices and the versions."""
    versions = ", ".join(f"{k} {v}" for k, v in report.versions.items()) or "nir not found"
    return [f"nir-check {report.network}: reference at dt = {report.dt:g} s, "
            f"{report.discretisation}, reset {report.reset}",
            f"T = {report.time_steps}, B = {report.batch_size}, input N(0, "
            f"{report.input_std:g}²), seed {report.seed}; "
            f"{versions}"]


def _what(check: LibraryCheck) -> str:
    return check.summary() or "-"


def terminal(report: ConformanceReport, width: int = WIDTH) -> str:
    """The table, each line at most ``width`` characters (the last column wraps)."""
    lead = sum(w + 1 for _, w in _COLUMNS)
    rest = max(20, width - lead)
    lines = [textwrap.shorten(line, width, placeholder="…") for line in heading(report)]
    lines.append("")
    lines.append("".join(f"{name:<{w}} " for name, w in _COLUMNS) + "what was found")
    for check in report.checks:
        cells = (check.library, check.version or "-", check.verdict)
        first = "".join(f"{textwrap.shorten(c, w, placeholder='…'):<{w}} "
                        for c, (_, w) in zip(cells, _COLUMNS, strict=True))
        wrapped = textwrap.wrap(_what(check), rest, break_long_words=True) or ["-"]
        lines.append(first + wrapped[0])
        lines += [" " * lead + part for part in wrapped[1:]]
    return "\n".join(line.rstrip() for line in lines)


def markdown(report: ConformanceReport) -> str:
    """A Markdown table, with how each importer was called."""
    out = [f"`{report.network}`: " + "; ".join(heading(report)).split(": ", 1)[1], "",
           "| library | version | result | what was found | called as |",
           "|---|---|---|---|---|"]
    for check in report.checks:
        cells = (check.library, check.version or "-", check.verdict, _what(check),
                 f"`{check.called}`" if check.called else "")
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(out)


def as_json(report: ConformanceReport) -> str:
    """:meth:`ConformanceReport.to_dict` as indented JSON."""
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False)


def render(report: ConformanceReport, fmt: str) -> str:
    """``report`` in format ``fmt`` (:data:`FORMATS`)."""
    if fmt == "json":
        return as_json(report)
    if fmt == "markdown":
        return markdown(report)
    return terminal(report)

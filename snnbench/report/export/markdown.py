"""``md``: GitHub-flavoured Markdown, for a README, a PR comment or
``$GITHUB_STEP_SUMMARY``: a run's table (as a page of its own, with a heading and who is
fastest above it), a comparison's verdict and pairs, a report page linking its plots."""

from __future__ import annotations

from pathlib import Path

from snnbench.gate.compare_output import (
    QUIET_MARKS,
    counts_text,
    geomean_line,
    pairs_table,
    rule_line,
)
from snnbench.gate.verdict import Comparison
from snnbench.render import Table
from snnbench.render.formats import markdown
from snnbench.report.export.base import (
    PIVOT_NOTE,
    Block,
    Exporter,
    PageWriter,
    ReportPage,
    RunResult,
    draw_page,
)
from snnbench.report.ranking import rank_run
from snnbench.report.tables import case_table
from snnbench.report.views import answer_lines


class Markdown(Exporter):
    """Markdown text, tables as pipe tables."""

    name = "md"
    suffix = "md"

    def run(self, result: RunResult) -> str:
        run = result.run
        table = markdown(case_table(run.summary))
        if not result.page:
            return table + "\n"
        lines = answer_lines(rank_run(run))
        answer = "".join([f"{lines[0]}\n\n", *(f"- {line.strip()}\n" for line in lines[1:]),
                          "\n"]) if lines else ""
        return f"# snnbench run {run.run_id}\n\n{answer}{table}\n"

    def comparison(self, result: Comparison) -> str:
        return comparison_markdown(result) + "\n"

    def report(self, result: ReportPage) -> str:
        return report_markdown(result)


def comparison_markdown(cmp: Comparison) -> str:
    """Markdown for a PR comment or ``$GITHUB_STEP_SUMMARY``: verdict, warnings, the pairs
    that matter, and the unchanged ones folded in a ``<details>`` block."""
    icon = {"pass": "✅", "fail": "❌", "inconclusive": "❔", "nothing comparable": "⚠️"}[
        cmp.state]
    b_env, c_env = (f" (`{e}`)" for e in cmp.environments) if cmp.environments else ("", "")
    lines = [
        "## snnbench compare",
        "",
        f"{icon} **{cmp.verdict}**",
        "",
        f"Baseline `{cmp.baseline_run_id}`{b_env} → candidate `{cmp.candidate_run_id}`{c_env}. "
        + counts_text(cmp) + ".",
        "",
        geomean_line(cmp),
        "",
        rule_line(cmp),
        "",
    ]
    if cmp.warnings:
        lines += ["**Warnings**", ""] + [f"- {w}" for w in cmp.warnings] + [""]
    shown = [p for p in cmp.pairs if p.mark not in QUIET_MARKS]
    if shown:
        lines += [markdown(pairs_table(shown)), ""]
    rest = [p for p in cmp.pairs if p.mark in QUIET_MARKS]
    if rest:
        lines += [f"<details><summary>{len(rest)} unchanged or informational pairs</summary>",
                  "", markdown(pairs_table(rest)), "", "</details>", ""]
    return "\n".join(lines)


def report_markdown(page: ReportPage) -> str:
    """``report.md``: the report page, its plots linked relative to the page's folder."""
    writer = _MarkdownPage(page.out)
    draw_page(page, writer)
    return "\n".join(writer.parts)


class _MarkdownPage(PageWriter):
    def __init__(self, out: Path) -> None:
        self.out = out
        self.parts: list[str] = []

    def opening(self, page: ReportPage) -> None:
        self.parts += [f"# snnbench report: {page.run.run_id}", "",
                       *(f"> **{line}**\n" for line in page.alerts),
                       "## How far to trust this report", "",
                       *(f"- {'**' + line + '**' if bad else line}" for bad, line in page.trust),
                       "", f"Cases: {page.status_line}.", "",
                       *(f"{line}  " for line in page.overhead), ""]

    def block(self, block: Block) -> None:
        note = [block.note, ""] if block.note else []
        table = markdown(block.table) if block.table is not None else "None."
        self.parts += [f"## {block.title}", "", *note, table, ""]

    def paragraph(self, text: str) -> None:
        self.parts += [text, ""]

    def section(self, title: str, images: list[tuple[str, Path]], pivot: Table) -> None:
        self.parts += [f"## {title}", ""]
        if pivot.rows:
            self.parts += [PIVOT_NOTE, "", markdown(pivot), ""]
        for caption, path in images:
            self.parts += [f"![{caption}]({path.relative_to(self.out).as_posix()})", ""]

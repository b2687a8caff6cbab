"""``html``: a run's table as an HTML ``<table>``, and a report as one self-contained page
(its plots embedded as base64, its style inlined: it fetches nothing)."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from snnbench.render import Table
from snnbench.render.formats import html_page, html_table
from snnbench.report.export import base
from snnbench.report.tables import case_table


class Html(base.Exporter):
    """HTML: a table, or a whole page."""

    name = "html"
    suffix = "html"

    def run(self, result: base.RunResult) -> str:
        return html_table(case_table(result.run.summary)) + "\n"

    def report(self, result: base.ReportPage) -> str:
        return report_html(result)


def report_html(page: base.ReportPage) -> str:
    """``report.html``: the report page, self-contained."""
    writer = _HtmlPage()
    base.draw_page(page, writer)
    return html_page(f"snnbench report {page.run.run_id}", "".join(writer.body))


class _HtmlPage(base.PageWriter):
    def __init__(self) -> None:
        self.body: list[str] = []

    def opening(self, page: base.ReportPage) -> None:
        esc = html.escape
        trust = "".join(f'<li class="bad"><strong>{esc(line)}</strong></li>' if bad
                        else f"<li>{esc(line)}</li>" for bad, line in page.trust)
        self.body += [f"<h1>snnbench report: {esc(page.run.run_id)}</h1>",
                      *(f'<p class="bad"><strong>{esc(line)}</strong></p>'
                        for line in page.alerts),
                      f"<h2>How far to trust this report</h2><ul>{trust}</ul>",
                      f"<p>Cases: {esc(page.status_line)}.</p>",
                      *(f"<p>{esc(line)}</p>" for line in page.overhead)]

    def block(self, block: base.Block) -> None:
        attrs = f' id="{block.anchor}"' if block.anchor else ""
        attrs += ' class="bad"' if block.bad else ""
        note = f"<p>{html.escape(block.note)}</p>" if block.note else ""
        table = html_table(block.table) if block.table is not None else "<p>None.</p>"
        self.body.append(f"<h2{attrs}>{html.escape(block.title)}</h2>{note}{table}")

    def paragraph(self, text: str) -> None:
        self.body.append(f"<p>{html.escape(text)}</p>")

    def section(self, title: str, images: list[tuple[str, Path]], pivot: Table) -> None:
        esc = html.escape
        self.body.append(f"<h2>{esc(title)}</h2>")
        if pivot.rows:
            self.body += [f"<p>{esc(base.PIVOT_NOTE)}</p>", html_table(pivot)]
        for caption, path in images:
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            self.body.append(f'<figure><img alt="{esc(caption)}" '
                             f'src="data:image/png;base64,{data}">'
                             f"<figcaption>{esc(caption)}</figcaption></figure>")

"""``html``: a run's table as an HTML ``<table>``, and a report as one self-contained page
(its plots embedded as base64, its style inlined: it fetches nothing)."""

from __future__ import annotations

import base64
import html

from snnbench.render.formats import html_page, html_table
from snnbench.report.export.base import (
    PIVOT_NOTE,
    Block,
    Exporter,
    ReportPage,
    RunResult,
    closing_blocks,
    opening_blocks,
)
from snnbench.report.tables import case_table


class Html(Exporter):
    """HTML: a table, or a whole page."""

    name = "html"
    suffix = "html"

    def run(self, result: RunResult) -> str:
        return html_table(case_table(result.run.summary)) + "\n"

    def report(self, result: ReportPage) -> str:
        return report_html(result)


def report_html(page: ReportPage) -> str:
    """``report.html``: the report page, self-contained."""
    run, status_line, sections, overhead = page.run, page.status_line, page.sections, page.overhead
    esc = html.escape
    trust = "".join(f'<li class="bad"><strong>{esc(line)}</strong></li>' if bad
                    else f"<li>{esc(line)}</li>" for bad, line in page.trust)
    body = [f"<h1>snnbench report: {esc(run.run_id)}</h1>",
            *(f'<p class="bad"><strong>{esc(line)}</strong></p>' for line in page.alerts),
            f"<h2>How far to trust this report</h2><ul>{trust}</ul>",
            f"<p>Cases: {esc(status_line)}.</p>",
            *(f"<p>{esc(line)}</p>" for line in overhead)]
    body += [_block(b) for b in opening_blocks(page)]
    if not sections:
        body.append("<p>No case finished ok: there is nothing to plot.</p>")
    for title, images, pivot in sections:
        body.append(f"<h2>{esc(title)}</h2>")
        if pivot.rows:
            body += [f"<p>{esc(PIVOT_NOTE)}</p>", html_table(pivot)]
        for caption, path in images:
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            body.append(f'<figure><img alt="{esc(caption)}" src="data:image/png;base64,{data}">'
                        f"<figcaption>{esc(caption)}</figcaption></figure>")
    body += [_block(b) for b in closing_blocks(page)]
    return html_page(f"snnbench report {run.run_id}", "".join(body))


def _block(block: Block) -> str:
    attrs = f' id="{block.anchor}"' if block.anchor else ""
    attrs += ' class="bad"' if block.bad else ""
    note = f"<p>{html.escape(block.note)}</p>" if block.note else ""
    table = html_table(block.table) if block.table is not None else "<p>None.</p>"
    return f"<h2{attrs}>{html.escape(block.title)}</h2>{note}{table}"

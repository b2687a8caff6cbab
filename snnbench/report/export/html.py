"""``html``: a run's table as an HTML ``<table>``, and a report as one self-contained page
(its plots embedded as base64, its style inlined: it fetches nothing)."""

from __future__ import annotations

import base64
import html

from snnbench.render.formats import html_page, html_table
from snnbench.report.export.base import (
    GOALS_NOTE,
    HEADLINE_NOTE,
    PIVOT_NOTE,
    Exporter,
    ReportPage,
    RunResult,
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
    run, status_line, env, sections = page.run, page.status_line, page.env, page.sections
    timing, metrics, problems, warns = page.timing, page.metrics, page.problems, page.warns
    goals, overhead = page.goals, page.overhead
    esc = html.escape
    trust = "".join(f'<li class="bad"><strong>{esc(line)}</strong></li>' if bad
                    else f"<li>{esc(line)}</li>" for bad, line in page.trust)
    body = [f"<h1>snnbench report: {esc(run.run_id)}</h1>",
            *(f'<p class="bad"><strong>{esc(line)}</strong></p>' for line in page.alerts),
            f"<h2>How far to trust this report</h2><ul>{trust}</ul>",
            f"<p>Cases: {esc(status_line)}.</p>",
            *(f"<p>{esc(line)}</p>" for line in overhead)]
    if page.headline.rows:
        body += ['<h2 id="fastest">Fastest at each n</h2>', f"<p>{esc(HEADLINE_NOTE)}</p>",
                 html_table(page.headline)]
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
    body += ["<h2>Timing</h2>", html_table(timing)]
    if metrics.rows:
        body += ["<h2>Other metrics per case</h2>", html_table(metrics)]
    body.append('<h2 class="bad">Cases that did not finish ok</h2>')
    body.append(html_table(problems) if problems.rows else "<p>None.</p>")
    if warns.rows:
        body += ["<h2>Measurement warnings</h2>", html_table(warns)]
    body += ["<h2>Environment</h2>", html_table(env)]
    if goals.rows:
        body += ["<h2>Fused backend against its targets</h2>", f"<p>{esc(GOALS_NOTE)}</p>",
                 html_table(goals)]
    return html_page(f"snnbench report {run.run_id}", "".join(body))

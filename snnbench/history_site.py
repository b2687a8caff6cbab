"""Render a :class:`~snnbench.history.History` as a static, offline site.

One ``index.html`` holding every plot as inline SVG drawn by matplotlib (no script, no CDN, no
font or image fetched: it opens from a file, an artifact or an air-gapped machine), and
``history.json`` with the same series for other tools. Each point of a plot is a link to its
run's report (``report/report.html`` of the run folder, or the run's ``summary.csv`` when it
has no report). Whiskers are the IQR (q1 to q3) of each point; a detected step is a dashed
vertical line labelled with its ratio.
"""

from __future__ import annotations

import html
import io
import json
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from snnbench.history import History, Point, Series, XAxis
from snnbench.metrics import format_value
from snnbench.storage import atomic_write_bytes, claim_folder

#: the files a history site is made of: a folder holding only these is an earlier site
SITE_FILES = frozenset({"index.html", "history.json"})
_PHASE_COLORS = {"forward": "#1f77b4", "backward": "#ff7f0e", "step": "#2ca02c",
                 "case": "#7f7f7f", "setup": "#9467bd"}
_MARKERS = ("o", "s", "^", "D", "v", "P")
_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:#222}
h1{font-size:1.5em} h2{font-size:1.2em;border-bottom:1px solid #ddd;margin-top:2em}
h3{font-size:1em;margin:1.2em 0 .3em} .note{color:#555;font-size:.9em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0 1em}
th,td{border:1px solid #ccc;padding:.2em .5em;text-align:left} th{background:#f3f3f3}
figure{margin:.3em 0 1em} svg{max-width:100%;height:auto}
.steps{font-size:.85em;color:#a00}
"""


def _written_by_history(path: Path) -> bool:
    return path.is_file() and path.name in SITE_FILES


def _report_link(point: Point, out: Path) -> str:
    report = point.run_path / "report" / "report.html"
    target = report if report.is_file() else point.run_path / "summary.csv"
    return Path(os.path.relpath(target, out)).as_posix()


def _x_labels(points: list[Point], x: XAxis) -> list[str]:
    if x == "version":
        return [p.library_version or "?" for p in points]
    if x == "commit":
        return [p.commit[:7] or "?" for p in points]
    return [p.date.strftime("%Y-%m-%d %H:%M") for p in points]


def _figure(series: list[Series], out: Path, x: XAxis, per_machine: bool) -> str:
    """One metric of one adapter and case: a line per (machine, phase), as inline SVG."""
    # every run of these series, in date order, gives the x positions (shared by the lines)
    runs = sorted({(p.date, p.run_id) for s in series for p in s.points})
    # text stays text in the SVG (not glyph paths): a fifth of the size, and searchable
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "snnbench"}):
        fig, ax = plt.subplots(figsize=(7.5, 2.6))
        return _draw(fig, ax, series, runs, out, x, per_machine)


def _draw(fig: Figure, ax: Axes, series: list[Series], runs: list[tuple[datetime, str]],
          out: Path, x: XAxis, per_machine: bool) -> str:
    metric = series[0].metric
    position = {run_id: i for i, (_, run_id) in enumerate(runs)}
    machines = list(dict.fromkeys(s.machine for s in series))
    labels_at: dict[int, str] = {}
    for s in series:
        marker = _MARKERS[machines.index(s.machine) % len(_MARKERS)]
        xs = [position[p.run_id] for p in s.points]
        ys = [p.median for p in s.points]
        lows = [max(p.median - p.q1, 0.0) for p in s.points]
        highs = [max(p.q3 - p.median, 0.0) for p in s.points]
        color = _PHASE_COLORS.get(s.phase, "#333333")
        name = s.phase + (f" · {s.machine.key}" if per_machine else "")
        ax.errorbar(xs, ys, yerr=[lows, highs], color=color, marker=marker, markersize=4,
                    linewidth=1.2, capsize=2, label=name)
        # the points again as links: matplotlib writes each url as an <a> in the SVG
        dots = ax.scatter(xs, ys, s=30, color=color, zorder=3)
        dots.set_urls([_report_link(p, out) for p in s.points])
        for p, label in zip(s.points, _x_labels(s.points, x), strict=True):
            labels_at[position[p.run_id]] = label
        for step in s.steps:
            at = position[s.points[step.index].run_id] - 0.5
            ax.axvline(at, color=color, linestyle="--", linewidth=0.8)
            ax.annotate(f"×{step.ratio:.2f}", (at, step.after), fontsize=7, color=color,
                        xytext=(3, 3), textcoords="offset points")
    ax.set_xticks(sorted(labels_at), [labels_at[i] for i in sorted(labels_at)], fontsize=7,
                  rotation=20, ha="right")
    ax.set_xlim(-0.6, max(len(runs) - 0.4, 0.6))
    ax.set_ylabel(metric, fontsize=8)
    ax.yaxis.set_major_formatter(lambda v, _pos: format_value(v, metric))
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    buffer = io.StringIO()
    # no date in the metadata: the same runs give the same page
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def _series_json(s: Series, out: Path) -> dict[str, object]:
    return {
        "machine": s.machine.key, "machine_label": s.machine.label, "adapter": s.label,
        "case": s.case, "phase": s.phase, "metric": s.metric,
        "points": [{"run_id": p.run_id, "date": p.date.isoformat(),
                    "library_version": p.library_version, "commit": p.commit,
                    "median": p.median, "q1": p.q1, "q3": p.q3, "n_samples": p.n_samples,
                    "replicates": p.replicates, "report": _report_link(p, out)}
                   for p in s.points],
        "steps": [{"at_run": s.points[st.index].run_id, "before": st.before, "after": st.after,
                   "ratio": st.ratio} for st in s.steps],
    }


def write_site(history: History, out_dir: str | Path, *, x: XAxis = "date",
               per_machine: bool = False,
               progress: Callable[[int, int], None] | None = None) -> list[Path]:
    """Write ``index.html`` and ``history.json`` into ``out_dir``: new, empty, or an earlier
    history site (anything else there is never overwritten:
    :class:`~snnbench.storage.StorageError`). Returns the written paths."""
    out = Path(out_dir)
    claim_folder(out, "--out", _written_by_history)
    out = out.resolve()
    groups = history.groups()
    body: list[str] = []
    toc: list[str] = []
    total = sum(len({s.metric for s in group}) for group in groups.values())
    done = 0
    for number, ((label, case), group) in enumerate(groups.items()):
        anchor = f"g{number}"
        toc.append(f'<li><a href="#{anchor}">{html.escape(label)} — {html.escape(case)}</a></li>')
        body.append(f'<h2 id="{anchor}">{html.escape(label)} <span class="note">'
                    f'{html.escape(case)}</span></h2>')
        for metric in dict.fromkeys(s.metric for s in group):
            of_metric = [s for s in group if s.metric == metric]
            body.append(f"<h3>{html.escape(metric)}</h3><figure>"
                        f"{_figure(of_metric, out, x, per_machine)}</figure>")
            steps = [f"{s.phase} ×{st.ratio:.2f} at {s.points[st.index].run_id}"
                     for s in of_metric for st in s.steps]
            if steps:
                body.append(f'<p class="steps">steps: {html.escape("; ".join(steps))}</p>')
            done += 1
            if progress is not None:
                progress(done, total)
    runs = sorted(history.runs, key=lambda r: str(r.manifest.get("created_utc") or ""))
    run_rows = "".join(
        f"<tr><td>{html.escape(r.run_id)}</td>"
        f"<td>{html.escape(str(r.manifest.get('created_utc') or '?'))}</td>"
        f"<td>{html.escape(str((r.manifest.get('snnbench') or {}).get('git_commit') or '?')[:10])}"
        f"</td><td>{html.escape(str(r.path))}</td></tr>" for r in runs)
    machines = "".join(f"<li><code>{m.key}</code> {html.escape(m.label)}</li>"
                       for m in history.machines)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="generator" content="snnbench history">
<title>snnbench history</title><style>{_CSS}</style></head>
<body>
<h1>snnbench history</h1>
<p class="note">{len(history.runs)} runs, {len(history.series)} series, x axis: {x}. Each point
is a run's median with its IQR (q1–q3) as whiskers, and links to that run's report. Runs from
different machines are never joined by one line. Steps: PELT (ruptures) on the log medians, with
a penalty from the series' own noise; steps below ×1.05 are not shown.</p>
<h2>Machines</h2><ul>{machines}</ul>
<h2>Runs</h2><table><tr><th>run</th><th>created (UTC)</th><th>snnbench commit</th>
<th>folder</th></tr>{run_rows}</table>
<h2>Series</h2><ul>{''.join(toc)}</ul>
{''.join(body)}
</body></html>
"""
    index, data = out / "index.html", out / "history.json"
    atomic_write_bytes(index, page.encode())
    doc = {"x": x, "series": [_series_json(s, out) for s in history.series]}
    atomic_write_bytes(data, json.dumps(doc, indent=1).encode())
    return [index, data]

"""``snnbench history``: many run folders as time series, with steps detected.

Every ok summary row of every run becomes a :class:`Point` (its median, with q1 and q3: the
IQR) of a :class:`Series`: one machine, one adapter label, one case, one phase, one metric.
The machine is part of a series' identity, so runs from different machines are never drawn on
one line; by default a history holds one machine only (:class:`HistoryError` otherwise), as
asv keeps one result folder per machine.

**Steps** are found with PELT (``ruptures``; Killick et al. 2012), an exact penalised
segmentation of the log medians into constant pieces: the same model as asv's own step
detection (a piecewise-constant fit with a penalty per step), from a maintained library. The
penalty is :data:`PENALTY` · σ² · log n per step, with σ the noise of the series itself: the
median absolute difference of successive log medians / (0.6745 · √2), a robust estimate that
a step barely moves (one large difference among many small ones), floored at 1 %. BIC's factor
would be 2; on simulated series of 12 runs with 3 % noise it marked a false step in 27 % of
flat series, 6 in 5 % (0.3 % at 30 runs), while still finding 98 % of × 1.5 steps and 75 % of
× 1.1 steps (6 + 6 runs). The within-run IQR
is not used for σ: it leaves out the noise between processes and runs, which is what a history
of separate runs shows (the lesson of the gate, :mod:`snnbench.gate.interval`). A step is kept when
the medians of the pieces on either side differ by at least :data:`MIN_STEP`.

**The site** (:func:`write_site`) is static and offline: one ``index.html`` holding every
plot as inline SVG drawn by matplotlib (no script, no CDN, no font or image fetched: it opens
from a file, an artifact or an air-gapped machine), and ``history.json`` with the same series
for other tools. It opens on an overview: the changes found (ratio, series, n, commit range)
and one chart per case with a line per library. Each point of a plot is a link to its run's
report, copied into the site (``run-<id>.html``, or the run's summary as ``run-<id>.csv`` when
it has no report): the folder works when published alone. Whiskers are the IQR (q1 to q3) of
each point; a detected step is a dashed vertical line labelled with its ratio. Axes carry the
metric's name and unit, and tick labels are never repeated.
"""

from __future__ import annotations

import hashlib
import html
import io
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from snnbench.errors import UserError
from snnbench.records import metrics, schema
from snnbench.records.contract import adapter_label
from snnbench.report.plots import color_map
from snnbench.store.overhead import PROBES
from snnbench.store.rundir import Run, RunDirError, load_run
from snnbench.store.storage import (
    atomic_write_bytes,
    claim_folder,
    label_networks,
    record_written,
    written_by_snnbench,
)
from snnbench.workload import DEFAULT_KIND, row_workload_class, workload_class

XAxis = Literal["date", "version", "commit"]
X_AXES: tuple[str, ...] = ("date", "version", "commit")
#: the step penalty's factor of σ² · log n (see the module docstring for why not BIC's 2)
PENALTY = 6.0
#: steps smaller than this ratio of piece medians are not reported
MIN_STEP = 1.05
#: σ of a series is never taken below this (1 %): identical medians would make any wiggle a step
MIN_NOISE = 0.01
#: metrics drawn: times and peaks (the others are per-case facts, not speeds)
METRICS: tuple[str, ...] = tuple(m.name for m in metrics.METRICS.values() if m.history)
#: run folders are looked for this deep below a folder given on the command line
SEARCH_DEPTH = 3


class HistoryError(UserError):
    """Input that makes no history (no runs, mixed machines, no data); one line."""


@dataclass(frozen=True)
class Machine:
    """The machine a run was measured on: its hostname hash, CPU and GPUs."""

    key: str
    label: str


def machine_of(manifest: dict[str, Any], host: str = "") -> Machine:
    """The machine of a run (``host``: the row's host, for runs spread over a cluster)."""
    cpu = manifest.get("cpu") if isinstance(manifest.get("cpu"), dict) else {}
    assert isinstance(cpu, dict)
    gpus = sorted(str(g.get("name", "?")) for g in manifest.get("gpus") or []
                  if isinstance(g, dict))
    # the vector ISA too: a VM may show one model name ("AMD EPYC") for AVX2 and AVX-512 hosts,
    # whose CPU kernels run at other speeds (runs before the field was recorded: "isa?")
    isa = cpu.get("isa")
    isa_text = " ".join(str(f) for f in isa) if isinstance(isa, list) else "isa?"
    parts = [str(manifest.get("hostname_hash") or "?"), str(cpu.get("model") or "?"),
             str(cpu.get("cores_logical") or "?"), isa_text, *gpus, host]
    key = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:8]
    widest = next((f for f in ("amx_bf16", "avx512_bf16", "avx512f", "avx2", "sve", "asimd")
                   if isinstance(isa, list) and f in isa), "ISA unknown")
    label = f"{cpu.get('model') or 'unknown CPU'} ×{cpu.get('cores_logical') or '?'} {widest}"
    if gpus:
        label += " + " + ", ".join(gpus)
    label += f" (host {host or manifest.get('hostname_hash') or '?'})"
    return Machine(key, label)


@dataclass(frozen=True)
class Point:
    """One run's value of a series."""

    run_id: str
    run_path: Path
    date: datetime
    library_version: str
    commit: str
    median: float
    q1: float
    q3: float
    n_samples: int
    replicates: int


@dataclass(frozen=True)
class Step:
    """A change of level between ``points[index - 1]`` and ``points[index]``."""

    index: int
    before: float
    after: float

    @property
    def ratio(self) -> float:
        """after / before (> 1: slower or larger)."""
        return self.after / self.before


@dataclass
class Series:
    """One machine, adapter, case, phase and metric over runs, in date order."""

    machine: Machine
    label: str
    case: str
    phase: str
    metric: str
    #: the case's size (its workload's size parameter, the neuron count of Linear+LIF; 0 when
    #: unknown)
    size: int = 0
    #: the workload kind of the case (:mod:`snnbench.workload`): what its size is called
    kind: str = DEFAULT_KIND
    points: list[Point] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)


@dataclass
class History:
    """Every series of a set of runs, and the runs themselves."""

    runs: list[Run]
    series: list[Series]
    machines: list[Machine]

    def groups(self) -> dict[tuple[str, str], list[Series]]:
        """Series by (adapter label, case), in label and case order."""
        out: dict[tuple[str, str], list[Series]] = {}
        order = {m: i for i, m in enumerate(METRICS)}
        for s in sorted(self.series, key=lambda s: (s.label, s.case, order[s.metric],
                                                    s.machine.key, s.phase)):
            out.setdefault((s.label, s.case), []).append(s)
        return out


def find_runs(paths: Iterable[str | Path]) -> list[Path]:
    """Run folders named by ``paths``: a run folder itself, or a folder holding run folders
    (up to :data:`SEARCH_DEPTH` levels down). Raises :class:`HistoryError` for a missing path
    or one that holds no run, and when there is none at all."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise HistoryError(f"{path} does not exist")
        if (path / schema.MANIFEST_FILE).is_file():
            found.append(path)
            continue
        if not path.is_dir():
            raise HistoryError(f"{path} is not a run folder nor a folder of runs")
        inside = sorted(m.parent for depth in range(1, SEARCH_DEPTH + 1)
                        for m in path.glob("/".join(["*"] * depth) + "/" + schema.MANIFEST_FILE))
        if not inside:
            raise HistoryError(f"{path} is not a run folder and holds none (no manifest.json "
                               f"within {SEARCH_DEPTH} levels)")
        found.extend(inside)
    if not found:
        raise HistoryError("no run folders given")
    unique = list(dict.fromkeys(p.resolve() for p in found))
    return unique


def _date(manifest: dict[str, Any]) -> datetime:
    text = str(manifest.get("created_utc") or "")
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return datetime.fromtimestamp(0, UTC)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def detect_steps(medians: Sequence[float]) -> list[Step]:
    """Steps of a series of medians (see the module docstring: PELT on the log medians, a
    penalty from the series' own robust noise, steps of at least :data:`MIN_STEP`)."""
    import ruptures

    values = np.log(np.asarray(medians, dtype=float))
    n = len(values)
    if n < 3 or not np.isfinite(values).all():
        return []
    diffs = np.abs(np.diff(values))
    sigma = max(float(np.median(diffs)) / (0.6745 * math.sqrt(2.0)), math.log1p(MIN_NOISE))
    ends = ruptures.Pelt(model="l2", min_size=1, jump=1).fit(values).predict(
        pen=PENALTY * sigma**2 * math.log(n))
    steps: list[Step] = []
    starts = [0, *ends[:-1]]
    for (a, b), (c, d) in zip(zip(starts, ends, strict=True),
                              zip(starts[1:], ends[1:], strict=True), strict=False):
        before, after = float(np.exp(np.median(values[a:b]))), float(np.exp(np.median(values[c:d])))
        if max(after / before, before / after) >= MIN_STEP:
            steps.append(Step(index=c, before=before, after=after))
    return steps


def collect(paths: Iterable[str | Path], *, machine: str | None = None,
            per_machine: bool = False) -> History:
    """Load the runs named by ``paths`` and build their series.

    Runs from several machines are refused unless ``machine`` picks one (its key, or a
    prefix of it) or ``per_machine`` draws each machine's series apart. Raises
    :class:`HistoryError` (or :class:`~snnbench.store.rundir.RunDirError` for a damaged run).
    """
    runs: list[Run] = []
    for path in find_runs(paths):
        try:
            runs.append(load_run(path, samples=False))
        except RunDirError as exc:
            raise HistoryError(f"{exc}") from exc
    by_machine: dict[Machine, list[Run]] = {}
    for run in runs:
        by_machine.setdefault(machine_of(run.manifest), []).append(run)
    if machine is not None:
        chosen = [m for m in by_machine if m.key.startswith(machine)]
        if len(chosen) != 1:
            known = "; ".join(f"{m.key}: {m.label}" for m in by_machine)
            raise HistoryError(f"--machine {machine!r} matches {len(chosen)} of the machines "
                               f"({known})")
        runs = by_machine[chosen[0]]
    elif len(by_machine) > 1 and not per_machine:
        known = "; ".join(f"{m.key}: {m.label}, {len(r)} runs" for m, r in by_machine.items())
        raise HistoryError(f"the runs come from {len(by_machine)} machines ({known}): their "
                           "times do not belong on one line; pick one with --machine KEY, or "
                           "draw each machine apart with --per-machine")
    # one network column over every run: a field one run varies names its cases in all
    summaries = label_networks([run.summary for run in runs])
    series: dict[tuple[str, ...], Series] = {}
    for run, summary in zip(runs, summaries, strict=True):
        rows = summary[(summary["status"] == "ok") & summary["metric"].isin(METRICS)
                       & ~summary["adapter"].isin(PROBES)]
        when, commit = _date(run.manifest), str((run.manifest.get("snnbench") or {})
                                                 .get("git_commit") or "")[:10]
        # a run spread over several hosts (a cluster) has a machine per host; a local run's
        # one host is the manifest's machine
        spread = len({h for h in rows["host"] if h}) > 1
        for _, row in rows.iterrows():
            median = float(row["median"])
            if not (math.isfinite(median) and median > 0):
                continue
            mach = machine_of(run.manifest, str(row["host"]) if spread else "")
            label = adapter_label(str(row["adapter"]), str(row["variant"]),
                                  str(row.get("environment", "") or ""))
            # the case's id too: two cases that read alike (two graph files of one name) are
            # two series, never pooled
            key = (mach.key, label, schema.case_text(row), str(row["phase"]), str(row["metric"]),
                   str(row["case_id"]))
            workload = row_workload_class(row)
            value = row.get(workload.size_param)
            size = int(value) if value is not None and value == value else 0
            s = series.setdefault(key, Series(mach, label, key[2], key[3], key[4], size,
                                              workload.kind))
            s.points.append(Point(
                run_id=run.run_id, run_path=run.path, date=when,
                library_version=str(row["library_version"]), commit=commit, median=median,
                q1=float(row["q1"]), q3=float(row["q3"]),
                n_samples=int(row["n_samples"]) if row["n_samples"] == row["n_samples"] else 0,
                replicates=int(row["replicates"]) if row["replicates"] == row["replicates"]
                else 1))
    if not series:
        raise HistoryError("the runs hold no ok measurement to draw")
    for s in series.values():
        s.points.sort(key=lambda p: (p.date, p.run_id))
        s.steps = detect_steps([p.median for p in s.points])
    machines = list(dict.fromkeys(s.machine for s in series.values()))
    return History(runs=runs, series=list(series.values()), machines=machines)


# ------------------------------------------------------------------------------------ site

#: the files a history site is made of (an earlier site: these, listed in the folder's ledger
#: of what snnbench wrote and unchanged since; a user's own file of either name is never
#: replaced), beside the copies of the runs' reports (``run-<id>.html`` / ``run-<id>.csv``)
SITE_FILES = frozenset({"index.html", "history.json"})
_PHASE_COLORS = {"forward": "#1f77b4", "backward": "#ff7f0e", "step": "#2ca02c",
                 "case": "#7f7f7f", "setup": "#9467bd"}
_MARKERS = ("o", "s", "^", "D", "v", "P")
#: a metric's name on the page (its axis says the unit)
_TITLES = {"time_s": "time per phase", "peak_mem_bytes": "peak memory",
           "peak_rss_bytes": "peak process memory (RSS)", "energy_j": "energy per step"}
_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:#222}
h1{font-size:1.5em} h2{font-size:1.2em;border-bottom:1px solid #ddd;margin-top:2em}
h3{font-size:1em;margin:1.2em 0 .3em} .note{color:#555;font-size:.9em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0 1em}
th,td{border:1px solid #ccc;padding:.2em .5em;text-align:left} th{background:#f3f3f3}
figure{margin:.3em 0 1em} svg{max-width:100%;height:auto}
.steps{font-size:.85em;color:#a00} .slower{color:#a00} .faster{color:#070}
"""


def metric_title(metric: str) -> str:
    """A metric as the page names it: ``time per phase``, ``peak memory``."""
    return _TITLES.get(metric, metrics.metric(metric).label)


def _copy_name(run: Run) -> str:
    """The site's file name for a run's copied report (or summary)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", run.run_id).strip("-.") or "run"
    report = run.path / "report" / "report.html"
    return f"run-{safe}.html" if report.is_file() else f"run-{safe}.csv"


def _copy_source(run: Run) -> Path:
    report = run.path / "report" / "report.html"
    return report if report.is_file() else run.path / schema.SUMMARY_CSV


def _report_link(point: Point, links: dict[Path, str]) -> str:
    """The link of a point: its run's copy in the site (a name beside index.html)."""
    return links.get(point.run_path, "")


def _unique(labels: list[str]) -> list[str]:
    """``labels`` with repeats told apart (``1.0``, ``1.0 (2)``): tick labels never repeat."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def _x_labels(runs: list[tuple[datetime, str]], points: dict[str, Point], x: XAxis) -> list[str]:
    """One label per run (in order), told apart when two runs share a version or commit."""
    labels = []
    for _, run_id in runs:
        p = points[run_id]
        if x == "version":
            labels.append(p.library_version or "?")
        elif x == "commit":
            labels.append(p.commit[:7] or "?")
        else:
            labels.append(p.date.strftime("%Y-%m-%d %H:%M"))
    return _unique(labels)


def _scale(metric: str, values: list[float]) -> tuple[float, str]:
    """(factor, unit) the axis of ``metric`` is drawn in: ms/µs/s, KiB/MiB/GiB, or its own."""
    unit = metrics.UNITS.get(metric, "")
    if unit == "s":
        return metrics.time_unit(values)
    if unit == "bytes":
        return metrics.byte_unit(values)
    return 1.0, unit


def _y_axis(ax: Axes, title: str, values: list[float], factor: float, unit: str) -> None:
    """A plain linear y axis in ``unit``: as many decimals as the ticks need to differ (no
    ``326 MiB`` five times), no offset, and some room when every value is the same."""
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    scaled = [v * factor for v in values if math.isfinite(v)]
    if scaled and max(scaled) - min(scaled) <= 1e-3 * max(abs(v) for v in scaled):
        mid = scaled[0]
        ax.set_ylim(mid * 0.95, mid * 1.05) if mid else ax.set_ylim(-1, 1)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    formatter = ScalarFormatter(useOffset=False)
    formatter.set_scientific(False)
    ax.yaxis.set_major_formatter(formatter)
    ax.set_ylabel(f"{title} [{unit}]" if unit else title, fontsize=8)


def _figure(series: list[Series], links: dict[Path, str], x: XAxis,
            name: Callable[[Series], str], color: Callable[[Series], str]) -> str:
    """Series of one metric as inline SVG: a line per series, named and coloured by the
    callables (per phase for one library, per library for a case)."""
    # every run of these series, in date order, gives the x positions (shared by the lines)
    runs = sorted({(p.date, p.run_id) for s in series for p in s.points})
    # text stays text in the SVG (not glyph paths): a fifth of the size, and searchable
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "snnbench"}):
        fig, ax = plt.subplots(figsize=(7.5, 2.8))
        return _draw(fig, ax, series, runs, links, x, name, color)


def _snapshot(series: list[Series], links: dict[Path, str]) -> str:
    """Step times of one case measured in one run only, as inline SVG: a dot per library on a
    linear axis from 0, its IQR as whiskers, fastest on top (a trend of one point would be a
    column of dots whose legend colours the reader must match)."""
    ordered = sorted(series, key=lambda s: (s.points[-1].median, s.label))
    factor, unit = _scale("time_s", [s.points[-1].median for s in ordered])
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "snnbench"}):
        fig, ax = plt.subplots(figsize=(7.5, 0.25 * len(ordered) + 1.2))
        for i, s in enumerate(ordered):
            p = s.points[-1]
            ax.errorbar(p.median * factor, i,
                        xerr=[[max(p.median - p.q1, 0.0) * factor],
                              [max(p.q3 - p.median, 0.0) * factor]],
                        fmt="o", color="#333333", markersize=4, capsize=2)
            dots = ax.scatter([p.median * factor], [i], s=30, color="#333333", zorder=3)
            dots.set_urls([_report_link(p, links) or None])
            ax.annotate(f"{p.median * factor:.3g}", (p.q3 * factor, i), xytext=(4, 0),
                        textcoords="offset points", va="center", fontsize=7)
        ax.set_yticks(range(len(ordered)), [s.label for s in ordered], fontsize=7)
        ax.set_ylim(len(ordered) - 0.5, -0.5)
        top = max(s.points[-1].q3 for s in ordered) * factor
        ax.set_xlim(0, top * 1.15 if top > 0 else 1.0)
        ax.set_xlabel(f"step time [{unit}] (one run: {ordered[0].points[-1].run_id})",
                      fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
        return _inline_svg(fig)


def _draw(fig: Figure, ax: Axes, series: list[Series], runs: list[tuple[datetime, str]],
          links: dict[Path, str], x: XAxis, name: Callable[[Series], str],
          color: Callable[[Series], str]) -> str:
    metric = series[0].metric
    position = {run_id: i for i, (_, run_id) in enumerate(runs)}
    machines = list(dict.fromkeys(s.machine for s in series))
    factor, unit = _scale(metric, [p.median for s in series for p in s.points])
    first: dict[str, Point] = {}
    for s in series:
        marker = _MARKERS[machines.index(s.machine) % len(_MARKERS)]
        xs = [position[p.run_id] for p in s.points]
        ys = [p.median * factor for p in s.points]
        lows = [max(p.median - p.q1, 0.0) * factor for p in s.points]
        highs = [max(p.q3 - p.median, 0.0) * factor for p in s.points]
        c = color(s)
        ax.errorbar(xs, ys, yerr=[lows, highs], color=c, marker=marker, markersize=4,
                    linewidth=1.2, capsize=2, label=name(s))
        # the points again as links: matplotlib writes each url as an <a> in the SVG
        dots = ax.scatter(xs, ys, s=30, color=c, zorder=3)
        dots.set_urls([_report_link(p, links) or None for p in s.points])
        for p in s.points:
            first.setdefault(p.run_id, p)
        for step in s.steps:
            at = position[s.points[step.index].run_id] - 0.5
            ax.axvline(at, color=c, linestyle="--", linewidth=0.8)
            ax.annotate(f"×{step.ratio:.2f}", (at, step.after * factor), fontsize=7, color=c,
                        xytext=(3, 3), textcoords="offset points")
    labels = _x_labels(runs, first, x)
    ax.set_xticks(range(len(runs)), labels, fontsize=7, rotation=20, ha="right")
    ax.set_xlim(-0.6, max(len(runs) - 0.4, 0.6))
    ax.set_xlabel({"date": "run date (UTC)", "version": "library version",
                   "commit": "snnbench commit"}[x], fontsize=8)
    steps_only = all(s.phase == "step" for s in series) and metric == "time_s"
    _y_axis(ax, "step time" if steps_only else metric_title(metric),
            [p.median for s in series for p in s.points], factor, unit)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _inline_svg(fig)


def _inline_svg(fig: Figure) -> str:
    """``fig`` as an inline ``<svg>`` element (closed afterwards)."""
    fig.tight_layout()
    buffer = io.StringIO()
    # no date in the metadata: the same runs give the same page
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def _series_json(s: Series, links: dict[Path, str]) -> dict[str, object]:
    return {
        "machine": s.machine.key, "machine_label": s.machine.label, "adapter": s.label,
        "case": s.case, workload_class(s.kind).size_param: s.size, "phase": s.phase,
        "metric": s.metric,
        "points": [{"run_id": p.run_id, "date": p.date.isoformat(),
                    "library_version": p.library_version, "commit": p.commit,
                    "median": p.median, "q1": p.q1, "q3": p.q3, "n_samples": p.n_samples,
                    "replicates": p.replicates, "report": _report_link(p, links)}
                   for p in s.points],
        "steps": [{"at_run": s.points[st.index].run_id, "before": st.before, "after": st.after,
                   "ratio": st.ratio} for st in s.steps],
    }


@dataclass(frozen=True)
class Change:
    """A step found in a series, as the overview lists it."""

    series: Series
    step: Step

    @property
    def commits(self) -> str:
        """``before..after``: the commits of the last run before the step and the first after."""
        before = self.series.points[self.step.index - 1].commit[:7] or "?"
        after = self.series.points[self.step.index].commit[:7] or "?"
        return f"{before}..{after}"

    @property
    def direction(self) -> str:
        """``slower``/``faster`` for a time, ``more``/``less`` for anything else."""
        up = self.step.ratio > 1
        if self.series.metric == "time_s":
            return "slower" if up else "faster"
        return "more" if up else "less"


def changes(history: History) -> list[Change]:
    """Every step of every series, the largest change first."""
    found = [Change(s, st) for s in history.series for st in s.steps]
    return sorted(found, key=lambda c: (-abs(math.log(c.step.ratio)), c.series.label,
                                        c.series.case, c.series.phase))


def _changes_table(found: list[Change], anchors: dict[tuple[str, str], str],
                   history: History) -> str:
    if not found:
        long = sum(1 for s in history.series if len(s.points) >= 3)
        if not long:
            return (f"<p>No change can be found yet: a step needs a series of at least 3 runs, "
                    f"and none of the {len(history.series)} series has as many.</p>")
        return (f"<p>No change found: {long} of the {len(history.series)} series have the 3 "
                "runs a step needs, and each is flat within its own noise.</p>")
    esc = html.escape
    rows = []
    for c in found:
        s = c.series
        what = (f"{s.phase} time" if s.metric == "time_s"
                else f"{metric_title(s.metric)} ({s.phase})")
        factor, unit = _scale(s.metric, [c.step.before, c.step.after])
        before = f"{c.step.before * factor:.4g} {unit}".strip()
        after = f"{c.step.after * factor:.4g} {unit}".strip()
        anchor = anchors.get((s.label, s.case), "")
        rows.append(
            f'<tr><td class="{c.direction if s.metric == "time_s" else ""}">'
            f"×{c.step.ratio:.2f} {c.direction}</td>"
            f'<td><a href="#{anchor}">{esc(s.label)}</a></td><td>{esc(what)}</td>'
            f"<td>{s.size or '?'}</td><td>{esc(before)} → {esc(after)}</td>"
            f"<td><code>{esc(c.commits)}</code></td>"
            f"<td>{esc(s.points[c.step.index].run_id)}</td><td>{esc(s.machine.key)}</td></tr>")
    symbol = workload_class(found[0].series.kind).size_symbol if found else ""
    return ("<table><tr><th>change</th><th>series</th><th>what</th>"
            f"<th>{esc(symbol or 'size')}</th>"
            "<th>median before → after</th><th>commits</th><th>first run after</th>"
            f"<th>machine</th></tr>{''.join(rows)}</table>")


def _step_time_cases(history: History) -> dict[tuple[str, str], list[Series]]:
    """The step-time series of each (machine, case), for the cross-library charts."""
    out: dict[tuple[str, str], list[Series]] = {}
    for s in sorted(history.series, key=lambda s: (s.size, s.case, s.machine.key, s.label)):
        if s.phase == "step" and s.metric == "time_s":
            out.setdefault((s.machine.key, s.case), []).append(s)
    return out


def write_site(history: History, out_dir: str | Path, *, x: XAxis = "date",
               per_machine: bool = False,
               progress: Callable[[int, int], None] | None = None) -> list[Path]:
    """Write ``index.html``, ``history.json`` and a copy of each run's report into
    ``out_dir``: new, empty, or an earlier history site, by its ledger (anything else there,
    a user's own ``index.html`` included, is never overwritten:
    :class:`~snnbench.store.storage.StorageError`). Returns the written paths."""
    out = Path(out_dir)
    claim_folder(out, "--out", written_by_snnbench)
    out = out.resolve()
    written: list[Path] = []
    # each run's report (or summary) is copied beside the page: links work wherever the
    # folder is published, without the run folders
    links: dict[Path, str] = {}
    for run in history.runs:
        name = _copy_name(run)
        if name in links.values():  # two runs of one id: the second keeps its place
            name = name.replace("run-", f"run{len(links)}-", 1)
        target = out / name
        atomic_write_bytes(target, _copy_source(run).read_bytes())
        record_written(out, [target])
        links[run.path] = name
        written.append(target)
    labels = sorted({s.label for s in history.series})
    colors = color_map(labels)
    groups = history.groups()
    anchors = {key: f"g{number}" for number, key in enumerate(groups)}
    cases = _step_time_cases(history)
    body: list[str] = []
    toc: list[str] = []
    total = sum(len({s.metric for s in group}) for group in groups.values()) + len(cases)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    overview: list[str] = []
    for number, ((machine, case), of_case) in enumerate(cases.items()):
        where = f" · machine {machine}" if per_machine else ""
        # the legend reads fastest first (by each library's latest run)
        of_case = sorted(of_case, key=lambda s: (s.points[-1].median, s.label))
        one_run = len({p.run_id for s in of_case for p in s.points}) == 1
        chart = (_snapshot(of_case, links) if one_run
                 else _figure(of_case, links, x, lambda s: s.label,
                              lambda s: colors.get(s.label, "#333333")))
        overview.append(f'<h3 id="c{number}">{html.escape(case)}{html.escape(where)}</h3>'
                        f"<figure>{chart}</figure>")
        tick()
    for (label, case), group in groups.items():
        anchor = anchors[(label, case)]
        toc.append(f'<li><a href="#{anchor}">{html.escape(label)} — {html.escape(case)}</a></li>')
        body.append(f'<h2 id="{anchor}">{html.escape(label)} <span class="note">'
                    f'{html.escape(case)}</span></h2>')
        for metric in dict.fromkeys(s.metric for s in group):
            of_metric = [s for s in group if s.metric == metric]
            body.append(f"<h3>{html.escape(metric_title(metric))}</h3><figure>"
                        + _figure(of_metric, links, x,
                                  lambda s: s.phase + (f" · {s.machine.key}" if per_machine
                                                       else ""),
                                  lambda s: _PHASE_COLORS.get(s.phase, "#333333"))
                        + "</figure>")
            steps = [f"{s.phase} ×{st.ratio:.2f} at {s.points[st.index].run_id}"
                     for s in of_metric for st in s.steps]
            if steps:
                body.append(f'<p class="steps">steps: {html.escape("; ".join(steps))}</p>')
            tick()
    runs = sorted(history.runs, key=lambda r: str(r.manifest.get("created_utc") or ""))
    run_rows = "".join(
        f'<tr><td><a href="{html.escape(links[r.path])}">{html.escape(r.run_id)}</a></td>'
        f"<td>{html.escape(str(r.manifest.get('created_utc') or '?'))}</td>"
        f"<td>{html.escape(str((r.manifest.get('snnbench') or {}).get('git_commit') or '?')[:10])}"
        f"</td><td>{html.escape(r.path.name)}</td></tr>" for r in runs)
    machines = "".join(f"<li><code>{m.key}</code> {html.escape(m.label)}</li>"
                       for m in history.machines)
    found = changes(history)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="generator" content="snnbench history">
<title>snnbench history</title><style>{_CSS}</style></head>
<body>
<h1>snnbench history</h1>
<p class="note">{len(history.runs)} runs, {len(history.series)} series, x axis: {x}. Each point
is a run's median with its IQR (q1–q3) as whiskers, and links to that run's report (copied
beside this page). Runs from different machines are never joined by one line. Steps: PELT
(ruptures) on the log medians, with a penalty from the series' own noise; steps below ×1.05 are
not shown.</p>
<h2 id="changes">Changes found</h2>
{_changes_table(found, anchors, history)}
<h2 id="cases">Step time per case, every library</h2>
<p class="note">The training step (forward + backward) of each library, one chart per case;
the sections below show each library's phases and memory.</p>
{''.join(overview)}
<h2 id="machines">Machines</h2><ul>{machines}</ul>
<h2 id="runs">Runs</h2><table><tr><th>run (its report)</th><th>created (UTC)</th>
<th>snnbench commit</th><th>folder</th></tr>{run_rows}</table>
<h2 id="series">Every series</h2><details><summary>{len(toc)} libraries × cases</summary>
<ul>{''.join(toc)}</ul></details>
{''.join(body)}
</body></html>
"""
    index, data = out / "index.html", out / "history.json"
    atomic_write_bytes(index, page.encode())
    record_written(out, [index])  # each recorded as it lands: a stop between keeps it ours
    doc = {"x": x, "series": [_series_json(s, links) for s in history.series],
           "changes": [{"adapter": c.series.label, "case": c.series.case,
                        workload_class(c.series.kind).size_param: c.series.size,
                        "phase": c.series.phase,
                        "metric": c.series.metric, "ratio": c.step.ratio,
                        "commits": c.commits, "machine": c.series.machine.key}
                       for c in found]}
    atomic_write_bytes(data, json.dumps(doc, indent=1).encode())
    record_written(out, [data])
    return [index, data, *written]

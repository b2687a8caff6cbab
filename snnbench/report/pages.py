"""``snnbench report`` and ``snnbench show``: tables, plots, HTML and Markdown from one run folder.

:func:`report` writes PNG plots (see :mod:`snnbench.report.plots`), ``report.md`` (Markdown with
links to the PNGs, fit for a README or a PR) and ``report.html`` (one self-contained page: images
are embedded as base64, nothing is fetched from the network). The timing table
(:func:`~snnbench.report.tables.summary_table`, :func:`~snnbench.report.tables.format_table`) comes
from
:mod:`snnbench.report.tables` and is re-exported here.

Tables are :class:`snnbench.render.Table` models; the page (a
:class:`~snnbench.report.export.ReportPage`) is drawn by every format of the exporter registry that
draws one (:mod:`snnbench.report.export`: Markdown and HTML).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from snnbench.records import schema
from snnbench.records.contract import adapter_label
from snnbench.records.metrics import METRICS, format_bytes, format_seconds, format_value
from snnbench.records.roofline import IMPOSSIBLE_NOTE, impossible_rows
from snnbench.records.schema import FLOOR, GROUP_COLUMNS, NETWORK, group_title, rows_workload
from snnbench.render import Table
from snnbench.report import plots, speedups, targets
from snnbench.report.conformance import conformance_blocks
from snnbench.report.export import EXPORTERS, ReportPage
from snnbench.report.tables import case_text, format_table, reading_order, summary_table
from snnbench.store.overhead import OVERHEAD_GOAL, harness_overhead, is_probe
from snnbench.store.rundir import load_run
from snnbench.store.stats import NOISY_IQR_RATIO
from snnbench.store.storage import (
    Run,
    StorageError,
    claim_folder,
    write_recorded,
    written_by_snnbench,
)
from snnbench.workload import row_workload_class

#: the report's tables; the timing table, the table model and the metric formatters stay
#: importable from here, where callers have always found them
__all__ = [
    "Table", "case_metrics_table", "environment_table", "format_bytes", "format_seconds",
    "format_table", "format_value", "headline_table", "overhead_lines", "problems_table",
    "report", "step_pivot_table", "summary_table", "targets_table", "trust_lines",
    "warnings_table",
]


def case_metrics_table(run: Run) -> Table:
    """One row per ok case: peak memory, energy, power, build and first-call time, firing rate,
    SynOps, spike match and gradient cosine. Metrics no case measured are left out."""
    frame = run.summary[run.summary["status"] == "ok"]
    present = [(m.name, m.label) for m in METRICS.values()
               if m.per_case and (frame["metric"] == m.name).any()]
    keys = list(schema.CASE_KEY)
    cases = reading_order(frame.drop_duplicates(keys).assign(phase="", metric=""))
    rows: list[list[str]] = []
    for _, case in cases.iterrows():
        mine = frame
        for k in keys:
            mine = mine[mine[k] == case[k]]
        cells = [adapter_label(str(case["adapter"]), str(case["variant"]),
                               str(case["environment"])), case_text(case)]
        for metric, _ in present:
            values = mine[mine["metric"] == metric]["median"].to_numpy(float)
            # the peak of a case is the largest over its phases; other metrics have one row
            value = float(np.nanmax(values)) if np.isfinite(values).any() else math.nan
            cells.append(format_value(value, metric))
        match, cosine = float(case["spike_match"]), float(case["grad_cosine"])
        cells.append(f"{match:.4f}" if math.isfinite(match) else "—")
        cells.append(f"{cosine:.4f}" if math.isfinite(cosine) else "—")
        rows.append(cells)
    headers = ["adapter", "case", *(t for _, t in present), "spike match", "grad cosine"]
    return Table(headers, rows)


def step_pivot_table(rows: pd.DataFrame) -> Table:
    """Median step time per adapter (rows, fastest first) and neuron count (columns), with
    the speed-up over torch; a cell whose samples carry a noise warning reads ``noisy``.

    ``rows`` are the summary rows of one configuration group.
    """
    step = rows[(rows["phase"] == "step") & (rows["metric"] == "time_s") & (rows["status"] == "ok")]
    if step.empty:
        return Table([], [])
    workload = rows_workload(rows)
    size = workload.size_param
    step = step.assign(label=[plots.label_of(r) for _, r in step.iterrows()])
    times = step.pivot_table(index="label", columns=size, values="median", aggfunc="min")
    speed = plots.speedup_table(rows)
    # fastest first (at the largest n each ran), the floor last: the order of the plots
    largest = times.ffill(axis=1).iloc[:, -1]
    labels = sorted(times.index, key=lambda lab: (lab == FLOOR, float(largest[lab]), lab))
    noisy = {(str(r["label"]), r[size]) for _, r in step.iterrows() if str(r["warning"])}
    out: list[list[str]] = []
    for lab in labels:
        cells = [lab]
        for n in times.columns:
            value = float(times.loc[lab, n])
            if not math.isfinite(value):
                cells.append("—")
                continue
            cell = format_seconds(value)
            if not speed.empty and lab in speed.columns and n in speed.index:
                s = float(speed.loc[n, lab])
                if math.isfinite(s):
                    cell += f" ({s:.2f}×)"
            if (lab, n) in noisy:
                cell += " noisy"
            cells.append(cell)
        out.append(cells)
    return Table(["adapter", *(workload.size_text(n) for n in times.columns)], out)


def problems_table(run: Run) -> Table:
    """Every case that did not finish ok, with its status and reason; also the cases timed
    although their spikes disagree with the reference (``--allow-mismatch``)."""
    frame = run.summary
    flagged = (frame["status"] != "ok") | (frame["allow_mismatch"].astype(bool)
                                           & (frame["message"] != ""))
    bad = reading_order(frame[flagged].drop_duplicates(list(schema.CASE_KEY)))
    rows = [
        [adapter_label(str(r["adapter"]), "", str(r["environment"])), str(r["variant"]),
         case_text(r),
         str(r["status"]) if r["status"] != "ok" else "ok (timed despite mismatch)",
         str(r["message"])]
        for _, r in bad.iterrows()
    ]
    return Table(["adapter", "variant", "case", "status", "reason"], rows)


def warnings_table(run: Run) -> Table:
    """Rows of ok cases that carry a statistics warning (e.g. high IQR/median)."""
    frame = run.summary
    noted = reading_order(frame[(frame["status"] == "ok") & (frame["warning"] != "")])
    rows = [
        [adapter_label(str(r["adapter"]), str(r["variant"]), str(r["environment"])),
         case_text(r), f"{r['phase']}/{r['metric']}", str(r["warning"])]
        for _, r in noted.iterrows()
    ]
    return Table(["adapter", "case", "phase/metric", "warning"], rows)


def environment_table(manifest: dict[str, Any], adapters: Iterable[str] = ()) -> Table:
    """Key facts of the manifest: machine, GPU, driver, CUDA, versions, settings, image."""

    def get(*path: str) -> Any:
        node: Any = manifest
        for p in path:
            node = node.get(p) if isinstance(node, dict) else None
        return node

    rows: list[list[str]] = [["run", str(manifest.get("run_id", "?"))]]
    rows.append(["started / finished (UTC)",
                 f"{manifest.get('created_utc', '?')} / {manifest.get('finished_utc', '?')}"])
    commit = get("snnbench", "git_commit") or "?"
    dirty = " (dirty tree)" if get("snnbench", "git_dirty") else ""
    rows.append(["snnbench", f"{get('snnbench', 'version') or '?'}, commit {commit}{dirty}"])
    rows.append(["python / OS", f"{manifest.get('python', '?')} / {manifest.get('os', '?')}"])
    cores = f"{get('cpu', 'cores_physical') or '?'} physical / {get('cpu', 'cores_logical') or '?'}"
    rows.append(["CPU", f"{get('cpu', 'model') or '?'} ({cores} logical cores)"])
    ram = manifest.get("ram_bytes")
    rows.append(["RAM", format_bytes(float(ram)) if isinstance(ram, (int, float)) else "?"])
    gpus = manifest.get("gpus") or []
    if not gpus:
        rows.append(["GPU", "none"])
    for i, gpu in enumerate(g for g in gpus if isinstance(g, dict)):
        mem = gpu.get("memory_bytes")
        rows.append([
            f"GPU {i}",
            f"{gpu.get('name', '?')}, driver {gpu.get('driver', '?')}, CUDA {gpu.get('cuda', '?')}"
            + (f", {format_bytes(float(mem))}" if isinstance(mem, (int, float)) else ""),
        ])
    settings = manifest.get("settings") or {}
    if isinstance(settings, dict) and settings:
        plain = {k: v for k, v in settings.items() if not isinstance(v, dict)}
        rows.append(["settings", ", ".join(f"{k}={cell_text(v)}"
                                           for k, v in sorted(plain.items()))])
        # a mapping setting (the thread variables) gets its own row, as NAME=value pairs
        for key, value in sorted((k, v) for k, v in settings.items() if isinstance(v, dict)):
            rows.append([f"settings: {key}", cell_text(value)])
    env_vars = manifest.get("env_vars")
    if isinstance(env_vars, dict):
        # a folder written by an older snnbench may hold variables it no longer records (a
        # Terraform token under TF_): a report shows only what is recorded today, masked
        from snnbench.host.environment import records_variable
        from snnbench.host.masking import masked_env_vars

        env_vars = masked_env_vars({k: v for k, v in env_vars.items()
                                    if records_variable(str(k))})
    if isinstance(env_vars, dict) and env_vars:
        rows.append(["environment", ", ".join(f"{k}={v}" for k, v in sorted(env_vars.items()))])
    image = manifest.get("image")
    if isinstance(image, dict):
        rows.append(["image", f"{image.get('tag', '?')} ({image.get('digest', '?')})"])
    packages = manifest.get("packages") or {}
    if isinstance(packages, dict):
        wanted = set(adapters)
        shown = {k: v for k, v in packages.items() if v is not None}
        # installed packages first; the ones the run's adapters need but lack are said so
        rows.append(["packages", ", ".join(f"{k} {v}" for k, v in sorted(shown.items())) or "—"])
        absent = sorted(k for k, v in packages.items() if v is None and k in wanted)
        if absent:
            rows.append(["not installed", ", ".join(absent)])
    for env in manifest.get("environments") or []:
        if not isinstance(env, dict):
            continue
        what = (f"could not be built: {env.get('error')}" if env.get("error")
                else ", ".join(str(p) for p in env.get("resolved") or []))
        warnings = "".join(f"; warning: {w}" for w in env.get("warnings") or [])
        rows.append([f"library environment {env.get('name', '?')}", what + warnings])
    return Table(["item", "value"], rows)


def cell_text(value: Any) -> str:
    """A manifest value as a table cell reads it: lists comma-separated, mappings as
    ``NAME=value`` pairs, never Python's ``['a']`` or ``{'k': 'v'}``."""
    if isinstance(value, dict):
        return ", ".join(f"{k}={cell_text(v)}" for k, v in sorted(value.items())) or "—"
    if isinstance(value, (list, tuple)):
        return ", ".join(cell_text(v) for v in value) or "—"
    return str(value)


def targets_table(run: Run) -> Table:
    """The fused backend's targets this run can judge (:mod:`snnbench.report.targets`); no rows when
    it has no ok fused case."""
    rows = [
        [c.group, str(c.size), c.target, f"{c.value:.3g}", "met" if c.met else "MISSED",
         c.detail]
        for c in targets.check_fused_targets(run.summary)
    ]
    size = rows_workload(run.summary).size_symbol
    return Table(["case", size, "target", "measured", "verdict", "figures"], rows)


def overhead_lines(summary: pd.DataFrame) -> list[str]:
    """The harness-overhead line per device (:func:`snnbench.store.overhead.harness_overhead`),
    with a warning past the goal, or one line saying it was not measured."""
    found = harness_overhead(summary)
    if not found:
        return ["harness overhead: not measured (no ok null case beside another ok case; set "
                "[run] overhead_probe = true or add --adapters null)"]
    lines = []
    for o in found:
        where = f" on {o.device}" if len(found) > 1 else ""
        line = (f"harness overhead{where}: null step {format_seconds(o.null_s)} = "
                f"{100 * o.share:.2g} % of the smallest case ({o.smallest_label}, "
                f"{o.smallest_size}, {format_seconds(o.smallest_s)})")
        if not o.within_goal:
            line += (f"; warning: ≥ {100 * OVERHEAD_GOAL:g} %, the harness's own time distorts "
                     "the smallest cases (use larger cases or longer samples)")
        lines.append(line)
    return lines


# ---------------------------------------------------------------------------------- report


@dataclass(frozen=True)
class _Group:
    slug: str
    title: str
    rows: pd.DataFrame


def _groups(ok: pd.DataFrame) -> list[_Group]:
    """Split ok rows by :data:`GROUP_COLUMNS`; one group gets no file-name prefix."""
    out: list[_Group] = []
    if ok.empty:
        return out
    grouped = list(ok.groupby(list(GROUP_COLUMNS), sort=True, dropna=False))
    for _, rows in grouped:
        d: dict[str, Any] = {c: rows.iloc[0][c] for c in GROUP_COLUMNS}
        title = group_title(d)
        slug = ("" if len(grouped) == 1
                else f"{rows_workload(rows).group_slug(d)}{_network_slug(d)}_")
        out.append(_Group(slug=slug, title=title, rows=rows))
    return out


def _network_slug(group: dict[str, Any]) -> str:
    """``-amp-bf16-surrogate-atan`` for a group's network column ("" when none varies): the
    file names of two networks' plots differ as their titles do."""
    text = re.sub(r"[^A-Za-z0-9.+-]+", "-", str(group[NETWORK])).strip("-")
    return f"-{text}" if text else ""


def _depth_groups(ok: pd.DataFrame) -> list[_Group]:
    """Groups by :data:`GROUP_COLUMNS` without the workload's depth (``layers``), for those
    holding several depths (a deep-stack sweep such as configs/multilayer.toml): the
    time-per-layer plot."""
    out: list[_Group] = []
    if ok.empty:
        return out
    # the depth of a kind that has one (linear-lif's layers), whichever kind's row is first
    kinds = (ok[[schema.KIND]].drop_duplicates().to_dict("records")
             if schema.KIND in ok.columns else [{}])
    depth = next((cls.depth_param for cls in map(row_workload_class, kinds)
                  if cls.depth_param), "")
    if not depth:
        return out
    keys = [c for c in GROUP_COLUMNS if c != depth]
    for _, rows in ok.groupby(keys, sort=True, dropna=False):
        if rows[depth].nunique() < 2:
            continue
        d: dict[str, Any] = {c: rows.iloc[0][c] for c in keys}
        depths = ",".join(str(int(v)) for v in sorted(rows[depth].unique()))
        title = group_title({**d, depth: depths})
        slug = f"{rows_workload(rows).group_slug(d, without=(depth,))}{_network_slug(d)}_"
        out.append(_Group(slug=slug, title=title, rows=rows))
    return out


#: (file stem, caption, needs the raw samples, drawing function)
_PLOTS: tuple[tuple[str, str, bool, Any], ...] = (
    ("at-size", "Time and peak memory per library at the largest n", False, plots.plot_at_size),
    ("phases", "Training step (forward + backward) per neuron count", False,
     plots.plot_phase_bars),
    ("speedup", "Speed-up over torch with 95 % intervals", True, plots.plot_speedup),
    ("distribution", "Raw step-time samples", True, plots.plot_distribution),
    ("scaling", "Step time vs neurons", False, plots.plot_scaling),
    ("memory", "Peak memory", False, plots.plot_memory),
)

def headline_table(groups: list[tuple[str, pd.DataFrame]], samples: pd.DataFrame | None
                   ) -> Table:
    """Who is fastest at each n of each case group (:func:`snnbench.report.speedups.headline`)."""
    many = len(groups) > 1
    rows: list[list[str]] = []
    for title, frame in groups:
        for best in speedups.headline(frame, samples):
            runner = (f"{best.runner_up.text()} faster than {best.runner_up.other}"
                      + (" (noisy)" if best.runner_up.noisy else "")
                      if best.runner_up is not None else "ran alone")
            ref = (best.reference.text() + (" (noisy)" if best.reference.noisy else "")
                   if best.reference is not None
                   else ("is torch" if best.label == speedups.REFERENCE else "torch not run"))
            cells = [str(best.size), best.label,
                     format_seconds(best.median_s) + (" noisy" if best.noisy else ""),
                     runner, ref]
            rows.append([title, *cells] if many else cells)
    symbol = rows_workload(groups[0][1]).size_symbol if groups else "n"
    headers = [symbol, "fastest", "step time", "ahead of the runner-up", "speed-up over torch"]
    return Table(["case", *headers] if many else headers, rows)


def trust_lines(run: Run, ok: pd.DataFrame, unread: str = "") -> list[tuple[bool, str]]:
    """How far to trust the report, as (is a warning, line): the machine's noise verdict with
    its reasons (or that it was not recorded), how many step times are noisy, and what the
    intervals leave out (``unread``: why the raw samples could not be read)."""
    lines: list[tuple[bool, str]] = []
    noise = run.manifest.get("noise")
    if isinstance(noise, dict) and noise.get("noisy"):
        reasons = [str(r) for r in noise.get("reasons") or []]
        lines.append((True, "Noisy run: its times include waiting on a busy machine, so a "
                      "difference between rows may be noise"
                      + (f" ({len(reasons)} reasons: {'; '.join(reasons)})" if reasons else "")))
    elif isinstance(noise, dict):
        lines.append((False, "The machine's load was watched during the run and showed no "
                      "sign of noise."))
    else:
        lines.append((False, "This run did not record the machine's load (an older "
                      "snnbench): whether the machine was quiet is unknown."))
    step = ok[(ok["phase"] == "step") & (ok["metric"] == "time_s")]
    noisy = int((step["warning"].astype(str) != "").sum())
    if noisy:
        lines.append((True, f"{noisy} of {len(step)} step times are noisy (IQR over "
                      f"{100 * NOISY_IQR_RATIO:g} % of the median): marked 'noisy' below; "
                      "their ratios are less certain."))
    elif len(step):
        lines.append((False, f"None of the {len(step)} step times is noisy (IQR at most "
                      f"{100 * NOISY_IQR_RATIO:g} % of the median)."))
    if unread:
        lines.append((True, f"The raw samples could not be read ({unread}): ratios come "
                      "without intervals and the distribution plot is left out."))
    elif run.samples is None:
        lines.append((False, "The run kept no raw samples: ratios come without intervals."))
    else:
        lines.append((False, "Intervals come from the samples of one run: they leave out "
                      "the spread between processes and days (for a verdict, run with "
                      "--replicates and use snnbench compare)."))
    return lines


def report(run_dir: str | Path, out_dir: str | Path | None = None, *,
           targets: bool = False) -> list[Path]:
    """Write plots, ``report.md`` and ``report.html`` for the run in ``run_dir``.

    ``out_dir`` defaults to ``<run_dir>/report``. The page opens with how far to trust it
    (the machine's noise, noisy rows, what the intervals leave out) and who is fastest at each
    n; the environment comes after the results. ``targets``: add the fused backend's targets
    (:mod:`snnbench.report.targets`), a section for snnbench's own developers. Returns the written
    paths (PNGs first, then the Markdown and the HTML page). Raises
    :class:`~snnbench.store.rundir.RunDirError` for a missing, empty or damaged run folder, and
    :class:`~snnbench.store.storage.StorageError` when ``out_dir`` holds files that are not an
    earlier report (they are never overwritten). Runs with one adapter, one neuron count or
    no ok case still give a report: plots without data are left out and the page says why.
    """
    try:
        run = load_run(run_dir, samples=True)
        unread = ""
    except StorageError as exc:
        # the figures and tables stand without the raw samples: only a damaged summary or
        # manifest (raised again here) stops a report
        run = load_run(run_dir, samples=False)
        unread = str(exc)
    out = Path(out_dir) if out_dir is not None else run.path / "report"
    if out_dir is None and out.is_symlink():
        # the folder's own report/ that points elsewhere (a folder someone sent): the report
        # would land wherever it points; an --out the user names is theirs to point
        raise StorageError(f"{out} is a symbolic link: a report is written into the run "
                           "folder itself; remove the link or give --out")
    # an earlier report is refreshed: the files its ledger lists, unchanged since; any other
    # file (the user's own report.md or phases.png) is never overwritten
    claim_folder(out, "--out", written_by_snnbench)

    summary = run.summary
    # a harness probe is no library: it is in the timing table, never in a plot or ranking
    ok = summary[(summary["status"] == "ok") & ~is_probe(summary)]
    # a case measured faster than physics allows is a defect, never a winner: no plot or
    # ranking shows it (the alerts at the top and the timing table do)
    ok = ok[~_impossible_cases(ok)]
    # only adapters that appear in a plot take a colour, so the palette does not wrap
    pairs = ok.drop_duplicates(["adapter", "variant", "environment"])
    labels = [plots.label_of(r) for _, r in pairs.iterrows()]
    colors = plots.color_map(labels)

    written: list[Path] = []
    sections: list[tuple[str, list[tuple[str, Path]], Table]] = []
    groups = _groups(ok)
    for group in groups:
        images: list[tuple[str, Path]] = []
        for name, caption, raw, draw in _PLOTS:
            target = out / f"{group.slug}{name}.png"
            path = (draw(group.rows, target, group.title, colors, samples=run.samples) if raw
                    else draw(group.rows, target, group.title, colors))
            if path is not None:  # recorded in the ledger as it was written
                images.append((caption, path))
                written.append(path)
        sections.append((group.title, images, step_pivot_table(group.rows)))
    for group in _depth_groups(ok):
        path = plots.plot_time_per_layer(group.rows, out / f"{group.slug}layers.png",
                                         group.title, colors)
        if path is not None:
            written.append(path)
            sections.append((f"Depth: {group.title}",
                             [("Step time per layer vs layers", path)], Table([], [])))

    counts = summary.drop_duplicates(list(schema.CASE_KEY))["status"].value_counts()
    status_line = ", ".join(f"{counts[s]} {s}" for s in schema.STATUSES if s in counts)
    env = environment_table(run.manifest, summary["library"].unique().tolist())

    page = ReportPage(run, out, status_line, env, sections, timing=summary_table(run),
                      metrics=case_metrics_table(run), problems=problems_table(run),
                      warns=warnings_table(run),
                      goals=targets_table(run) if targets else Table([], []),
                      overhead=overhead_lines(summary), alerts=alert_lines(run),
                      trust=trust_lines(run, ok, unread),
                      headline=headline_table([(g.title, g.rows) for g in groups],
                                              run.samples),
                      conformance=conformance_blocks(run.path))
    # one page per format that draws a page (report.md, report.html), in the registry's order
    for fmt in EXPORTERS.formats(ReportPage):
        exporter = EXPORTERS.get(fmt, ReportPage)
        path = out / f"report.{exporter.suffix}"
        write_recorded(path, exporter.serialize(page).encode("utf-8"))
        written.append(path)
    return written


def _impossible_cases(frame: pd.DataFrame) -> pd.Series:
    """A mask of the rows whose case (adapter, variant, environment, case id) has a timed
    phase flagged ``impossible`` (:mod:`snnbench.records.roofline`)."""
    bad = impossible_rows(frame)
    keys = ["adapter", "variant", "environment", "case_id"]
    flagged = set(bad[keys].astype(str).itertuples(index=False, name=None))
    return pd.Series([tuple(k) in flagged for k in frame[keys].astype(str).itertuples(
        index=False, name=None)], index=frame.index, dtype=bool)


def alert_lines(run: Run) -> list[str]:
    """Every row measured faster than its device's floor: a defect the report leads with (the
    noise verdict is in :func:`trust_lines`)."""
    lines: list[str] = []
    bad = impossible_rows(run.summary)
    for _, row in bad.iterrows():
        label = adapter_label(str(row["adapter"]), str(row["variant"]), str(row["environment"]))
        lines.append(f"Impossible: {label} {case_text(row)} {row['phase']} "
                     f"{format_seconds(float(row['median']))} is below the device's floor of "
                     f"{format_seconds(float(row['floor_s']))}: {IMPOSSIBLE_NOTE}")
    return lines

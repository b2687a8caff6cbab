"""PNG plots of one run, drawn headless with matplotlib's Agg canvas.

Every function takes rows of the summary table that belong to one *configuration group* (same
device, dtype, batch, time steps, layers, reset: only the workload's size and the adapters
vary), writes one PNG
and returns its path, or returns None when the rows hold nothing to draw, so a run with one
adapter or one neuron count still gives a report without empty axes. Each PNG is recorded in its
folder's ledger as it is written (:func:`snnbench.records.fileio.write_recorded`): a later report
replaces it, and nothing else. Figures are built with
:class:`matplotlib.figure.Figure` directly (no pyplot): no global state, no display needed.

The rules a published figure follows: bars only on a linear axis (a bar's length is its value),
adapters sorted by speed (fastest on top), one axis scale shared by the panels of a figure
(except the distribution plot, whose panels show shapes), the training step drawn as forward and
backward stacked, the hardware floor drawn where it was measured and said absent where not, and
ratios with their interval. Only the scaling plot (lines, no bars) is log-log.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from snnbench.records.contract import adapter_label
from snnbench.records.fileio import write_recorded
from snnbench.records.metrics import byte_unit, time_unit
from snnbench.records.schema import FLOOR, rows_workload
from snnbench.report import speedups

REFERENCE = speedups.REFERENCE
_DPI = 110


def label_of(row: pd.Series) -> str:
    """Legend label of a summary row (adapter, adapter:variant, adapter@environment)."""
    return adapter_label(str(row["adapter"]), str(row["variant"]),
                         str(row.get("environment", "") or ""))


def color_map(labels: Sequence[str]) -> dict[str, str]:
    """A fixed colour per label, shared by all plots of a report; the floor is always dark grey."""
    # tab10, then dark hues that cannot be mistaken for its light/dark twins
    palette = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
        "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#843c39", "#637939", "#e7ba52",
        "#7b4173", "#393b79", "#ad494a", "#8ca252", "#bd9e39", "#a55194",
    ]
    colors: dict[str, str] = {}
    others = [lab for lab in sorted(set(labels)) if lab != FLOOR]
    for i, lab in enumerate(others):
        colors[lab] = palette[i % len(palette)]
    colors[FLOOR] = "#555555"
    return colors


def _save(fig: Figure, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=_DPI, bbox_inches="tight")
    # whole or not at all, and in the ledger with it: an interrupted report leaves a folder
    # the next report still takes as its own
    write_recorded(out, png.getvalue())
    return out


def _errors(frame: pd.DataFrame, scale: float) -> np.ndarray:
    """Asymmetric error bars from the quartiles: (median - q1, q3 - median), NaN → 0."""
    med = frame["median"].to_numpy(float) * scale
    low = np.nan_to_num(med - frame["q1"].to_numpy(float) * scale, nan=0.0).clip(0, None)
    high = np.nan_to_num(frame["q3"].to_numpy(float) * scale - med, nan=0.0).clip(0, None)
    return np.vstack([low, high])


def _log_y(ax: Axes) -> None:
    """Log y axis with plain tick labels at 1-2-5 steps (readable even over a narrow range)."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _floor_note(ax: Axes, text: str = "floor: not measured in this run") -> None:
    """Say in the panel that the hardware floor is absent (a plot never implies one)."""
    ax.text(0.99, 0.02, text, transform=ax.transAxes, ha="right", va="bottom", fontsize=7,
            color="#555555")


def _floor_line(ax: Axes, at: float) -> None:
    """The floor (a GEMM alone: a bound no library beats) as a dashed line; the legend names
    it (:func:`_floor_handle`): a label beside the line collides with the bars or the title
    when the floor sits near 0."""
    ax.axvline(at, color="#555555", linestyle="--", linewidth=1)


def _floor_handle() -> Line2D:
    return Line2D([], [], color="#555555", linestyle="--", linewidth=1, label="floor")


def _panels(count: int, heights: Sequence[float], width: float,
            sharex: bool = True) -> tuple[Figure, list[Axes]]:
    """``count`` panels stacked vertically, their heights in proportion to their rows."""
    fig = Figure(figsize=(width, sum(heights) + 1.0), layout="constrained")
    axes = fig.subplots(count, 1, squeeze=False, sharex=sharex,
                        gridspec_kw={"height_ratios": list(heights)})
    return fig, [row[0] for row in axes]


def _time_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """ok, finite forward/backward/step time rows, labelled."""
    data = rows[rows["phase"].isin(["forward", "backward", "step"]) & (rows["metric"] == "time_s")]
    data = data[np.isfinite(data["median"].to_numpy(float))]
    labelled: pd.DataFrame = data.assign(label=[label_of(r) for _, r in data.iterrows()])
    return labelled


def _noisy_labels(frame: pd.DataFrame) -> set[str]:
    """Labels whose step time carries a noise warning (high IQR / median)."""
    step = frame[(frame["phase"] == "step") & (frame["warning"].astype(str) != "")]
    return set(step["label"])


def _by_step(panel: pd.DataFrame) -> list[str]:
    """The labels of one n, fastest first: by step median, else forward + backward."""
    totals: dict[str, float] = {}
    for lab, part in panel.groupby("label"):
        step = part[part["phase"] == "step"]["median"]
        total = (float(step.min()) if not step.empty
                 else float(part[part["phase"].isin(["forward", "backward"])]["median"].sum()))
        totals[str(lab)] = total
    return sorted(totals, key=lambda lab: (totals[lab], lab))


def _tick_names(labels: Sequence[str], noisy: set[str]) -> list[str]:
    return [f"{lab} (noisy)" if lab in noisy else lab for lab in labels]


def _time_panel(ax: Axes, panel: pd.DataFrame, factor: float, colors: dict[str, str]) -> float:
    """Forward and backward stacked into the step, one horizontal bar per label (fastest on
    top), the step's median and IQR as a black dot and whisker, its value written beside it;
    the floor as a dashed line or a note. Returns the largest x drawn (in display units)."""
    libs = panel[panel["label"] != FLOOR]
    labels = _by_step(libs)
    widest = 0.0
    for i, lab in enumerate(labels):
        part = libs[libs["label"] == lab]

        def med(phase: str, part: pd.DataFrame = part) -> float:
            values = part[part["phase"] == phase]["median"].to_numpy(float)
            return float(values.min()) * factor if len(values) else math.nan

        fwd, bwd, color = med("forward"), med("backward"), colors.get(lab, "#888888")
        if math.isfinite(fwd):
            ax.barh(i, fwd, color=color, edgecolor="black", linewidth=0.5, height=0.7)
        if math.isfinite(bwd):
            ax.barh(i, bwd, left=np.nan_to_num(fwd), color=color, alpha=0.45, hatch="//",
                    edgecolor="black", linewidth=0.5, height=0.7)
        step = part[part["phase"] == "step"]
        end = np.nansum([fwd, bwd])
        if not step.empty:
            row = step.sort_values("median").iloc[0]
            m, q1, q3 = (float(row[c]) * factor for c in ("median", "q1", "q3"))
            ax.errorbar(m, i, xerr=[[max(m - q1, 0.0)], [max(q3 - m, 0.0)]], fmt="o",
                        color="black", markersize=3, capsize=2, linewidth=1)
            end = max(end, q3 if math.isfinite(q3) else m, m)
            value = m
        else:
            value = end
        ax.annotate(f"{value:.3g}", (end, i), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=7)
        widest = max(widest, end)
    noisy = _noisy_labels(libs)
    ax.set_yticks(range(len(labels)), _tick_names(labels, noisy), fontsize=8)
    ax.set_ylim(len(labels) - 0.5, -0.5)  # fastest on top
    floor = panel[(panel["label"] == FLOOR) & (panel["phase"] == "step")]
    if floor.empty:
        _floor_note(ax)
    else:
        at = float(floor["median"].min()) * factor
        _floor_line(ax, at)
    ax.grid(axis="x", alpha=0.3)
    return widest


def _time_legend(fig: Figure, floor: bool) -> None:
    """The legend of a time figure, below it (above the panels it ran into their titles)."""
    handles = [
        Patch(facecolor="#bbbbbb", edgecolor="black", label="forward"),
        Patch(facecolor="#dddddd", edgecolor="black", hatch="//", label="backward"),
        Line2D([], [], color="black", marker="o", markersize=3, label="step: median, IQR"),
        *([_floor_handle()] if floor else []),
    ]
    fig.legend(handles=handles, fontsize=8, loc="outside lower center", ncol=len(handles),
               frameon=False)


def plot_phase_bars(
    rows: pd.DataFrame, out: Path, title: str, colors: dict[str, str]
) -> Path | None:
    """The step of each adapter, forward and backward stacked, one panel per neuron count.

    Linear time axis shared by every panel (a bar's length is its time, and panels compare);
    adapters sorted by step time, fastest on top; the step's median and IQR as a dot and
    whisker; the floor a dashed line, or a note that this run did not measure it.
    """
    data = _time_rows(rows)
    if data.empty:
        return None
    workload = rows_workload(rows)
    size = workload.size_param
    sizes = sorted(int(n) for n in data[size].unique())
    factor, unit = time_unit(data["median"].tolist())
    counts = [data[(data[size] == n) & (data["label"] != FLOOR)]["label"].nunique()
              for n in sizes]
    fig, axes = _panels(len(sizes), [0.28 * c + 0.8 for c in counts], 8.0)
    widest = 0.0
    for ax, n in zip(axes, sizes, strict=True):
        widest = max(widest, _time_panel(ax, data[data[size] == n], factor, colors))
        ax.set_title(workload.size_text(n), fontsize=9, loc="left")
    axes[0].set_xlim(0, widest * 1.15 or 1.0)
    axes[-1].set_xlabel(f"median time [{unit}] (linear; same scale in every panel)")
    _time_legend(fig, bool((data["label"] == FLOOR).any()))
    fig.suptitle(f"Training step = forward + backward, fastest first\n{title}", fontsize=10)
    return _save(fig, out)


def plot_at_size(
    rows: pd.DataFrame, out: Path, title: str, colors: dict[str, str]
) -> Path | None:
    """Time and peak memory per adapter at one neuron count, side by side: the chart of the
    Open Neuromorphic benchmark posts, on linear axes, sorted by step time, one row per
    adapter in both panels. The n is the largest with a time for at least two adapters."""
    data = _time_rows(rows)
    workload = rows_workload(rows)
    size = workload.size_param
    libs = data[data["label"] != FLOOR]
    wide = [int(n) for n in libs[size].unique()
            if libs[libs[size] == n]["label"].nunique() >= 2]
    if not wide:
        return None
    n = max(wide)
    panel = data[data[size] == n]
    labels = _by_step(panel[panel["label"] != FLOOR])
    peak, metric = memory_rows(rows[rows[size] == n])
    has_mem = not peak.empty
    fig = Figure(figsize=(11.0 if has_mem else 7.0, 0.3 * len(labels) + 1.8),
                 layout="constrained")
    axes = fig.subplots(1, 2 if has_mem else 1, squeeze=False, sharey=True)[0]
    factor, unit = time_unit(panel["median"].tolist())
    widest = _time_panel(axes[0], panel, factor, colors)
    axes[0].set_xlim(0, widest * 1.2 or 1.0)
    axes[0].set_xlabel(f"median time [{unit}]")
    axes[0].set_title("time per training step", fontsize=9, loc="left")
    _time_legend(fig, bool((panel["label"] == FLOOR).any()))
    if has_mem:
        peak = peak.assign(label=[label_of(r) for _, r in peak.iterrows()])
        scale, munit = byte_unit(peak["median"].tolist())
        ax = axes[1]
        for i, lab in enumerate(labels):
            value = peak[peak["label"] == lab]["median"].to_numpy(float)
            if len(value) and math.isfinite(value[0]):
                ax.barh(i, value[0] * scale, color=colors.get(lab, "#888888"),
                        edgecolor="black", linewidth=0.5, height=0.7)
                ax.annotate(f"{value[0] * scale:.3g}", (value[0] * scale, i), xytext=(4, 0),
                            textcoords="offset points", va="center", fontsize=7)
            else:
                ax.annotate("not measured", (0, i), xytext=(4, 0), textcoords="offset points",
                            va="center", fontsize=7, color="#777777")
        top = float(peak["median"].max()) * scale
        ax.set_xlim(0, top * 1.2 or 1.0)
        ax.set_xlabel(f"{_memory_what(rows, metric)} [{munit}]")
        ax.set_title("peak memory", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(f"Time and memory per library at {workload.size_text(n)}\n{title}",
                 fontsize=10)
    return _save(fig, out)


def plot_scaling(rows: pd.DataFrame, out: Path, title: str, colors: dict[str, str]) -> Path | None:
    """Median step time against the workload's size (:attr:`~snnbench.workload.Workload.
    size_param`, the neuron count of Linear+LIF) on log-log axes, floor dashed where
    present."""
    workload = rows_workload(rows)
    size = workload.size_param
    data = rows[(rows["phase"] == "step") & (rows["metric"] == "time_s")]
    data = data[np.isfinite(data["median"].to_numpy(float))]
    if data.empty:
        return None
    factor, unit = time_unit(data["median"].tolist())
    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    ax = fig.subplots()
    data = data.assign(label=[label_of(r) for _, r in data.iterrows()])
    for lab in sorted(data["label"].unique()):
        line = data[data["label"] == lab].sort_values(size)
        _line(ax, line, size, factor, lab, colors)
    _log2_x(ax)
    _log_y(ax)
    sizes = sorted(data[size].unique())
    ax.set_xticks([float(s) for s in sizes], [str(int(s)) for s in sizes])
    ax.set_xlabel(workload.size_axis or size)
    ax.set_ylabel(f"median step time [{unit}]")
    ax.grid(alpha=0.3, which="both")
    if not (data["label"] == FLOOR).any():
        _floor_note(ax)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"Step time (forward + backward) vs {size}\n{title}", fontsize=10)
    return _save(fig, out)


def _line(ax: Axes, line: pd.DataFrame, x: str, factor: float, lab: str,
          colors: dict[str, str]) -> None:
    """One adapter's medians against ``x`` with IQR whiskers; the floor dashed, unmarked."""
    is_floor = lab == FLOOR
    ax.errorbar(
        line[x].to_numpy(float),
        line["median"].to_numpy(float) * factor,
        yerr=_errors(line, factor),
        marker="" if is_floor else "o",
        linestyle="--" if is_floor else "-",
        color=colors.get(lab, "#888888"),
        label="floor (hardware bound)" if is_floor else lab,
        capsize=3,
    )


def _log2_x(ax: Axes) -> None:
    """A base-2 log x axis without minor tick labels (the sizes are powers of two)."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_minor_formatter(NullFormatter())


def memory_rows(rows: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Peak memory per (adapter, variant, size): device memory when measured, else process
    RSS.

    The peak of a case is the largest peak over its phases. Returns the rows and the metric used.
    """
    size = rows_workload(rows).size_param
    for metric in ("peak_mem_bytes", "peak_rss_bytes"):
        data = rows[(rows["metric"] == metric) & np.isfinite(rows["median"].to_numpy(float))]
        if not data.empty:
            peak = (
                data.groupby(["adapter", "variant", "environment", size], as_index=False)[
                    "median"].max()
            )
            return peak, metric
    return rows.iloc[0:0], ""


def _memory_what(rows: pd.DataFrame, metric: str) -> str:
    """What a peak-memory axis measures, in words."""
    if metric != "peak_mem_bytes":
        return "peak process RSS"
    if set(rows["device"].astype(str)) == {"cpu"}:
        return "peak memory (RSS growth over the post-import baseline)"
    return "peak device memory"


def plot_memory(rows: pd.DataFrame, out: Path, title: str, colors: dict[str, str]) -> Path | None:
    """Peak memory per adapter, one panel per neuron count: horizontal bars on a linear axis
    shared by every panel, smallest first; the floor's (a GEMM alone) as a dashed line."""
    peak, metric = memory_rows(rows)
    if peak.empty:
        return None
    peak = peak.assign(label=[label_of(r) for _, r in peak.iterrows()])
    scale, unit = byte_unit(peak["median"].tolist())
    workload = rows_workload(rows)
    size = workload.size_param
    sizes = sorted(int(n) for n in peak[size].unique())
    counts = [peak[(peak[size] == n) & (peak["label"] != FLOOR)]["label"].nunique()
              for n in sizes]
    fig, axes = _panels(len(sizes), [0.28 * max(c, 1) + 0.8 for c in counts], 8.0)
    for ax, n in zip(axes, sizes, strict=True):
        panel = peak[(peak[size] == n) & (peak["label"] != FLOOR)]
        panel = pd.DataFrame(panel.groupby("label", as_index=False)["median"].max())
        panel = panel.sort_values(["median", "label"])
        for i, (lab, value) in enumerate(zip(panel["label"], panel["median"], strict=True)):
            ax.barh(i, value * scale, color=colors.get(str(lab), "#888888"), edgecolor="black",
                    linewidth=0.5, height=0.7)
            ax.annotate(f"{value * scale:.3g}", (value * scale, i), xytext=(4, 0),
                        textcoords="offset points", va="center", fontsize=7)
        ax.set_yticks(range(len(panel)), list(panel["label"]), fontsize=8)
        ax.set_ylim(len(panel) - 0.5, -0.5)
        floor = peak[(peak[size] == n) & (peak["label"] == FLOOR)]
        if floor.empty:
            _floor_note(ax)
        else:
            at = float(floor["median"].max()) * scale
            _floor_line(ax, at)
        ax.set_title(workload.size_text(n), fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_xlim(0, float(peak["median"].max()) * scale * 1.15 or 1.0)
    if (peak["label"] == FLOOR).any():
        fig.legend(handles=[_floor_handle()], fontsize=8, loc="outside lower center",
                   frameon=False)
    what = _memory_what(rows, metric)
    axes[-1].set_xlabel(f"{what} [{unit}] (linear; same scale in every panel)")
    fig.suptitle(f"Peak memory, smallest first\n{title}", fontsize=10)
    return _save(fig, out)


def speedup_table(rows: pd.DataFrame, reference: str = REFERENCE) -> pd.DataFrame:
    """Speed-up of each adapter's median step time over ``reference`` (default variant), per n.

    Index: the workload's size (neurons); columns: labels (the reference itself excluded);
    cells: ref / adapter, NaN where either is missing. Empty when the rows hold no reference
    step time.
    """
    step = rows[(rows["phase"] == "step") & (rows["metric"] == "time_s")]
    step = step[np.isfinite(step["median"].to_numpy(float))]
    ref = step[(step["adapter"] == reference) & step["variant"].isin(["default", ""])
               & (step["environment"] == "")]
    if ref.empty:
        return pd.DataFrame()
    size = rows_workload(rows).size_param
    step = step.assign(label=[label_of(r) for _, r in step.iterrows()])
    times = step.pivot_table(index=size, columns="label", values="median", aggfunc="min")
    ref_times = ref.groupby(size)["median"].min()
    speed: pd.DataFrame = times.rdiv(ref_times, axis=0)
    return speed.drop(columns=[reference], errors="ignore")


def plot_speedup(rows: pd.DataFrame, out: Path, title: str, colors: dict[str, str],
                 samples: pd.DataFrame | None = None) -> Path | None:
    """Speed-up of each adapter's step over ``torch``, one panel per neuron count: a dot per
    adapter with its 95 % bootstrap interval from the raw samples (:mod:`snnbench.report.speedups`;
    none without ``samples``), on a linear axis shared by the panels, fastest on top, a line
    at 1× (as fast as torch)."""
    found = speedups.speedups(rows, samples)
    if not found:
        return None
    workload = rows_workload(rows)
    sizes = sorted({r.size for r in found})
    counts = [sum(1 for r in found if r.size == n) for n in sizes]
    fig, axes = _panels(len(sizes), [0.28 * c + 0.8 for c in counts], 8.0)
    top = max(max(r.high if r.has_interval else r.value, r.value) for r in found)
    with_interval = any(r.has_interval for r in found)
    for ax, n in zip(axes, sizes, strict=True):
        mine = sorted((r for r in found if r.size == n), key=lambda r: (-r.value, r.label))
        for i, r in enumerate(mine):
            is_floor = r.label == FLOOR
            color = "#555555" if is_floor else colors.get(r.label, "#888888")
            err = ([[r.value - r.low], [r.high - r.value]] if r.has_interval else None)
            ax.errorbar(r.value, i, xerr=err, fmt="D" if is_floor else "o", color=color,
                        markerfacecolor="white" if r.noisy else color, markersize=5,
                        capsize=3, linewidth=1.2)
            ax.annotate(r.text(), (r.high if r.has_interval else r.value, i), xytext=(5, 0),
                        textcoords="offset points", va="center", fontsize=7)
        names = [("floor (bound)" if r.label == FLOOR else r.label)
                 + (" (noisy)" if r.noisy else "") for r in mine]
        ax.set_yticks(range(len(mine)), names, fontsize=8)
        ax.set_ylim(len(mine) - 0.5, -0.5)
        ax.axvline(1.0, color="#444444", linewidth=1, linestyle=":")
        ax.set_title(workload.size_text(n), fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_xlim(0, top * 1.25)
    axes[-1].set_xlabel(f"speed-up over {REFERENCE} (step time; > 1 is faster; linear)")
    how = ("whiskers: 95 % bootstrap interval of the ratio of medians (raw samples); "
           "hollow: a noisy row" if with_interval else "no raw samples: no intervals")
    fig.suptitle(f"Speed-up over {REFERENCE}, fastest first ({how})\n{title}", fontsize=10)
    return _save(fig, out)


#: at most this many samples per adapter are drawn as dots (the box uses them all)
_STRIP = 300
#: the distribution plot's axis: sample / its case's median, from ÷ to × this
_SPREAD = 2.0


def plot_distribution(rows: pd.DataFrame, out: Path, title: str, colors: dict[str, str],
                      samples: pd.DataFrame | None = None) -> Path | None:
    """The spread of each adapter's raw step-time samples, one panel per neuron count: every
    sample divided by its case's median (1 = the median), a box (quartiles, whiskers to 1.5
    IQR) over the samples as dots, fastest adapter on top. One linear axis, shared by every
    panel, from 1/:data:`_SPREAD` to :data:`_SPREAD`; samples beyond it are counted in the
    label. None without raw samples."""
    if samples is None or samples.empty:
        return None
    step = speedups.step_rows(rows)
    if step.empty:
        return None
    workload = rows_workload(rows)
    size = workload.size_param
    sizes = sorted(int(n) for n in step[size].unique())
    counts = [step[step[size] == n]["label"].nunique() for n in sizes]
    fig, axes = _panels(len(sizes), [0.3 * c + 0.9 for c in counts], 8.0)
    rng = np.random.default_rng(0)
    drawn = False
    for ax, n in zip(axes, sizes, strict=True):
        at = step[step[size] == n].sort_values(["median", "label"]).drop_duplicates("label")
        names: list[str] = []
        for i, (_, row) in enumerate(at.iterrows()):
            lab, v = str(row["label"]), speedups.step_samples(row, samples)
            median = float(np.median(v)) if len(v) else math.nan
            if not (len(v) and median > 0):
                names.append(f"{lab} (no samples)")
                continue
            drawn = True
            rel = v / median
            color = "#555555" if lab == FLOOR else colors.get(lab, "#888888")
            ax.boxplot([rel], positions=[i], orientation="horizontal", widths=0.6,
                       showfliers=False, medianprops={"color": "black"},
                       boxprops={"color": color}, whiskerprops={"color": color},
                       capprops={"color": color})
            shown = rel if len(rel) <= _STRIP else rng.choice(rel, _STRIP, replace=False)
            ax.scatter(shown, i + rng.uniform(-0.25, 0.25, len(shown)), s=5, color=color,
                       alpha=0.5, linewidths=0)
            beyond = int(((rel < 1 / _SPREAD) | (rel > _SPREAD)).sum())
            names.append(f"{lab} ({len(v)}" + (f", {beyond} off the axis)" if beyond else ")"))
        ax.set_yticks(range(len(at)), names, fontsize=8)
        ax.set_ylim(len(at) - 0.5, -0.5)
        ax.axvline(1.0, color="#444444", linewidth=0.8, linestyle=":")
        ax.set_title(workload.size_text(n), fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    if not drawn:
        return None
    axes[0].set_xlim(1 / _SPREAD, _SPREAD)
    axes[-1].set_xlabel("step time / its median (linear; same scale in every panel)")
    fig.suptitle("Spread of the raw step-time samples, each relative to its own median\n"
                 "(box: quartiles, whiskers 1.5 IQR; dots: samples; in brackets: how many)\n"
                 f"{title}", fontsize=10)
    return _save(fig, out)


def plot_time_per_layer(
    rows: pd.DataFrame, out: Path, title: str, colors: dict[str, str]
) -> Path | None:
    """Median step time divided by the layer count against the layer count, one panel per n.

    ``rows`` span several ``layers`` values of otherwise one configuration group (the caller
    groups without ``layers``). A flat line is a stack whose cost grows linearly with depth;
    a falling one amortises fixed costs (launches, Python per step) over more layers. Needs
    at least two layer counts; the floor is dashed.
    """
    workload = rows_workload(rows)
    size, depth = workload.size_param, workload.depth_param
    data = rows[(rows["phase"] == "step") & (rows["metric"] == "time_s")]
    data = data[np.isfinite(data["median"].to_numpy(float))]
    if data.empty or not depth or data[depth].nunique() < 2:
        return None
    data = data.assign(
        label=[label_of(r) for _, r in data.iterrows()],
        per_layer=data["median"].to_numpy(float) / data[depth].to_numpy(float),
        q1=data["q1"].to_numpy(float) / data[depth].to_numpy(float),
        q3=data["q3"].to_numpy(float) / data[depth].to_numpy(float),
    )
    factor, unit = time_unit(data["per_layer"].tolist())
    sizes = sorted(data[size].unique())
    fig = Figure(figsize=(4.2 * len(sizes) + 2.0, 4.2), layout="constrained")
    axes = fig.subplots(1, len(sizes), squeeze=False)[0]
    depths = sorted(data[depth].unique())
    for ax, n in zip(axes, sizes, strict=True):
        panel = data[data[size] == n]
        for lab in sorted(panel["label"].unique()):
            line = panel[panel["label"] == lab].sort_values(depth)
            _line(ax, line.assign(median=line["per_layer"]), depth, factor, lab, colors)
        _log2_x(ax)
        ax.set_xticks([float(d) for d in depths], [str(int(d)) for d in depths])
        _log_y(ax)
        ax.set_xlabel(depth)
        ax.set_title(workload.size_text(n), fontsize=10)
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel(f"median step time / {depth} [{unit}]")
    axes[-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"Step time per layer vs depth (whiskers: IQR / {depth})\n{title}",
                 fontsize=10)
    return _save(fig, out)

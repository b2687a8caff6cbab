"""PNG plots of one run, drawn headless with matplotlib's Agg canvas.

Every function takes rows of the summary table that belong to one *configuration group* (same
device, dtype, batch, time steps, layers, reset: only neurons and adapters vary), writes one PNG
and returns its path, or returns None when the rows hold nothing to draw, so a run with one
adapter or one neuron count still gives a report without empty axes. Each PNG is recorded in its
folder's ledger as it is written (:func:`snnbench.fileio.write_recorded`): a later report
replaces it, and nothing else. Figures are built with
:class:`matplotlib.figure.Figure` directly (no pyplot): no global state, no display needed.
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
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from snnbench.contract import adapter_label
from snnbench.fileio import write_recorded
from snnbench.metrics import byte_unit, time_unit
from snnbench.schema import FLOOR

#: a value range wider than this (max/min) is drawn on a log axis
LOG_RANGE = 30.0
REFERENCE = "torch"
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


def wants_log(values: Sequence[float]) -> bool:
    """True when the positive values span more than :data:`LOG_RANGE` (bars would vanish)."""
    positive = [v for v in values if math.isfinite(v) and v > 0]
    return len(positive) > 1 and max(positive) / min(positive) > LOG_RANGE


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


def _finish_log(ax: Axes, values: Sequence[float]) -> None:
    """Switch the y axis to log when ``values`` span more than :data:`LOG_RANGE`."""
    if wants_log(values):
        _log_y(ax)


def plot_phase_bars(
    rows: pd.DataFrame, out: Path, title: str, colors: dict[str, str]
) -> Path | None:
    """Forward and backward median time per adapter, one panel per neuron count.

    ``rows``: ok summary rows with metric ``time_s``. Error bars span q1..q3 (the IQR).
    """
    data = rows[rows["phase"].isin(["forward", "backward"]) & (rows["metric"] == "time_s")]
    data = data[np.isfinite(data["median"].to_numpy(float))]
    if data.empty:
        return None
    sizes = sorted(int(n) for n in data["neurons"].unique())
    cols = min(3, len(sizes))
    nrows = math.ceil(len(sizes) / cols)
    labels_all = sorted({label_of(r) for _, r in data.iterrows()})
    width = max(4.5, 0.7 * len(labels_all) + 2.0)
    fig = Figure(figsize=(width * cols, 3.8 * nrows + 0.6), layout="constrained")
    axes = fig.subplots(nrows, cols, squeeze=False)
    for idx, n in enumerate(sizes):
        ax = axes[idx // cols][idx % cols]
        panel = data[data["neurons"] == n].copy()
        panel["label"] = [label_of(r) for _, r in panel.iterrows()]
        labels = sorted(panel["label"].unique(), key=lambda lab: (lab == FLOOR, lab))
        factor, unit = time_unit(panel["median"].tolist())
        x = np.arange(len(labels))
        for offset, phase, hatch in ((-0.2, "forward", ""), (0.2, "backward", "//")):
            part = panel[panel["phase"] == phase].set_index("label").reindex(labels)
            med = part["median"].to_numpy(float) * factor
            ax.bar(
                x + offset,
                np.nan_to_num(med, nan=0.0),
                width=0.4,
                yerr=_errors(part, factor),
                capsize=3,
                color=[colors.get(lab, "#888888") for lab in labels],
                edgecolor="black",
                linewidth=0.5,
                hatch=hatch,
                label=phase,
            )
        ax.set_xticks(x, labels, rotation=30, ha="right")
        pad = 0.5 if len(labels) > 1 else 1.0  # one adapter: keep its bars narrow, centred
        ax.set_xlim(-pad, len(labels) - 1 + pad)
        ax.set_ylabel(f"median time [{unit}]")
        ax.set_title(f"n = {n}")
        _finish_log(ax, (panel["median"] * factor).tolist())
        ax.grid(axis="y", alpha=0.3, which="both")
        # legend by hatch only: colours already name the adapters on the x axis
        handles = [
            Patch(facecolor="white", edgecolor="black", hatch=h, label=p)
            for p, h in (("forward", ""), ("backward", "//"))
        ]
        ax.legend(handles=handles, fontsize=8)
    for idx in range(len(sizes), nrows * cols):
        axes[idx // cols][idx % cols].set_visible(False)
    fig.suptitle(f"Forward and backward time (bars: median, whiskers: IQR)\n{title}")
    return _save(fig, out)


def plot_scaling(rows: pd.DataFrame, out: Path, title: str, colors: dict[str, str]) -> Path | None:
    """Median step time against neuron count on log-log axes, floor dashed where present."""
    data = rows[(rows["phase"] == "step") & (rows["metric"] == "time_s")]
    data = data[np.isfinite(data["median"].to_numpy(float))]
    if data.empty:
        return None
    factor, unit = time_unit(data["median"].tolist())
    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    ax = fig.subplots()
    data = data.assign(label=[label_of(r) for _, r in data.iterrows()])
    for lab in sorted(data["label"].unique()):
        line = data[data["label"] == lab].sort_values("neurons")
        _line(ax, line, "neurons", factor, lab, colors)
    _log2_x(ax)
    _log_y(ax)
    sizes = sorted(data["neurons"].unique())
    ax.set_xticks([float(s) for s in sizes], [str(int(s)) for s in sizes])
    ax.set_xlabel("neurons n")
    ax.set_ylabel(f"median step time [{unit}]")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"Step time (forward + backward) vs n\n{title}", fontsize=10)
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


def _grouped_bars(
    ax: Axes,
    table: pd.DataFrame,
    colors: dict[str, str],
    baseline: float = 0.0,
) -> None:
    """Bars per column of ``table`` (labels) grouped by its index (neuron counts).

    Bars start at ``baseline`` (1 for ratios, so a slow-down points down from the 1× line).
    """
    labels = sorted(table.columns, key=lambda lab: (lab == FLOOR, lab))
    x = np.arange(len(table.index))
    width = 0.8 / max(1, len(labels))
    for i, lab in enumerate(labels):
        values = np.nan_to_num(table[lab].to_numpy(float), nan=baseline)
        is_floor = lab == FLOOR
        ax.bar(
            x - 0.4 + width * (i + 0.5),
            values - baseline,
            bottom=baseline,
            width=width,
            # the floor is a bound, not a library: light grey, hatched
            color="#dddddd" if is_floor else colors.get(lab, "#888888"),
            edgecolor="black",
            linewidth=0.5,
            hatch="//" if is_floor else "",
            label="floor (bound)" if is_floor else lab,
        )
    ax.set_xticks(x, [str(int(n)) for n in table.index])
    ax.set_xlabel("neurons n")


def _bar_size(table: pd.DataFrame) -> tuple[float, float]:
    """Figure size for grouped bars: wider with more groups and bars; room for the legend."""
    bars = len(table.index) * max(1, len(table.columns))
    return max(6.0, 0.35 * bars + 2.0) + 1.5, 4.5


def memory_rows(rows: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Peak memory per (adapter, variant, n): device memory when measured, else process RSS.

    The peak of a case is the largest peak over its phases. Returns the rows and the metric used.
    """
    for metric in ("peak_mem_bytes", "peak_rss_bytes"):
        data = rows[(rows["metric"] == metric) & np.isfinite(rows["median"].to_numpy(float))]
        if not data.empty:
            peak = (
                data.groupby(["adapter", "variant", "environment", "neurons"], as_index=False)[
                    "median"].max()
            )
            return peak, metric
    return rows.iloc[0:0], ""


def plot_memory(rows: pd.DataFrame, out: Path, title: str, colors: dict[str, str]) -> Path | None:
    """Peak memory per adapter and neuron count (grouped bars)."""
    peak, metric = memory_rows(rows)
    if peak.empty:
        return None
    peak = peak.assign(label=[label_of(r) for _, r in peak.iterrows()])
    table = peak.pivot_table(index="neurons", columns="label", values="median", aggfunc="max")
    scale, unit = byte_unit(peak["median"].tolist())
    table = table * scale
    fig = Figure(figsize=_bar_size(table), layout="constrained")
    ax = fig.subplots()
    _grouped_bars(ax, table, colors)
    on_cpu = set(rows["device"].astype(str)) == {"cpu"}
    if metric != "peak_mem_bytes":
        what = "process RSS"
    elif on_cpu:
        what = "memory (resident-set growth over the post-import baseline)"
    else:
        what = "device memory"
    ax.set_ylabel(f"peak {what} [{unit}]")
    _finish_log(ax, table.to_numpy(float).ravel().tolist())
    ax.grid(axis="y", alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"Peak {what}\n{title}", fontsize=10)
    return _save(fig, out)


def speedup_table(rows: pd.DataFrame, reference: str = REFERENCE) -> pd.DataFrame:
    """Speed-up of each adapter's median step time over ``reference`` (default variant), per n.

    Index: neurons; columns: labels (the reference itself excluded); cells: ref / adapter, NaN
    where either is missing. Empty when the rows hold no reference step time.
    """
    step = rows[(rows["phase"] == "step") & (rows["metric"] == "time_s")]
    step = step[np.isfinite(step["median"].to_numpy(float))]
    ref = step[(step["adapter"] == reference) & step["variant"].isin(["default", ""])
               & (step["environment"] == "")]
    if ref.empty:
        return pd.DataFrame()
    step = step.assign(label=[label_of(r) for _, r in step.iterrows()])
    times = step.pivot_table(index="neurons", columns="label", values="median", aggfunc="min")
    ref_times = ref.groupby("neurons")["median"].min()
    speed: pd.DataFrame = times.rdiv(ref_times, axis=0)
    return speed.drop(columns=[reference], errors="ignore")


def plot_speedup(rows: pd.DataFrame, out: Path, title: str, colors: dict[str, str]) -> Path | None:
    """Speed-up over the ``torch`` reference (step time), grouped by neuron count."""
    table = speedup_table(rows)
    if table.empty or table.columns.empty or not np.isfinite(table.to_numpy(float)).any():
        return None
    fig = Figure(figsize=_bar_size(table), layout="constrained")
    ax = fig.subplots()
    _grouped_bars(ax, table, colors, baseline=1.0)
    ax.axhline(1.0, color="#444444", linewidth=1, linestyle=":", label=f"{REFERENCE} = 1")
    ax.set_ylabel(f"speed-up over {REFERENCE} (step time, ×)")
    _finish_log(ax, [*table.to_numpy(float).ravel().tolist(), 1.0])
    ax.grid(axis="y", alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"Speed-up over {REFERENCE} (higher is faster)\n{title}", fontsize=10)
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
    data = rows[(rows["phase"] == "step") & (rows["metric"] == "time_s")]
    data = data[np.isfinite(data["median"].to_numpy(float))]
    if data.empty or data["layers"].nunique() < 2:
        return None
    data = data.assign(
        label=[label_of(r) for _, r in data.iterrows()],
        per_layer=data["median"].to_numpy(float) / data["layers"].to_numpy(float),
        q1=data["q1"].to_numpy(float) / data["layers"].to_numpy(float),
        q3=data["q3"].to_numpy(float) / data["layers"].to_numpy(float),
    )
    factor, unit = time_unit(data["per_layer"].tolist())
    sizes = sorted(data["neurons"].unique())
    fig = Figure(figsize=(4.2 * len(sizes) + 2.0, 4.2), layout="constrained")
    axes = fig.subplots(1, len(sizes), squeeze=False)[0]
    depths = sorted(data["layers"].unique())
    for ax, n in zip(axes, sizes, strict=True):
        panel = data[data["neurons"] == n]
        for lab in sorted(panel["label"].unique()):
            line = panel[panel["label"] == lab].sort_values("layers")
            _line(ax, line.assign(median=line["per_layer"]), "layers", factor, lab, colors)
        _log2_x(ax)
        ax.set_xticks([float(d) for d in depths], [str(int(d)) for d in depths])
        _log_y(ax)
        ax.set_xlabel("layers")
        ax.set_title(f"n={int(n)}", fontsize=10)
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel(f"median step time / layers [{unit}]")
    axes[-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"Step time per layer vs depth (whiskers: IQR / layers)\n{title}", fontsize=10)
    return _save(fig, out)

"""`snnbench report` / `show`: plots, HTML, Markdown and tables from fixture run folders."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from snnbench.records import schema
from snnbench.render.formats import html_table, markdown, text
from snnbench.report import plots
from snnbench.report.pages import Table, format_table, report, summary_table
from snnbench.store.rundir import RunDirError, load_run
from tests.fixtures.runfolders import FakeCase, timed_case, write_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _full_run(path: Path) -> Path:
    rng = np.random.default_rng(0)
    speed = {"torch": 1.0, "snntorch": 2.5, "fused": 0.3, "floor": 0.1, "lava-dl": 40.0}
    cases = [
        timed_case(a, n, rng, median_s=1e-3 * f * n / 64, mem_bytes=f * n * n * 8, device="cuda")
        for n in (64, 256, 1024)
        for a, f in speed.items()
    ]
    cases.append(FakeCase("spyx", 256, device="cuda", status="error", message="XlaRuntimeError: x"))
    cases.append(
        FakeCase("sinabs", 1024, device="cuda", status="oom", message="CUDA out of memory")
    )
    gpu = {"name": "NVIDIA H200", "driver": "550.54", "cuda": "12.4", "memory_bytes": 150e9}
    return write_run(path, cases, manifest={"gpus": [gpu]})


def test_full_report(tmp_path: Path) -> None:
    run = _full_run(tmp_path / "run")
    written = report(run, tmp_path / "out")
    names = [p.name for p in written]
    assert names == [
        "at-size.png",
        "phases.png",
        "speedup.png",
        "distribution.png",
        "scaling.png",
        "memory.png",
        "report.md",
        "report.html",
    ]
    for png in written[:6]:
        assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 10_000

    md = (tmp_path / "out" / "report.md").read_text()
    assert "NVIDIA H200, driver 550.54, CUDA 12.4" in md
    assert "Cases: 15 ok, 1 error, 1 oom." in md
    assert "![Speed-up over torch with 95 % intervals](speedup.png)" in md
    # every non-ok row with status and reason
    assert (
        "| spyx | default | cuda float32 n=256 B=4 T=20 L=1 subtract | error | XlaRuntimeError: x |"
        in md
    )
    assert "| oom | CUDA out of memory |" in md
    # step pivot: fused is ~3.3× faster than torch, the floor ~10×
    fused_row = next(line for line in md.splitlines() if line.startswith("| fused | "))
    speedups = [float(x) for x in re.findall(r"\((\d+\.\d+)×\)", fused_row)]
    assert len(speedups) == 3 and all(2.8 < s < 3.8 for s in speedups)

    page = (tmp_path / "out" / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 6
    assert "http://" not in page and "https://" not in page  # self-contained, no network
    assert "XlaRuntimeError: x" in page


def test_default_out_dir_is_inside_run(tmp_path: Path) -> None:
    run = _full_run(tmp_path / "run")
    written = report(run)
    assert all(p.parent == run / "report" for p in written)


def test_single_adapter_single_size(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    run = write_run(tmp_path / "run", [timed_case("torch", 64, rng, median_s=1e-3, mem_bytes=None)])
    written = report(run, tmp_path / "out")
    # no time-and-memory chart nor speed-up plot (torch alone), no memory plot (nothing
    # measured), no crash; its samples' spread is drawn
    assert [p.name for p in written] == ["phases.png", "distribution.png", "scaling.png",
                                         "report.md", "report.html"]


def test_only_failures_still_reports(tmp_path: Path) -> None:
    run = write_run(
        tmp_path / "run",
        [
            FakeCase("norse", 64, status="error", message="boom"),
            FakeCase("lava-dl", 64, status="unavailable", message="lava-dl is not installed"),
        ],
    )
    written = report(run, tmp_path / "out")
    assert [p.name for p in written] == ["report.md", "report.html"]
    md = written[0].read_text()
    assert "nothing to plot" in md and "lava-dl is not installed" in md


def test_groups_get_their_own_plots(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    cases = [timed_case("torch", 64, rng, median_s=1e-3, device=d) for d in ("cpu", "cuda")]
    written = report(write_run(tmp_path / "run", cases), tmp_path / "out")
    names = {p.name for p in written}
    assert "cpu-float32-B4-T20-L1-subtract_phases.png" in names
    assert "cuda-float32-B4-T20-L1-subtract_phases.png" in names


def test_depth_sweep_gets_a_time_per_layer_plot(tmp_path: Path) -> None:
    # a run over several layer counts (configs/multilayer.toml): one per-layer plot for the
    # group without layers, beside the usual per-layer-count plots; none for a single depth
    rng = np.random.default_rng(3)
    cases = [timed_case(a, n, rng, median_s=1e-3 * layers, layers=layers)
             for a in ("torch", "fused") for n in (64, 256) for layers in (1, 2, 4, 8)]
    written = report(write_run(tmp_path / "run", cases), tmp_path / "out")
    names = {p.name for p in written}
    assert "cpu-float32-B4-T20-subtract_layers.png" in names
    assert "cpu-float32-B4-T20-L8-subtract_scaling.png" in names
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Depth: cpu, float32, B=4, T=20, layers=1,2,4,8, reset=subtract" in md
    assert "cpu-float32-B4-T20-subtract_layers.png" in md
    one_depth = [c for c in cases if c.layers == 1]
    single = report(write_run(tmp_path / "one", one_depth), tmp_path / "out1")
    assert not any(p.name.endswith("layers.png") for p in single)


def test_time_per_layer_divides_by_the_depth(tmp_path: Path) -> None:
    import pandas as pd

    from snnbench.report import plots

    rows = pd.DataFrame([
        {"adapter": "torch", "variant": "default", "environment": "", "phase": "step",
         "metric": "time_s", "neurons": 64, "layers": layers, "median": 2e-3 * layers,
         "q1": 2e-3 * layers, "q3": 2e-3 * layers} for layers in (1, 2, 4)])
    assert plots.plot_time_per_layer(rows, tmp_path / "a.png", "t", {}) is not None
    assert plots.plot_time_per_layer(rows[rows["layers"] == 1], tmp_path / "b.png", "t",
                                     {}) is None


def test_format_table_values(tmp_path: Path) -> None:
    # hand-made samples: median 1.5 ms, quartiles 1.25 / 1.75 ms → IQR 0.5 ms = 33.3 %
    samples = np.array([1.0, 1.5, 2.0]) * 1e-3
    case = FakeCase("torch", 64, samples={("step", "time_s"): samples})
    bad = FakeCase("norse", 64, status="mismatch", message="spike match 0.91 < 0.999")
    run = load_run(write_run(tmp_path / "run", [case, bad]))
    table = summary_table(run)
    assert table.headers[:5] == ["adapter", "variant", "case", "phase", "median"]
    by_adapter = {row[0]: row for row in table.rows}
    assert by_adapter["torch"][4:8] == ["1.5 ms", "500 µs", "33.3%", "3"]
    assert by_adapter["norse"][9:] == ["mismatch", "spike match 0.91 < 0.999"]
    as_text = format_table(run, "text")
    assert as_text.splitlines()[0].startswith("adapter  variant  case")
    md = format_table(run, "md")
    assert md.splitlines()[1].startswith("|---|")


def test_table_renderers() -> None:
    t = Table(["a", "b"], [["x|y", "<b>"]])
    assert markdown(t).splitlines()[2] == "| x\\|y | <b> |"
    assert "<td>&lt;b&gt;</td>" in html_table(t)
    assert text(t).splitlines() == ["a    b", "---  ---", "x|y  <b>"]


def test_units() -> None:
    assert plots.time_unit([0.0123]) == (1e3, "ms")
    assert plots.time_unit([2.5e-6]) == (1e6, "µs")
    assert plots.byte_unit([3 * 2**30]) == (2**-30, "GiB")


def test_timed_despite_mismatch_is_flagged(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    note = "spikes match the reference on 97.0000%; timed anyway (--allow-mismatch)"
    case = timed_case("norse", 64, rng, median_s=1e-3, allow_mismatch=True, message=note)
    run = load_run(write_run(tmp_path / "run", [case]))
    step = next(r for r in summary_table(run).rows if r[3] == "step")
    assert step[9:] == ["ok", note]
    md = report(run.path, tmp_path / "out")[-2].read_text()
    assert f"| ok (timed despite mismatch) | {note} |" in md
    # the CSV fallback reads the flag back as a bool too
    (run.path / schema.SUMMARY_PARQUET).unlink()
    assert load_run(run.path).summary["allow_mismatch"].tolist() == [True] * 4  # 3 times + mem


def test_csv_fallback_keeps_empty_text(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", [FakeCase("norse", 64, status="error", message="boom")])
    (run / schema.SUMMARY_PARQUET).unlink()
    loaded = load_run(run)
    assert loaded.summary.loc[0, "phase"] == "" and loaded.summary.loc[0, "message"] == "boom"


# ------------------------------------------------------------------ damaged or empty folders


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="does not exist"):
        report(tmp_path / "nope")


def test_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="not a run folder"):
        report(tmp_path)


def test_damaged_manifest(tmp_path: Path) -> None:
    (tmp_path / schema.MANIFEST_FILE).write_text("{not json")
    with pytest.raises(RunDirError, match="damaged manifest"):
        load_run(tmp_path)


def test_unfinished_run(tmp_path: Path) -> None:
    (tmp_path / schema.MANIFEST_FILE).write_text(json.dumps({"schema_version": 1}))
    with pytest.raises(RunDirError, match="did not finish"):
        load_run(tmp_path)


def test_summary_missing_columns(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", [FakeCase("norse", 64, status="error", message="boom")])
    frame = pd.read_parquet(run / schema.SUMMARY_PARQUET).drop(columns=["median", "status"])
    frame.to_parquet(run / schema.SUMMARY_PARQUET)
    with pytest.raises(RunDirError, match="missing columns median, status"):
        load_run(run)


def test_damaged_parquet(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", [FakeCase("norse", 64, status="error", message="boom")])
    (run / schema.SUMMARY_PARQUET).write_bytes(b"PAR1 garbage")
    with pytest.raises(RunDirError, match="cannot read summary"):
        load_run(run)


def test_empty_summary(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", [])
    with pytest.raises(RunDirError, match="no rows"):
        report(run)


def test_other_schema_version(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", [FakeCase("norse", 64, status="error")], schema_version=99)
    with pytest.raises(RunDirError, match="schema_version 99"):
        report(run)


def test_reads_what_the_harness_storage_writes(tmp_path: Path) -> None:
    """The real writer (snnbench.store.storage) and this reader agree on the format."""
    from snnbench.gate.compare import compare
    from snnbench.records.contract import CaseRecord
    from snnbench.store.rundir import RunDir

    def record(adapter: str, n: int, status: str, scale: float) -> CaseRecord:
        rng = np.random.default_rng(n)
        rec: dict[str, object] = {
            "adapter": adapter,
            "variant": "default",
            "device": "cpu",
            "library": adapter,
            "library_version": "1.0",
            "status": status,
            "message": "" if status == "ok" else "boom",
            "spike_match": 1.0,
            "grad_cosine": 1.0,
            "spec": {
                "dtype": "float32",
                "neurons": n,
                "batch_size": 4,
                "time_steps": 20,
                "layers": 1,
                "reset": "subtract",
            },
        }
        if status == "ok":
            rec["samples"] = {
                phase: {
                    "time_s": list(scale * share * rng.normal(0.1, 1e-3, 12)),  # 100 ms: past the CPU floor
                    "peak_mem_bytes": [4e6],
                }
                for phase, share in (("forward", 0.4), ("backward", 0.6), ("step", 1.0))
            }
        return CaseRecord.from_dict(rec)

    runs = {}
    for name, scale in (("base", 1.0), ("cand", 1.5)):
        folder = RunDir.create(tmp_path / name)
        folder.write_manifest({"run_id": name, "gpus": [], "packages": {}})
        folder.write_case(record("torch", 64, "ok", scale))
        folder.write_case(record("norse", 64, "error", scale))
        folder.rebuild_tables(name)
        runs[name] = folder.path

    loaded = load_run(runs["base"])
    assert loaded.samples is not None and len(loaded.samples) == 3 * 13
    written = report(runs["base"], tmp_path / "out")
    assert "| norse | default | cpu float32 n=64 B=4 T=20 L=1 subtract | error | boom |" in (
        written[-2].read_text()
    )
    # one process a side: a time change needs a stated spread between processes to be judged
    assert {p.mark for p in compare(runs["base"], runs["cand"]).pairs
            if p.metric == "time_s" and p.phase == "step"} == {"inconclusive"}
    result = compare(runs["base"], runs["cand"], process_spread=0.1)
    marks = {(p.key[0], p.phase, p.metric): p.mark for p in result.pairs}
    assert marks[("torch", "step", "time_s")] == "regression"
    assert marks[("torch", "step", "peak_mem_bytes")] == "same"
    assert marks[("norse", "", "")] == "still_failing"
    assert result.exit_code == 1


# ------------------------------------------------ issue 36: plots, headline, trust, targets


def _captured(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Keep each figure a plot saves (instead of writing it), to look at its axes."""
    figures: list[object] = []

    def keep(fig: object, out: Path) -> Path:
        figures.append(fig)
        return out

    monkeypatch.setattr(plots, "_save", keep)
    return figures


def _speed_run(path: Path, *, floor: bool = True) -> Path:
    rng = np.random.default_rng(5)
    speed = {"torch": 1.0, "snntorch": 2.5, "fused": 0.3, "norse": 1.6}
    if floor:
        speed["floor"] = 0.1
    cases = [timed_case(a, n, rng, median_s=1e-3 * f * n / 64, mem_bytes=f * n * 1e5, n=40)
             for n in (64, 1024) for a, f in speed.items()]
    return write_run(path, cases)


def test_bars_are_linear_sorted_by_speed_and_panels_share_their_axis(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = load_run(_speed_run(tmp_path / "run"))
    figures = _captured(monkeypatch)
    rows = run.summary
    colors = plots.color_map(["torch", "snntorch", "fused", "norse"])
    for draw in (plots.plot_phase_bars, plots.plot_memory):
        draw(rows, tmp_path / "x.png", "t", colors)
    plots.plot_speedup(rows, tmp_path / "s.png", "t", colors, samples=run.samples)
    plots.plot_distribution(rows, tmp_path / "d.png", "t", colors, samples=run.samples)
    assert len(figures) == 4
    for fig in figures:
        axes = [ax for ax in fig.axes if ax.get_visible()]  # type: ignore[attr-defined]
        assert len(axes) == 2  # one panel per n
        assert all(ax.get_xscale() == "linear" for ax in axes)
        assert axes[0].get_shared_x_axes().joined(axes[0], axes[1])
        assert axes[0].get_xlim() == axes[1].get_xlim()
    step, memory, speedup, _ = figures

    def names(ax: object) -> list[str]:
        return [t.get_text() for t in ax.get_yticklabels()]  # type: ignore[attr-defined]

    # fastest on top, the floor apart (a dashed line, not a library bar)
    assert names(step.axes[1]) == ["fused", "torch", "norse", "snntorch"]  # type: ignore[attr-defined]
    assert names(memory.axes[1]) == ["fused", "torch", "norse", "snntorch"]  # type: ignore[attr-defined]
    assert names(speedup.axes[1])[:2] == ["floor (bound)", "fused"]  # type: ignore[attr-defined]
    # forward and backward stacked: the backward bar starts where the forward one ends
    bars = [p for p in step.axes[1].patches if p.get_height() > 0.5]  # type: ignore[attr-defined]
    fwd, bwd = bars[0], bars[1]
    assert bwd.get_x() == pytest.approx(fwd.get_x() + fwd.get_width())
    # speed-ups carry their interval (1 % noise, 40 samples a side: narrow, around 1/0.3)
    fused = next(t.get_text() for t in speedup.axes[1].texts  # type: ignore[attr-defined]
                 if t.get_text().startswith("3."))
    value, low, high = (float(v) for v in re.findall(r"(\S+)× \[(\S+), (\S+)\]", fused)[0])
    assert low <= value <= high and 0 < high - low < 0.5 and abs(value - 1 / 0.3) < 0.1


def test_an_absent_floor_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = load_run(_speed_run(tmp_path / "run", floor=False), samples=False).summary
    figures = _captured(monkeypatch)
    plots.plot_phase_bars(rows, tmp_path / "p.png", "t", {})
    plots.plot_scaling(rows, tmp_path / "s.png", "t", {})
    for fig in figures:
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]  # type: ignore[attr-defined]
        assert "floor: not measured in this run" in texts
    with_floor = load_run(_speed_run(tmp_path / "run2"), samples=False).summary
    figures.clear()
    plots.plot_phase_bars(with_floor, tmp_path / "p.png", "t", {})
    texts = [t.get_text() for ax in figures[0].axes for t in ax.texts]  # type: ignore[attr-defined]
    assert "floor: not measured in this run" not in texts
    legend = figures[0].legends[0]  # type: ignore[attr-defined]
    assert "floor" in [t.get_text() for t in legend.get_texts()]
    dashed = [line for line in figures[0].axes[1].get_lines()  # type: ignore[attr-defined]
              if line.get_linestyle() == "--"]
    assert len(dashed) == 1  # the floor's line in each panel


def test_the_chart_at_one_size_has_time_and_memory_side_by_side(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = load_run(_speed_run(tmp_path / "run"), samples=False).summary
    figures = _captured(monkeypatch)
    assert plots.plot_at_size(rows, tmp_path / "a.png", "t", {}) is not None
    time_ax, mem_ax = figures[0].axes[:2]  # type: ignore[attr-defined]
    assert "n=1024" in figures[0]._suptitle.get_text()  # type: ignore[attr-defined]
    assert time_ax.get_xscale() == mem_ax.get_xscale() == "linear"
    assert time_ax.get_shared_y_axes().joined(time_ax, mem_ax)  # one row per library in both
    assert time_ax.get_xlim()[0] == 0 and mem_ax.get_xlim()[0] == 0


def test_report_leads_with_trust_and_the_fastest_and_ends_with_the_environment(
        tmp_path: Path) -> None:
    run = _speed_run(tmp_path / "run")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["noise"] = {"noisy": True, "reasons": ["other processes keep 1.5 cores busy"]}
    manifest["settings"] = {"threads": 2, "seeds": [0], "thread_env": {"OMP_NUM_THREADS": "2"}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    # one step time planted noisy
    summary = pd.read_parquet(run / "summary.parquet")
    noisy = ((summary["adapter"] == "norse") & (summary["phase"] == "step")
             & (summary["metric"] == "time_s") & (summary["neurons"] == 64))
    summary.loc[noisy, "warning"] = "noisy: IQR is 30% of the median"
    summary.to_parquet(run / "summary.parquet", index=False)
    (run / "summary.csv").unlink()
    md = next(p for p in report(run, tmp_path / "out") if p.name == "report.md").read_text()
    order = [md.index(h) for h in ("## How far to trust", "## Fastest at each n",
                                   "## cpu, float32", "## Timing", "## Environment")]
    assert order == sorted(order)
    trust = md.split("## Fastest")[0]
    assert "Noisy run" in trust and "other processes keep 1.5 cores busy" in trust
    assert "1 of 10 step times are noisy" in trust
    # the headline: fused at each n, with intervals, against the runner-up and torch
    head = md.split("## Fastest at each n")[1].split("\n## ")[0]
    rows = [line for line in head.splitlines() if line.startswith("| 64 ") or
            line.startswith("| 1024 ")]
    assert len(rows) == 2 and all("| fused |" in r for r in rows)
    assert all(re.search(r"\d\.\d\d× \[\d+\.\d\d, \d+\.\d\d\] faster than torch", r)
               for r in rows), rows
    # the noisy row is marked where it is shown
    pivot = md.split("## cpu, float32")[1].split("## Timing")[0]
    norse = next(line for line in pivot.splitlines() if line.startswith("| norse |"))
    assert norse.split("|")[2].strip().endswith("noisy")
    # no Python structure in a cell
    assert "{'" not in md and "['" not in md
    assert "| settings: thread_env | OMP_NUM_THREADS=2 |" in md
    assert "seeds=0" in md


def test_a_quiet_run_and_a_run_without_samples_say_so(tmp_path: Path) -> None:
    run = _speed_run(tmp_path / "run")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["noise"] = {"noisy": False, "reasons": []}
    (run / "manifest.json").write_text(json.dumps(manifest))
    (run / schema.SAMPLES_PARQUET).unlink()
    written = report(run, tmp_path / "out")
    assert "distribution.png" not in {p.name for p in written}
    md = (tmp_path / "out" / "report.md").read_text()
    assert "showed no sign of noise" in md and "ratios come without intervals" in md
    assert "faster than torch" in md and "× [" not in md


def test_damaged_raw_samples_leave_a_report_without_intervals(tmp_path: Path) -> None:
    run = _speed_run(tmp_path / "run")
    (run / schema.SAMPLES_PARQUET).write_bytes(b"not a parquet file")
    written = report(run, tmp_path / "out")
    assert "distribution.png" not in {p.name for p in written}
    md = (tmp_path / "out" / "report.md").read_text()
    assert "The raw samples could not be read" in md and "× [" not in md

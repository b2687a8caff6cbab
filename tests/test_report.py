"""`snnbench report` / `show`: plots, HTML, Markdown and tables from fixture run folders."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from snnbench import plots, schema
from snnbench.render.formats import html_table, markdown, text
from snnbench.report import Table, format_table, report, summary_table
from snnbench.rundir import RunDirError, load_run
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
        "phases.png",
        "scaling.png",
        "memory.png",
        "speedup.png",
        "report.md",
        "report.html",
    ]
    for png in written[:4]:
        assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 10_000

    md = (tmp_path / "out" / "report.md").read_text()
    assert "NVIDIA H200, driver 550.54, CUDA 12.4" in md
    assert "Cases: 15 ok, 1 error, 1 oom." in md
    assert "![Speed-up over torch](speedup.png)" in md
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
    assert page.count('src="data:image/png;base64,') == 4
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
    # no speed-up plot (torch alone), no memory plot (nothing measured), no crash
    assert [p.name for p in written] == ["phases.png", "scaling.png", "report.md", "report.html"]


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
    assert "## Depth: cpu, float32, B=4, T=20, layers 1, 2, 4, 8, reset=subtract" in md
    assert "cpu-float32-B4-T20-subtract_layers.png" in md
    one_depth = [c for c in cases if c.layers == 1]
    single = report(write_run(tmp_path / "one", one_depth), tmp_path / "out1")
    assert not any(p.name.endswith("layers.png") for p in single)


def test_time_per_layer_divides_by_the_depth(tmp_path: Path) -> None:
    import pandas as pd

    from snnbench import plots

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


def test_log_axis_rule() -> None:
    assert not plots.wants_log([1.0, 29.0])
    assert plots.wants_log([1.0, 31.0])
    assert not plots.wants_log([5.0, float("nan")])
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
    """The real writer (snnbench.storage) and this reader agree on the format."""
    from snnbench.compare import compare
    from snnbench.contract import CaseRecord
    from snnbench.rundir import RunDir

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

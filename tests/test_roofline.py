"""The roofline columns: work, peaks and the ``impossible`` flag (no GPU needed)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from snnbench.records import roofline
from snnbench.records.roofline import annotate, device_peak, impossible_rows
from snnbench.store.rundir import load_run
from snnbench.workload import LinearLif
from snnbench.workload.linear_lif.synops import phase_work

ROOT = Path(__file__).resolve().parents[1]
ANCHOR = ROOT.parent / "shared" / "anchors" / "opennm-2024-rtx4090.csv"


@pytest.mark.parametrize(("name", "model"), [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200"),
    ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA L40S", "L40S"),
])
def test_the_driver_s_name_finds_its_model(name: str, model: str) -> None:
    peak = device_peak(name)
    assert peak is not None and peak.model == model


def test_an_unlisted_gpu_has_no_roofline() -> None:
    assert device_peak("NVIDIA GeForce GTX 1080") is None
    row = _row(device="cuda", median=1e-9)
    assert roofline.row_roofline(row, "NVIDIA GeForce GTX 1080", LinearLif.row_work) is None


def test_the_work_of_the_public_chart_s_largest_case() -> None:
    # 2 * 500 * 16 * 16384^2 = 4.29 TFLOP per forward (anchors/README.md)
    forward = phase_work("forward", 16384, 16, 500, 1, "float32")
    assert forward.flops == pytest.approx(4.295e12, rel=1e-3)
    # one layer: only the weight gradient is needed backward
    assert phase_work("backward", 16384, 16, 500, 1, "float32").flops == forward.flops
    # two layers: forward 2 products, backward 3 (dW twice, dX once)
    two = phase_work("step", 512, 16, 500, 2, "float32")
    assert two.flops == pytest.approx(5 * 2.0 * 512**2 * 16 * 500)
    assert phase_work("forward", 512, 1, 1, 1, "bfloat16").bytes == 512 * 512 * 2


def test_the_peak_follows_the_precision_the_row_ran() -> None:
    assert roofline.peak_precision("float32", "strict") == "fp32"
    assert roofline.peak_precision("float32", "tf32") == "tf32"
    assert roofline.peak_precision("float32", "amp-bf16") == "bf16"
    assert roofline.peak_precision("bfloat16", "strict") == "bf16"
    h100 = device_peak("NVIDIA H100 80GB HBM3")
    assert h100 is not None
    # the anchors' floors for the n = 16384 step on an H100: 128 ms fp32, 17 ms TF32, 9 ms bf16
    step = phase_work("step", 16384, 16, 500, 1, "float32")
    assert step.flops / h100.fp32 == pytest.approx(0.128, abs=0.001)
    assert step.flops / h100.tf32 == pytest.approx(0.0174, abs=0.0005)
    assert step.flops / h100.bf16 == pytest.approx(0.0087, abs=0.0005)


def _row(**over: object) -> dict[str, object]:
    row: dict[str, object] = {
        "adapter": "torch", "variant": "default", "device": "cuda", "dtype": "float32",
        "neurons": 16384, "batch_size": 16, "time_steps": 500, "layers": 1,
        "matmul_precision": "strict", "phase": "forward", "metric": "time_s", "median": 0.1,
        "host": "h",
    }
    row.update(over)
    return row


def test_the_public_chart_s_spikingjelly_forward_is_impossible() -> None:
    """The anchor table's SpikingJelly-CuPy forward at n = 16384 is 190 TFLOP/s: above the
    RTX 4090's fp32 peak (and every card the post names)."""
    table = pd.read_csv(ANCHOR) if ANCHOR.exists() else None
    if table is None:
        seconds = 0.0226
    else:
        sj = table[table["framework"].str.contains("SpikingJelly") & (table["neurons"] == 16384)]
        seconds = float(sj["forward"].min())
    line = roofline.row_roofline(_row(median=seconds), "NVIDIA GeForce RTX 4090",
                                 LinearLif.row_work)
    assert line is not None
    assert line.flop_per_s > 150e12
    assert line.impossible
    # the same time in bf16 on an H100 is possible
    h100 = roofline.row_roofline(_row(median=seconds, matmul_precision="amp-bf16"),
                                 "NVIDIA H100 80GB HBM3", LinearLif.row_work)
    assert h100 is not None and not h100.impossible


def test_annotate_flags_only_timed_gpu_rows_of_real_adapters() -> None:
    summary = pd.DataFrame([
        _row(median=0.0226),                                # impossible on a 4090 in fp32
        _row(median=0.5),                                   # possible
        _row(adapter="null", median=1e-8),                  # the harness probe: no work
        _row(device="cpu", median=1e-9),                    # no CPU roofline
        _row(metric="peak_mem_bytes", median=1.0),          # not a time
        _row(phase="setup", metric="build_s", median=1e-9),  # not a timed phase
    ])
    out = annotate(summary, {"h": "NVIDIA GeForce RTX 4090"}, LinearLif.row_work, probes={"null"})
    assert out["impossible"].tolist() == [True, False, False, False, False, False]
    assert math.isnan(out.loc[2, "flops"]) and math.isnan(out.loc[3, "flops"])
    assert out.loc[1, "peak_flop_share"] == pytest.approx(4.295e12 / 0.5 / 82.6e12, rel=1e-3)
    assert len(impossible_rows(out)) == 1
    # a host the run did not describe takes the run's only GPU model
    assert annotate(summary, {"other": "NVIDIA GeForce RTX 4090"},
                    LinearLif.row_work)["impossible"].iloc[0]
    # two models and an unknown host: no guess
    two = {"a": "NVIDIA GeForce RTX 4090", "b": "NVIDIA H200"}
    assert not annotate(summary, two, LinearLif.row_work)["impossible"].any()


@pytest.mark.parametrize("run", sorted((ROOT / "results" / "reference").glob("gpu-*/run")))
def test_no_committed_gpu_row_is_impossible(run: Path) -> None:
    # as every reader sees it (load_run annotates, with the run's own GPU)
    out = load_run(run, samples=False).summary
    assert set(roofline.gpu_models(load_run(run, samples=False).manifest).values()) == {
        "NVIDIA H100 80GB HBM3"}
    assert out["flops"].notna().sum() > 0
    assert impossible_rows(out).empty


def test_a_case_records_what_its_library_does_by_default() -> None:
    """Rows say what users of a library get without snnbench's precision setting: JAX runs
    float32 products as TF32 on NVIDIA GPUs unless told otherwise; PyTorch does not."""
    from snnbench.measure.worker import apply_framework_settings
    from snnbench.workload import LinearLif
    from snnbench.workload.linear_lif.spec import NetworkSpec

    torch_applied = apply_framework_settings("torch", LinearLif(NetworkSpec()), 1)
    assert torch_applied["torch_default_float32_matmul_precision"] == "highest"
    assert torch_applied["torch_tf32"] is False
    pytest.importorskip("jax")
    jax_applied = apply_framework_settings("jax", LinearLif(NetworkSpec()), 1)
    assert jax_applied["jax_default_matmul_precision"].startswith("default (TF32")
    assert jax_applied["jax_matmul_precision"] == "highest"


def _planted_impossible(tmp_path: Path) -> Path:
    """The committed H100 run with haiku's forward time made 1 µs (below the floor)."""
    import shutil

    src = ROOT / "results" / "reference" / "gpu-h100-2026-11-26-zero" / "run"
    dst = tmp_path / "run"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("report", "samples.parquet"))
    summary = pd.read_parquet(dst / "summary.parquet")
    hit = ((summary["adapter"] == "haiku") & (summary["variant"] == "fp32")
           & (summary["metric"] == "time_s") & (summary["phase"] == "forward"))
    summary.loc[hit, "median"] = 1e-6
    summary.to_parquet(dst / "summary.parquet", index=False)
    (dst / "summary.csv").unlink()
    return dst


def test_show_and_report_flag_an_impossible_row_and_never_rank_it(tmp_path: Path) -> None:
    from snnbench.report.pages import report
    from snnbench.report.tables import case_rows

    run = _planted_impossible(tmp_path)
    rows = {r[0] + (":" + r[1] if r[1] != "default" else ""): r
            for r in case_rows(load_run(run, samples=False).summary)}
    assert rows["haiku:fp32"][-1].startswith("impossible (forward)")
    assert not rows["spyx:fp32"][-1].startswith("impossible")
    written = report(run, tmp_path / "rep")
    md = next(p for p in written if p.name == "report.md").read_text()
    head = md.split("## Environment")[0]
    assert "Impossible: haiku:fp32" in head and "below the device's floor" in head
    # the ranking under each plot group leaves the defective case out; the timing table keeps it
    ranking = md.split("## Timing")[0].split("## cuda")[1]
    assert "haiku" not in ranking and "spyx" in ranking
    assert "haiku" in md.split("## Timing")[1]


def test_a_noisy_run_says_so_before_any_figure(tmp_path: Path) -> None:
    import json

    from snnbench.report.pages import report

    run = _planted_impossible(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["noise"] = {"noisy": True, "reasons": ["other processes keep 2.0 cores busy"]}
    (run / "manifest.json").write_text(json.dumps(manifest))
    md = next(p for p in report(run, tmp_path / "rep") if p.name == "report.md").read_text()
    assert md.index("Noisy run") < md.index("## Environment")
    assert "other processes keep 2.0 cores busy" in md.split("## Environment")[0]


def test_the_gate_fails_an_impossible_measurement(tmp_path: Path) -> None:
    """A candidate faster than its device's floor is no improvement: the gate fails on it."""
    from snnbench.gate.compare import compare

    run = _planted_impossible(tmp_path)
    honest = ROOT / "results" / "reference" / "gpu-h100-2026-11-26-zero" / "run"
    result = compare(honest, run, process_spread=0.3)
    marks = {(p.key[0], p.phase, p.metric): p for p in result.pairs if p.metric == "time_s"}
    flagged = marks[("haiku", "forward", "time_s")]
    assert flagged.mark == "impossible"
    assert "candidate" in flagged.note and "floor" in flagged.note
    assert result.exit_code == 1
    assert "impossible measurement" in result.verdict
    assert marks[("spyx", "forward", "time_s")].mark != "impossible"

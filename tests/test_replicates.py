"""Replicates across processes (--replicates) and the harness-overhead probe (the null adapter)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from snnbench.adapters.null import PROBE_NOTE, NullAdapter
from snnbench.gate.compare import compare
from snnbench.records.contract import CaseRecord
from snnbench.registry import discover
from snnbench.report.pages import overhead_lines, summary_table
from snnbench.store.overhead import harness_overhead
from snnbench.store.rundir import load_run
from snnbench.store.stats import replicate_spread, within_spread
from snnbench.store.storage import samples_frame, summary_frame
from snnbench.sweep.config import ConfigError, RunConfig
from snnbench.sweep.planning.jobs import plan_jobs
from snnbench.sweep.planning.tasks import plan_tasks
from snnbench.sweep.run import start_run
from snnbench.workload import LinearLif
from snnbench.workload.linear_lif.spec import NetworkSpec
from tests.conftest import run_cli
from tests.fixtures.runfolders import timed_case, write_run

FAST = {"repeats": 3, "max_repeats": 5, "min_time_s": 0.0, "warmup": 1, "warmup_s": 0.0,
        "threads": 1, "device": "cpu"}


def _config(adapters: list[str], neurons: list[int], **run: object) -> RunConfig:
    return RunConfig.from_dict({
        "run": {**FAST, "adapters": adapters, "timeout_s": 60.0, **run},
        "network": {"batch_size": 2, "time_steps": 5},
        "sweep": [{"neurons": neurons}],
    })


def _record(adapter: str, replicate: int, status: str = "ok", message: str = "",
            samples: dict[str, dict[str, list[float]]] | None = None) -> CaseRecord:
    spec = NetworkSpec(neurons=8, batch_size=2, time_steps=5)
    return CaseRecord.from_dict({"adapter": adapter, "variant": "default", "device": "cpu",
                                 "spec": spec.to_dict(), "status": status, "message": message,
                                 "replicate": replicate, "samples": samples or {}})


# -- the spread arithmetic --------------------------------------------------------------------
def test_replicate_spread_is_the_range_of_the_medians_over_their_median() -> None:
    # medians 0.9, 1.0, 1.2: (1.2 - 0.9) / 1.0
    assert replicate_spread([1.0, 1.2, 0.9]) == pytest.approx(0.3)
    assert replicate_spread([2.0, 3.0]) == pytest.approx(1.0 / 2.5)
    assert math.isnan(replicate_spread([1.0]))  # one process: no spread between processes
    assert math.isnan(replicate_spread([0.0, 0.0]))
    assert replicate_spread([1.0, math.nan, 1.5]) == pytest.approx(0.5 / 1.25)


def test_within_spread_is_the_median_of_each_replicates_iqr_ratio() -> None:
    # [1..5]: q1 2, q3 4, median 3 → 2/3; a constant replicate → 0; median of the two → 1/3
    assert within_spread([[1, 2, 3, 4, 5], [10, 10, 10, 10]]) == pytest.approx(1 / 3)
    assert math.isnan(within_spread([]))


def test_replicates_of_a_case_make_one_summary_row_per_phase_and_metric() -> None:
    records = [
        _record("a", 0, samples={"step": {"time_s": [1.0, 1.0, 1.0]},
                                 "case": {"firing_rate": [0.25]}}),
        _record("a", 1, samples={"step": {"time_s": [2.0, 2.0, 2.0]},
                                 "case": {"firing_rate": [0.25]}}),
        _record("a", 2, samples={"step": {"time_s": [1.5, 1.5, 1.5]},
                                 "case": {"firing_rate": [0.25]}}),
    ]
    frame = summary_frame(records, "r")
    step = frame[frame["phase"] == "step"]
    assert len(step) == 1 and len(frame) == 2
    row = step.iloc[0]
    assert row["n_samples"] == 9 and row["median"] == 1.5 and row["replicates"] == 3
    # medians 1, 2, 1.5: (2 - 1) / 1.5; each replicate is constant inside: 0 within
    assert row["replicate_spread"] == pytest.approx(1 / 1.5)
    assert row["within_spread"] == 0.0
    assert "replicates differ: their medians span 67%" in row["warning"]
    assert frame[frame["phase"] == "case"].iloc[0]["replicate_spread"] == 0.0

    samples = samples_frame(records, "r")
    assert sorted(set(samples["replicate"])) == [0, 1, 2]
    step_samples = samples[samples["phase"] == "step"]
    assert step_samples.groupby("replicate")["value"].first().tolist() == [1.0, 2.0, 1.5]


def test_a_failed_replicate_adds_a_status_row_and_alike_ones_are_one_row() -> None:
    records = [
        _record("a", 0, samples={"step": {"time_s": [1.0, 1.1, 1.2]}}),
        _record("a", 1, status="error", message="boom"),
        _record("a", 2, samples={"step": {"time_s": [1.0, 1.1, 1.2]}}),
        _record("b", 0, status="skipped", message="no"),
        _record("b", 1, status="skipped", message="no"),
    ]
    frame = summary_frame(records, "r")
    a = frame[frame["adapter"] == "a"]
    assert sorted(a["status"]) == ["error", "ok"]
    assert a[a["status"] == "ok"].iloc[0]["replicates"] == 2
    assert a[a["status"] == "error"].iloc[0]["replicates"] == 1
    b = frame[frame["adapter"] == "b"]
    assert len(b) == 1 and b.iloc[0]["replicates"] == 2 and b.iloc[0]["message"] == "no"


def test_one_process_keeps_the_old_rows() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    frame = summary_frame([_record("a", 0, samples={"step": {"time_s": values}})], "r")
    row = frame.iloc[0]
    assert row["replicates"] == 1 and math.isnan(row["replicate_spread"])
    assert row["within_spread"] == pytest.approx(2.0 / 3.0)  # IQR 2 over median 3
    assert row["warning"].startswith("very noisy") and "replicates differ" not in row["warning"]


# -- planning -----------------------------------------------------------------------------------
def test_replicates_run_case_by_case_in_abba_order(fake_plugins: Path) -> None:
    entries = discover()
    config = _config(["fake-ok", "fake-sleep"], [8, 16], replicates=3)
    jobs = plan_jobs(plan_tasks(config, entries, "cpu"), config.run, entries)
    assert [(j.workload.spec.neurons, j.replicate, j.adapter) for j in jobs] == [
        (8, 0, "fake-ok"), (8, 0, "fake-sleep"),
        (8, 1, "fake-sleep"), (8, 1, "fake-ok"),
        (8, 2, "fake-ok"), (8, 2, "fake-sleep"),
        (16, 0, "fake-ok"), (16, 0, "fake-sleep"),
        (16, 1, "fake-sleep"), (16, 1, "fake-ok"),
        (16, 2, "fake-ok"), (16, 2, "fake-sleep"),
    ]
    assert [j.order for j in jobs] == list(range(1, 13))
    assert len({j.key for j in jobs}) == 12  # every replicate has its own record
    assert jobs[0].key.endswith(jobs[0].workload.case_id)  # replicate 0 keeps the old key
    assert jobs[2].key.endswith("--r1")


def test_replicates_must_be_a_positive_integer() -> None:
    with pytest.raises(ConfigError, match="replicates must be a positive integer, got 0"):
        _config(["fake-ok"], [8], replicates=0)


def test_cli_refuses_zero_replicates_in_one_line(tmp_path: Path) -> None:
    proc = run_cli("run", "--adapters", "fake-ok", "--replicates", "0", "--out",
                   str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --replicates must be an integer ≥ 1, got 0"
    assert not (tmp_path / "out").exists()


def test_overhead_probe_adds_one_null_case_at_the_smallest_case(fake_plugins: Path) -> None:
    entries = discover()
    config = _config(["all"], [16, 8], overhead_probe=True)
    tasks = plan_tasks(config, entries, "cpu")
    nulls = [t for t in tasks if t.adapter == "null"]
    assert [t.workload.spec.neurons for t in nulls] == [8]
    first_of_8 = next(t for t in tasks if t.workload.spec.neurons == 8)
    assert first_of_8.adapter == "null"  # first of its case, so ABBA brackets it too
    # 'all' names no probe; without the setting there is no null case
    assert not [t for t in plan_tasks(_config(["all"], [8]), entries, "cpu")
                if t.adapter == "null"]
    # named explicitly: at every case, and not added a second time
    named = plan_tasks(_config(["null", "fake-ok"], [16, 8], overhead_probe=True), entries, "cpu")
    assert [t.workload.spec.neurons for t in named if t.adapter == "null"] == [16, 8]


# -- a real sweep -------------------------------------------------------------------------------
def test_a_replicated_sweep_and_its_resume(fake_plugins: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    config = _config(["fake-ok", "fake-subtract-only"], [8], replicates=3, overhead_probe=True)
    config = RunConfig.from_dict({**config.to_dict(),
                                  "network": {"batch_size": 2, "time_steps": 5,
                                              "reset": "zero"}})
    outcome = start_run(config, out, tmp_path, False)
    assert not outcome.failed
    # 3 adapters (null, fake-ok, a skipped one) × 3 replicates, each its own record
    assert len(outcome.records) == 9
    assert sorted((r.adapter, r.replicate) for r in outcome.records) == [
        (a, r) for a in ("fake-ok", "fake-subtract-only", "null") for r in range(3)]
    summary = pd.read_parquet(out / "summary.parquet")
    ok = summary[summary["adapter"] == "fake-ok"]
    assert not ok.duplicated(["phase", "metric"]).any()
    step = ok[(ok["phase"] == "step") & (ok["metric"] == "time_s")].iloc[0]
    assert step["replicates"] == 3 and step["n_samples"] >= 9
    assert np.isfinite(step["replicate_spread"]) and np.isfinite(step["within_spread"])
    skipped = summary[summary["adapter"] == "fake-subtract-only"]
    assert len(skipped) == 1 and skipped.iloc[0]["replicates"] == 3
    samples = pd.read_parquet(out / "samples.parquet")
    assert set(samples[samples["adapter"] == "fake-ok"]["replicate"]) == {0, 1, 2}

    # the null probe: ok, not verified and saying so, and the report's overhead line
    null = summary[summary["adapter"] == "null"]
    assert set(null["status"]) == {"ok"} and null["message"].eq(PROBE_NOTE).all()
    assert null["spike_match"].isna().all()
    (line,) = overhead_lines(summary)
    assert line.startswith("harness overhead: null step ")
    assert "of the smallest case (fake-ok, n=8," in line

    table = summary_table(load_run(out))
    assert "between / within" in table.headers
    cell = table.headers.index("between / within")
    assert any(row[cell].endswith("(3×)") for row in table.rows)

    # compare reads a replicated run as one row per case
    cmp = compare(out, out)
    # a run against itself: ratio 1; the interval of three tiny processes may be wide enough
    # to straddle the factor (inconclusive), never a fail or an improvement
    assert cmp.exit_code in (0, 3)
    assert {p.mark for p in cmp.time_pairs()} <= {"same", "inconclusive"}
    assert all(p.ratio == 1.0 and p.baseline_processes == 3 for p in cmp.time_pairs())
    keys = [(p.key, p.phase, p.metric) for p in cmp.pairs]
    assert len(keys) == len(set(keys))

    # a lost replicate is run again on --resume; the others are kept
    lost = next(p for p in (out / "cases").glob("fake-ok--*--r1.json"))
    lost.unlink()
    resumed = start_run(RunConfig(), out, tmp_path, True)
    assert [(r.adapter, r.replicate) for r in resumed.records] == [("fake-ok", 1)]
    assert resumed.skipped_existing == 8
    assert lost.exists()


# -- the null adapter ---------------------------------------------------------------------------
def test_null_adapter_does_nothing_and_is_never_verified() -> None:
    adapter = NullAdapter()
    caps = adapter.capabilities("default")
    assert not caps.verifiable and caps.approximation_note == PROBE_NOTE
    spec = NetworkSpec(neurons=4, batch_size=2, time_steps=3, layers=2, dtype="bfloat16")
    # the plugin API v2, natively (no shim): a workload in, gradients by name out
    workload = LinearLif(spec)
    assert adapter.api_version == 2
    assert adapter.reason_skipped(workload, "cpu", "default") is None
    assert type(discover()["null"].create()) is NullAdapter
    model = adapter.build(workload, workload.make_data(), "cpu", "default")
    assert model.step() is None and model.forward() is None
    model.synchronize()
    assert model.spikes(None).shape == (3, 2, 4)
    grads = model.gradients()
    assert sorted(grads) == sorted(workload.parameter_names())
    assert grads["layers.1.weight"].shape == (4, 4) and not grads["layers.1.bias"].any()
    assert adapter.version()  # snnbench's own version: always available


def _step_rows(rows: list[tuple[str, str, int, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"adapter": a, "variant": "default", "environment": "", "device": d,
                          "neurons": n, "phase": "step", "metric": "time_s", "status": "ok",
                          "median": m} for a, d, n, m in rows])


def test_overhead_is_the_null_step_over_the_smallest_case() -> None:
    summary = _step_rows([("null", "cpu", 64, 2e-6), ("torch", "cpu", 64, 4e-3),
                          ("fused", "cpu", 64, 4e-4), ("torch", "cpu", 512, 9e-3)])
    (o,) = harness_overhead(summary)
    assert (o.smallest_label, o.smallest_size) == ("fused", "n=64")
    assert o.share == pytest.approx(0.005) and o.within_goal
    assert overhead_lines(summary) == [
        "harness overhead: null step 2 µs = 0.5 % of the smallest case (fused, n=64, 400 µs)"]


def test_overhead_past_one_percent_warns_per_device() -> None:
    summary = _step_rows([("null", "cpu", 8, 1e-5), ("torch", "cpu", 8, 5e-4),
                          ("null", "cuda", 8, 5e-6), ("fused", "cuda", 8, 1e-3)])
    lines = overhead_lines(summary)
    assert lines[0].startswith("harness overhead on cpu: null step 10 µs = 2 % of the smallest")
    assert "warning: ≥ 1 %" in lines[0]
    assert lines[1].startswith("harness overhead on cuda: null step 5 µs = 0.5 %")
    assert "warning" not in lines[1]


def test_overhead_not_measured_says_so() -> None:
    (line,) = overhead_lines(_step_rows([("torch", "cpu", 8, 1e-3)]))
    assert line.startswith("harness overhead: not measured")


def test_compare_never_gates_on_the_probe(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    base = write_run(tmp_path / "base", [timed_case("null", 8, rng, median_s=1e-6),
                                         timed_case("torch", 8, rng, median_s=1e-3)])
    cand = write_run(tmp_path / "cand", [timed_case("null", 8, rng, median_s=3e-6),
                                         timed_case("torch", 8, rng, median_s=1e-3)])
    # one process a side: the stated spread lets the ×3 read as a regression it would be
    cmp = compare(base, cand, time_floor_s=0.0, process_spread=0.05)
    null_step = next(p for p in cmp.pairs
                     if p.label == "null" and (p.phase, p.metric) == ("step", "time_s"))
    assert null_step.mark == "info"
    assert null_step.note == "harness probe, not gated (would be regression)"
    assert cmp.exit_code == 0


def test_null_is_listed_but_not_in_a_sweeps_all() -> None:
    from snnbench.sweep.planning.selection import select_adapters

    entries = discover()
    assert entries["null"].adapter_class is NullAdapter
    assert "null" in {s.adapter for s in select_adapters(("all",), entries)}  # snnbench list
    assert "null" not in {s.adapter for s in select_adapters(("all",), entries, probes=False)}

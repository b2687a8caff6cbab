"""The instruction-count metric (issue 32, item 2): callgrind's output read, the ``count`` gate
rule, the metric skipped with a reason where it cannot be counted, and one tiny torch case
counted end to end (skipped where valgrind is missing; CI installs it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from snnbench.gate import interval as gate
from snnbench.gate.compare import CompareError, compare
from snnbench.measure import callgrind
from snnbench.measure.worker import count_instructions
from snnbench.records.contract import CaseRecord, Job
from snnbench.records.metrics import GATED, metric
from snnbench.workload import LinearLif
from snnbench.workload.linear_lif.spec import NetworkSpec
from tests.conftest import run_cli
from tests.fixtures.runfolders import timed_case, write_run
from tests.test_user_errors import assert_one_line_error, invoke

DATA = Path(__file__).parent / "data"
needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None,
                                    reason="valgrind is not installed (CI installs it)")


# -- reading callgrind's output ------------------------------------------------------------------
def test_total_of_a_real_callgrind_dump() -> None:
    # a dump written by valgrind 3.19 after torch's _valgrind_toggle_and_dump_stats (its call
    # tree cut out): the summary and totals lines give the instructions collected
    text = (DATA / "callgrind.out.forward").read_text()
    assert callgrind.parse_total(text) == 100835


def test_total_reads_the_ir_column_wherever_the_events_put_it() -> None:
    text = "events: Dr Ir Dw\nsummary: 7 1234 9\ntotals: 7 1234 9\n"
    assert callgrind.parse_total(text) == 1234


@pytest.mark.parametrize(("text", "fragment"), [
    ("events: Ir\nfn=main\n15 4\n", "not a callgrind output"),
    ("", "not a callgrind output"),
    ("events: Dr\ntotals: 5\n", "no Ir event"),
])
def test_unreadable_output_is_a_clear_error(text: str, fragment: str) -> None:
    with pytest.raises(callgrind.CallgrindError, match=fragment):
        callgrind.parse_total(text)


def test_dumps_are_read_in_phase_order_per_call(tmp_path: Path) -> None:
    out = tmp_path / "cg.out"
    for number, total in ((1, 300), (2, 600)):
        Path(f"{out}.{number}").write_text(f"events: Ir\ntotals: {total}\n")
    assert callgrind.read_dumps(out, ("forward", "backward"), 3) == {"forward": 100.0,
                                                                      "backward": 200.0}
    with pytest.raises(callgrind.CallgrindError, match="no callgrind dump for step"):
        callgrind.read_dumps(out, ("forward", "backward", "step"), 3)


# -- where it cannot be counted: a reason, never a crash -----------------------------------------
def _job(tmp_path: Path, **kw: object) -> Job:
    spec = NetworkSpec(neurons=16, batch_size=2, time_steps=5)
    return Job(adapter="torch", variant="default", device="cpu", workload=LinearLif(spec),
               result_path=str(tmp_path / "result.json"), instructions=True, **kw)  # type: ignore[arg-type]


def test_jax_and_gpu_cases_are_skipped_with_a_reason() -> None:
    assert "jax adapter is not counted" in (callgrind.skip_reason("jax", "cpu") or "")
    assert "CPU only" in (callgrind.skip_reason("torch", "cuda") or "")


def test_without_valgrind_the_metric_is_skipped_and_the_case_stays_ok(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no valgrind on it
    job = _job(tmp_path)
    record = CaseRecord.for_job(job)
    record.samples = {"forward": {"time_s": [1e-3]}}
    count_instructions("torch", job, record, since_prepared_s=1.0)
    assert record.samples == {"forward": {"time_s": [1e-3]}}
    assert "valgrind is not installed" in record.measurement["instructions"]["skipped"]


def test_no_time_left_in_the_timeout_skips_the_count(tmp_path: Path) -> None:
    counts = callgrind.collect(_job(tmp_path), tmp_path, budget_s=5.0)
    assert counts.per_call == {} and "of the case's timeout left" in counts.skipped


# -- the count rule of the gate ------------------------------------------------------------------
def test_count_rule_is_the_ratio_against_the_factor() -> None:
    assert gate.judge_count(1.05, 1.02) == "regression"
    assert gate.judge_count(1.0, 1.02) == "same"
    assert gate.judge_count(1.019, 1.02) == "same"
    assert gate.judge_count(0.97, 1.02) == "improved"
    assert metric("instructions").gate_for("forward") == "count"
    assert metric("instructions").gate_for("setup") == "info"
    assert "instructions" in GATED


def _run(path: Path, instructions: float, *, time_scale: float = 1.0) -> Path:
    rng = np.random.default_rng(int(instructions) % 1000)
    case = timed_case("torch", 64, rng, median_s=1e-3 * time_scale, rel_noise=0.3)
    for phase, share in (("forward", 0.4), ("backward", 0.6), ("step", 1.0)):
        case.samples[(phase, "instructions")] = np.array([instructions * share])
    return write_run(path, [case])


def test_planted_five_per_cent_more_work_fails_and_the_identical_pair_passes(
        tmp_path: Path) -> None:
    base = _run(tmp_path / "a", 1_000_000)
    same = _run(tmp_path / "a2", 1_000_300)  # 0.03 %: the spread measured between runs
    more = _run(tmp_path / "b", 1_050_000)
    # the time samples are noisy (30 %) and drawn anew: only the counts may decide
    planted = compare(base, more, gated_metrics=("instructions",))
    assert planted.exit_code == 1
    assert {(p.phase, p.mark) for p in planted.regressions} == {
        ("forward", "regression"), ("backward", "regression"), ("step", "regression")}
    assert all(p.test == "count" for p in planted.regressions)
    identical = compare(base, same, gated_metrics=("instructions",))
    assert identical.exit_code == 0, [(p.metric, p.mark) for p in identical.pairs]
    assert {p.metric for p in identical.compared} == {"instructions"}
    assert compare(base, base, gated_metrics=("instructions",)).exit_code == 0
    # a looser factor lets the planted 5 % through
    assert compare(base, more, gated_metrics=("instructions",), count_factor=1.06).exit_code == 0


def test_compare_refuses_a_metric_it_cannot_gate(tmp_path: Path) -> None:
    base = _run(tmp_path / "a", 1_000_000)
    with pytest.raises(CompareError, match="--metric takes gated metrics"):
        compare(base, base, gated_metrics=("energy_j",))
    assert_one_line_error(invoke("compare", str(base), str(base), "--metric", "bogus"),
                          "--metric takes gated metrics")
    assert_one_line_error(invoke("compare", str(base), str(base), "--count-factor", "1"),
                          "--count-factor must be a finite number")


def test_compare_cli_gates_instructions_and_says_the_rule(tmp_path: Path) -> None:
    base, more = _run(tmp_path / "a", 1_000_000), _run(tmp_path / "b", 1_050_000)
    result = invoke("compare", str(base), str(more), "--metric", "instructions", "-f", "json")
    assert result.exit_code == 1, result.stdout
    doc = json.loads(result.stdout)
    assert doc["rule"]["count_factor"] == 1.02
    assert doc["rule"]["gated_metrics"] == ["instructions"]
    marks = {(p["phase"], p["metric"]): p["mark"] for p in doc["pairs"]}
    assert marks[("forward", "instructions")] == "regression"
    assert marks[("forward", "time_s")] == "info"


# -- end to end ----------------------------------------------------------------------------------
@needs_valgrind
def test_a_tiny_torch_case_is_counted_into_the_summary(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", "--adapters", "torch", "--neurons", "16", "--steps", "5",
                   "--batch-size", "2", "--device", "cpu", "--threads", "1", "--repeats", "3",
                   "--config", "ci-smoke", "--instructions", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = pd.read_parquet(out / "summary.parquet")
    rows = summary[(summary["adapter"] == "torch") & (summary["metric"] == "instructions")]
    assert set(rows["phase"]) == {"forward", "backward", "step"}, proc.stderr[-3000:]
    assert (rows["unit"] == "Ir").all() and (rows["median"] > 1000).all()
    step, forward = (float(rows[rows["phase"] == p]["median"].iloc[0])
                     for p in ("step", "forward"))
    assert step > forward  # a step is a forward and a backward
    record = json.loads(next((out / "cases").glob("torch--*.json")).read_text())
    assert record["status"] == "ok" and record["measurement"]["instructions"]["skipped"] == ""


def test_counting_process_runs_one_thread_and_builds_fused_for_avx2(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from snnbench.fused import cpu

    monkeypatch.delenv(cpu.MARCH_ENV, raising=False)
    assert "-march=native" in cpu._flags()  # the timed build is the machine's own
    env = callgrind.counting_env({"OMP_NUM_THREADS": "2"})
    assert env["OMP_NUM_THREADS"] == "1" and env["PYTHONHASHSEED"] == "0"
    if "SNNBENCH_FUSED_MARCH" in env:  # x86-64: valgrind runs no AVX-512
        monkeypatch.setenv(cpu.MARCH_ENV, env["SNNBENCH_FUSED_MARCH"])
        assert "-march=x86-64-v3" in cpu._flags() and "-march=native" not in cpu._flags()

"""Sweeps through real worker processes with fault-injecting adapters."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from snnbench.records.schema import SAMPLE_COLUMNS, SUMMARY_COLUMNS
from snnbench.sweep.config import RunConfig
from snnbench.sweep.run import start_run

FAST = {"repeats": 3, "max_repeats": 5, "min_time_s": 0.0, "warmup": 1, "warmup_s": 0.0,
        "threads": 1, "device": "cpu"}


def _config(adapters: list[str], timeout_s: float = 60.0, **network: object) -> RunConfig:
    return RunConfig.from_dict({
        "run": {**FAST, "adapters": adapters, "timeout_s": timeout_s},
        "network": {"batch_size": 2, "time_steps": 10, **network},
        "sweep": [{"neurons": [8]}],
    })


def _status(summary: pd.DataFrame) -> dict[str, tuple[str, str]]:
    first = summary.groupby("adapter").first()
    return {a: (r["status"], r["message"]) for a, r in first.iterrows()}


def test_faults_become_rows_and_the_sweep_goes_on(fake_plugins: Path, tmp_path: Path) -> None:
    adapters = ["fake-raises", "fake-abort", "fake-hang", "fake-memoryerror", "fake-shape",
                "fake-nan", "fake-wrong", "fake-missing", "fake-broken", "fake-ok"]
    outcome = start_run(_config(adapters, timeout_s=8.0), tmp_path / "run", tmp_path, False)
    summary = pd.read_parquet(tmp_path / "run" / "summary.parquet")
    status = _status(summary)
    assert status["fake-raises"][0] == "error"
    assert "injected failure in forward" in status["fake-raises"][1]
    assert status["fake-abort"] == ("error", status["fake-abort"][1])
    assert "SIGABRT" in status["fake-abort"][1]
    assert status["fake-hang"][0] == "timeout"
    assert status["fake-memoryerror"][0] == "oom"
    assert status["fake-shape"][0] == "error" and "shape" in status["fake-shape"][1]
    assert status["fake-nan"][0] == "error" and "NaN" in status["fake-nan"][1]
    assert status["fake-wrong"][0] == "mismatch" and "not timed" in status["fake-wrong"][1]
    assert status["fake-missing"][0] == "unavailable"
    assert status["fake-broken"][0] == "unavailable"
    assert status["fake-ok"][0] == "ok"
    assert outcome.failed
    ok = summary[summary["adapter"] == "fake-ok"]
    assert set(ok["phase"]) >= {"forward", "backward", "step", "setup", "case"}
    assert ok["spike_match"].iloc[0] == 1.0 and ok["grad_cosine"].iloc[0] == pytest.approx(1.0)
    # a mismatch is never timed, an error row carries no statistics
    assert summary[summary["adapter"] == "fake-wrong"]["median"].isna().all()


def test_allow_mismatch_times_and_records_it(fake_plugins: Path, tmp_path: Path) -> None:
    config = _config(["fake-wrong"]).with_overrides({"allow_mismatch": True}, {})
    start_run(config, tmp_path / "run", tmp_path, False)
    summary = pd.read_parquet(tmp_path / "run" / "summary.parquet")
    assert (summary["status"] == "ok").all() and summary["allow_mismatch"].all()
    assert summary["spike_match"].iloc[0] < 0.999
    assert "--allow-mismatch" in summary["message"].iloc[0]


def test_known_cost_is_measured(fake_plugins: Path, tmp_path: Path) -> None:
    config = _config(["fake-sleep"]).with_overrides({"repeats": 5}, {})
    start_run(config, tmp_path / "run", tmp_path, False)
    summary = pd.read_parquet(tmp_path / "run" / "summary.parquet")
    t = summary[summary["metric"] == "time_s"].set_index("phase")["median"]
    # forward sleeps 20 ms, backward 30 ms: generous bounds for a shared machine
    assert 0.020 <= t["forward"] < 0.060
    assert 0.030 <= t["backward"] < 0.080
    assert 0.050 <= t["step"] < 0.120
    samples = pd.read_parquet(tmp_path / "run" / "samples.parquet")
    fwd = samples[(samples["phase"] == "forward") & (samples["metric"] == "time_s")]
    assert len(fwd) >= 5 and (fwd["value"] >= 0.020).all()


def test_schema_round_trip(fake_plugins: Path, tmp_path: Path) -> None:
    start_run(_config(["fake-ok", "fake-subtract-only"], reset="zero"), tmp_path / "run",
              tmp_path, False)
    summary = pd.read_parquet(tmp_path / "run" / "summary.parquet")
    csv = pd.read_csv(tmp_path / "run" / "summary.csv", keep_default_na=False,
                      na_values=[""])
    assert tuple(summary.columns) == SUMMARY_COLUMNS
    assert tuple(csv.columns) == SUMMARY_COLUMNS
    assert len(csv) == len(summary)
    pd.testing.assert_series_equal(csv["median"], summary["median"], check_dtype=False)
    samples = pd.read_parquet(tmp_path / "run" / "samples.parquet")
    assert tuple(samples.columns) == SAMPLE_COLUMNS
    skipped = summary[summary["adapter"] == "fake-subtract-only"]
    assert skipped["status"].tolist() == ["skipped"]
    assert "reset mode 'zero' not supported" in skipped["message"].iloc[0]

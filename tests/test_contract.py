"""The worker contract: typed jobs and case records, their files, and the worker's two clocks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from snnbench.errors import UserError
from snnbench.measure.timing import MeasureSettings
from snnbench.measure.worker import run_job
from snnbench.records.contract import (
    CaseRecord,
    ContractError,
    Job,
    LibraryEnvironment,
    Placement,
    case_key,
)
from snnbench.sweep.config import RunConfig
from snnbench.sweep.run import start_run
from snnbench.workload import LinearLif
from snnbench.workload.linear_lif.reference import run_reference
from snnbench.workload.linear_lif.spec import NetworkSpec, make_case_data
from snnbench.workload.linear_lif.synops import firing_rate

FAST = MeasureSettings(repeats=2, max_repeats=2, min_time_s=0.0, warmup=0, warmup_s=0.0)


def _job(tmp_path: Path, **changes: object) -> Job:
    fields: dict[str, object] = {
        "adapter": "fake-ok", "variant": "default", "device": "cpu",
        "workload": LinearLif(NetworkSpec(neurons=8, batch_size=2, time_steps=30)),
        "result_path": str(tmp_path / "result.json"), "measure": FAST,
    }
    fields.update(changes)
    return Job(**fields)  # type: ignore[arg-type]


def test_job_round_trips_through_its_file(tmp_path: Path) -> None:
    job = _job(tmp_path, env=(("OMP_NUM_THREADS", "1"),), mode="verify", replicate=2,
               environment=LibraryEnvironment("snntorch@0.9.4", ("snntorch==0.9.4",), "/x/py"),
               placement=Placement(executor="slurm", host="n1", cpus=(0, 1), attempt=2))
    job.write(tmp_path / "job.json")
    assert Job.read(tmp_path / "job.json") == job
    assert job.key == "fake-ok@snntorch@0.9.4--default--cpu--" + job.workload.case_id + "--r2"


def test_plain_keys_are_unchanged() -> None:
    # run folders written before environments and replicates keep their file names
    assert case_key("torch", "default", "cpu", "abc") == "torch--default--cpu--abc"


@pytest.mark.parametrize(("data", "match"), [
    ([1, 2], "not a job: not a JSON object"),
    ({"schema": 99}, "job schema 99"),
    ({"schema": 1, "adapter": "x"}, "it lacks 'variant'"),
    ({"schema": 1, "adapter": "x", "variant": "v", "device": "cpu", "spec": {"neurons": -1}},
     "neurons must be a positive integer"),
])
def test_a_bad_job_is_one_clear_error(data: object, match: str) -> None:
    with pytest.raises(ContractError, match=match):
        Job.from_dict(data)


def test_record_round_trip_and_validation(tmp_path: Path) -> None:
    record = CaseRecord.for_job(_job(tmp_path), "ok", "fine", "numpy")
    record.samples = {"step": {"time_s": [0.1, 0.2]}}
    record.write(tmp_path / "r.json")
    again = CaseRecord.read(tmp_path / "r.json")
    assert again == record and again.placement.host  # the host is always recorded
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["case_id"] == record.workload.case_id
    for bad, match in (({"hello": 1}, "lacks 'adapter', 'variant', 'device', 'spec', 'status'"),
                       ({**data, "status": "great"}, "unknown status 'great'"),
                       ({**data, "case_id": "other"}, "does not match its spec"),
                       ({**data, "schema": 7}, "record schema 7")):
        with pytest.raises(UserError, match=match):
            CaseRecord.from_dict(bad, source="r.json")


def test_worker_refuses_a_bad_job_file_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "job.json").write_text('{"hello": 1}')
    proc = subprocess.run([sys.executable, "-m", "snnbench.measure.worker", str(tmp_path / "job.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'job.json'} is not a job: it lacks 'schema'"]


def test_case_metrics_come_from_the_same_short_spec_as_the_check(
        fake_plugins: Path, tmp_path: Path) -> None:
    job = _job(tmp_path, verify_time_steps=7)
    record = run_job(job)
    assert record.status == "ok", record.message
    small = job.workload.spec.replace(time_steps=7)
    expected = firing_rate(list(run_reference(make_case_data(small)).spikes))
    assert record.samples["case"]["firing_rate"] == [pytest.approx(expected)]
    full = firing_rate(list(run_reference(make_case_data(job.workload.spec.replace(
        time_steps=30))).spikes))
    assert expected != pytest.approx(full)  # the test can tell the two apart


def test_a_case_records_where_its_time_went_outside_the_samples(
        fake_plugins: Path, tmp_path: Path) -> None:
    record = run_job(_job(tmp_path), started_s=1.25)
    assert record.status == "ok", record.message
    phases = record.overhead_s
    assert phases["start"] == 1.25
    assert {"load", "import", "prepare", "verify", "build", "first_call", "warmup", "timing",
            "metrics"} <= set(phases)
    assert all(seconds >= 0 for seconds in phases.values())
    # the timed phases' wall holds their samples
    timed = sum(sum(record.samples[phase]["time_s"]) for phase in ("forward", "backward", "step"))
    assert phases["timing"] >= timed
    # additive: a record written before the field reads as one without it
    data = record.to_dict()
    del data["overhead_s"]
    assert CaseRecord.from_dict(data).overhead_s == {}
    assert CaseRecord.from_dict(record.to_dict()).overhead_s == phases


def _slow_prepare_run(tmp_path: Path, prepare_s: float, timeout_s: float,
                      prepare_timeout_s: float, monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame:
    monkeypatch.setenv("SNNBENCH_FAKE_PREPARE_S", str(prepare_s))
    config = RunConfig.from_dict({
        "run": {"repeats": 2, "max_repeats": 2, "min_time_s": 0.0, "warmup": 0,
                "warmup_s": 0.0, "threads": 1, "device": "cpu", "adapters": ["fake-slow-prepare"],
                "timeout_s": timeout_s, "prepare_timeout_s": prepare_timeout_s},
        "network": {"batch_size": 2, "time_steps": 10, "neurons": 8},
    })
    start_run(config, tmp_path / "run", tmp_path, False)
    return pd.read_parquet(tmp_path / "run" / "summary.parquet")


def test_preparation_does_not_count_against_the_case_timeout(
        fake_plugins: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # preparing takes 4 s, the case limit is 3 s: the case must still run, with prepare_s ≈ 4
    summary = _slow_prepare_run(tmp_path, 4.0, 3.0, 60.0, monkeypatch)
    assert set(summary["status"]) == {"ok"}
    prepare = summary[summary["metric"] == "prepare_s"]["median"].iloc[0]
    assert 4.0 <= prepare < 8.0
    assert not (tmp_path / "run" / "jobs").exists()  # job folders are removed once stored


def test_preparation_has_its_own_limit(
        fake_plugins: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = _slow_prepare_run(tmp_path, 30.0, 3.0, 3.0, monkeypatch)
    row = summary.iloc[0]
    assert row["status"] == "timeout"
    assert "took longer than the 3 s prepare limit" in row["message"]


def test_a_record_carries_its_workload_kind_and_an_untagged_one_is_linear_lif(
        tmp_path: Path) -> None:
    from snnbench.records.contract import RECORD_SCHEMA

    job = _job(tmp_path)
    assert job.workload.kind == "linear-lif" and job.to_dict()["kind"] == "linear-lif"
    assert Job.from_dict(job.to_dict()).workload == job.workload
    record = CaseRecord.for_job(job, "ok", "fine", "numpy")
    data = record.to_dict()
    assert data["kind"] == "linear-lif" and data["schema"] == RECORD_SCHEMA == 2
    # a schema-1 record (written before kinds) names none: linear-lif, read as today's schema
    old = {k: v for k, v in data.items() if k != "kind"} | {"schema": 1}
    again = CaseRecord.from_dict(old, source="old.json")
    assert again.workload.kind == "linear-lif" and again.schema == RECORD_SCHEMA
    assert again.workload.case_id == again.case_id == job.workload.case_id
    with pytest.raises(UserError, match="kind: unknown workload kind 'transformer'"):
        CaseRecord.from_dict({**data, "kind": "transformer"}, source="r.json")
    with pytest.raises(UserError, match="kind: unknown workload kind"):
        Job.from_dict({**job.to_dict(), "kind": "transformer"})


def test_a_workers_age_is_read_on_the_kernels_clock_since_boot(tmp_path: Path) -> None:
    """The ``start`` overhead: process start (clock ticks since boot) to now (/proc/uptime),
    to the hundredth; psutil's boot time in whole seconds overstated it by up to a second."""
    import os

    from snnbench.measure.worker import process_age_s

    ticks = os.sysconf("SC_CLK_TCK")
    stat = tmp_path / "stat"
    # a command name with a space and a parenthesis, as the kernel writes it
    fields = ["S", "1", *["0"] * 17, str(10 * ticks), "0"]
    stat.write_text(f"4242 (my (odd) name) {' '.join(fields)}\n")
    uptime = tmp_path / "uptime"
    uptime.write_text("10.25 3.00\n")
    assert process_age_s(str(stat), str(uptime)) == pytest.approx(0.25)
    uptime.write_text("9.00 3.00\n")  # never negative
    assert process_age_s(str(stat), str(uptime)) == 0.0
    # this process: unreadable files fall back to psutil; either way a plausible age
    age = process_age_s()
    assert age is not None and 0.0 <= age < 24 * 3600
    fallback = process_age_s(str(tmp_path / "missing"), str(uptime))
    assert fallback is not None and fallback >= 0.0

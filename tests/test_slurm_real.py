"""The Slurm executor against a real Slurm (issue 20): `make slurm-check` starts a single-node
cluster (scripts/slurm_cluster.sh), without accounting and then with it, and runs these with
SNNBENCH_REAL_SLURM=1. Elsewhere they skip; submitit's local cluster (test_clusters.py) stays
the quick rehearsal.

Each test reproduces one finding of a run against a real cluster: a time limit, a cancel,
sacct without accounting, concurrency, submission errors, the manifest, a parent killed on
another host, a drained node.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from snnbench.executors import ExecutorSettings
from snnbench.executors.slurm import SlurmSettings
from snnbench.records.contract import CaseRecord
from snnbench.sweep.config import RunConfig
from snnbench.sweep.run import start_run
from tests.conftest import FAKE_PLUGIN_DIR, REPO, TAG_VAR, run_cli, wait_until_gone
from tests.test_executors import sweep

PARTITION = os.environ.get("SNNBENCH_SLURM_PARTITION", "debug")


def _slurm_works() -> bool:
    if os.environ.get("SNNBENCH_REAL_SLURM") != "1" or shutil.which("sbatch") is None:
        return False
    try:
        return subprocess.run(["sbatch", "--test-only", f"--partition={PARTITION}", "--wrap",
                               "true"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


pytestmark = [
    pytest.mark.real_slurm,
    pytest.mark.skipif(not _slurm_works(), reason="needs SNNBENCH_REAL_SLURM=1 and a Slurm "
                       "whose sbatch works (make slurm-check starts one)"),
]

#: a fast sweep of the fake adapters (3 samples, no minimum time), with the null probe
FAST_TOML = """
[run]
device = "cpu"
repeats = 3
max_repeats = 3
min_time_s = 0.0
warmup = 1
warmup_s = 0.0
threads = 1
timeout_s = 600
overhead_probe = true
[network]
batch_size = 2
time_steps = 5
surrogate = "fast_sigmoid"
reset = "subtract"
[[sweep]]
neurons = [8]
"""
CLI_SWEEP = ["--config", "FAST", "--executor", "slurm", "--partition", PARTITION]


def _cli(args: list[str], folder: Path) -> list[str]:
    """``args`` with the fast config written into ``folder``."""
    config = folder / "fast.toml"
    config.write_text(FAST_TOML)
    return [str(config) if a == "FAST" else a for a in args]


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process sweeps look at Slurm every second (5 s by default)."""
    monkeypatch.setitem(__import__("snnbench.executors.slurm", fromlist=["POLL_S"]).POLL_S,
                        "slurm", 1.0)


def _env(tag: str, slow_s: float) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(FAKE_PLUGIN_DIR), str(REPO), os.environ.get("PYTHONPATH", "")]),
        TAG_VAR: tag, "SNNBENCH_FAKE_SLOW_S": str(slow_s), "COLUMNS": "200",
        "SNNBENCH_SLURM_POLL_S": "1"}


def _node_cpus() -> int:
    out = subprocess.run(["sinfo", "-h", "-p", PARTITION, "-o", "%c"], capture_output=True,
                         text=True, timeout=30).stdout.split()
    return max(int(c.rstrip("+")) for c in out)


def _array_ids(run: Path) -> list[str]:
    return sorted(p.name.split("_")[0] for p in (run / "logs" / "slurm").glob("*_submission.sh"))


def _tasks_left(arrays: list[str]) -> list[str]:
    """Tasks of these arrays Slurm still runs or holds pending."""
    if not arrays:
        return []
    out = subprocess.run(["squeue", "-h", "-r", "-j", ",".join(arrays), "-o", "%i %T"],
                         capture_output=True, text=True, timeout=30).stdout
    return [line for line in out.splitlines() if line.strip()]


def _records(run: Path) -> dict[tuple[str, int], CaseRecord]:
    records = [CaseRecord.read(p) for p in (run / "cases").glob("*.json")]
    return {(r.adapter, r.workload.spec.neurons): r for r in records}


def _start_two_task_sweep(tmp_path: Path, process_tag: str,
                          slow: float) -> tuple[Path, subprocess.Popen[str]]:
    """``snnbench run`` of two slow fake cases, one array task each, one task at a time
    (the other pending), into ``tmp_path/run``: the folder and the process."""
    run = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "snnbench", "run", *_cli(CLI_SWEEP, tmp_path),
         "--adapters", "fake-slow",
         "--neurons", "8,16", "--cases-per-task", "1", "--array-parallelism", "1",
         "--out", str(run)], env=_env(process_tag, slow), cwd=REPO, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return run, proc


def _wait_for_case(run: Path, proc: subprocess.Popen[str] | None, adapter: str,
                   timeout: float = 120) -> None:
    """Until a case of ``adapter`` runs (its job folder exists on the shared filesystem)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (run / "jobs").is_dir() and any((run / "jobs").glob(f"{adapter}--*/job.json")):
            time.sleep(2.0)  # well into the case
            return
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the sweep ended early: {proc.communicate()}")
        time.sleep(0.2)
    if proc is not None:
        proc.kill()
    pytest.fail(f"no {adapter} case started within {timeout:g} s")


@pytest.fixture
def cancel_leftovers(tmp_path: Path) -> Iterator[None]:
    """Whatever a failing test left in Slurm for its run folders is cancelled."""
    yield
    arrays = [a for run in tmp_path.iterdir() if (run / "logs").is_dir()
              for a in _array_ids(run)]
    if arrays:
        subprocess.run(["scancel", *arrays], capture_output=True, timeout=60)


# -- a normal sweep: the serial rows, true concurrency, the manifest -----------------------
@pytest.mark.usefixtures("cancel_leftovers")
def test_a_slurm_sweep_gives_the_serial_rows_with_the_concurrency_that_ran(
        fake_plugins: Path, tmp_path: Path) -> None:
    """Findings 4 and 6: each task asks for every CPU of the node, so Slurm runs them one
    after another: every row says concurrency 1 (it said what was requested), compare finds
    no concurrency difference with a serial run, and the manifest's config names Slurm and
    its partition (it said local and "")."""
    config = sweep(["fake-ok", "fake-raises"], [8])
    serial, run = tmp_path / "serial", tmp_path / "slurm"
    start_run(config, serial, tmp_path, False)
    settings = ExecutorSettings(name="slurm", slurm=SlurmSettings(
        partition=PARTITION, cases_per_task=1, cpus_per_task=_node_cpus(), timeout_min=10))
    outcome = start_run(config, run, tmp_path, False, executor_settings=settings)
    ran = [r for r in outcome.records if r.status == "ok"]
    assert len(ran) == 1 and {r.placement.executor for r in ran} == {"slurm"}
    assert {r.status for r in outcome.records} == {"ok", "error"}
    summary = pd.read_parquet(run / "summary.parquet")
    assert set(summary[summary["status"] == "ok"]["concurrency"]) == {1}
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["executor"]["name"] == "slurm"
    assert manifest["config"]["executor"]["slurm"]["partition"] == PARTITION
    (execution,) = manifest["executions"]
    assert execution["concurrency"] == 1
    assert len(execution["engine_jobs"]) == len(outcome.records)  # one case per task
    proc = run_cli("compare", str(serial), str(run))
    # 1: a timing regression, 3: inconclusive (one process a side on a busy machine); either way
    # the gate ran and nothing was refused
    assert proc.returncode in (0, 1, 3), proc.stderr
    assert "concurrency differs" not in proc.stdout


# -- a time limit ----------------------------------------------------------------------------
@pytest.mark.usefixtures("cancel_leftovers")
def test_a_time_limit_is_a_timeout_and_resume_runs_it_with_the_new_limit(
        fake_plugins: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 1: the case cut by the task's time limit was `error` (submitit's
    UncompletedJobError at USR2) and --resume kept it; now `timeout`, re-run by --resume with
    the limit given then."""
    run = tmp_path / "run"
    monkeypatch.setenv("SNNBENCH_FAKE_SLOW_S", "100")
    settings = ExecutorSettings(name="slurm", slurm=SlurmSettings(
        partition=PARTITION, timeout_min=1, cases_per_task=4))
    started = time.monotonic()
    start_run(sweep(["fake-slow"], [8], timeout_s=600), run, tmp_path, False,
              executor_settings=settings)
    assert time.monotonic() - started < 120
    slow = _records(run)[("fake-slow", 8)]
    assert slow.status == "timeout", slow.message
    assert "time limit" in slow.message and "--timeout-min" in slow.message
    monkeypatch.setenv("SNNBENCH_FAKE_SLOW_S", "0.01")
    longer = ExecutorSettings(name="slurm", slurm=SlurmSettings(partition=PARTITION,
                                                                timeout_min=2))
    outcome = start_run(RunConfig(), run, tmp_path, True, executor_settings=longer)
    assert [(r.adapter, r.status, r.placement.attempt) for r in outcome.records] == [
        ("fake-slow", "ok", 2)]
    manifest = json.loads((run / "manifest.json").read_text())
    assert [e["timeout_min"] for e in manifest["executions"]] == [1, 2]


# -- a cancel, with and without accounting ---------------------------------------------------
def test_a_cancelled_sweep_is_lost_not_oom_ends_and_resume_reruns_it(
        tmp_path: Path, process_tag: str) -> None:
    """Findings 2 and 3: after `scancel` of the array the running case was `oom` (the
    worker's own SIGKILL after Slurm's SIGTERM) and kept by --resume; without accounting the
    cancelled pending tasks left the sweep waiting forever, with a sacct warning per poll.
    Now every case is `lost`, the sweep ends on its own with at most one warning, and
    --resume runs them again."""
    run, proc = _start_two_task_sweep(tmp_path, process_tag, 100.0)
    try:
        _wait_for_case(run, proc, "fake-slow")  # one task runs, the other is pending
        arrays = _array_ids(run)
        subprocess.run(["scancel", *arrays], check=True, timeout=60)
        cancelled = time.monotonic()
        _, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            subprocess.run(["scancel", *_array_ids(run)], capture_output=True, timeout=60)
    took = time.monotonic() - cancelled
    assert proc.returncode == 1, stderr
    assert took < 60
    assert "Traceback" not in stderr and "Bypassing sacct" not in stderr
    assert stderr.count("accounting is not available") <= 1
    records = _records(run)
    slow = {n: r for (a, n), r in records.items() if a == "fake-slow"}
    assert sorted(slow) == [8, 16]
    assert {r.status for r in slow.values()} == {"lost"}, [r.message for r in slow.values()]
    assert any("CANCELLED" in r.message for r in slow.values())
    assert wait_until_gone(process_tag, timeout=30) == []
    assert _tasks_left(arrays) == []
    resumed = run_cli("run", "--resume", "--out", str(run), "--cases-per-task", "2",
                      env=_env(process_tag, 0.01), timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert {r.status for r in _records(run).values()} == {"ok"}


# -- submission errors -----------------------------------------------------------------------
@pytest.mark.parametrize(("args", "env", "message"), [
    (["--partition", "nosuchpart"], {}, "invalid partition"),
    ([], {"SLURM_CONF": "BAD_PORT"}, "Unable to contact slurm controller"),
], ids=["partition", "no-controller"])
def test_a_submission_slurm_refuses_is_one_line_and_no_folder(
        tmp_path: Path, args: list[str], env: dict[str, str], message: str) -> None:
    """Finding 5: a 70-line traceback with exit 1 and a half-made run folder; now one line,
    exit 2, nothing written."""
    if env.get("SLURM_CONF") == "BAD_PORT":
        # a copy of this cluster's configuration whose controller port nobody listens on
        conf = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).read_text()
        bad = tmp_path / "slurm.conf"
        bad.write_text(conf + "\nSlurmctldPort=1\n")
        env = {"SLURM_CONF": str(bad)}
    out = tmp_path / "run"
    proc = run_cli("run", *_cli(CLI_SWEEP, tmp_path), "--adapters", "fake-ok", "--neurons",
                   "8", *args, "--out", str(out), env={**_env("", 0.01), **env}, timeout=180)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2  # one line (a long one may wrap once)
    assert not out.exists()


# -- the parent killed on another host ---------------------------------------------------------
PARENT_ELSEWHERE = """
import sys
import snnbench.executors.remote as remote
remote.hostname = lambda: "login-elsewhere"   # the owner seen from the node: another host
from snnbench.executors import ExecutorSettings
from snnbench.executors.slurm import SlurmSettings
from snnbench.sweep.run import start_run
from tests.test_executors import sweep
settings = ExecutorSettings(name="slurm", slurm=SlurmSettings(
    partition=sys.argv[2], cases_per_task=1, array_parallelism=1, timeout_min=10,
    heartbeat_window_s=int(sys.argv[3])))
start_run(sweep(["fake-slow"], [8, 16, 24], timeout_s=600), __import__("pathlib").Path(
    sys.argv[1]), None, False, executor_settings=settings)
"""


def test_a_parent_killed_on_another_host_stops_its_tasks_within_the_heartbeat_window(
        tmp_path: Path, process_tag: str) -> None:
    """Multi-node: with the owner on another host, tasks watch its heartbeat. After a
    SIGKILL of the owner the running task stops within the window, and the tasks that start
    later see a stale heartbeat and stop at once (each waited a full window)."""
    run, window = tmp_path / "run", 10
    proc = subprocess.Popen([sys.executable, "-c", PARENT_ELSEWHERE, str(run), PARTITION,
                             str(window)], env=_env(process_tag, 100.0), cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    arrays: list[str] = []
    try:
        _wait_for_case(run, proc, "fake-slow")
        arrays = _array_ids(run)
        proc.kill()
        proc.communicate(timeout=30)
        killed = time.monotonic()
        while _tasks_left(arrays) and time.monotonic() - killed < 4 * window + 30:
            time.sleep(0.5)
        took = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
        if arrays:
            subprocess.run(["scancel", *arrays], capture_output=True, timeout=60)
    # the last beat is up to 5 s older than the kill; a task start takes a few seconds
    assert took < window + 15, f"tasks ran {took:.0f} s after the owner died"
    assert wait_until_gone(process_tag, timeout=30) == []
    assert not [p for p in (run / "jobs").glob("fake-slow--*") if p.is_dir()]


# -- a drained node ----------------------------------------------------------------------------
def test_a_drained_node_finishes_its_case_and_the_wait_is_said_once(
        tmp_path: Path, process_tag: str) -> None:
    """`scontrol update state=drain`: the running case finishes `ok`, the pending tasks wait
    (said once, with Slurm's reason), and run when the node is resumed."""
    node = subprocess.run(["sinfo", "-h", "-p", PARTITION, "-o", "%N"], capture_output=True,
                          text=True, timeout=30).stdout.strip()
    run, proc = _start_two_task_sweep(tmp_path, process_tag, 0.5)
    try:
        _wait_for_case(run, proc, "fake-slow")
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=drain",
                        "reason=snnbench-test"], check=True, timeout=30)
        # drained until Slurm gives the pending task the drain as its reason (its scheduler
        # re-evaluates pending jobs every few seconds), and the sweep had a poll to see it
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            reasons = subprocess.run(["squeue", "-h", "-r", "-t", "PD", "-j",
                                      ",".join(_array_ids(run)), "-o", "%r"],
                                     capture_output=True, text=True, timeout=30).stdout
            if "DRAIN" in reasons.upper() or "ReqNodeNotAvail" in reasons:
                break
            time.sleep(1)
        time.sleep(7)
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"],
                       check=True, timeout=30)
        _, stderr = proc.communicate(timeout=240)
    finally:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"],
                       capture_output=True, timeout=30)
        if proc.poll() is None:
            proc.kill()
            subprocess.run(["scancel", *_array_ids(run)], capture_output=True, timeout=60)
    assert proc.returncode == 0, stderr
    assert {r.status for r in _records(run).values()} == {"ok"}
    # said once per reason Slurm gives (it may name the drain in two ways while it lasts)
    waits = [line for line in stderr.splitlines() if "array tasks wait (" in line]
    assert 1 <= len(waits) <= 2 and len(set(waits)) == len(waits), stderr

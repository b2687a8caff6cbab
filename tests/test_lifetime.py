"""No process outlives its sweep: kill `snnbench run` mid-sweep (SIGKILL, SIGTERM, SIGINT) under
each executor; no worker and no job folder is left, and --resume finishes the run (with any
executor)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import FAKE_PLUGIN_DIR, REPO, TAG_VAR, run_cli, wait_until_gone

SWEEP = ["--config", "ci-smoke", "--adapters", "fake-ok,fake-slow", "--neurons", "8,16",
         "--steps", "5", "--batch-size", "2", "--repeats", "3", "--warmup", "1",
         "--threads", "1", "--device", "cpu", "--timeout", "120"]
LOCAL_CLUSTER = ["--executor", "slurm", "--slurm-cluster", "local", "--cases-per-task", "2"]


def _env(tag: str, slow_s: float) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(FAKE_PLUGIN_DIR), os.environ.get("PYTHONPATH", "")]),
            TAG_VAR: tag, "SNNBENCH_FAKE_SLOW_S": str(slow_s), "COLUMNS": "200"}


def _start(out: Path, tag: str, executor: list[str],
           extra_env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, **_env(tag, 60.0), **(extra_env or {})}
    return subprocess.Popen([sys.executable, "-m", "snnbench", "run", *SWEEP, *executor,
                             "--out", str(out)], env=env, cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_mid_sweep(out: Path, proc: subprocess.Popen[str], timeout: float = 180) -> None:
    """Until a fast case is recorded and a slow one is running (its job folder exists)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = list((out / "cases").glob("*.json")) if (out / "cases").is_dir() else []
        running = [p for p in (out / "jobs").glob("fake-slow*") if (p / "job.json").exists()] \
            if (out / "jobs").is_dir() else []
        if done and running:
            time.sleep(1.0)  # let the slow worker get well into its case
            return
        if proc.poll() is not None:
            pytest.fail(f"the sweep ended early: {proc.communicate()}")
        time.sleep(0.1)
    proc.kill()
    pytest.fail("the sweep never reached the middle")


def _kill_and_check(out: Path, proc: subprocess.Popen[str], sig: signal.Signals,
                    tag: str) -> None:
    proc.send_signal(sig)  # the parent only, as a scheduler or a user would
    try:
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"snnbench run did not stop on {sig.name}")
    expected = {signal.SIGKILL: -9, signal.SIGTERM: 143, signal.SIGINT: 130}[sig]
    assert proc.returncode == expected, stderr
    if sig != signal.SIGKILL:
        assert "finished cases are kept" in stderr
        assert f"snnbench run --resume --out {out}" in stderr
        assert "Traceback" not in stderr
    assert wait_until_gone(tag, timeout=30) == []
    leftovers = [p for p in (out / "jobs").iterdir() if p.is_dir()] \
        if (out / "jobs").is_dir() else []
    assert leftovers == []
    # finished cases are kept, intact; read as every reader does: the tables lag the records
    # (rebuilt as they double), and a stop during the first rebuild leaves only the records
    # and the stale mark that sends readers to them
    from snnbench.store.rundir import load_run

    summary = load_run(out).summary
    assert set(summary["status"]) == {"ok"}
    assert 1 <= len(list((out / "cases").glob("*.json"))) < 5


def _resume_and_check(out: Path, tag: str, executor: list[str]) -> None:
    proc = run_cli("run", "--resume", "--out", str(out), *executor, env=_env(tag, 0.01))
    assert proc.returncode == 0, proc.stderr
    summary = pd.read_parquet(out / "summary.parquet")
    times = summary[summary["metric"] == "time_s"]
    per_case = times.groupby(["adapter", "neurons", "phase"]).size()
    # 2 adapters × 2 sizes, and ci-smoke's null probe at the smallest
    assert len(per_case) == (2 * 2 + 1) * 3 and (per_case == 1).all()
    assert set(summary["status"]) == {"ok"}
    assert wait_until_gone(tag) == []


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "executor", "resume_with"), [
    (signal.SIGKILL, [], ["--jobs", "2"]),
    (signal.SIGTERM, [], []),
    (signal.SIGINT, [], LOCAL_CLUSTER),
    (signal.SIGTERM, ["--jobs", "2"], []),
    (signal.SIGKILL, LOCAL_CLUSTER, []),
    (signal.SIGTERM, LOCAL_CLUSTER, []),
], ids=["kill-local", "term-local", "int-local", "term-jobs2", "kill-slurm", "term-slurm"])
def test_killing_the_sweep_leaves_nothing_and_resume_finishes(
        tmp_path: Path, process_tag: str, sig: signal.Signals, executor: list[str],
        resume_with: list[str]) -> None:
    if executor == LOCAL_CLUSTER or resume_with == LOCAL_CLUSTER:
        pytest.importorskip("submitit")
    out = tmp_path / "run"
    proc = _start(out, process_tag, executor)
    _wait_mid_sweep(out, proc)
    _kill_and_check(out, proc, sig, process_tag)
    _resume_and_check(out, process_tag, resume_with)


@pytest.mark.slow
def test_terminating_a_ray_sweep_leaves_nothing(tmp_path: Path, process_tag: str,
                                                ray_cluster: dict[str, str]) -> None:
    out = tmp_path / "run"
    proc = _start(out, process_tag, ["--executor", "ray"],
                  {"RAY_ADDRESS": ray_cluster["address"]})
    _wait_mid_sweep(out, proc)
    _kill_and_check(out, proc, signal.SIGTERM, process_tag)
    _resume_and_check(out, process_tag, [])


def test_a_worker_whose_parent_died_before_it_started_exits(tmp_path: Path) -> None:
    """The race the pre-exec check covers: the launcher is gone when the worker arms."""
    from snnbench.host.lifeline import PARENT_PID_VAR

    job_dir = tmp_path / "jobs" / "k"
    job_dir.mkdir(parents=True)
    (job_dir / "job.json").write_text("{}")
    dead = subprocess.Popen(["true"])
    dead.wait()
    proc = subprocess.run([sys.executable, "-m", "snnbench.measure.worker", str(job_dir / "job.json")],
                          env={**os.environ, PARENT_PID_VAR: str(dead.pid)}, cwd=REPO,
                          capture_output=True, text=True, timeout=60,
                          start_new_session=True)
    # started by pytest (alive) but told its launcher is a dead pid: it removes its folder
    # and kills itself instead of running a job nobody waits for
    assert proc.returncode == -signal.SIGKILL
    assert not job_dir.exists() and not job_dir.parent.exists()


def test_the_leak_check_finds_an_orphaned_worker(process_tag: str) -> None:
    """The session's check is live: a tagged 'worker' whose parent exited is found."""
    from tests.conftest import tagged_processes

    # the shell starts it in the background and exits: the sleeper is re-parented, as a
    # leaked worker was
    subprocess.run(["sh", "-c", f"'{sys.executable}' -c 'import time; time.sleep(60)' "
                                "snnbench.measure.worker >/dev/null 2>&1 &"],
                   env={**os.environ, TAG_VAR: process_tag}, check=True, timeout=30)
    deadline = time.monotonic() + 10
    found: list[str] = []
    while not found and time.monotonic() < deadline:
        found = tagged_processes(process_tag)
        time.sleep(0.1)
    assert len(found) == 1 and "snnbench.measure.worker" in found[0]
    os.kill(int(found[0].split()[1]), signal.SIGKILL)
    assert wait_until_gone(process_tag) == []


# -- issue 21, item 14: stops leave nothing behind ---------------------------------------------
@pytest.mark.slow
def test_sigkill_under_jobs_2_leaves_no_job_folder(tmp_path: Path, process_tag: str) -> None:
    """Killed at any moment, also between two cases (a folder made, its worker not started
    yet, or a worker gone and its folder not yet removed): no job folder is left."""
    for attempt, delay in enumerate((0.0, 0.35, 0.7, 1.1)):
        out = tmp_path / f"run{attempt}"
        env = {**os.environ, **_env(process_tag, 0.0)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "snnbench", "run", "--adapters", "fake-ok", "--neurons",
             ",".join(str(n) for n in range(4, 40)), "--steps", "3", "--batch-size", "2",
             "--repeats", "1", "--warmup", "0", "--threads", "1", "--device", "cpu",
             "--config", "ci-smoke", "--jobs", "2", "--out", str(out)],
            env=env, cwd=REPO, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 180
        while not (out / "cases").is_dir() or not list((out / "cases").glob("*.json")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        time.sleep(delay)
        proc.kill()
        proc.communicate(timeout=60)
        assert wait_until_gone(process_tag, timeout=30) == []
        left = sorted(p.name for p in (out / "jobs").iterdir()) if (out / "jobs").exists() \
            else []
        assert left == [], (attempt, left)


def _hanging_index() -> tuple[socket.socket, str]:
    """An index that accepts connections and never answers: uv waits in the resolve."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    return server, f"http://127.0.0.1:{server.getsockname()[1]}/simple"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
def test_a_stop_during_an_environment_build_leaves_nothing(
        tmp_path: Path, process_tag: str, sig: signal.Signals) -> None:
    from tests.conftest import tagged_processes

    server, index = _hanging_index()
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    out = tmp_path / "run"
    env = {**os.environ, **_env(process_tag, 0.0), "UV_DEFAULT_INDEX": index,
           "UV_INDEX_URL": index, "UV_HTTP_TIMEOUT": "120", "UV_HTTP_RETRIES": "0",
           "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "TMPDIR": str(private_tmp),
           "SNNBENCH_ENV_CACHE": str(tmp_path / "envs")}
    for name in ("UV_OFFLINE", "SNNBENCH_WHEELHOUSE", "HTTP_PROXY", "HTTPS_PROXY",
                 "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env.pop(name, None)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "snnbench", "run", "--adapters", "fake-ok,fake-lib@1.0",
             "--neurons", "8", "--steps", "3", "--out", str(out)],
            env=env, cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while not tagged_processes(process_tag, ("uv pip compile",)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        server.close()
    assert proc.returncode == {signal.SIGKILL: -9, signal.SIGTERM: 143}[sig], stderr
    # uv dies with its parent (not seconds later), and nothing of the build stays in the
    # temporary folder
    assert wait_until_gone(process_tag, timeout=1.0) == []
    assert sorted(p.name for p in private_tmp.iterdir()) == []
    assert not out.exists()
    if sig == signal.SIGTERM:
        lines = stderr.strip().splitlines()
        assert lines[-1] == "stopped by SIGTERM before the run started: nothing was written", \
            stderr
        assert "--resume" not in stderr and "Traceback" not in stderr

"""Issue 38, item 1: each case's worker is forked from a zygote that imported its library once
per sweep, and stays a fresh process: no case sees what an earlier case left, the record says
how its process started, and no zygote or child outlives the sweep (killed or not)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from snnbench.executors.forkserver import Zygotes, memory_short
from snnbench.executors.launch import Cancelled, run_worker
from snnbench.executors.settings import ExecutorError, ExecutorSettings
from snnbench.records.contract import CaseRecord, Job
from snnbench.workload import LinearLif
from snnbench.workload.linear_lif.spec import NetworkSpec
from tests.conftest import FAKE_PLUGIN_DIR, TAG_VAR, run_cli, tagged_processes, wait_until_gone
from tests.test_libenv import env_cache, fake_config, wheelhouse
from tests.test_lifetime import _kill_and_check, _start, _wait_mid_sweep

#: the library-environment fixtures, used here by name
FIXTURES = (env_cache, wheelhouse)

SMALL = ["--config", "ci-smoke", "--steps", "5", "--batch-size", "2", "--repeats", "3",
         "--warmup", "1", "--threads", "1", "--device", "cpu", "--timeout", "120"]


def _env(tag: str, probe_dir: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(FAKE_PLUGIN_DIR), os.environ.get("PYTHONPATH", "")]),
            TAG_VAR: tag, "SNNBENCH_FAKE_PROBE_DIR": str(probe_dir)}


def _records(out: Path) -> list[CaseRecord]:
    return [CaseRecord.read(p) for p in sorted((out / "cases").glob("*.json"))]


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_no_case_sees_what_an_earlier_case_left(tmp_path: Path, process_tag: str,
                                                start: str) -> None:
    probes = tmp_path / "probes"
    probes.mkdir()
    out = tmp_path / "run"
    proc = run_cli("run", *SMALL, "--adapters", "fake-counter", "--neurons", "8,16",
                   "--replicates", "2", "--start", start, "--out", str(out),
                   env=_env(process_tag, probes))
    assert proc.returncode == 0, proc.stderr
    records = [r for r in _records(out) if r.adapter == "fake-counter"]
    assert len(records) == 4 and {r.status for r in records} == {"ok"}
    assert {r.start for r in records} == {start}
    seen = [json.loads(p.read_text()) for p in probes.glob("counter-*.json")]
    by_pid: dict[int, list[int]] = {}
    for probe in seen:
        by_pid.setdefault(probe["pid"], []).append(probe["builds"])
    # one process per case (verification builds, then the timed build), each finding the
    # module-level counter at its initial value on its first build
    assert len(by_pid) == 4
    assert all(min(builds) == 0 for builds in by_pid.values()), by_pid
    parents = {probe["ppid"] for probe in seen}
    if start == "fork":
        # all forked from one zygote (the sweep's child, not the sweep)
        assert len(parents) == 1 and os.getpid() not in parents
    assert wait_until_gone(process_tag) == []


def test_a_library_that_leaves_a_thread_running_is_not_forked(tmp_path: Path,
                                                               process_tag: str) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", *SMALL, "--adapters", "fake-thread-at-import", "--neurons", "8",
                   "--start", "fork", "--out", str(out), env=_env(process_tag, tmp_path))
    assert proc.returncode == 0, proc.stderr
    [record] = [r for r in _records(out) if r.adapter == "fake-thread-at-import"]
    assert record.status == "ok" and record.start == "spawn"
    log = (out / "logs" / f"{record.key}.log").read_text()
    assert "a Python thread runs in the zygote (fake-library-thread)" in log
    [probe] = [r for r in _records(out) if r.adapter == "null"]
    assert probe.start == "fork"  # the other adapters still fork
    assert wait_until_gone(process_tag) == []


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
def test_killing_a_forking_sweep_leaves_no_zygote_and_no_child(
        tmp_path: Path, process_tag: str, sig: signal.Signals) -> None:
    out = tmp_path / "run"
    proc = _start(out, process_tag, ["--start", "fork"])
    _wait_mid_sweep(out, proc)
    # the slow case runs forked from its zygote, which is alive with it
    assert any("snnbench.executors.zygote" in p for p in tagged_processes(process_tag)), \
        tagged_processes(process_tag)
    _kill_and_check(out, proc, sig, process_tag)  # nothing left: no zygote, no child
    assert {r.start for r in _records(out)} == {"fork"}


def test_start_is_checked() -> None:
    assert ExecutorSettings().start == "auto"  # fork where safe (docs/executors.md)
    assert ExecutorSettings(start="spawn").to_dict()["start"] == "spawn"
    assert ExecutorSettings.from_dict({"start": "fork"}).start == "fork"
    with pytest.raises(ExecutorError, match="start must be one of auto, fork, spawn"):
        ExecutorSettings(start="vfork")
    with pytest.raises(ExecutorError, match="--start fork is an option of the local executor"):
        ExecutorSettings(name="slurm", start="fork")


def test_a_bad_start_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = run_cli("run", *SMALL, "--adapters", "null", "--start", "thread",
                   "--out", str(tmp_path / "run"))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "start must be one of" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_no_zygote_is_started_when_memory_is_short(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16000000 kB\nMemFree:  100 kB\n"
                       "MemAvailable:    3000000 kB\n")
    assert "memory is short (2.9 GiB available of 15.3)" in memory_short(str(meminfo))
    meminfo.write_text("MemTotal:       16000000 kB\nMemAvailable:    9000000 kB\n")
    assert memory_short(str(meminfo)) == ""
    assert memory_short(str(tmp_path / "missing")) == ""  # unknown: no limit


def test_a_hung_forked_worker_is_killed_and_a_stop_kills_it_at_once(
        fake_plugins: Path, tmp_path: Path, process_tag: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TAG_VAR, process_tag)
    zygotes = Zygotes()
    job = Job(adapter="fake-hang", variant="default", device="cpu",
              workload=LinearLif(NetworkSpec(neurons=8, batch_size=2, time_steps=5)), timeout_s=2.0,
              prepare_timeout_s=300.0)
    try:
        folder = tmp_path / "jobs" / "hang"
        folder.mkdir(parents=True)
        record = run_worker(job.with_result_in(folder), folder, tmp_path / "logs" / "hang.log",
                            zygotes=zygotes)
        assert record.status == "timeout" and record.start == "fork", record.message
        assert "no result within the 2 s timeout" in record.message
        # a stop while the case runs: the worker is killed and the launcher returns at once
        stop = threading.Event()
        timer = threading.Timer(1.0, stop.set)
        timer.start()
        started = time.monotonic()
        with pytest.raises(Cancelled):
            run_worker(dataclasses.replace(job, timeout_s=600.0).with_result_in(folder), folder,
                       tmp_path / "logs" / "stop.log", stop, zygotes=zygotes)
        assert time.monotonic() - started < 30
        workers = [p for p in tagged_processes(process_tag) if "snnbench.executors.zygote" in p]
        assert len(workers) == 1, workers  # the zygote alone: its child is gone
    finally:
        zygotes.close()
    assert wait_until_gone(process_tag) == []


@pytest.mark.usefixtures("env_cache", "fake_plugins")
def test_a_library_environment_forks_from_a_zygote_of_its_own_interpreter(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    wheelhouse = request.getfixturevalue("wheelhouse")
    out = tmp_path / "run"
    config = fake_config(tmp_path, ["fake-lib@1.0", "fake-lib@2.0", "fake-ok"])
    proc = run_cli("run", "--config", str(config), "--wheelhouse", str(wheelhouse),
                   "--start", "fork", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    records = {r.environment.name or r.adapter: r for r in _records(out)}
    assert {r.start for r in records.values()} == {"fork"}
    # each forked worker saw its own environment's library, as a spawned one does
    assert records["fake-lib@1.0"].library_version == "1.0"
    assert records["fake-lib@2.0"].library_version == "2.0"
    assert records["fake-lib@2.0"].packages["snnbench-fakelib"] == "2.0"
    assert "snnbench-fakelib" not in records["fake-ok"].packages


# -- the rare hang of an interrupted forking sweep ---------------------------------------------
def _fake_ok_job(timeout_s: float = 120.0) -> Job:
    return Job(adapter="fake-ok", variant="default", device="cpu",
               workload=LinearLif(NetworkSpec(neurons=8, batch_size=2, time_steps=5)), timeout_s=timeout_s,
               prepare_timeout_s=300.0)


def test_an_interrupt_just_after_a_worker_exit_arrived_stops_the_launcher(
        fake_plugins: Path, tmp_path: Path, process_tag: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C raised between the receipt of the forked worker's exit message and its use (a
    signal handler raises wherever the main thread is): the message is gone, and the launcher,
    killing and reaping the worker, must not wait forever for it (it asks the zygote again)."""
    import snnbench.executors.forkserver as forkserver

    monkeypatch.setenv(TAG_VAR, process_tag)
    real_receive = forkserver.receive
    fired: list[dict[str, object]] = []

    def receive(sock: object, timeout_s: float | None) -> tuple[dict[str, object] | None,
                                                                list[int]]:
        message, fds = real_receive(sock, timeout_s)  # type: ignore[arg-type]
        if message is not None and "exited" in message and not fired:
            fired.append(message)
            for fd in fds:
                os.close(fd)
            raise KeyboardInterrupt  # what SIGINT's handler raises at this very point
        return message, fds

    monkeypatch.setattr("snnbench.executors.forkserver.receive", receive)
    zygotes = Zygotes()
    folder = tmp_path / "jobs" / "ok"
    folder.mkdir(parents=True)
    outcome: list[str] = []

    def launch() -> None:
        try:
            run_worker(_fake_ok_job().with_result_in(folder), folder,
                       tmp_path / "logs" / "ok.log", zygotes=zygotes)
            outcome.append("returned")
        except KeyboardInterrupt:
            outcome.append("interrupted")

    thread = threading.Thread(target=launch, daemon=True)
    thread.start()
    try:
        thread.join(120)
        assert fired, "the forked worker's exit never arrived"
        assert outcome == ["interrupted"], \
            "the launcher still waits for the exit message it had already received"
    finally:
        zygotes.close()  # without the fix: closes the socket the launcher waits on
        thread.join(30)
    assert wait_until_gone(process_tag) == []


def test_a_zygote_closed_before_its_child_has_a_session_kills_that_child(
        fake_plugins: Path, tmp_path: Path, process_tag: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep stops while a just-forked child has not made its own session yet (held there
    by a ``sitecustomize`` that delays ``os.setsid``): its group does not exist yet, and the
    zygote must still kill it (by pid) and end by itself, not wait for the case to end."""
    from snnbench.host.lifeline import PARENT_PID_VAR

    hooks = tmp_path / "hooks"
    hooks.mkdir()
    # only the forked child calls os.setsid (Popen's new session is made in C)
    (hooks / "sitecustomize.py").write_text(
        "import os, time\n"
        "_setsid = os.setsid\n"
        "def _late_setsid():\n"
        "    open(os.environ['HOLD_MARK'], 'w').close()\n"
        "    time.sleep(120)\n"
        "    return _setsid()\n"
        "os.setsid = _late_setsid\n")
    mark = tmp_path / "held"
    env = {**os.environ, TAG_VAR: process_tag, PARENT_PID_VAR: str(os.getpid()),
           "HOLD_MARK": str(mark),
           "PYTHONPATH": os.pathsep.join([str(hooks), str(FAKE_PLUGIN_DIR)])}
    folder = tmp_path / "jobs" / "ok"
    folder.mkdir(parents=True)
    job = _fake_ok_job().with_result_in(folder)
    job.write(folder / "job.json")
    zygotes = Zygotes()
    try:
        with open(tmp_path / "child.log", "wb") as log:
            child = zygotes.fork(sys.executable, "fake-ok", env, (), str(folder / "job.json"),
                                 log.fileno(), 300.0)
        assert not isinstance(child, str), child
        deadline = time.monotonic() + 60
        while not mark.exists():
            assert time.monotonic() < deadline, "the child never reached os.setsid"
            time.sleep(0.05)
        zygote = child._zygote
    finally:
        zygotes.close()
    # it ended by itself (its socket closed) after killing its child, not SIGKILLed by the
    # sweep after waiting for it
    assert zygote.proc.returncode == 0, zygote.proc.returncode
    assert wait_until_gone(process_tag) == []

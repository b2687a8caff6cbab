"""Where cases run: local slots (--jobs, --gpus with a fake NVML), settings, placement rows,
lost cases, merge, and the hosts warning of compare."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest

from snnbench.errors import UserError
from snnbench.executors import ExecutorError, ExecutorSettings, LocalExecutor, make_executor
from snnbench.executors.placement import (
    Slot,
    available_cpus,
    cpu_slots,
    gpu_slots,
    list_gpus,
    visible_gpu_uuid,
)
from snnbench.records.contract import CaseRecord, Placement
from snnbench.store.rundir import RunDir
from snnbench.sweep.config import RunConfig
from snnbench.sweep.run import merge_run, start_run
from snnbench.sweep.threads import share_threads
from tests.conftest import run_cli

FAST = {"repeats": 3, "max_repeats": 3, "min_time_s": 0.0, "warmup": 1, "warmup_s": 0.0,
        "threads": 1, "device": "cpu"}


def sweep(adapters: list[str], neurons: list[int], **run: Any) -> RunConfig:
    """A small sweep of the fake adapters (fast sigmoid and subtract reset, as they declare)."""
    return RunConfig.from_dict({
        "run": {**FAST, "adapters": adapters, "timeout_s": 60.0, **run},
        "network": {"batch_size": 2, "time_steps": 5, "surrogate": "fast_sigmoid",
                    "reset": "subtract"},
        "sweep": [{"neurons": neurons}],
    })


def ok_keys(run: Path) -> set[tuple[str, str, int]]:
    summary = pd.read_parquet(run / "summary.parquet")
    ok = summary[summary["status"] == "ok"]
    return {(a, v, int(n)) for a, v, n in zip(ok["adapter"], ok["variant"], ok["neurons"],
                                              strict=True)}


def probes(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


class FakeNvml:
    """Two GPUs, in PCI order; GPU 0 is near CPUs 0-1, GPU 1 near CPUs 2-3."""

    GPUS: ClassVar[list[tuple[str, str, list[int]]]] = [("GPU-aaaaaaaa-0000-0000-0000-000000000000", "NVIDIA H100", [0b0011]),
            ("GPU-bbbbbbbb-1111-1111-1111-111111111111", "NVIDIA H100", [0b1100])]

    def __init__(self, present: bool = True) -> None:
        self.present = present
        self.open = 0

    def nvmlInit(self) -> None:
        if not self.present:
            raise RuntimeError("NVML Shared Library Not Found")
        self.open += 1

    def nvmlShutdown(self) -> None:
        self.open -= 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.GPUS)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return self.GPUS[handle][0].encode()

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self.GPUS[handle][1]

    def nvmlDeviceGetCpuAffinity(self, handle: int, words: int) -> list[int]:
        return self.GPUS[handle][2]


# -- placement on one machine -------------------------------------------------------------
def test_cpu_slots_split_the_cores_without_overlap() -> None:
    slots = cpu_slots(2, cpus=(0, 1, 2, 3, 4))
    assert [s.cpus for s in slots] == [(0, 1), (2, 3)]  # the fifth core is not shared out
    assert cpu_slots(1, cpus=(3, 5)) == [Slot(0, cpus=(3, 5))]
    with pytest.raises(ExecutorError, match="--jobs 3 needs at least 3 CPU cores"):
        cpu_slots(3, cpus=(0, 1))
    with pytest.raises(ExecutorError, match="positive integer"):
        cpu_slots(0)


def test_gpus_are_pinned_by_uuid_and_bound_to_their_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = FakeNvml()
    gpus = list_gpus(nvml)
    assert [(g.index, g.cpus) for g in gpus] == [(0, (0, 1)), (1, (2, 3))]
    monkeypatch.setattr("snnbench.executors.placement.available_cpus", lambda: (0, 1, 2))
    # by NVML index, by full UUID, or by UUID without its prefix; in the order given
    for selection in (["1", "0"], [FakeNvml.GPUS[1][0], "0"], ["bbbbbbbb-1111-1111-1111-111111111111", "0"]):
        slots = gpu_slots(selection, bind_cpus=True, nvml=nvml)
        assert [s.gpu_uuid for s in slots] == [FakeNvml.GPUS[1][0], FakeNvml.GPUS[0][0]]
        assert dict(slots[0].env) == {"CUDA_VISIBLE_DEVICES": FakeNvml.GPUS[1][0],
                                      "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        assert slots[0].cpus == (2,) and slots[1].cpus == (0, 1)  # only CPUs we may use
    assert gpu_slots(["0"], nvml=nvml)[0].cpus == ()  # not bound unless asked
    assert nvml.open == 0  # every nvmlInit was shut down


@pytest.mark.parametrize(("selection", "message"), [
    (["7"], "no GPU '7' on this machine (NVML sees: 0 (NVIDIA H100, GPU-aaaa"),
    (["GPU-ffff"], "no GPU 'GPU-ffff'"),
    (["0", "0"], "names GPU '0' twice"),
])
def test_a_gpu_that_does_not_exist_is_refused(selection: list[str], message: str) -> None:
    with pytest.raises(ExecutorError, match=message.replace("(", r"\(")):
        gpu_slots(selection, nvml=FakeNvml())


def test_no_nvml_is_one_clear_error() -> None:
    with pytest.raises(ExecutorError, match="NVML sees no NVIDIA GPU here"):
        gpu_slots(["0"], nvml=FakeNvml(present=False))


def test_visible_gpu_uuid_maps_engine_indices_through_nvml() -> None:
    nvml = FakeNvml()
    assert visible_gpu_uuid(nvml, {"CUDA_VISIBLE_DEVICES": "1"}) == FakeNvml.GPUS[1][0]
    assert visible_gpu_uuid(nvml, {"CUDA_VISIBLE_DEVICES": "GPU-x"}) == "GPU-x"
    assert visible_gpu_uuid(nvml, {}) == ""
    assert visible_gpu_uuid(FakeNvml(present=False), {"CUDA_VISIBLE_DEVICES": "0"}) == ""


# -- settings -----------------------------------------------------------------------------
def test_executor_table_round_trips_and_refuses_typos() -> None:
    data = {"name": "slurm", "slurm": {"partition": "gpu", "setup": "module load cuda",
                                       "cases_per_task": 3}}
    settings = ExecutorSettings.from_dict(data)
    assert settings.slurm.setup == ("module load cuda",) and settings.slurm.cases_per_task == 3
    assert ExecutorSettings.from_dict(settings.to_dict()) == settings
    config = RunConfig.from_dict({"run": {"adapters": ["torch"]}, "executor": data})
    assert RunConfig.from_dict(config.to_dict()).executor == settings
    with pytest.raises(ExecutorError, match=r"\[executor.slurm\]: unknown key\(s\) partitoin"):
        ExecutorSettings.from_dict({"slurm": {"partitoin": "gpu"}})
    with pytest.raises(ExecutorError, match="unknown executor 'sge'"):
        ExecutorSettings.from_dict({"name": "sge"})
    with pytest.raises(ExecutorError, match="exclude each other"):
        ExecutorSettings(jobs=2, gpus=("0",))
    with pytest.raises(ExecutorError, match="options of the local executor"):
        ExecutorSettings(name="ray", jobs=2)
    with pytest.raises(ExecutorError, match="pdb"):
        ExecutorSettings().with_overrides({"slurm.cluster": "debug"})
    assert isinstance(ExecutorError("x"), UserError)  # the CLI maps it to exit 2


def test_jobs_caps_each_case_to_its_share_of_the_threads() -> None:
    config = sweep(["fake-ok"], [8], threads=0)
    executor = make_executor(ExecutorSettings(jobs=2), "cpu", config.run.resolved_threads)
    share = len(available_cpus()) // 2
    assert executor.threads_per_case() == share
    assert share_threads(config, executor).run.threads == share
    assert share_threads(config, LocalExecutor()).run.threads == 0  # serial: unchanged


# -- local side by side -------------------------------------------------------------------
@pytest.mark.slow
def test_jobs_run_side_by_side_on_their_own_cores(fake_plugins: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    if len(available_cpus()) < 2:
        pytest.skip("needs 2 cores")
    seen = tmp_path / "probe"
    seen.mkdir()
    monkeypatch.setenv("SNNBENCH_FAKE_PROBE_DIR", str(seen))
    monkeypatch.setenv("SNNBENCH_FAKE_SLOW_S", "0.3")
    config = sweep(["fake-probe"], [8, 16, 24, 32], threads=0)
    outcome = start_run(config, tmp_path / "run", tmp_path, False,
                        executor_settings=ExecutorSettings(jobs=2))
    assert {r.status for r in outcome.records} == {"ok"}
    records = outcome.records
    assert {r.placement.concurrency for r in records} == {2}
    assert {r.placement.executor for r in records} == {"local"}
    # each worker was pinned to one slot's cores, and told to use that many threads
    slots = {r.placement.cpus for r in records}
    assert len(slots) == 2 and not set.intersection(*(set(s) for s in slots))
    share = len(available_cpus()) // 2
    for probe in probes(seen):
        assert tuple(probe["affinity"]) in slots
        assert probe["omp_num_threads"] == str(share)
    # and they did overlap in time (0.3 s forward sleeps, side by side)
    spans = sorted((r.started_utc, r.finished_utc) for r in records)
    assert any(b[0] < a[1] for a, b in itertools.pairwise(spans))
    summary = pd.read_parquet(tmp_path / "run" / "summary.parquet")
    assert set(summary["concurrency"]) == {2} and set(summary["executor"]) == {"local"}
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["settings"]["threads"] == share
    assert manifest["executions"][0]["concurrency"] == 2
    assert [h["host"] for h in manifest["hosts"]] == [records[0].placement.host]
    assert not (tmp_path / "run" / "jobs").exists()


@pytest.mark.slow
def test_gpus_run_one_case_per_gpu_pinned_by_uuid(fake_plugins: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    seen = tmp_path / "probe"
    seen.mkdir()
    monkeypatch.setenv("SNNBENCH_FAKE_PROBE_DIR", str(seen))
    monkeypatch.setenv("SNNBENCH_FAKE_SLOW_S", "0.2")
    executor = LocalExecutor(gpu_slots(["0", "1"], nvml=FakeNvml()))
    config = sweep(["fake-probe"], [8, 16, 24], device="cuda")
    outcome = start_run(config, tmp_path / "run", tmp_path, False, executor=executor)
    uuids = {g[0] for g in FakeNvml.GPUS}
    assert {r.status for r in outcome.records} == {"ok"}
    assert {r.placement.gpu_uuid for r in outcome.records} == uuids
    for probe in probes(seen):
        assert probe["device"] == "cuda"
        assert probe["cuda_visible_devices"] in uuids
        assert probe["cuda_device_order"] == "PCI_BUS_ID"
    summary = pd.read_parquet(tmp_path / "run" / "summary.parquet")
    assert set(summary["gpu_uuid"]) == uuids and set(summary["concurrency"]) == {2}


# -- lost cases, merge, compare -----------------------------------------------------------
@pytest.mark.slow
def test_a_lost_case_runs_again_as_its_next_attempt(fake_plugins: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    start_run(sweep(["fake-ok"], [8, 16]), run, tmp_path, False)
    path = next((run / "cases").glob("*.json"))
    record = CaseRecord.read(path)
    record.status, record.message, record.samples = "lost", "node failure", {}
    record.write(path)
    merge_run(run)
    summary = pd.read_parquet(run / "summary.parquet")
    assert "lost" in set(summary["status"])
    outcome = start_run(RunConfig(), run, tmp_path, True)
    assert [r.key for r in outcome.records] == [record.key]
    assert outcome.records[0].status == "ok" and outcome.records[0].placement.attempt == 2
    assert outcome.skipped_existing == 1
    assert set(pd.read_parquet(run / "summary.parquet")["status"]) == {"ok"}


@pytest.mark.slow
def test_merge_rebuilds_tables_and_hosts_and_compare_warns_across_hosts(
        fake_plugins: Path, tmp_path: Path) -> None:
    base, cand = tmp_path / "base", tmp_path / "cand"
    for run in (base, cand):
        start_run(sweep(["fake-ok"], [8]), run, tmp_path, False)
    # the candidate's case "ran" on another node, which wrote its own machine record
    path = next((cand / "cases").glob("*.json"))
    record = CaseRecord.read(path)
    record.placement = Placement(executor="slurm", host="node17", engine_job_id="42_0",
                                 concurrency=2)
    record.write(path)
    host_record = json.loads(next((cand / "hosts").glob("*.json")).read_text())
    host_record.update(host="node17", gpus=[{"name": "NVIDIA A100", "driver": "1", "index": 0}])
    (cand / "hosts" / "node17.json").write_text(json.dumps(host_record))
    (cand / "summary.parquet").unlink()
    proc = run_cli("merge", str(cand))
    assert proc.returncode == 0, proc.stderr
    assert "merged 1 case records" in proc.stdout
    summary = pd.read_parquet(cand / "summary.parquet")
    assert set(summary["host"]) == {"node17"} and set(summary["executor"]) == {"slurm"}
    manifest = json.loads((cand / "manifest.json").read_text())
    assert "node17" in {h["host"] for h in manifest["hosts"]}
    proc = run_cli("compare", str(base), str(cand))
    # one process each of a µs case: the gate's verdict is not the point here, the warnings are
    assert proc.returncode in (0, 1, 3), proc.stderr
    assert "hosts differ" in proc.stdout
    assert "concurrency differs: 1 → 2" in proc.stdout
    assert "GPU models differ" in proc.stdout and "NVIDIA A100" in proc.stdout
    assert run_cli("merge", str(tmp_path / "nothing")).returncode == 2


def test_older_runs_without_placement_columns_still_load(tmp_path: Path) -> None:
    from snnbench.store.rundir import load_run
    from tests.conftest import REPO

    run = load_run(REPO / "results" / "baselines" / "cpu-smoke")
    assert set(run.summary["executor"]) == {"local"} and set(run.summary["concurrency"]) == {1}


def test_run_dir_keys_of_lost_records_are_not_finished(tmp_path: Path) -> None:
    from snnbench.sweep.execute import retry_attempts

    run_dir = RunDir.create(tmp_path / "run")
    assert retry_attempts(run_dir) == {}
    (run_dir.cases_dir / "x.json").write_text("{}")  # a damaged record is not a retry
    assert retry_attempts(run_dir) == {}
    assert os.path.isdir(run_dir.cases_dir)


# -- bad input: one line, exit 2, nothing written -----------------------------------------
@pytest.mark.parametrize(("args", "env", "message"), [
    (["--executor", "sge"], {}, "unknown executor 'sge' (known: local, slurm, ray)"),
    (["--jobs", "0"], {}, "--jobs must be an integer ≥ 1, got 0"),
    (["--jobs", "4096"], {}, "--jobs 4096 needs at least 4096 CPU cores"),
    (["--jobs", "2", "--gpus", "0"], {}, "exclude each other"),
    (["--gpus", "0", "--device", "cpu"], {}, "use it with --device cuda"),
    (["--gpus", "7", "--device", "cuda"], {}, "--gpus: NVML sees no NVIDIA GPU here"),
    (["--executor", "slurm"], {"PATH": "NO_SBATCH"}, "no Slurm here ('sbatch' is not on PATH)"),
    (["--executor", "ray", "--ray-address", "127.0.0.1:1"], {},
     "cannot reach Ray at 127.0.0.1:1"),
    (["--executor", "ray"], {"RAY_ADDRESS": "127.0.0.1:1"}, "cannot reach Ray at 127.0.0.1:1"),
    (["--executor", "slurm", "--slurm-cluster", "debug"], {}, "pdb"),
])
def test_bad_executor_input_exits_2_and_writes_nothing(args: list[str], env: dict[str, str],
                                                       message: str, tmp_path: Path) -> None:
    if "slurm" in args:
        pytest.importorskip("submitit")
    if "ray" in args:
        pytest.importorskip("ray")
    if env.get("PATH") == "NO_SBATCH":
        # hide sbatch: CI machines have Slurm now; the CLI runs as sys.executable, so a PATH
        # with nothing on it takes nothing else away
        empty = tmp_path / "bin"
        empty.mkdir()
        env = {**env, "PATH": str(empty)}
    out = tmp_path / "run"
    proc = run_cli("run", "--config", "ci-smoke", "--adapters", "torch", "--out", str(out),
                   *args, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and "━" not in proc.stderr  # no progress bar
    assert len(proc.stderr.strip().splitlines()) <= 2  # one line (a long one may wrap once)
    assert not out.exists()


def test_a_config_executor_typo_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[run]\nadapters = ["torch"]\n[executor]\nname = "local"\njbos = 2\n')
    proc = run_cli("run", "--config", str(config), "--out", str(tmp_path / "run"))
    assert proc.returncode == 2 and "unknown key(s) jbos" in proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("executor", "extra"), [("slurm", "snnbench[slurm]"),
                                                 ("ray", "snnbench[ray]")])
def test_a_missing_extra_is_named(executor: str, extra: str, tmp_path: Path) -> None:
    """Without submitit or Ray installed the flag names the extra to install."""
    import subprocess
    import sys

    from tests.conftest import REPO

    code = ("import sys; sys.modules['submitit'] = None; sys.modules['ray'] = None; "
            "from snnbench.cli import main; sys.argv = ['snnbench', 'run', '--adapters', 'torch', "
            f"'--executor', '{executor}', '--out', r'{tmp_path / 'run'}']; main()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 2, proc.stderr
    assert f"pip install '{extra}'" in proc.stderr
    assert not (tmp_path / "run").exists()


# -- cluster tasks stop with their sweep ---------------------------------------------------
def _watch(owner: Any, run: Path, seconds: float = 5.0) -> bool:
    import threading

    from snnbench.executors.remote import watch_owner

    stop = threading.Event()
    thread = threading.Thread(target=watch_owner, args=(owner, run, stop, 0.05), daemon=True)
    thread.start()
    stopped = stop.wait(seconds)
    stop.set()
    thread.join()
    return stopped


def test_a_cluster_task_stops_when_its_owner_is_gone(tmp_path: Path) -> None:
    import subprocess

    from snnbench.executors.placement import hostname
    from snnbench.executors.remote import Owner, beat, request_cancel

    (tmp_path / "jobs").mkdir()
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert _watch(Owner(hostname(), gone.pid), tmp_path)  # same host: its pid is gone
    assert not _watch(Owner.me(), tmp_path, 0.5)  # alive: the task goes on
    # another host: only the heartbeat tells; a stale one stops the task after the grace
    beat(tmp_path)
    assert _watch(Owner("elsewhere", 1, grace_s=0.3), tmp_path)
    request_cancel(tmp_path)  # the owner stops the sweep
    assert _watch(Owner.me(), tmp_path)


def test_a_task_started_after_its_owner_died_elsewhere_stops_at_once(tmp_path: Path) -> None:
    """Multi-node: the heartbeat carries its wall time; a task that starts when it is older
    than the window stops at its first look instead of waiting a window of its own."""
    import time

    from snnbench.executors.remote import Owner, heartbeat_age, heartbeat_path

    (tmp_path / "jobs").mkdir()
    heartbeat_path(tmp_path).write_text(f"1 2 {time.time() - 30:.3f}\n")
    assert heartbeat_age(heartbeat_path(tmp_path).read_text()) == pytest.approx(30, abs=2)
    assert _watch(Owner("elsewhere", 1, grace_s=20), tmp_path, 0.3)
    heartbeat_path(tmp_path).write_text(f"1 2 {time.time():.3f}\n")
    assert not _watch(Owner("elsewhere", 1, grace_s=20), tmp_path, 0.3)
    assert heartbeat_age("1 2") is None  # an older snnbench's heartbeat: changes only


def test_a_worker_killed_by_sigkill_is_oom_only_with_the_kernels_word() -> None:
    """Finding 2: a SIGKILL that is not the kernel's OOM killer (Slurm stopping the task, a
    user) is lost, not oom."""
    import signal

    from snnbench.executors.launch import Exit, classify_exit, kernel_oom_kills
    from snnbench.records.contract import Job
    from snnbench.workload import LinearLif
    from snnbench.workload.linear_lif.spec import NetworkSpec

    job = Job("fake-ok", "default", "cpu", LinearLif(NetworkSpec(neurons=8)))
    kill = -signal.SIGKILL
    assert classify_exit(Exit(kill, oom_kills=1), job)[0] == "oom"
    assert classify_exit(Exit(kill, oom_kills=0), job)[0] == "lost"
    assert classify_exit(Exit(kill), job)[0] == "oom"  # no /proc/vmstat: as before
    assert classify_exit(Exit(-signal.SIGTERM, oom_kills=0), job)[0] == "lost"
    assert classify_exit(Exit(-signal.SIGSEGV, oom_kills=0), job)[0] == "error"
    if os.path.exists("/proc/vmstat"):
        assert isinstance(kernel_oom_kills(), int)


def test_a_time_limit_signal_records_timeouts_and_a_term_lost(monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """Finding 1, on the node: USR2 with little time left is the time limit (timeout, with
    the --resume hint); with plenty left, or SIGTERM, the task says lost for now."""
    import signal
    import threading

    from snnbench.executors import remote
    from snnbench.records.contract import Job
    from snnbench.workload import LinearLif
    from snnbench.workload.linear_lif.spec import NetworkSpec

    job = Job("fake-ok", "default", "cpu", LinearLif(NetworkSpec(neurons=8)))
    told = remote.SchedulerSignals(threading.Event(), time_limit_s=600)
    told.handler(signal.SIGUSR2, None)
    assert told.stop.is_set() and told.received()
    monkeypatch.setattr(remote, "_time_left_s", lambda: 80.0)
    record = told.record(job, started=True)
    assert record.status == "timeout" and "--resume --timeout-min" in record.message
    assert "10 min" in record.message and record.finished_utc
    preempted = remote.SchedulerSignals(threading.Event(), time_limit_s=600)
    preempted.handler(signal.SIGUSR2, None)
    monkeypatch.setattr(remote, "_time_left_s", lambda: 500.0)
    assert preempted.record(job, started=False).status == "lost"
    term = remote.SchedulerSignals(threading.Event())
    term.handler(signal.SIGTERM, None)
    assert term.record(job, started=True).status == "lost"
    assert remote.parse_slurm_duration("1-02:03:04") == 93784
    assert remote.parse_slurm_duration("1:30") == 90 and remote.parse_slurm_duration("x") is None


class StartsAllAtOnce(LocalExecutor):
    """Like a cluster engine: every case 'starts' at submission, then records come in."""

    name = "fake-cluster"

    def run(self, jobs: Any, work_dir: Path, log_dir: Path, on_start: Any = None) -> Any:
        jobs = list(jobs)
        for job in jobs:
            if on_start is not None:
                on_start(job)
        yield from LocalExecutor.run(self, jobs, work_dir, log_dir)


def test_progress_numbers_cases_as_they_start(fake_plugins: Path, tmp_path: Path) -> None:
    """Finding 6: a sweep whose engine starts its cases together read 'case 1/4' four
    times (then 'case 3/7 … 7/7'); each start now has its own number."""
    events: list[tuple[str, int, int]] = []
    start_run(sweep(["fake-ok"], [8, 16, 24, 32]), tmp_path / "run", tmp_path, False,
              progress=lambda event, i, n, job, record: events.append((event, i, n)),
              executor=StartsAllAtOnce())
    assert [i for e, i, _ in events if e == "start"] == [1, 2, 3, 4]
    assert [i for e, i, _ in events if e == "done"] == [1, 2, 3, 4]


class Interrupted(LocalExecutor):
    """Submits 'jobs', runs one case, then the user presses Ctrl-C."""

    name = "fake-cluster"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "engine_jobs": ["41_0", "41_1"]}

    def run(self, jobs: Any, work_dir: Path, log_dir: Path, on_start: Any = None) -> Any:
        yield from itertools.islice(LocalExecutor.run(self, jobs, work_dir, log_dir), 1)
        raise KeyboardInterrupt


def test_an_interrupted_execution_is_recorded_with_its_jobs(fake_plugins: Path,
                                                              tmp_path: Path) -> None:
    """Finding 6: an interrupted sweep's submission was missing from `executions`."""
    with pytest.raises(KeyboardInterrupt):
        start_run(sweep(["fake-ok"], [8, 16]), tmp_path / "run", tmp_path, False,
                  executor=Interrupted())
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    (execution,) = manifest["executions"]
    assert execution["engine_jobs"] == ["41_0", "41_1"]
    assert execution["interrupted"] == "SIGINT" and execution["finished_utc"]


def test_the_manifest_records_the_executor_the_flags_chose(fake_plugins: Path,
                                                            tmp_path: Path) -> None:
    """Finding 6: config.executor said the config file's executor, not the flags'."""
    settings = ExecutorSettings().with_overrides({"bind_cpus": True,
                                                  "slurm.partition": "debug"})
    start_run(sweep(["fake-ok"], [8]), tmp_path / "run", tmp_path, False,
              executor_settings=settings)
    recorded = json.loads((tmp_path / "run" / "manifest.json").read_text())["config"]
    assert recorded["executor"]["bind_cpus"] is True
    assert recorded["executor"]["slurm"]["partition"] == "debug"


@pytest.mark.parametrize("status", ["ok", "error", "lost"])
def test_a_ray_task_writes_no_record_of_a_case_that_did_not_finish(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: str) -> None:
    """A stopping Ray sweep's forced cancel kills the case's worker before the task: the task
    saw "killed by SIGKILL from outside" and wrote a ``lost`` record into the folder of a
    sweep that said "finished cases are kept" (found by test_lifetime's Ray case). A finished
    case's record (ok, error...) is still written by the task itself."""
    import threading

    from snnbench.executors import remote
    from snnbench.records.contract import Job
    from snnbench.workload import LinearLif
    from snnbench.workload.linear_lif.spec import NetworkSpec

    job = Job("fake-ok", "default", "cpu", LinearLif(NetworkSpec(neurons=8)))
    ended = CaseRecord.for_job(job, status, "as the worker ended")  # type: ignore[arg-type]
    monkeypatch.setattr(remote, "run_in_folder", lambda *args, **kwargs: ended)
    remote.record_path(tmp_path, job.key).parent.mkdir()  # the run folder's cases/
    returned = remote.run_case(job, tmp_path, job.placement, threading.Event())
    assert returned.status == status  # the owner, while it lives, still gets it
    written = remote.record_path(tmp_path, job.key)
    assert written.exists() == (status != "lost")

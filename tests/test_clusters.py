"""The cluster executors on this machine: submitit's local cluster (never its debug cluster)
and a local Ray instance with logical GPUs. Nothing here ran on a real Slurm or Ray cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from snnbench.executors import ExecutorSettings
from snnbench.executors.slurm import SlurmSettings
from snnbench.records.contract import Job
from snnbench.sweep.run import start_run
from snnbench.workload import LinearLif
from snnbench.workload.linear_lif.spec import NetworkSpec
from tests.test_executors import ok_keys, probes, sweep

submitit = pytest.importorskip("submitit")

ADAPTERS = ["fake-ok", "fake-slow", "fake-raises"]
NEURONS = [8, 16]


@pytest.fixture(scope="module")
def serial_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference: the same sweep through the default local executor."""
    from tests.conftest import FAKE_PLUGIN_DIR

    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(FAKE_PLUGIN_DIR))
    mp.setenv("PYTHONPATH", str(FAKE_PLUGIN_DIR))
    try:
        out = tmp_path_factory.mktemp("serial") / "run"
        start_run(sweep(ADAPTERS, NEURONS), out, out.parent, False)
    finally:
        mp.undo()
    return out


def statuses(run: Path) -> dict[tuple[str, int], str]:
    summary = pd.read_parquet(run / "summary.parquet")
    return {(a, int(n)): s for a, n, s in zip(summary["adapter"], summary["neurons"],
                                              summary["status"], strict=True)}


# -- Slurm through submitit ---------------------------------------------------------------
def test_pack_and_container_prefix() -> None:
    from snnbench.executors.slurm import container_prefix, pack

    jobs = [Job("fake-ok", "default", "cpu", LinearLif(NetworkSpec(neurons=n))) for n in range(1, 8)]
    assert [len(g) for g in pack(jobs, 3)] == [3, 3, 1]
    image = SlurmSettings(image="/scratch/snnbench.sif", container_args=("--bind", "/scratch"))
    assert container_prefix(image, "cuda") == ("apptainer", "exec", "--nv", "--bind", "/scratch",
                                               "/scratch/snnbench.sif")
    assert container_prefix(image, "cpu")[:3] == ("apptainer", "exec", "--bind")
    assert container_prefix(SlurmSettings(), "cuda") == ()


def test_worker_command_runs_inside_the_image() -> None:
    from snnbench.executors.launch import worker_command

    job = Job("fake-ok", "default", "cuda", LinearLif(NetworkSpec(neurons=8)))
    prefix = ("apptainer", "exec", "--nv", "img.sif")
    assert worker_command(job, Path("/run/jobs/k/job.json"), prefix) == [
        "apptainer", "exec", "--nv", "img.sif", "python", "-P", "-m", "snnbench.measure.worker",
        "/run/jobs/k/job.json"]


@pytest.mark.parametrize(("exc", "status"), [
    (submitit.core.utils.FailedJobError("Job (task=0) failed during processing with trace:\n"
                                        "----\nValueError: boom\n----"), "error"),
    (submitit.core.utils.UncompletedJobError("Job 12_3 (task: 0) with path x\nhas not produced "
                                             "any output (state: TIMEOUT)"), "timeout"),
    (submitit.core.utils.UncompletedJobError("Job 12_3 has not produced any output "
                                             "(state: OUT_OF_MEMORY)"), "lost"),
    (submitit.core.utils.UncompletedJobError("Job 12_3 (state: NODE_FAIL)"), "lost"),
    (submitit.core.utils.UncompletedJobError("Job 12_3 (state: CANCELLED by 1000)"), "lost"),
])
def test_submitit_outcomes_map_to_statuses(exc: BaseException, status: str) -> None:
    from snnbench.executors.slurm import outcome_status

    got, message = outcome_status(exc, submitit)
    assert got == status
    assert message and "\n" not in message
    if status == "error":
        assert "ValueError: boom" in message


def test_unrecorded_cases_of_a_failed_task_become_rows(tmp_path: Path) -> None:
    from snnbench.executors.slurm import SlurmExecutor

    class DeadTask:
        job_id = "77_1"

        def exception(self) -> BaseException:
            return submitit.core.utils.UncompletedJobError("Job 77_1 (state: NODE_FAIL)")

    (tmp_path / "cases").mkdir()
    jobs = {j.key: j for j in (Job("fake-ok", "default", "cpu", LinearLif(NetworkSpec(neurons=n)))
                               for n in (8, 16))}
    executor = SlurmExecutor(SlurmSettings(cluster="local"))
    executor._jobs = [DeadTask()]
    records = list(executor._unrecorded(0, jobs, tmp_path, None, submitit))
    assert [r.status for r in records] == ["lost", "lost"]
    assert {r.placement.engine_job_id for r in records} == {"77_1"}
    assert "NODE_FAIL" in records[0].message


@pytest.mark.parametrize(("state", "status"), [
    ("TIMEOUT", "timeout"), ("OUT_OF_MEMORY", "oom"), ("CANCELLED", "lost"),
    ("PREEMPTED", "lost"), ("NODE_FAIL", "lost"), ("GONE", "lost"), ("FAILED", "error"),
])
def test_slurm_states_decide_the_status_of_unrecorded_cases(tmp_path: Path, state: str,
                                                            status: str) -> None:
    """Finding 1 and 2: the status comes from the task's state in Slurm; a provisional
    `lost` record of the task (it got SIGTERM) is decided the same way and keeps its times."""
    from snnbench.executors.slurm import SlurmExecutor
    from snnbench.executors.slurm_state import TaskState
    from snnbench.records.contract import CaseRecord

    class Task:
        job_id = "9_0"

    (tmp_path / "cases").mkdir()
    jobs = [Job("fake-ok", "default", "cpu", LinearLif(NetworkSpec(neurons=n))) for n in (8, 16)]
    provisional = CaseRecord.for_job(jobs[0], "lost", "Slurm stopped the array task (SIGTERM)")
    provisional.started_utc, provisional.finished_utc = "2026-01-01T00:00:00", "2026-01-01T00:00:05"
    provisional.write(tmp_path / "cases" / f"{jobs[0].key}.json")
    executor = SlurmExecutor(SlurmSettings())
    executor._jobs = [Task()]
    records = list(executor._unrecorded(0, {j.key: j for j in jobs}, tmp_path,
                                        TaskState(state, source="squeue"), submitit))
    assert [r.status for r in records] == [status, status]
    assert records[0].started_utc == "2026-01-01T00:00:00" and "SIGTERM" in records[0].message
    assert records[1].placement.engine_job_id == "9_0"
    assert CaseRecord.read(tmp_path / "cases" / f"{jobs[0].key}.json").status == status


class FakeSlurm:
    """squeue and sacct answers, without accounting unless told; counts the calls."""

    def __init__(self, listed: dict[str, str], accounting: bool = False) -> None:
        self.listed = listed
        self.accounting = accounting
        self.calls: list[str] = []

    def __call__(self, command: list[str]) -> Any:
        import subprocess

        self.calls.append(command[0])
        if command[0] == "squeue":
            out = "".join(f"{t}|{s}|None|node1\n" for t, s in self.listed.items())
            return subprocess.CompletedProcess(command, 0, out, "")
        if not self.accounting:
            return subprocess.CompletedProcess(
                command, 1, "", "Slurm accounting storage is disabled\n")
        return subprocess.CompletedProcess(command, 0, "5_2|CANCELLED by 0|None assigned\n", "")


def test_without_accounting_a_vanished_task_is_over_in_bounded_time_said_once() -> None:
    """Finding 3: a pending task cancelled vanishes from squeue; without accounting sacct
    cannot tell. It is over after GONE_AFTER_S, and sacct's absence is said once."""
    from snnbench.executors.slurm_state import GONE, GONE_AFTER_S, SlurmStates

    slurm = FakeSlurm({"5_0": "RUNNING", "5_1": "PENDING"})
    now = [0.0]
    states = SlurmStates(run=slurm, clock=lambda: now[0])
    assert {t: s.state for t, s in states.poll(["5_0", "5_1"]).items()} == {
        "5_0": "RUNNING", "5_1": "PENDING"}
    slurm.listed = {"5_0": "RUNNING"}  # 5_1 cancelled before it started
    for _ in range(10):
        found = states.poll(["5_0", "5_1"])
        assert "5_1" not in found or found["5_1"].state == GONE
        now[0] += GONE_AFTER_S / 4
    assert found["5_1"].state == GONE and found["5_1"].over
    assert found["5_0"].state == "RUNNING"
    assert len(states.warnings) == 1 and "accounting" in states.warnings[0]
    assert slurm.calls.count("sacct") == 1  # not asked again once it said no
    slurm.listed = {"5_0": "TIMEOUT"}
    assert states.poll(["5_0"])["5_0"].over
    assert states.final.keys() == {"5_0", "5_1"}


def test_with_accounting_sacct_tells_what_squeue_forgot() -> None:
    from snnbench.executors.slurm_state import SlurmStates, expand_task_ids

    slurm = FakeSlurm({"5_0": "COMPLETED"}, accounting=True)
    found = SlurmStates(run=slurm).poll(["5_0", "5_2"])
    assert found["5_2"].state == "CANCELLED" and found["5_2"].source == "sacct"
    assert found["5_0"].state == "COMPLETED"
    assert expand_task_ids("7_[1-3,5%2]") == ["7_1", "7_2", "7_3", "7_5"]
    assert expand_task_ids("7") == ["7"]


def test_concurrency_is_what_ran_side_by_side_on_a_host() -> None:
    """Finding 4: from where and when each case ran, not what was requested."""
    from snnbench.executors.remote import side_by_side
    from snnbench.records.contract import CaseRecord, Placement

    def ran(n: int, host: str, start: int, end: int) -> CaseRecord:
        record = CaseRecord.for_job(Job("fake-ok", "default", "cpu", LinearLif(NetworkSpec(neurons=n))),
                                    "ok")
        record.placement = Placement(executor="slurm", host=host, concurrency=4)
        record.started_utc = f"2026-01-01T00:00:{start:02d}+00:00"
        record.finished_utc = f"2026-01-01T00:00:{end:02d}+00:00"
        return record

    records = [ran(1, "a", 0, 10), ran(2, "a", 10, 20), ran(3, "a", 15, 25),
               ran(4, "b", 0, 30), ran(5, "a", 16, 18)]
    got = {r.workload.spec.neurons: side_by_side(records)[r.key] for r in records}
    assert got == {1: 1, 2: 3, 3: 3, 4: 1, 5: 3}


def test_a_submission_that_fails_after_the_folder_exists_names_it_resumable(
        tmp_path: Path) -> None:
    """Finding 5: sbatch refusing at submission (after --test-only passed) is one line that
    says the folder is kept and how to resume it."""
    from snnbench.executors.slurm import SlurmExecutor, SubmissionError

    class Refusing:
        def map_array(self, *args: Any) -> Any:
            raise submitit.core.utils.FailedJobError(
                "sbatch: error: Batch job submission failed: Invalid account or account/"
                "partition combination specified\nmore lines")

    executor = SlurmExecutor(SlurmSettings(cluster="local"))
    executor._executor = lambda folder: Refusing()  # type: ignore[method-assign]
    job = Job("fake-ok", "default", "cpu", LinearLif(NetworkSpec(neurons=8)))
    with pytest.raises(SubmissionError) as caught:
        list(executor.run([job], tmp_path / "jobs", tmp_path / "logs"))
    message = str(caught.value)
    assert "\n" not in message and "Invalid account" in message
    assert f"'snnbench run --resume --out {tmp_path}'" in message


@pytest.mark.slow
def test_submitit_local_cluster_gives_the_serial_rows(fake_plugins: Path, tmp_path: Path,
                                                      serial_run: Path) -> None:
    run = tmp_path / "run"
    settings = ExecutorSettings(name="slurm", slurm=SlurmSettings(cluster="local",
                                                                  cases_per_task=4))
    outcome = start_run(sweep(ADAPTERS, NEURONS), run, tmp_path, False,
                        executor_settings=settings)
    assert statuses(run) == statuses(serial_run)
    assert ok_keys(run) == ok_keys(serial_run)
    ran = [r for r in outcome.records if r.adapter != "fake-raises"]
    assert {r.placement.executor for r in ran} == {"slurm"}
    assert len({r.placement.engine_job_id for r in ran}) == 2  # 6 cases, 4 per array task
    assert all(r.placement.engine_job_id for r in ran)
    manifest = json.loads((run / "manifest.json").read_text())
    execution = manifest["executions"][0]
    assert execution["name"] == "slurm" and len(execution["engine_jobs"]) == 2
    assert manifest["hosts"] and not (run / "jobs").exists()
    assert (run / "logs" / "slurm").is_dir()  # submitit's own logs, beside the workers'


# -- Ray ----------------------------------------------------------------------------------
def test_ray_failures_map_to_statuses() -> None:
    ray = pytest.importorskip("ray")
    from snnbench.executors.ray_engine import failure_status

    assert failure_status(ray.exceptions.OutOfMemoryError("killed by the monitor"), ray)[0] \
        == "oom"
    assert failure_status(ray.exceptions.WorkerCrashedError(), ray)[0] == "lost"
    assert failure_status(ray.exceptions.NodeDiedError("gone"), ray)[0] == "lost"
    assert failure_status(ValueError("boom"), ray) == ("error", "the Ray task failed: boom")


@pytest.mark.slow
def test_ray_gives_the_serial_rows(fake_plugins: Path, tmp_path: Path, serial_run: Path,
                                   ray_cluster: dict[str, str]) -> None:
    run = tmp_path / "run"
    outcome = start_run(sweep(ADAPTERS, NEURONS), run, tmp_path, False,
                        executor_settings=ExecutorSettings(name="ray"))
    assert statuses(run) == statuses(serial_run)
    assert ok_keys(run) == ok_keys(serial_run)
    ran = [r for r in outcome.records if r.adapter != "fake-raises"]
    assert {r.placement.executor for r in ran} == {"ray"}
    assert len({r.placement.engine_job_id for r in ran}) == len(ran)  # one task per case
    import ray

    assert ray.is_initialized()  # the shared instance is left running for the next test


@pytest.mark.slow
def test_ray_gives_each_cuda_case_one_gpu(fake_plugins: Path, tmp_path: Path,
                                          ray_cluster: dict[str, str]) -> None:
    probe_dir = Path(ray_cluster["probe_dir"])
    for old in probe_dir.glob("*.json"):
        old.unlink()
    run = tmp_path / "run"
    outcome = start_run(sweep(["fake-probe"], [8, 16, 24, 32], device="cuda"), run, tmp_path,
                        False, executor_settings=ExecutorSettings(name="ray"))
    assert {r.status for r in outcome.records} == {"ok"}
    seen = probes(probe_dir)
    assert len(seen) == 4
    # Ray gave each task one of its two (logical) GPUs through CUDA_VISIBLE_DEVICES
    assert {p["cuda_visible_devices"] for p in seen} <= {"0", "1"}
    assert {r.placement.concurrency for r in outcome.records} == {2}


@pytest.mark.slow
def test_a_crashed_ray_worker_is_a_lost_case(fake_plugins: Path, tmp_path: Path,
                                             ray_cluster: dict[str, str]) -> None:
    run = tmp_path / "run"
    outcome = start_run(sweep(["fake-kill-parent", "fake-ok"], [8]), run, tmp_path, False,
                        executor_settings=ExecutorSettings(name="ray"))
    status = {r.adapter: r for r in outcome.records}
    assert status["fake-ok"].status == "ok"
    assert status["fake-kill-parent"].status == "lost", status["fake-kill-parent"].message
    assert "WorkerCrashedError" in status["fake-kill-parent"].message
    assert outcome.failed
    assert not (run / "jobs").exists()  # the orphaned worker removed its own folder




# -- Apptainer (static: no apptainer here) -------------------------------------------------
def test_apptainer_definition_is_built_from_the_gpu_docker_stage() -> None:
    from tests.conftest import REPO

    text = (REPO / "docker" / "snnbench.def").read_text()
    header = [line for line in text.splitlines() if line and not line.startswith("#")][:2]
    assert header == ["Bootstrap: docker-daemon", "From: snnbench:gpu"]
    # snnbench:gpu is what `make docker-build-gpu` tags from the Dockerfile's gpu stage
    assert "FROM ${PYTHON_IMAGE} AS gpu" in (REPO / "docker" / "Dockerfile").read_text()
    assert "$(DOCKER_IMAGE):$*" in (REPO / "docker" / "docker.mk").read_text()
    sections = {line.split()[0] for line in text.splitlines() if line.startswith("%")}
    assert sections == {"%labels", "%environment", "%runscript", "%test"}
    assert 'exec snnbench "$@"' in text


def test_the_manifest_records_the_image(tmp_path: Path) -> None:
    from snnbench.executors.slurm import SlurmExecutor
    from snnbench.host.machines import read_machine_records, write_machine_record

    image = tmp_path / "snnbench-gpu.sif"
    image.write_bytes(b"\0" * 64)
    write_machine_record(tmp_path, "node3", "slurm", str(image))
    (record,) = read_machine_records(tmp_path)
    assert record["host"] == "node3" and record["executor"] == "slurm"
    assert record["image"] == {"runtime": "apptainer", "image": str(image), "bytes": 64,
                               "modified_utc": record["image"]["modified_utc"]}
    described = SlurmExecutor(SlurmSettings(image=str(image))).describe()
    assert described["image"] == str(image)


def test_a_time_limit_warning_before_the_task_listens_is_a_timeout(tmp_path: Path) -> None:
    """Finding 1, the early case: with a short limit the warning can come while submitit
    still starts the task; its own handler then fails the task ("timed-out and not
    checkpointable"): that is the time limit, not an error. The warning now comes at most
    half the limit ahead."""
    import pickle
    from types import SimpleNamespace

    from snnbench.executors.remote import signal_delay_s
    from snnbench.executors.slurm import SlurmExecutor
    from snnbench.executors.slurm_state import TaskState

    result = tmp_path / "9_0_result.pkl"
    result.write_bytes(pickle.dumps(("error", "Traceback ...\nsubmitit.core.utils."
                                     "UncompletedJobError: Job not requeued because: "
                                     "timed-out and not checkpointable.\n")))
    (tmp_path / "cases").mkdir()
    job = Job("fake-ok", "default", "cpu", LinearLif(NetworkSpec(neurons=8)))
    executor = SlurmExecutor(SlurmSettings())
    executor._jobs = [SimpleNamespace(job_id="9_0", paths=SimpleNamespace(result_pickle=result))]
    (record,) = executor._unrecorded(0, {job.key: job}, tmp_path,
                                     TaskState("FAILED", "NonZeroExitCode", source="squeue"),
                                     submitit)
    assert record.status == "timeout" and "--timeout-min" in record.message
    assert signal_delay_s(60) == 30 and signal_delay_s(240 * 60) == 90

"""The cluster executors on this machine: submitit's local cluster (never its debug cluster)
and a local Ray instance with logical GPUs. Nothing here ran on a real Slurm or Ray cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from snnbench.contract import Job
from snnbench.executors import ExecutorSettings
from snnbench.executors.settings import SlurmSettings
from snnbench.runner import start_run
from snnbench.spec import NetworkSpec
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

    jobs = [Job("fake-ok", "default", "cpu", NetworkSpec(neurons=n)) for n in range(1, 8)]
    assert [len(g) for g in pack(jobs, 3)] == [3, 3, 1]
    image = SlurmSettings(image="/scratch/snnbench.sif", container_args=("--bind", "/scratch"))
    assert container_prefix(image, "cuda") == ("apptainer", "exec", "--nv", "--bind", "/scratch",
                                               "/scratch/snnbench.sif")
    assert container_prefix(image, "cpu")[:3] == ("apptainer", "exec", "--bind")
    assert container_prefix(SlurmSettings(), "cuda") == ()


def test_worker_command_runs_inside_the_image() -> None:
    from snnbench.launch import worker_command

    job = Job("fake-ok", "default", "cuda", NetworkSpec(neurons=8))
    prefix = ("apptainer", "exec", "--nv", "img.sif")
    assert worker_command(job, Path("/run/jobs/k/job.json"), prefix) == [
        "apptainer", "exec", "--nv", "img.sif", "python", "-P", "-m", "snnbench.worker",
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
    jobs = {j.key: j for j in (Job("fake-ok", "default", "cpu", NetworkSpec(neurons=n))
                               for n in (8, 16))}
    records = list(SlurmExecutor(SlurmSettings(cluster="local"))._unrecorded(
        DeadTask(), jobs, tmp_path, submitit))
    assert [r.status for r in records] == ["lost", "lost"]
    assert {r.placement.engine_job_id for r in records} == {"77_1"}
    assert "NODE_FAIL" in records[0].message


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
    assert "FROM ${CUDA_IMAGE} AS gpu" in (REPO / "docker" / "Dockerfile").read_text()
    assert "$(DOCKER_IMAGE):$*" in (REPO / "docker" / "docker.mk").read_text()
    sections = {line.split()[0] for line in text.splitlines() if line.startswith("%")}
    assert sections == {"%labels", "%environment", "%runscript", "%test"}
    assert 'exec snnbench "$@"' in text


def test_the_manifest_records_the_image(tmp_path: Path) -> None:
    from snnbench.executors.slurm import SlurmExecutor
    from snnbench.machines import read_machine_records, write_machine_record

    image = tmp_path / "snnbench-gpu.sif"
    image.write_bytes(b"\0" * 64)
    write_machine_record(tmp_path, "node3", "slurm", str(image))
    (record,) = read_machine_records(tmp_path)
    assert record["host"] == "node3" and record["executor"] == "slurm"
    assert record["image"] == {"runtime": "apptainer", "image": str(image), "bytes": 64,
                               "modified_utc": record["image"]["modified_utc"]}
    described = SlurmExecutor(SlurmSettings(image=str(image))).describe()
    assert described["image"] == str(image)

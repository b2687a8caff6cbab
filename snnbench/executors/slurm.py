"""``slurm``: the sweep as one Slurm array job, through submitit.

Several cases are packed into each array task (many tiny jobs are an anti-pattern on Slurm);
a task runs its cases one after another with :func:`snnbench.executors.remote.run_packed`,
each in a fresh worker process, optionally inside an Apptainer image
(``apptainer exec --nv IMAGE python -m snnbench.worker …``). The run folder is the exchange
(a shared filesystem is required): nodes write each record into ``<run>/cases/`` themselves,
and this process yields them as they appear.

submitit's outcomes map to statuses for the cases a task never recorded: ``FailedJobError``
(the task's Python failed) → ``error``; ``UncompletedJobError`` → ``timeout`` when Slurm
reports a timeout, else ``lost`` (out of memory, cancelled, node failure); ``--resume`` runs
``lost`` cases again.

``cluster = "local"`` runs the same array on this machine with submitit's local cluster (CI,
a laptop). It starts every array task at once and gives every task the same GPUs: never use
it for GPU concurrency. submitit's ``debug`` cluster is refused (it runs pdb on a failure).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from snnbench.contract import CaseRecord, ContractError, Job
from snnbench.executors.base import Executor, ExecutorError, JobStarted
from snnbench.executors.placement import available_cpus
from snnbench.executors.remote import (
    Owner,
    beat,
    cancel_path,
    record_path,
    request_cancel,
    run_packed,
)
from snnbench.executors.settings import SlurmSettings
from snnbench.schema import RETRY_STATUSES

#: how often the folder and the jobs are looked at
POLL_S = {"local": 0.25, "slurm": 5.0}
#: how long ``close()`` waits for cancelled local-cluster tasks to end
CANCEL_WAIT_S = 30.0


def import_submitit() -> Any:
    """submitit, or :class:`ExecutorError` naming the extra to install."""
    try:
        import submitit
    except ImportError as exc:
        raise ExecutorError("--executor slurm needs submitit: pip install 'snnbench[slurm]'") \
            from exc
    return submitit


def container_prefix(settings: SlurmSettings, device: str) -> tuple[str, ...]:
    """``apptainer exec [--nv] [ARGS] IMAGE``, or nothing when no image is configured."""
    if not settings.image:
        return ()
    nv = ("--nv",) if device == "cuda" else ()
    return ("apptainer", "exec", *nv, *settings.container_args, settings.image)


def pack(jobs: list[Job], cases_per_task: int) -> list[list[Job]]:
    """Consecutive groups of at most ``cases_per_task`` jobs (sweep order: similar sizes)."""
    return [jobs[i:i + cases_per_task] for i in range(0, len(jobs), cases_per_task)]


def outcome_status(exc: BaseException, submitit: Any) -> tuple[str, str]:
    """(status, message) for the unrecorded cases of an array task that ended with ``exc``."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    if isinstance(exc, submitit.core.utils.FailedJobError):
        trace = [line.strip() for line in str(exc).splitlines() if line.strip()
                 and not line.startswith(("-", "You can check", "or at paths"))]
        return "error", f"the array task failed: {trace[-1] if trace else first}"[:400]
    if "TIMEOUT" in str(exc):
        return "timeout", f"the array task hit Slurm's time limit: {first}"[:400]
    return "lost", (f"the array task ended without recording this case (out of memory, "
                    f"cancelled or node failure): {first}")[:400]


class SlurmExecutor(Executor):
    """Submits the sweep as one array job and collects the records its tasks write."""

    name = "slurm"

    def __init__(self, settings: SlurmSettings, device: str = "cpu",
                 threads: int = 1) -> None:
        self.settings = settings
        self.device = device
        self.threads = threads
        self._jobs: list[Any] = []
        self._run_dir: Path | None = None
        #: ids of every array task this executor submitted (kept after close, for the manifest)
        self.engine_jobs: list[str] = []

    @property
    def cluster(self) -> str:
        return self.settings.cluster

    def check(self) -> None:
        import_submitit()
        if self.cluster == "slurm" and shutil.which("sbatch") is None:
            raise ExecutorError("--executor slurm: no Slurm here ('sbatch' is not on PATH); "
                                "run it on a cluster's login node")
        if self.settings.image and self.cluster == "slurm" and not Path(
                self.settings.image).exists():
            raise ExecutorError(f"--image {self.settings.image}: no such Apptainer image")

    def describe(self) -> dict[str, Any]:
        s = self.settings
        return {"name": self.name, "cluster": self.cluster, "partition": s.partition,
                "account": s.account, "gpus_per_node": s.gpus_per_node,
                "timeout_min": s.timeout_min, "array_parallelism": s.array_parallelism,
                "cases_per_task": s.cases_per_task, "setup": list(s.setup),
                "image": s.image, "container_args": list(s.container_args),
                "engine_jobs": list(self.engine_jobs)}

    def _executor(self, folder: Path) -> Any:
        submitit = import_submitit()
        s = self.settings
        executor = submitit.AutoExecutor(folder=folder, cluster=self.cluster)
        params: dict[str, Any] = {
            "name": "snnbench", "timeout_min": s.timeout_min, "nodes": 1, "tasks_per_node": 1,
            "cpus_per_task": s.cpus_per_task or self.threads,
            "gpus_per_node": s.gpus_per_node if self.device == "cuda" else 0,
            "slurm_array_parallelism": s.array_parallelism,
        }
        if s.partition:
            params["slurm_partition"] = s.partition
        if s.account:
            params["slurm_account"] = s.account
        if s.setup:
            params["slurm_setup"] = list(s.setup)
            params["local_setup"] = list(s.setup)
        executor.update_parameters(**params)
        return executor

    def run(self, jobs: Iterable[Job], work_dir: Path, log_dir: Path,
            on_start: JobStarted | None = None) -> Iterator[CaseRecord]:
        submitit = import_submitit()
        jobs = list(jobs)
        if not jobs:
            return
        run_dir = work_dir.parent
        groups = pack(jobs, self.settings.cases_per_task)
        if self.cluster == "local":
            # submitit's local cluster starts every array task at once on this machine: no more
            # tasks than its cores hold, or the cases would time each other (measured: a
            # 16-case sweep in 5 tasks on 2 cores, step medians x2.3 against serial)
            slots = max(1, len(available_cpus()) // max(1, self.threads))
            if len(groups) > slots:
                groups = pack(jobs, math.ceil(len(jobs) / slots))
        concurrency = min(len(groups), self.settings.array_parallelism)
        prefix = container_prefix(self.settings, self.device)
        owner = Owner.me()
        cancel_path(run_dir).unlink(missing_ok=True)  # a stop request of an earlier attempt
        beat(run_dir)
        self._run_dir = run_dir
        executor = self._executor(log_dir / "slurm")
        args = [(str(run_dir), [j.to_dict() for j in group], owner, self.name, concurrency,
                 prefix, self.settings.image) for group in groups]
        self._jobs = executor.map_array(run_packed, *zip(*args, strict=True))
        self.engine_jobs += [str(j.job_id) for j in self._jobs]
        for job in jobs:
            if on_start is not None:
                on_start(job)
        pending = {i: {j.key: j for j in group} for i, group in enumerate(groups)}
        poll = POLL_S[self.cluster]
        while pending:
            beat(run_dir)
            for i in list(pending):
                for key in list(pending[i]):
                    record = _read(record_path(run_dir, key))
                    if record is not None:
                        del pending[i][key]
                        yield record
                if self._jobs[i].done():
                    # the task is over: what it did not record, it never will
                    yield from self._unrecorded(self._jobs[i], pending.pop(i), run_dir,
                                                submitit)
            if pending:
                time.sleep(poll)

    def _unrecorded(self, engine_job: Any, left: dict[str, Job], run_dir: Path,
                    submitit: Any) -> Iterator[CaseRecord]:
        missing = []
        for key, job in left.items():
            record = _read(record_path(run_dir, key))  # written just before the task ended
            if record is None:
                missing.append(job)
            else:
                yield record
        if not missing:
            return
        exc = engine_job.exception()
        if exc is None:
            status, message = "lost", "the array task finished without recording this case"
        else:
            status, message = outcome_status(exc, submitit)
        for job in missing:
            record = CaseRecord.for_job(job, status, message)
            record.placement = dataclasses.replace(
                record.placement, executor=self.name, engine_job_id=str(engine_job.job_id))
            yield record

    def close(self) -> None:
        """Stop the array tasks that still run: each task's cases stop on the run folder's
        cancel request (their workers are killed, job folders removed); Slurm also gets
        ``scancel`` for tasks not started yet. Local tasks are waited for (a few seconds), so
        that no process outlives the sweep here."""
        running = [j for j in self._jobs if not _done(j)]
        if running and self._run_dir is not None:
            request_cancel(self._run_dir)
        if self.cluster == "slurm":
            for job in running:
                with contextlib.suppress(Exception):
                    job.cancel(check=False)
        else:
            deadline = time.monotonic() + CANCEL_WAIT_S
            while time.monotonic() < deadline and not all(_done(j) for j in running):
                time.sleep(0.1)
            for job in running:  # a task that did not listen
                if not _done(job):
                    with contextlib.suppress(Exception):
                        job.cancel(check=False)
        self._jobs = []


def _done(job: Any) -> bool:
    try:
        return bool(job.done())
    except Exception:
        return True


def _read(path: Path) -> CaseRecord | None:
    """The record a task wrote, or None (none yet, or a ``lost`` one of an earlier attempt)."""
    if not path.exists():
        return None
    try:
        record = CaseRecord.read(path)
    except ContractError:  # a half-copied file on a slow shared filesystem: read it next time
        return None
    return None if record.status in RETRY_STATUSES else record


def tasks_needed(jobs: int, cases_per_task: int) -> int:
    """Array tasks a sweep of ``jobs`` cases is packed into."""
    return math.ceil(jobs / cases_per_task)

"""``slurm``: the sweep as one Slurm array job, through submitit.

Several cases are packed into each array task (many tiny jobs are an anti-pattern on Slurm);
a task runs its cases one after another with :func:`snnbench.executors.remote.run_packed`,
each in a fresh worker process, optionally inside an Apptainer image
(``apptainer exec --nv IMAGE python -m snnbench.measure.worker …``). The run folder is the exchange
(a shared filesystem is required): nodes write each record into ``<run>/cases/`` themselves,
and this process yields them as they appear.

Statuses come from the scheduler's own state, not from submitit's exceptions:

* the task stops its running case on the time-limit warning (``USR2``, 90 s ahead) and
  records it and the cases it did not start as ``timeout``;
* a case the task did not record gets its status from the task's final Slurm state
  (:mod:`.slurm_state`: squeue, then sacct where accounting is on): ``TIMEOUT`` → ``timeout``,
  ``OUT_OF_MEMORY`` → ``oom``, ``CANCELLED``, ``PREEMPTED``, ``NODE_FAIL`` → ``lost``,
  ``FAILED`` → ``error`` with the task's traceback; a task Slurm no longer knows (no
  accounting) → ``lost``. ``--resume`` runs ``lost`` and ``timeout`` cases again.

Each row's concurrency is what ran side by side on its node (:func:`.remote.side_by_side`),
not what was asked for. A submission Slurm refuses is found before anything is written
(``sbatch --test-only``): one line, exit 2.

``cluster = "local"`` runs the same array on this machine with submitit's local cluster (CI,
a laptop). It starts every array task at once and gives every task the same GPUs: never use
it for GPU concurrency. submitit's ``debug`` cluster is refused (it runs pdb on a failure).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import pickle
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snnbench.executors.base import ExecutorError, JobStarted
from snnbench.executors.placement import available_cpus
from snnbench.executors.remote import (
    ClusterExecutor,
    Owner,
    beat,
    cancel_path,
    record_path,
    request_cancel,
    run_packed,
    side_by_side,
    signal_delay_s,
)
from snnbench.executors.settings import ExecutorSettings, check_int
from snnbench.executors.slurm_state import SlurmStates, TaskState, status_of
from snnbench.records.contract import CaseRecord, ContractError, Job

#: how often the folder and the jobs are looked at (Slurm: one squeue call each time;
#: ``SNNBENCH_SLURM_POLL_S`` changes it, e.g. for a small CI cluster)
POLL_S = {"local": 0.25, "slurm": 5.0}
POLL_VAR = "SNNBENCH_SLURM_POLL_S"
#: how long ``close()`` waits for cancelled local-cluster tasks to end
CANCEL_WAIT_S = 30.0
#: how long ``sbatch --test-only`` may take (an unreachable controller is retried a while)
TEST_SUBMIT_S = 60.0
#: pending reasons that are the ordinary wait for a turn (others are said once each)
ORDINARY_WAITS = frozenset({"", "None", "Priority", "Resources", "JobArrayTaskLimit",
                            "BeginTime", "Dependency", "QOSMaxJobsPerUserLimit"})


@dataclass(frozen=True)
class SlurmSettings:
    """``[executor.slurm]``: how the sweep is submitted as one Slurm array job.

    ::

        [executor.slurm]
        partition = "gpu"
        account = ""
        gpus_per_node = 1         # per array task; 0 for a CPU sweep
        cpus_per_task = 0         # 0: the sweep's thread count
        timeout_min = 240         # per array task (all its cases)
        array_parallelism = 8     # array tasks running at once
        cases_per_task = 4        # cases packed into one array task, run one after another
        setup = ["module load cuda/13.0", "source ~/snnbench/.venv/bin/activate"]
        image = ""                # an Apptainer image: cases run in `apptainer exec --nv IMAGE`
        container_args = []       # extra `apptainer exec` arguments (["--bind", "/scratch"])
        heartbeat_window_s = 600  # tasks on other hosts stop when `snnbench run` is this silent
    """

    partition: str = ""
    account: str = ""
    gpus_per_node: int = 1
    cpus_per_task: int = 0
    timeout_min: int = 240
    array_parallelism: int = 8
    cases_per_task: int = 4
    setup: tuple[str, ...] = ()
    image: str = ""
    container_args: tuple[str, ...] = ()
    #: seconds without a heartbeat of the submitting ``snnbench run`` after which the array
    #: tasks on other hosts stop (on its own host they watch its pid)
    heartbeat_window_s: int = 600
    #: submitit cluster: ``slurm``, or ``local`` (tests, a laptop: no Slurm needed)
    cluster: str = "slurm"

    def __post_init__(self) -> None:
        for name in ("gpus_per_node", "cpus_per_task"):
            check_int(name, getattr(self, name), minimum=0)
        for name in ("timeout_min", "array_parallelism", "cases_per_task",
                     "heartbeat_window_s"):
            check_int(name, getattr(self, name), minimum=1)
        if self.cluster not in ("slurm", "local"):
            # submitit's "debug" cluster runs pdb on a failure: never
            raise ExecutorError(f"slurm cluster must be slurm or local (submitit's debug cluster "
                                f"would start pdb on a failure), got {self.cluster!r}")


class SubmissionError(ExecutorError):
    """Slurm refused the array job: one line, exit 2."""


def first_error_line(exc: BaseException | str) -> str:
    """The line of an sbatch failure that says why (``sbatch: error: ...``), else the first."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if "error:" in line:
            return line[line.index("sbatch:"):] if "sbatch:" in line else line
    return lines[0] if lines else type(exc).__name__ if isinstance(exc, BaseException) else ""


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


class SlurmExecutor(ClusterExecutor[SlurmSettings]):
    """Submits the sweep as one array job and collects the records its tasks write."""

    name = "slurm"
    settings_type = SlurmSettings

    @classmethod
    def recorded_commands(cls, settings: ExecutorSettings) -> list[str]:
        """The setup lines, the Apptainer image and its arguments."""
        slurm: SlurmSettings = settings.table(cls.name)
        found = [f"setup {line!r}" for line in slurm.setup]
        if slurm.image:
            found.append(f"image {slurm.image!r}")
        return found + [f"container argument {arg!r}" for arg in slurm.container_args]

    def __init__(self, settings: SlurmSettings, device: str = "cpu",
                 threads: int = 1) -> None:
        super().__init__(settings, device, threads)
        self._jobs: list[Any] = []
        self._run_dir: Path | None = None
        #: ids of every array task this executor submitted (kept after close, for the manifest)
        self.engine_jobs: list[str] = []
        self._states: SlurmStates | None = None
        self._said: set[str] = set()
        #: records of cases that ran in this sweep (their concurrency is kept true)
        self._ran: dict[str, CaseRecord] = {}
        self._seen_concurrency: dict[str, int] = {}

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
        if self.cluster == "slurm":
            self._test_submission()

    def sbatch_options(self) -> list[str]:
        """The resources each array task asks for, as sbatch options."""
        s = self.settings
        options = ["--nodes=1", "--ntasks-per-node=1", f"--time={s.timeout_min}",
                   f"--cpus-per-task={self.cpus_per_task}"]
        if self.device == "cuda" and s.gpus_per_node:
            options.append(f"--gpus-per-node={s.gpus_per_node}")
        if s.partition:
            options.append(f"--partition={s.partition}")
        if s.account:
            options.append(f"--account={s.account}")
        return options

    @property
    def cpus_per_task(self) -> int:
        return self.settings.cpus_per_task or self.threads

    def _test_submission(self) -> None:
        """``sbatch --test-only``: a partition, account or limit Slurm refuses, or a
        controller it cannot reach, is one line before anything is written."""
        command = ["sbatch", "--test-only", *self.sbatch_options(), "--wrap", "true"]
        try:
            proc = subprocess.run(command, capture_output=True, text=True,
                                  timeout=TEST_SUBMIT_S, check=False)
        except subprocess.TimeoutExpired:
            raise SubmissionError(f"--executor slurm: sbatch --test-only did not answer within "
                                  f"{TEST_SUBMIT_S:g} s (is slurmctld reachable?); nothing "
                                  "was written") from None
        except OSError as exc:
            raise SubmissionError(f"--executor slurm: cannot run sbatch: {exc}") from None
        if proc.returncode != 0:
            raise SubmissionError(f"--executor slurm: Slurm refuses the array job "
                                  f"({first_error_line(proc.stderr) or proc.returncode}); "
                                  "nothing was written")

    def describe(self) -> dict[str, Any]:
        s = self.settings
        return {"name": self.name, "cluster": self.cluster, "partition": s.partition,
                "account": s.account, "gpus_per_node": s.gpus_per_node,
                "timeout_min": s.timeout_min, "array_parallelism": s.array_parallelism,
                "cases_per_task": s.cases_per_task, "setup": list(s.setup),
                "image": s.image, "container_args": list(s.container_args),
                "heartbeat_window_s": s.heartbeat_window_s,
                "engine_jobs": list(self.engine_jobs),
                # what ran side by side on a node at most (rows: each case's own)
                "concurrency": max(self._seen_concurrency.values(), default=0)}

    def _executor(self, folder: Path) -> Any:
        submitit = import_submitit()
        s = self.settings
        executor = submitit.AutoExecutor(folder=folder, cluster=self.cluster)
        params: dict[str, Any] = {
            "name": "snnbench", "timeout_min": s.timeout_min, "nodes": 1, "tasks_per_node": 1,
            "cpus_per_task": self.cpus_per_task,
            "gpus_per_node": s.gpus_per_node if self.device == "cuda" else 0,
            "slurm_array_parallelism": s.array_parallelism,
        }
        if self.cluster == "slurm":
            params["slurm_signal_delay_s"] = signal_delay_s(s.timeout_min * 60)
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
        owner = Owner.me(float(self.settings.heartbeat_window_s))
        cancel_path(run_dir).unlink(missing_ok=True)  # a stop request of an earlier attempt
        beat(run_dir)
        self._run_dir = run_dir
        executor = self._executor(log_dir / "slurm")
        limit_s = float(self.settings.timeout_min * 60)
        args = [(str(run_dir), [j.to_dict() for j in group], owner, self.name, concurrency,
                 prefix, self.settings.image, limit_s) for group in groups]
        try:
            self._jobs = executor.map_array(run_packed, *zip(*args, strict=True))
        except Exception as exc:  # sbatch refused it, or the controller is gone
            raise SubmissionError(
                f"--executor slurm: submitting the array job failed "
                f"({first_error_line(exc)}); nothing was submitted, the run folder {run_dir} "
                f"is kept and resumable: 'snnbench run --resume --out {run_dir}'") from None
        self.engine_jobs += [str(j.job_id) for j in self._jobs]
        if self.cluster == "slurm":
            self._states = SlurmStates()
        pending = {i: {j.key: j for j in group} for i, group in enumerate(groups)}
        started: set[str] = set()
        over_seen: set[int] = set()
        poll = POLL_S[self.cluster]
        with contextlib.suppress(ValueError):
            if self.cluster == "slurm" and os.environ.get(POLL_VAR):
                poll = max(0.2, float(os.environ[POLL_VAR]))
        while pending:
            beat(run_dir)
            states = self._poll_states([i for i in pending])
            for i in list(pending):
                for key, job in list(pending[i].items()):
                    ran = key in started or (work_dir / key).exists()
                    record = _read(record_path(run_dir, key), job.placement.attempt)
                    if ran and key not in started:
                        started.add(key)
                        if on_start is not None:
                            on_start(job)
                    if record is not None:
                        del pending[i][key]
                        if key not in started and on_start is not None:
                            on_start(job)
                        yield self._with_concurrency(record, run_dir)
                if not pending[i]:
                    del pending[i]
                    continue
                if self._task_over(i, states):
                    # the task is over (seen twice: a record may reach a shared filesystem
                    # late): what it did not record, it never will
                    if i in over_seen or self.cluster == "local":
                        for record in self._unrecorded(i, pending.pop(i), run_dir,
                                                       states.get(i), submitit):
                            yield self._with_concurrency(record, run_dir)
                    over_seen.add(i)
            if pending:
                time.sleep(poll)
        if self.cluster == "slurm":
            # every case is in: the tasks end by themselves (a scancel now would mark the
            # last ones CANCELLED in Slurm's accounting)
            self._jobs = []

    def _poll_states(self, tasks: list[int]) -> dict[int, TaskState]:
        """Slurm's state of the array tasks (index → state); empty on the local cluster."""
        if self._states is None:
            return {}
        ids = {str(self._jobs[i].job_id): i for i in tasks}
        found = self._states.poll(ids)
        for line in self._states.warnings:
            self._say_once(line)
        waiting: dict[str, list[str]] = {}
        for task_id, state in sorted(found.items()):
            if state.state == "PENDING" and state.reason not in ORDINARY_WAITS:
                waiting.setdefault(state.reason, []).append(task_id)
        for reason, waiters in waiting.items():
            if reason not in self._said:
                self._said.add(reason)
                self.say(f"slurm: array tasks wait ({reason}): {', '.join(waiters)}")
        return {ids[t]: state for t, state in found.items()}

    def _say_once(self, line: str) -> None:
        if line not in self._said:
            self._said.add(line)
            self.say(f"slurm: {line}")

    def _task_over(self, i: int, states: dict[int, TaskState]) -> bool:
        if self.cluster == "local":
            return _done(self._jobs[i])
        state = states.get(i)
        return state is not None and state.over

    def _with_concurrency(self, record: CaseRecord, run_dir: Path) -> CaseRecord:
        """``record`` with its true concurrency; earlier records it overlapped are rewritten
        (their rows follow with the next table rebuild)."""
        if not record.placement.concurrency or not record.finished_utc:
            return record
        self._ran[record.key] = record
        counts = side_by_side(list(self._ran.values()))
        for key, count in counts.items():
            ran = self._ran[key]
            self._seen_concurrency[key] = count
            if ran.placement.concurrency != count:
                ran.placement = dataclasses.replace(ran.placement, concurrency=count)
                if ran is not record:
                    with contextlib.suppress(OSError):
                        ran.write(record_path(run_dir, key))
        return record

    def _unrecorded(self, i: int, left: dict[str, Job], run_dir: Path,
                    state: TaskState | None, submitit: Any) -> Iterator[CaseRecord]:
        engine_job = self._jobs[i]
        missing: list[tuple[Job, CaseRecord | None]] = []
        for key, job in left.items():
            path = record_path(run_dir, key)
            record = _read(path, job.placement.attempt)  # written just before the task ended
            if record is None:
                missing.append((job, _read(path, job.placement.attempt, final=False)))
            else:
                yield record
        if not missing:
            return
        if state is not None:
            status, message = status_of(state)
            if status == "error":
                trace = _task_trace(engine_job)
                if "timed-out" in trace:
                    # the time-limit warning came before the task listened: submitit's own
                    # handler ended it (UncompletedJobError, "timed-out and not checkpointable")
                    status = "timeout"
                    message = (f"the array task reached its Slurm time limit (the warning came "
                               f"as it started: {trace}); 'snnbench run --resume "
                               f"--timeout-min M' runs it again")[:400]
                elif trace:
                    message = f"{message}: {trace}"[:400]
        else:
            exc = _local_exception(engine_job)
            if exc is None:
                status, message = "lost", "the array task finished without recording this case"
            else:
                status, message = outcome_status(exc, submitit)
        for job, provisional in missing:
            if provisional is not None:
                # the task's own word (stopped by SIGTERM), decided now by Slurm's state
                record = provisional
                record.status = status  # type: ignore[assignment]
                record.message = f"{message}; the task: {provisional.message}"[:600]
            else:
                record = CaseRecord.for_job(job, status, message)
                record.placement = dataclasses.replace(
                    record.placement, executor=self.name, engine_job_id=str(engine_job.job_id),
                    concurrency=0)
            record.write(record_path(run_dir, job.key))
            yield record

    def close(self) -> None:
        """Stop the array tasks that still run: each task's cases stop on the run folder's
        cancel request (their workers are killed, job folders removed); Slurm also gets
        ``scancel`` for tasks not started yet. Local tasks are waited for (a few seconds), so
        that no process outlives the sweep here."""
        if self.cluster == "slurm":
            final = self._states.final if self._states is not None else {}
            running = [j for j in self._jobs if str(j.job_id) not in final]
        else:
            running = [j for j in self._jobs if not _done(j)]
        if running and self._run_dir is not None:
            request_cancel(self._run_dir)
        if self.cluster == "slurm":
            arrays = sorted({str(j.job_id).split("_")[0] for j in running})
            if arrays:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    subprocess.run(["scancel", *arrays], capture_output=True, timeout=60,
                                   check=False)
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


def _local_exception(job: Any) -> BaseException | None:
    try:
        exc: BaseException | None = job.exception()
    except Exception as error:  # its result could not be read
        return error
    return exc


def _task_trace(job: Any) -> str:
    """The last line of the traceback a failed task left in its result file, "" if none."""
    try:
        with open(job.paths.result_pickle, "rb") as handle:
            outcome, payload = pickle.load(handle)
    except Exception:
        return ""
    if outcome != "error":
        return ""
    lines = [line.strip() for line in str(payload).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _read(path: Path, attempt: int = 0, final: bool = True) -> CaseRecord | None:
    """The record a task wrote for this ``attempt``, or None (none yet, an earlier attempt's,
    or, when ``final``, a ``lost`` one: the task's provisional word, which Slurm's final state
    of the task decides)."""
    if not path.exists():
        return None
    try:
        record = CaseRecord.read(path)
    except ContractError:  # a half-copied file on a slow shared filesystem: read it next time
        return None
    if attempt and record.placement.attempt < attempt:
        return None
    if not attempt and record.status in ("lost", "timeout"):
        return None
    return None if final and record.status == "lost" else record


def tasks_needed(jobs: int, cases_per_task: int) -> int:
    """Array tasks a sweep of ``jobs`` cases is packed into."""
    return math.ceil(jobs / cases_per_task)

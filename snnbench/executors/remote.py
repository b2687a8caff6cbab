"""What a cluster engine (Slurm array task, Ray task) runs on a node: cases of one run folder.

The run folder is the exchange and must be on a filesystem the nodes share: each case's job
folder is ``<run>/jobs/<key>/``, its log ``<run>/logs/<key>.log``, and its record is written
atomically to ``<run>/cases/<key>.json`` by the node itself, so whatever happens to the
process that submitted the sweep, finished cases are kept and ``--resume`` finds them.

Cases stop when the sweep's owner (the ``snnbench run`` that submitted them) is gone: on its
host by its pid, elsewhere by a heartbeat file it rewrites while it lives (a task that starts
after the owner died sees the heartbeat's age and stops at once).

On Slurm an array task also listens to the scheduler (:class:`SchedulerSignals`): the
``USR2`` submitit asks for ahead of the time limit ends the running case and records it, and
the cases not started, as ``timeout``; ``SIGTERM`` (a cancel, a preemption, a node shutting
down) ends the running case as ``lost`` for now, and the submitting process decides the status
from the task's final state in Slurm. Either way a worker killed because its task was stopped
is never mistaken for one the kernel killed for memory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

import psutil

from snnbench.executors.base import Executor
from snnbench.executors.launch import Cancelled
from snnbench.executors.local import run_in_folder
from snnbench.executors.placement import hostname, visible_gpu_uuid
from snnbench.records.contract import CaseRecord, ContractError, Job, Placement, now_utc
from snnbench.records.schema import CASES_DIR, JOBS_DIR, RETRY_STATUSES

#: the heartbeat the owner rewrites (``<run>/jobs/.owner``)
HEARTBEAT = ".owner"
#: written by the owner when it stops the sweep (``<run>/jobs/.cancel``): running cases end
CANCEL = ".cancel"

if TYPE_CHECKING:
    from snnbench.executors.settings import ExecutorSettings

SettingsT = TypeVar("SettingsT")


class ClusterExecutor(Executor, Generic[SettingsT]):
    """An executor whose workers run as tasks of a cluster engine (Ray tasks, Slurm array
    tasks), possibly on other hosts.

    What every such executor shares: its workers watch the owner's heartbeat and the cancel
    flag in the run folder (so both are its :attr:`work_files`), and it is built from its own
    ``[executor.NAME]`` table (``settings_type``) alone; this machine's GPUs are not its
    concern.
    """

    work_files = (HEARTBEAT, CANCEL)

    def __init__(self, settings: SettingsT, device: str = "cpu", threads: int = 1) -> None:
        self.settings = settings
        self.device = device
        self.threads = threads

    @classmethod
    def from_settings(cls, settings: ExecutorSettings, device: str, threads: int,
                      nvml: Any | None = None) -> Self:
        """The executor of the ``[executor.NAME]`` table of ``settings``."""
        return cls(settings.table(cls.name), device, threads)


@dataclass(frozen=True)
class Owner:
    """The process that submitted the cases; they stop when it is gone."""

    host: str
    pid: int
    #: seconds without a new heartbeat after which a case on another host stops
    grace_s: float = 600.0
    #: the owner's start time (a reused pid is another process)
    created: float = 0.0

    @classmethod
    def me(cls, grace_s: float = 600.0) -> Owner:
        """The running process; ``grace_s``: the heartbeat window of tasks on other hosts."""
        return cls(hostname(), os.getpid(), grace_s, psutil.Process().create_time())

    def alive(self) -> bool:
        """On the owner's host: is it still running (a zombie, killed but not reaped, is not)?"""
        try:
            proc = psutil.Process(self.pid)
            return (proc.status() != psutil.STATUS_ZOMBIE
                    and (not self.created or proc.create_time() == self.created))
        except psutil.NoSuchProcess:
            return False
        except psutil.AccessDenied:
            return True


def heartbeat_path(run_dir: Path) -> Path:
    return run_dir / JOBS_DIR / HEARTBEAT


def cancel_path(run_dir: Path) -> Path:
    return run_dir / JOBS_DIR / CANCEL


def request_cancel(run_dir: Path) -> None:
    """Ask every case still running for this run folder to stop (they look twice a second)."""
    path = cancel_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


#: heartbeats are rewritten at most this often (a shared filesystem needs no more)
BEAT_EVERY_S = 5.0
_last_beat: dict[Path, float] = {}


def beat(run_dir: Path) -> None:
    """Rewrite the heartbeat: its content changes each time (a watcher needs no clock of the
    owner's host for that), and it carries the wall time of the beat (for a task that starts
    long after the owner died)."""
    path = heartbeat_path(run_dir)
    now = time.monotonic()
    if path.exists() and now - _last_beat.get(path, -BEAT_EVERY_S) < BEAT_EVERY_S:
        return
    _last_beat[path] = now
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{os.getpid()} {time.monotonic_ns()} {time.time():.3f}\n")
    os.replace(tmp, path)


def heartbeat_age(text: str, now: float | None = None) -> float | None:
    """Seconds since the beat ``text`` records (by this host's clock), None when unknown."""
    parts = text.split()
    try:
        return (time.time() if now is None else now) - float(parts[2])
    except (IndexError, ValueError):
        return None


def watch_owner(owner: Owner, run_dir: Path, stop: threading.Event, poll_s: float = 0.5) -> None:
    """Set ``stop`` when ``owner`` is gone or asks to stop (run in a daemon thread).

    On the owner's host: its pid. Elsewhere: its heartbeat, which must change within
    ``owner.grace_s``; one already older than that when the watch starts (the owner died
    before this task started) stops the task at the first look."""
    here = hostname() == owner.host
    last, seen = "", time.monotonic()
    first = True
    while not stop.wait(0.0 if first else poll_s):
        if cancel_path(run_dir).exists():
            stop.set()
        elif here:
            if not owner.alive():
                stop.set()
            first = False
            continue
        try:
            text = heartbeat_path(run_dir).read_text()
        except OSError:
            text = last
        if first:
            age = heartbeat_age(text)
            if age is not None and age > owner.grace_s:
                stop.set()
        first = False
        if text != last:
            last, seen = text, time.monotonic()
        elif time.monotonic() - seen > owner.grace_s:
            stop.set()


def record_path(run_dir: Path, key: str) -> Path:
    return run_dir / CASES_DIR / f"{key}.json"


def already_done(run_dir: Path, key: str, attempt: int = 0) -> bool:
    """True when the folder holds a record of ``key`` that needs no re-run (a requeued task):
    a final status of this ``attempt`` (any attempt when 0)."""
    path = record_path(run_dir, key)
    if not path.exists():
        return False
    try:
        record = CaseRecord.read(path)
    except ContractError:
        return False
    if attempt:
        # this attempt's records are final, but a lost one (a requeued task runs it again);
        # an earlier attempt's are not
        return record.placement.attempt >= attempt and record.status != "lost"
    return record.status not in RETRY_STATUSES


def run_case(job: Job, run_dir: Path, placement: Placement, stop: threading.Event,
             prefix: Sequence[str] = ()) -> CaseRecord:
    """Run one case here and write its record into the run folder, unless the case did not
    finish (``lost``: its worker was killed from outside).

    A stopping sweep's engine kills its task's worker (Ray's forced cancel signals the
    worker before the task itself); a ``lost`` record the task wrote then would sit in the
    folder of a sweep whose owner said "finished cases are kept". The owner, while it lives,
    stores the returned record itself; once it is gone, ``--resume`` runs a case without a
    record again, as it would a ``lost`` one.
    """
    placed = dataclasses.replace(job, placement=placement)
    record = run_in_folder(placed, run_dir / JOBS_DIR, run_dir / "logs", stop, prefix)
    if record.status != "lost":
        record.write(record_path(run_dir, record.key))
    return record


#: the signal submitit asks Slurm for ahead of the time limit (``--signal=USR2@90``)
TIME_LIMIT_SIGNAL = signal.SIGUSR2
#: seconds before the limit submitit asks for it (at most; see :func:`signal_delay_s`); a USR2
#: with more time left than that (plus slack for the controller's 30 s check) is a
#: preemption, not the limit
SIGNAL_DELAY_S = 90


def signal_delay_s(time_limit_s: float) -> int:
    """How long before the limit the warning comes: 90 s, but never more than half the limit
    (with a 1-minute limit a 90 s warning would come as the task starts, before it listens)."""
    if not time_limit_s:
        return SIGNAL_DELAY_S
    return int(max(10, min(SIGNAL_DELAY_S, time_limit_s // 2)))
#: how long the task waits, after a worker died of a signal, for the scheduler's own signal
#: to reach it too (both are sent at once; the worker may die first)
SIGNAL_RACE_S = 1.0


@dataclass
class SchedulerSignals:
    """What the scheduler told an array task: ``USR2`` (the time limit is near, or a
    preemption) or ``SIGTERM`` (cancelled, preempted, the node shuts down)."""

    stop: threading.Event
    #: seconds of the task's time limit (0: unknown)
    time_limit_s: float = 0.0
    signum: int = 0
    started: float = field(default_factory=time.monotonic)
    _time_limit: bool | None = None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        if not self.signum:
            self.signum = signum
        self.stop.set()

    @contextlib.contextmanager
    def installed(self) -> Iterator[SchedulerSignals]:
        """Handle the signals in this (the main) thread; outside Slurm, change nothing."""
        if not os.environ.get("SLURM_JOB_ID") or threading.current_thread() is not \
                threading.main_thread():
            yield self
            return
        previous = {sig: signal.signal(sig, self.handler)
                    for sig in (signal.SIGTERM, TIME_LIMIT_SIGNAL)}
        try:
            yield self
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)

    def received(self, wait_s: float = 0.0) -> bool:
        """Whether a scheduler signal came (waiting up to ``wait_s`` for it)."""
        deadline = time.monotonic() + wait_s
        while not self.signum and time.monotonic() < deadline:
            time.sleep(0.02)
        return bool(self.signum)

    def time_limit(self) -> bool:
        """Is the USR2 the time limit? Asked of Slurm (the time the task has left), else
        judged by how long the task ran."""
        if self._time_limit is None:
            left = _time_left_s()
            if left is not None:
                self._time_limit = left <= signal_delay_s(self.time_limit_s) + 60
            else:
                ran = time.monotonic() - self.started
                self._time_limit = not self.time_limit_s or (
                    ran >= self.time_limit_s - signal_delay_s(self.time_limit_s) - 60)
        return self._time_limit

    def record(self, job: Job, started: bool) -> CaseRecord:
        """The record of a case the signal ended (``started``) or kept from starting."""
        what = "while this case ran" if started else "before this case started"
        if self.signum == TIME_LIMIT_SIGNAL and self.time_limit():
            limit = f"{self.time_limit_s / 60:g} min " if self.time_limit_s else ""
            record = CaseRecord.for_job(job, "timeout", (
                f"the array task reached its Slurm time limit ({limit}--timeout-min) {what}; "
                "'snnbench run --resume --timeout-min M' runs it again"))
        else:
            name = signal.Signals(self.signum).name if self.signum else "a signal"
            record = CaseRecord.for_job(job, "lost", (
                f"Slurm stopped the array task ({name}: cancelled, preempted or the node "
                f"went away) {what}"))
        record.finished_utc = now_utc()
        return record


def _time_left_s() -> float | None:
    """Seconds this Slurm job has left, from squeue; None when it cannot be asked."""
    job = os.environ.get("SLURM_JOB_ID", "")
    if not job:
        return None
    try:
        proc = subprocess.run(["squeue", "-h", "-j", job, "-o", "%L"], capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_slurm_duration(proc.stdout.strip()) if proc.returncode == 0 else None


def parse_slurm_duration(text: str) -> float | None:
    """``[days-]hours:minutes:seconds``, ``minutes:seconds`` → seconds; None otherwise."""
    days, _, rest = text.rpartition("-") if "-" in text else ("", "", text)
    parts = rest.split(":")
    try:
        numbers = [int(p) for p in parts]
        whole_days = int(days) if days else 0
    except ValueError:
        return None
    if not 1 <= len(numbers) <= 3:
        return None
    while len(numbers) < 3:
        numbers.insert(0, 0)
    hours, minutes, seconds = numbers
    return float(((whole_days * 24 + hours) * 60 + minutes) * 60 + seconds)


def run_packed(run_dir: str, jobs: list[dict[str, Any]], owner: Owner, executor: str,
               concurrency: int, prefix: Sequence[str] = (), image: str = "",
               time_limit_s: float = 0.0) -> list[str]:
    """An array task: run ``jobs`` one after another; returns the keys it recorded.

    Called by submitit on a node (so it must stay importable and picklable: plain arguments).
    ``concurrency`` is recorded for now; the submitting process corrects it to what ran side
    by side (:func:`side_by_side`).
    """
    from snnbench.host.machines import write_machine_record

    root = Path(run_dir)
    host = hostname()
    write_machine_record(root, host, executor, image)
    engine_id = _engine_job_id()
    stop = threading.Event()
    threading.Thread(target=watch_owner, args=(owner, root, stop), daemon=True,
                     name="snnbench-owner").start()
    done: list[str] = []
    todo = [Job.from_dict(data, source="packed job") for data in jobs]
    running: Job | None = None
    began = ""
    with SchedulerSignals(stop, time_limit_s).installed() as told:
        try:
            for job in todo:
                if already_done(root, job.key, job.placement.attempt):
                    continue
                if stop.is_set():
                    break
                placement = dataclasses.replace(
                    job.placement, executor=executor, host=host, gpu_uuid=visible_gpu_uuid(),
                    concurrency=concurrency, engine_job_id=engine_id)
                running = dataclasses.replace(job, placement=placement)
                began = now_utc()
                record = run_in_folder(running, root / JOBS_DIR, root / "logs", stop, prefix)
                if _by_signal(record) and told.received(SIGNAL_RACE_S):
                    # killed because Slurm stopped the task, not by the kernel or a bug
                    record = told.record(running, started=True)
                    record.started_utc = began
                record.write(record_path(root, record.key))
                done.append(record.key)
                running = None
        except Cancelled:
            pass
        finally:
            stop.set()
        if told.received():
            # the scheduler ended the task: the running case and those never started
            left = [j for j in todo if j.key not in done
                    and not already_done(root, j.key, j.placement.attempt)]
            for job in left:
                was_running = running is not None and job.key == running.key
                placed = running if was_running and running is not None else \
                    dataclasses.replace(job, placement=dataclasses.replace(
                        job.placement, executor=executor, host=host, concurrency=0,
                        engine_job_id=engine_id))
                record = told.record(placed, started=was_running)
                if was_running:
                    record.started_utc = began
                record.write(record_path(root, record.key))
                if record.status != "lost":
                    done.append(record.key)
    return done


def _by_signal(record: CaseRecord) -> bool:
    """Whether the worker behind ``record`` died of a signal (the parent's own record)."""
    return record.status in ("oom", "error", "lost") and (
        "SIG" in record.message or "signal" in record.message)


def side_by_side(records: Sequence[CaseRecord]) -> dict[str, int]:
    """Key → how many cases (itself included) ran at once on its host at the busiest moment
    of its run, from where (``placement.host``) and when (``started_utc`` to
    ``finished_utc``) each ran. Records without times (decided without running) are left
    out."""
    spans: dict[str, list[tuple[float, float, str]]] = {}
    for record in records:
        span = _span(record)
        if span is not None and record.placement.concurrency:
            spans.setdefault(record.placement.host, []).append((*span, record.key))
    result: dict[str, int] = {}
    for host_spans in spans.values():
        for start, end, key in host_spans:
            # the busiest moment within [start, end) is at its start or another case's start
            moments = [start] + [s for s, _, _ in host_spans if start < s < end]
            result[key] = max(sum(1 for s, e, _ in host_spans if s <= t < e)
                              for t in moments)
    return result


def _span(record: CaseRecord) -> tuple[float, float] | None:
    try:
        end = datetime.fromisoformat(record.finished_utc).timestamp()
    except (TypeError, ValueError):
        return None
    try:
        start = datetime.fromisoformat(record.started_utc).timestamp()
    except (TypeError, ValueError):
        if not record.wall_s:
            return None
        start = end - float(record.wall_s)
    return (start, max(end, start + 1e-6))


def run_one(run_dir: str, data: dict[str, Any], owner: Owner,
            concurrency: int) -> dict[str, Any]:
    """A Ray task: run one case here; returns its record as plain data."""
    engine_job_id = ""
    try:
        import ray

        engine_job_id = str(ray.get_runtime_context().get_task_id() or "")
    except Exception:  # called outside Ray (tests)
        pass
    from snnbench.host.machines import write_machine_record

    root = Path(run_dir)
    host = hostname()
    write_machine_record(root, host, "ray")
    job = Job.from_dict(data, source="ray job")
    stop = threading.Event()
    threading.Thread(target=watch_owner, args=(owner, root, stop), daemon=True,
                     name="snnbench-owner").start()
    placement = dataclasses.replace(
        job.placement, executor="ray", host=host, gpu_uuid=visible_gpu_uuid(),
        concurrency=concurrency, engine_job_id=engine_job_id)
    try:
        return run_case(job, root, placement, stop).to_dict()
    finally:
        stop.set()


def _engine_job_id() -> str:
    """The scheduler's id of this task (``<array job>_<index>`` on Slurm), "" if unknown."""
    try:
        import submitit

        return str(submitit.JobEnvironment().job_id)
    except Exception:  # not inside a submitit job
        array, index = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
        return f"{array}_{index}" if array and index else os.environ.get("SLURM_JOB_ID", "")

"""What a cluster engine (Slurm array task, Ray task) runs on a node: cases of one run folder.

The run folder is the exchange and must be on a filesystem the nodes share: each case's job
folder is ``<run>/jobs/<key>/``, its log ``<run>/logs/<key>.log``, and its record is written
atomically to ``<run>/cases/<key>.json`` by the node itself, so whatever happens to the
process that submitted the sweep, finished cases are kept and ``--resume`` finds them.

Cases stop when the sweep's owner (the ``snnbench run`` that submitted them) is gone: on its
host by its pid, elsewhere by a heartbeat file it rewrites while it lives.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from snnbench.contract import CaseRecord, ContractError, Job, Placement
from snnbench.executors.local import run_in_folder
from snnbench.executors.placement import hostname, visible_gpu_uuid
from snnbench.launch import Cancelled
from snnbench.schema import CASES_DIR, JOBS_DIR, RETRY_STATUSES

#: the heartbeat the owner rewrites (``<run>/jobs/.owner``)
HEARTBEAT = ".owner"
#: written by the owner when it stops the sweep (``<run>/jobs/.cancel``): running cases end
CANCEL = ".cancel"


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
    """Rewrite the heartbeat (content changes, so clocks of other hosts do not matter)."""
    path = heartbeat_path(run_dir)
    now = time.monotonic()
    if path.exists() and now - _last_beat.get(path, -BEAT_EVERY_S) < BEAT_EVERY_S:
        return
    _last_beat[path] = now
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{os.getpid()} {time.monotonic_ns()}\n")
    os.replace(tmp, path)


def watch_owner(owner: Owner, run_dir: Path, stop: threading.Event, poll_s: float = 0.5) -> None:
    """Set ``stop`` when ``owner`` is gone or asks to stop (run in a daemon thread)."""
    here = hostname() == owner.host
    last, seen = "", time.monotonic()
    while not stop.wait(poll_s):
        if cancel_path(run_dir).exists():
            stop.set()
        elif here:
            if not owner.alive():
                stop.set()
            continue
        try:
            text = heartbeat_path(run_dir).read_text()
        except OSError:
            text = last
        if text != last:
            last, seen = text, time.monotonic()
        elif time.monotonic() - seen > owner.grace_s:
            stop.set()


def record_path(run_dir: Path, key: str) -> Path:
    return run_dir / CASES_DIR / f"{key}.json"


def already_done(run_dir: Path, key: str) -> bool:
    """True when the folder holds a record of ``key`` that needs no re-run (a requeued task)."""
    path = record_path(run_dir, key)
    if not path.exists():
        return False
    try:
        return CaseRecord.read(path).status not in RETRY_STATUSES
    except ContractError:
        return False


def run_case(job: Job, run_dir: Path, placement: Placement, stop: threading.Event,
             prefix: Sequence[str] = ()) -> CaseRecord:
    """Run one case here and write its record into the run folder."""
    placed = dataclasses.replace(job, placement=placement)
    record = run_in_folder(placed, run_dir / JOBS_DIR, run_dir / "logs", stop, prefix)
    record.write(record_path(run_dir, record.key))
    return record


def run_packed(run_dir: str, jobs: list[dict[str, Any]], owner: Owner, executor: str,
               concurrency: int, prefix: Sequence[str] = (), image: str = "") -> list[str]:
    """An array task: run ``jobs`` one after another; returns the keys it recorded.

    Called by submitit on a node (so it must stay importable and picklable: plain arguments).
    """
    from snnbench.machines import write_machine_record

    root = Path(run_dir)
    host = hostname()
    write_machine_record(root, host, executor, image)
    engine_id = _engine_job_id()
    stop = threading.Event()
    threading.Thread(target=watch_owner, args=(owner, root, stop), daemon=True,
                     name="snnbench-owner").start()
    done: list[str] = []
    try:
        for data in jobs:
            job = Job.from_dict(data, source="packed job")
            if already_done(root, job.key):
                continue
            if stop.is_set():
                break
            placement = dataclasses.replace(
                job.placement, executor=executor, host=host, gpu_uuid=visible_gpu_uuid(),
                concurrency=concurrency, engine_job_id=engine_id)
            done.append(run_case(job, root, placement, stop, prefix).key)
    except Cancelled:
        pass
    finally:
        stop.set()
    return done


def run_one(run_dir: str, data: dict[str, Any], owner: Owner,
            concurrency: int) -> dict[str, Any]:
    """A Ray task: run one case here; returns its record as plain data."""
    engine_job_id = ""
    try:
        import ray

        engine_job_id = str(ray.get_runtime_context().get_task_id() or "")
    except Exception:  # called outside Ray (tests)
        pass
    from snnbench.machines import write_machine_record

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

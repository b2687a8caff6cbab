"""Run one :class:`~snnbench.records.contract.Job` as ``python -m snnbench.measure.worker JOB.json``
and turn whatever happens to that process into a :class:`~snnbench.records.contract.CaseRecord`.

Every executor (local, Slurm, Ray) ends up here, on whichever machine runs the case, so a case
always keeps its fresh process and a segfault stays a case status. The local executor may have
that process forked from a zygote that imported the case's library once per sweep instead of
started anew (:mod:`snnbench.executors.forkserver`); the worker runs the same either way, and the
record says which (``start``).

Two clocks guard a worker. Until it touches :attr:`Job.prepared_marker` it is preparing
(importing its library, building a CUDA extension on first use) under
:attr:`Job.prepare_timeout_s`; from then on the timed case runs under :attr:`Job.timeout_s`.
A first-use build therefore never eats the case's time limit.

A worker dies with the process that started it (:mod:`snnbench.host.lifeline`), is pinned to the
CPUs of its :class:`~snnbench.records.contract.Placement`, and is killed when its executor is
stopped (``stop``): no worker outlives its sweep.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from snnbench.executors.forkserver import ForkedProcess, Zygotes
from snnbench.host.lifeline import PARENT_PID_VAR
from snnbench.host.masking import scrub, secret_values
from snnbench.host.processes import Child, kill_group, kill_leftovers, pinned_thread
from snnbench.records.contract import RESULT_NOT_WRITTEN_EXIT, CaseRecord, ContractError, Job
from snnbench.records.fileio import replace_with_new_file

__all__ = ["Cancelled", "Exit", "pinned_thread", "run_worker", "worker_command",
           "worker_environment"]

#: how often the parent looks at the worker and its marker file
POLL_S = 0.05


@dataclass(frozen=True)
class Exit:
    """How a worker process ended, as seen by the process that started it."""

    returncode: int | None
    #: "" when it ended by itself, else "prepare" or "case": the limit it overran
    timed_out: str = ""
    wall_s: float = 0.0
    #: processes the kernel's OOM killer killed on this host while the worker ran (None:
    #: unknown, no /proc/vmstat)
    oom_kills: int | None = None


def kernel_oom_kills() -> int | None:
    """The kernel's count of OOM kills since boot (``oom_kill`` in /proc/vmstat, memory
    cgroups' included), None where it cannot be read."""
    try:
        with open("/proc/vmstat", encoding="ascii") as vmstat:
            for line in vmstat:
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
    except (OSError, ValueError):
        pass
    return None


class Cancelled(Exception):
    """The executor stopped (interrupt, or its engine is shutting down): the worker was killed."""


def worker_command(job: Job, job_path: Path, prefix: Sequence[str] = ()) -> list[str]:
    """The worker's command line, under the job's environment interpreter.

    ``prefix`` wraps it (``apptainer exec --nv IMAGE``); inside a container the interpreter
    is the container's ``python`` unless the job names one.
    """
    python = job.environment.python or ("python" if prefix else sys.executable)
    # -P: the current folder is not put on sys.path. Run from a source checkout (an image's
    # work folder, say), `-m` would otherwise import that tree's snnbench instead of the
    # installed one the parent runs.
    return [*prefix, python, "-P", "-m", "snnbench.measure.worker", str(job_path)]


def worker_environment(job: Job, base: dict[str, str] | None = None) -> dict[str, str]:
    """The worker's environment variables: the parent's, then the job's own."""
    env = dict(os.environ if base is None else base)
    env.update(job.env_vars)
    env["PYTHONUNBUFFERED"] = "1"
    env[PARENT_PID_VAR] = str(os.getpid())
    return env


def start_worker(job: Job, job_path: Path, log: BinaryIO, env: dict[str, str],
                 prefix: Sequence[str] = (), zygotes: Zygotes | None = None,
                 stop: threading.Event | None = None) -> tuple[Child, str]:
    """Start the job's worker with its output on ``log``: forked from its zygote when
    ``zygotes`` is given (:mod:`snnbench.executors.forkserver`), else (or when its zygote cannot
    fork) as a new process. The process, and how it was started (``fork`` or ``spawn``)."""
    if zygotes is not None and not prefix:
        python = job.environment.python or sys.executable
        forked = zygotes.fork(python, job.adapter, env, job.placement.cpus, str(job_path),
                              log.fileno(), job.prepare_timeout_s,
                              lambda: stop is not None and stop.is_set())
        if isinstance(forked, ForkedProcess):
            return forked, "fork"
        if stop is not None and stop.is_set():
            raise Cancelled(f"{job.key}: stopped")
        # said once per case, in its log: why its library was imported again
        log.write(f"snnbench: started as a new process: {forked}\n".encode())
        log.flush()
    with pinned_thread(job.placement.cpus):
        proc = subprocess.Popen(
            worker_command(job, job_path, prefix),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: a timeout kills its children
        )
    return proc, "spawn"


def run_worker(job: Job, job_dir: Path, log_path: Path, stop: threading.Event | None = None,
               prefix: Sequence[str] = (), zygotes: Zygotes | None = None) -> CaseRecord:
    """Write ``job`` into ``job_dir``, run its worker, and return its record.

    ``job.result_path`` must lie in ``job_dir``. The record is the worker's own when it wrote
    one; otherwise one the parent builds from the exit (timeout, signal, exit code) and the
    last lines of the log. When ``stop`` is set the worker is killed and :class:`Cancelled`
    raised. The calling thread waits for the worker: it must, since the kernel's
    parent-death signal fires when the thread that started a process exits. With
    ``zygotes`` the worker is forked from a pre-imported parent (:func:`start_worker`); the
    record's ``start`` says how it was started.
    """
    job_path = job_dir / "job.json"
    job.write(job_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    ooms = kernel_oom_kills()
    env = worker_environment(job)
    # a new file, never one opened through what was there: in a folder someone sent, a
    # link to a file elsewhere (it would be truncated) or a FIFO (it would block)
    with open(replace_with_new_file(log_path), "wb") as log:
        proc, start = start_worker(job, job_path, log, env, prefix, zygotes, stop)
        try:
            exit_ = wait_for_worker(proc, job, stop)
        except BaseException:
            kill_group(proc)
            kill_leftovers(proc)
            release(proc)
            scrub_log(log_path, secret_values(env))
            raise
        # a helper the library started (a compile server, daemonized) dies with its case
        kill_leftovers(proc)
        release(proc)
    secrets = secret_values(env)
    scrub_log(log_path, secrets)
    record = read_result(Path(job.result_path))
    if record is None:
        after = kernel_oom_kills()
        if ooms is not None and after is not None:
            exit_ = dataclasses.replace(exit_, oom_kills=after - ooms)
        record = record_from_exit(job, exit_, log_path)
    # a library may print a token or raise with a database URL: no credential of the
    # worker's environment reaches the log, the case record or the summary
    record.message = scrub(record.message, secrets)
    record.traceback = scrub(record.traceback, secrets)
    record.wall_s = exit_.wall_s
    record.start = start
    record.order = job.order
    if not record.finished_utc:
        from snnbench.records.contract import now_utc

        record.finished_utc = now_utc()
    return record


def release(proc: Child) -> None:
    """Let a forked worker's zygote reap it, now that nothing it left can outlive it."""
    if isinstance(proc, ForkedProcess):
        proc.release()


def scrub_log(path: Path, secrets: list[str]) -> None:
    """Mask ``secrets`` (and URL passwords) in the worker's log, rewritten only if needed."""
    try:
        with open(path, "r+b") as log:
            text = log.read().decode("utf-8", errors="surrogateescape")
            clean = scrub(text, secrets)
            if clean != text:
                log.seek(0)
                log.write(clean.encode("utf-8", errors="surrogateescape"))
                log.truncate()
    except OSError:
        pass  # no log (a full disk): nothing written, nothing to mask


def wait_for_worker(proc: Child, job: Job,
                    stop: threading.Event | None = None) -> Exit:
    """Wait for the worker under the prepare limit, then under the case limit."""
    started = time.monotonic()
    marker = job.prepared_marker
    case_started: float | None = None
    while True:
        if stop is not None and stop.is_set():
            raise Cancelled(f"{job.key}: stopped")
        try:
            returncode = proc.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            pass
        else:
            return Exit(returncode, "", time.monotonic() - started)
        now = time.monotonic()
        if case_started is None and marker.exists():
            case_started = now
        if case_started is None and now - started > job.prepare_timeout_s:
            kill_group(proc)
            return Exit(proc.returncode, "prepare", now - started)
        if case_started is not None and now - case_started > job.timeout_s:
            kill_group(proc)
            return Exit(proc.returncode, "case", now - started)


def read_result(path: Path) -> CaseRecord | None:
    """The worker's record, or None when it wrote none (or a damaged one)."""
    if not path.exists():
        return None
    try:
        return CaseRecord.read(path)
    except ContractError:
        return None


def signal_name(code: int) -> str:
    """``SIGSEGV`` for 11, ``signal 99`` for an unknown number."""
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def log_tail(path: Path, lines: int = 6) -> str:
    """The last non-empty lines of a log, joined with `` | ``."""
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:] if line.strip())


def classify_exit(exit_: Exit, job: Job) -> tuple[str, str]:
    """(status, message) for a worker that ended without writing a record."""
    if exit_.timed_out == "prepare":
        return "timeout", (f"preparation (library import, first-use builds) took longer than "
                           f"the {job.prepare_timeout_s:g} s prepare limit; killed")
    if exit_.timed_out:
        return "timeout", f"no result within the {job.timeout_s:g} s timeout; killed"
    code = exit_.returncode
    if code is not None and code < 0:
        if -code == signal.SIGKILL:
            if exit_.oom_kills is None:
                return "oom", "worker killed by SIGKILL (most likely the host ran out of memory)"
            if exit_.oom_kills > 0:
                return "oom", "worker killed by SIGKILL: the kernel's OOM killer (out of memory)"
            # not the kernel: a user, a userspace OOM daemon, an engine stopping its task
            return "lost", ("worker killed by SIGKILL from outside, not by the kernel's OOM "
                            "killer; --resume runs it again")
        if -code == signal.SIGTERM:
            return "lost", "worker stopped by SIGTERM from outside; --resume runs it again"
        return "error", f"worker crashed with {signal_name(-code)}"
    if code == RESULT_NOT_WRITTEN_EXIT:
        # not the case's failure: the disk's (full, read-only); the next resume runs it again
        return "lost", "the worker could not write its result; --resume runs it again"
    return "error", f"worker exited with code {code} and no result"


def record_from_exit(job: Job, exit_: Exit, log_path: Path) -> CaseRecord:
    """The parent's record of a worker that died, hung or exited without a result."""
    status, message = classify_exit(exit_, job)
    tail = log_tail(log_path)
    if tail:
        message += f"; last output: {tail[-400:]}"
    return CaseRecord.for_job(job, status, message)

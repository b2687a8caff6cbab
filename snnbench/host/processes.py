"""Child processes that never outlive what started them: one way to start, stop and time out.

Every child snnbench starts (a worker, an installer, an import probe, a check step) runs in a
process group of its own, so that stopping it stops whatever it started in turn: a library's
compiler, a data-loader pool, uv's resolver. A timeout or an interrupt kills the whole group,
never the child alone (``subprocess.run`` would kill only the child and leave its children).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol


class Child(Protocol):
    """What these helpers use of a child process: a ``subprocess.Popen``, or a worker forked
    from a zygote (:class:`snnbench.executors.forkserver.ForkedProcess`)."""

    pid: int
    returncode: int | None

    def wait(self, timeout: float | None = None) -> int:
        """Reap it; raise ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        ...


@contextlib.contextmanager
def pinned_thread(cpus: Sequence[int]) -> Iterator[None]:
    """Run the block with this thread pinned to ``cpus`` (nothing when empty).

    A new process starts with the CPU affinity of the thread that spawns it, so the worker is
    pinned from its first instruction: the thread pools its libraries create at import
    inherit it. (A pre-exec hook would do the same but forces ``fork`` over ``vfork``, unsafe
    in a threaded parent.) On Linux the affinity of pid 0 is the calling thread's only.
    """
    if not cpus or not hasattr(os, "sched_getaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(cpus))
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def signal_group(proc: Child, sig: signal.Signals) -> None:
    """Send ``sig`` to ``proc``'s whole process group (gone already: nothing to do)."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        # no such group: the process has ended, or it was forked and has not made its own
        # session yet: then it alone (only while not reaped: its pid cannot be reused)
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, sig)
    except PermissionError:
        pass


def kill_group(proc: Child) -> None:
    """SIGKILL ``proc``'s whole process group and reap ``proc``."""
    signal_group(proc, signal.SIGKILL)
    proc.wait()


def session_members(session: int) -> list[int]:
    """Pids of the processes in session ``session`` (Linux ``/proc``; elsewhere none)."""
    members: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                # "pid (comm) state ppid pgrp session ...": comm may hold spaces and ")"
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if len(fields) > 3 and fields[3] == str(session):
            members.append(int(entry))
    return members


def kill_leftovers(proc: Child) -> None:
    """SIGKILL what a child started with ``start_new_session`` left behind once it exited:
    its process group and its session (a compile server the library daemonized, reparented
    to init, is still in both)."""
    signal_group(proc, signal.SIGKILL)
    for pid in session_members(proc.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def interruptible_children() -> Iterator[None]:
    """Within this block, a child started ignoring nothing it should hear: a process started
    with SIGINT ignored (a background job of a script: ``cmd &``) passes that on through exec,
    so the SIGINT of :func:`stop_group` would reach a child deaf to it (cut by SIGKILL 30 s
    later, its finished cases unsaid). A handler, unlike SIG_IGN, is reset to the default in
    the child. Only the main thread may change a handler; elsewhere this does nothing."""
    ignored = (threading.current_thread() is threading.main_thread()
               and signal.getsignal(signal.SIGINT) == signal.SIG_IGN)
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def stop_group(proc: subprocess.Popen[Any], grace_s: float) -> None:
    """SIGINT the group (a sweep then keeps what it finished), SIGKILL it ``grace_s`` later
    if it is still there; ``proc`` is reaped either way."""
    signal_group(proc, signal.SIGINT)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    finally:
        # its children may outlive a child that obeyed: the group goes in every case
        kill_group(proc)


def run_captured(argv: Sequence[str], timeout_s: float, *,
                 env: Mapping[str, str] | None = None,
                 pass_fds: Sequence[int] = ()) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in its own process group with no input, capturing its text output.

    Like ``subprocess.run(..., timeout=timeout_s)``, it raises ``subprocess.TimeoutExpired``
    (with what the command printed so far) after ``timeout_s`` seconds, but only once the
    whole group is killed; an interrupt kills the group too.
    """
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            pass_fds=tuple(pass_fds), start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        signal_group(proc, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        raise subprocess.TimeoutExpired(proc.args, timeout_s, stdout, stderr) from exc
    except BaseException:
        kill_group(proc)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)

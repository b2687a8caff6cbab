"""No process outlives its sweep: a worker dies with the process that started it.

* :func:`arm` runs first thing in the worker: it asks the kernel for ``SIGTERM`` when its
  parent dies (``PR_SET_PDEATHSIG``; the kernel sends it when the *thread* that started the
  worker exits, so that thread must wait for it: every executor's does), checks that the
  launcher did not die while the worker was starting, and handles ``SIGTERM`` (from the
  kernel, ``scancel`` or a user) by removing the job's folder and killing the worker's process
  group. A watch thread does the same when the worker is re-parented (a parent behind an
  ``apptainer`` starter, which the kernel's signal does not cover).
* :class:`Terminated` lets ``snnbench run`` treat ``SIGTERM`` like ``Ctrl-C``: finished cases
  are kept, running workers are killed, the user gets a ``--resume`` hint.

* :func:`start_reaper` starts a small guard beside a local sweep: when the sweep is killed
  outright (``SIGKILL``), it removes the job folders the sweep's own threads had made (one
  made for a worker not started yet, one a finished worker left for the sweep to read).

Only a worker stuck in native code that holds the GIL can escape the handler and the watch
thread; the next ``--resume`` removes its folder.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType

#: prctl(2) option: the signal a process gets when its parent dies (Linux only)
PR_SET_PDEATHSIG = 1
#: set by the launcher in the worker's environment: the pid of the process that started it
PARENT_PID_VAR = "SNNBENCH_PARENT_PID"
#: how often the worker's watch thread looks at its parent
WATCH_S = 0.2


class Terminated(KeyboardInterrupt):
    """``SIGTERM`` (or ``SIGHUP``) received: unwinds like ``Ctrl-C`` with its own exit code."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: the termination signals received (engines such as Ray turn any exception a signal handler
#: raises into a plain KeyboardInterrupt: the number survives here)
_RECEIVED: list[int] = []


def termination_signal(exc: BaseException) -> int | None:
    """The SIGTERM/SIGHUP behind ``exc`` (an interrupt), or None for a plain Ctrl-C."""
    if isinstance(exc, Terminated):
        return exc.signum
    return _RECEIVED[-1] if _RECEIVED else None


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread."""

    def handler(signum: int, frame: FrameType | None) -> None:
        _RECEIVED.append(signum)
        raise Terminated(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _load_prctl() -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl: Callable[..., int] = libc.prctl
    except (OSError, AttributeError):  # not Linux: the watch thread is the only guard
        return None
    return prctl


_PRCTL = _load_prctl()


def set_parent_death_signal(signum: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``signum`` to this process when its parent dies."""
    if _PRCTL is None:
        return False
    return _PRCTL(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0


def _die(job_dir: Path | None) -> None:
    """Remove the job's folder, then SIGKILL this worker's process group (or itself)."""
    if job_dir is not None:
        shutil.rmtree(job_dir, ignore_errors=True)
        with contextlib.suppress(OSError):  # the jobs folder, once its last job is gone
            job_dir.parent.rmdir()
    # the launcher starts each worker as a session leader: its group is the worker and the
    # helpers it spawned (compile workers...), and nothing else
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def arm(job_dir: Path | None) -> bool:
    """Tie this worker's life to its parent; returns False when not started by a launcher.

    Only acts when :data:`PARENT_PID_VAR` is set (the launcher sets it), so importing or
    calling the worker in a test process changes nothing.
    """
    expected = os.environ.get(PARENT_PID_VAR, "")
    if not expected.isdigit():
        return False
    launcher = int(expected)

    def on_term(signum: int, frame: FrameType | None) -> None:
        _die(job_dir)

    signal.signal(signal.SIGTERM, on_term)
    # Slurm sends the time-limit warning (USR2) to every process of the task: it is for the
    # task, which stops this worker itself; by default USR2 would kill the worker outright
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    set_parent_death_signal(signal.SIGTERM)
    parent = os.getppid()
    # started directly by the launcher, which is gone already: the kernel signal came too late.
    # A parent of 1 means re-parented to init, unless the launcher is PID 1 itself (a container
    # run without an init, ``podman run`` without ``--init``): then 1 is the launcher, alive
    if (parent == 1 and launcher != 1) or (parent != launcher and not alive(launcher)):
        _die(job_dir)

    def watch() -> None:
        while True:
            time.sleep(WATCH_S)
            if os.getppid() != parent:
                _die(job_dir)

    threading.Thread(target=watch, name="snnbench-lifeline", daemon=True).start()
    return True


def start_reaper(work_dir: Path, keys: Sequence[str]) -> subprocess.Popen[bytes]:
    """A guard process that removes the job folders ``keys`` under ``work_dir`` (and the
    folder, once empty) if this process dies without doing so. Stop it with :func:`stop_reaper`
    once the sweep has cleaned up itself."""
    return subprocess.Popen(
        [sys.executable, "-P", "-m", "snnbench.host.lifeline", str(work_dir), *keys],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, PARENT_PID_VAR: str(os.getpid())},
        start_new_session=True,  # a Ctrl-C meant for the sweep must not stop its guard
    )


def stop_reaper(reaper: subprocess.Popen[bytes]) -> None:
    """End the guard: the sweep is over and has removed its job folders itself."""
    with contextlib.suppress(OSError):
        reaper.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        reaper.wait(timeout=5)
        return
    reaper.kill()
    reaper.wait()


def _reap(work_dir: Path, keys: Sequence[str], parent: int) -> None:
    """Wait for ``parent`` to die, then remove what its job folders left."""
    while os.getppid() == parent:
        time.sleep(WATCH_S)
    # the parent died without cleaning up (a clean end would have stopped this guard first);
    # its workers die too and remove their own folders: a few passes catch a worker that was
    # still writing its result while the first one ran
    for _ in range(4):
        for key in keys:
            shutil.rmtree(work_dir / key, ignore_errors=True)
        with contextlib.suppress(OSError):
            work_dir.rmdir()  # only when empty: a cluster task may still own folders there
        time.sleep(0.25)


if __name__ == "__main__":
    _reap(Path(sys.argv[1]), sys.argv[2:], int(os.environ[PARENT_PID_VAR]))

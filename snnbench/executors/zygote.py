"""The zygote process: import a case's library once, then fork one worker per case.

Run as ``python -P -m snnbench.executors.zygote FD ADAPTER`` by
:class:`snnbench.executors.forkserver.Zygote`, under the case's own environment interpreter and
environment variables. It imports
:mod:`snnbench.measure.worker` and ``ADAPTER``'s library (what a worker would import first), checks
that forking is safe (:func:`fork_hazard`), says whether it is ready, and then only forks: each
child runs :func:`snnbench.measure.worker.main` on its job, as ``python -m snnbench.measure.worker
JOB.json`` would, and exits. The zygote itself never builds, verifies or times a case.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from types import FrameType

from snnbench.executors import forkserver
from snnbench.host import lifeline

#: how often the zygote looks at its parent (as a worker's watch thread does)
WATCH_S = lifeline.WATCH_S


def preimport(adapter: str) -> str:
    """Import the worker and ``adapter``'s library; "" when done, else why not."""
    try:
        import snnbench.measure.worker  # noqa: F401  (numpy, the harness: what every case imports)
        from snnbench.registry import get_entry

        get_entry(adapter).create().version()
    except BaseException as exc:  # a failed import: the cases spawn and report it themselves
        return f"the zygote could not import {adapter}'s library: {type(exc).__name__}: {exc}"
    return ""


def fork_hazard(wait_s: float = 2.0) -> str:
    """Why forking this process now would be unsafe, "" when it is safe.

    A Python thread other than this one (a plugin imported in a thread that has not ended yet:
    waited for up to ``wait_s``), a loaded CUDA driver, an initialised torch CUDA or a JAX
    backend: a forked child could inherit a held lock or a device context.
    """
    deadline = time.monotonic() + wait_s
    while threading.active_count() > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    if threading.active_count() > 1:
        names = ", ".join(t.name for t in threading.enumerate() if t is not threading.main_thread())
        return f"a Python thread runs in the zygote ({names})"
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            if any("libcuda.so" in line for line in maps):
                return "the CUDA driver is loaded in the zygote"
    except OSError:
        return "cannot read /proc/self/maps"
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_initialized():
        return "torch initialised CUDA in the zygote"
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is not None and getattr(bridge, "_backends", None):
        return "a JAX backend exists in the zygote"
    return ""


def guard() -> int:
    """Die with the process that started this one; its pid."""
    lifeline.set_parent_death_signal(signal.SIGKILL)
    parent = os.getppid()
    launcher = os.environ.get(lifeline.PARENT_PID_VAR, "")
    # the thread that started us may have ended before the signal was asked for
    # (a parent of 1 is the launcher itself only in a container run without an init)
    if (parent == 1 and launcher != "1") or (launcher.isdigit()
                                             and not lifeline.alive(int(launcher))):
        os._exit(0)
    return parent


def run_child(job_path: str, log_fd: int, sock: socket.socket, zygote: int) -> int:
    """In the forked child: become a worker as the launcher would have started it, then run
    the case; the worker's exit code."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the worker installs its own
    # tied to the zygote before anything else: until os.setsid below, this child has no
    # process group of its own for a stop to kill, and the zygote may be SIGKILLed meanwhile
    lifeline.set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != zygote:  # the zygote died while forking: so does its child
        return 1
    os.setsid()  # a session leader, as a spawned worker: a timeout kills its whole group
    sock.close()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(devnull)
    os.close(log_fd)
    numpy = sys.modules.get("numpy")
    if numpy is not None:  # its global generator, seeded afresh as in a new process
        numpy.random.seed()
    from snnbench.measure import worker

    sys.argv = [worker.__file__ or "snnbench.measure.worker", job_path]
    return worker.main([job_path])


def fork_child(job_path: str, log_fd: int, sock: socket.socket, zygote: int) -> int:
    """Fork the child of one case; its pid (in the zygote)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        code = run_child(job_path, log_fd, sock, zygote)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def exit_code(pid: int) -> int | None:
    """The exit code of child ``pid`` once it ended (left a zombie until reaped), else None."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return -int(signal.SIGKILL)
    if info is None or info.si_pid == 0:
        return None
    if info.si_code == os.CLD_EXITED:
        return info.si_status
    return -info.si_status


def serve(sock: socket.socket, parent: int) -> None:
    """Fork a child per request until the socket closes or the parent changes; then kill the
    children still running and reap them all."""
    running: dict[int, int] = {}  # pid -> its pidfd (-1 where none)
    ended: dict[int, int] = {}  # pid -> exit code, until the launcher lets it be reaped
    me = os.getpid()
    try:
        while os.getppid() == parent:
            watched: list[socket.socket | int] = [sock]
            watched += [fd for fd in running.values() if fd >= 0]
            ready, _, _ = select.select(watched, [], [], WATCH_S)
            for pid in list(running):
                code = exit_code(pid)
                if code is not None:
                    fd = running.pop(pid)
                    if fd >= 0:
                        os.close(fd)
                    ended[pid] = code
                    forkserver.send(sock, {"exited": pid, "returncode": code})
            if sock not in ready:
                continue
            message, passed = forkserver.receive(sock, 0)
            if message is None:
                return
            if "reap" in message:
                pid = int(message["reap"])
                if ended.pop(pid, None) is not None:
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(pid, 0)
            elif "poll" in message:
                # the launcher may have lost the exit message (interrupted as it arrived)
                pid = int(message["poll"])
                if pid in ended:
                    forkserver.send(sock, {"exited": pid, "returncode": ended[pid]})
            elif "run" in message and passed:
                pid = fork_child(str(message["run"]), passed[0], sock, me)
                for fd in passed:
                    os.close(fd)
                pidfd = -1
                with contextlib.suppress(OSError, AttributeError):
                    pidfd = os.pidfd_open(pid)
                running[pid] = pidfd
                forkserver.send(sock, {"started": pid})
            else:
                for fd in passed:
                    os.close(fd)
                forkserver.send(sock, {"failed": f"unknown request {message!r}"})
    finally:
        for pid in [*running, *ended]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            # and the child itself: one forked a moment ago has no group of its own yet
            # (killpg finds none), and waiting for it would wait for its whole case
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -P -m snnbench.executors.zygote FD ADAPTER``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not args[0].isdigit():
        print("usage: python -m snnbench.executors.zygote FD ADAPTER", file=sys.stderr)
        return 2
    parent = guard()
    sock = socket.socket(fileno=int(args[0]))

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)  # unwinds serve(), which kills the children

    signal.signal(signal.SIGTERM, on_term)
    why = preimport(args[1]) or fork_hazard()
    try:
        forkserver.send(sock, {"ready": not why, "why": why})
        if not why:
            serve(sock, parent)
    except (OSError, ValueError):
        pass  # the launcher went away: nothing to serve
    return 0


if __name__ == "__main__":
    code = main()
    # no interpreter shutdown: collecting a library's heap and running its exit hooks took
    # seconds under load while a stopping sweep waited for its zygotes (nothing of a case
    # was ever here to write out)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

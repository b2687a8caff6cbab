"""Pay a library's import once per sweep: a pre-imported parent (a *zygote*) forks each case.

A sweep's cases spend seconds importing torch and their library before they measure anything.
With the ``fork`` start method, the local executor starts one zygote per (interpreter,
environment, adapter, CPUs, executor thread): ``python -P -m snnbench.executors.zygote`` in the
case's own environment interpreter, with the environment variables the case's worker would get. It
imports :mod:`snnbench.measure.worker` and the adapter's library, touches no device, and from then
on only forks: one child per case, which runs exactly what ``python -m snnbench.measure.worker
JOB.json`` runs (:mod:`snnbench.executors.zygote`). The zygote never builds, verifies or times
anything, so a child that has run no case is as fresh as a new process: no state of an earlier case
reaches it.

Safety: the zygote says it is ready only when no Python thread but its main one runs, no CUDA
driver is loaded, torch has not initialised CUDA and no JAX backend exists (a CUDA context
must never cross a fork). Otherwise it says why not, and the cases of that zygote start as
before, each in a new process (``spawn``); so do cases whose zygote could not start at all.

Lifetime: a zygote dies with the thread that started it (the kernel's parent-death signal),
when its socket closes (the sweep's executor closed it, or the sweep died) and when its
parent changes; its children die with it (:func:`snnbench.host.lifeline.arm` in each child), so no
process outlives the sweep. Each child is a session leader, as a spawned worker is: a
timeout kills its whole process group.

The protocol is one JSON object per message on a ``SOCK_SEQPACKET`` socket pair; the case's
log travels as a file descriptor beside the message that starts the case.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from snnbench.host.processes import kill_group, pinned_thread

#: how a case's worker process was started (the case record's ``start``)
START_METHODS: tuple[str, ...] = ("fork", "spawn")
#: the largest message (a job path, a reason) either side sends
MESSAGE_MAX = 1 << 16
#: how often a waiting side looks at a stop request or a dead peer
POLL_S = 0.1


def fork_unsupported() -> str | None:
    """Why this machine cannot fork cases from a zygote, None when it can (Linux only: the
    parent-death signal, ``/proc`` and fd passing over ``SOCK_SEQPACKET`` are what keep the
    guarantees)."""
    if not sys.platform.startswith("linux"):
        return f"forking cases needs Linux (this is {sys.platform})"
    if not hasattr(os, "fork") or not hasattr(socket, "send_fds"):
        return "forking cases needs os.fork and socket.send_fds"
    return None


def send(sock: socket.socket, message: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
    """Send one message (and the file descriptors ``fds``)."""
    data = json.dumps(dict(message)).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.sendall(data)


def receive(sock: socket.socket,
            timeout_s: float | None) -> tuple[dict[str, Any] | None, list[int]]:
    """The next message and the file descriptors that came with it.

    Raises ``TimeoutError`` when none came within ``timeout_s`` (None: wait); the message is
    None when the other side closed its end (or died).
    """
    ready, _, _ = select.select([sock], [], [], timeout_s)
    if not ready:
        raise TimeoutError
    try:
        data, fds, _, _ = socket.recv_fds(sock, MESSAGE_MAX, 4)
    except (ConnectionError, OSError):
        return None, []
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ValueError(f"not a message: {message!r}")
    return message, list(fds)


class ForkedProcess:
    """A worker its zygote forked: what the launcher uses of a ``Popen`` (``pid``, ``wait``,
    ``returncode``).

    The zygote leaves the child a zombie until :meth:`release` (as a ``Popen`` child is until
    its parent waits): its pid and process group cannot be reused while the launcher still
    kills what it left behind.
    """

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self._zygote = zygote
        self.pid = pid
        self.args = zygote.argv
        self.returncode: int | None = None
        #: an interrupt (Ctrl-C's handler raises wherever the main thread is) may have landed
        #: after a message was received and before it was used: then ask the zygote again
        self._ask = False

    def poll(self) -> int | None:
        """The exit code once the child has ended, else None."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.wait(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child's end (``subprocess.TimeoutExpired`` after ``timeout``); its exit
        code, negative for a signal, as ``Popen.wait`` gives it."""
        if self.returncode is not None:
            return self.returncode
        try:
            return self._wait(timeout)
        except subprocess.TimeoutExpired:
            raise
        except BaseException:
            self._ask = True
            raise

    def _wait(self, timeout: float | None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._ask and not self._zygote.broken:
                # the exit may have been received by a wait that was interrupted before it
                # could use it: the zygote says it again (it keeps the child until reaped)
                with contextlib.suppress(OSError):
                    send(self._zygote.sock, {"poll": self.pid})
                self._ask = False
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                message, fds = receive(self._zygote.sock, left)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0) from None
            for fd in fds:
                os.close(fd)
            if message is None:
                # the zygote died (its children die with it, by their parent-death signal):
                # make sure this one is gone, and report it killed
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.pid, signal.SIGKILL)
                self._zygote.broken = "the zygote died"
                self.returncode = -int(signal.SIGKILL)
                return self.returncode
            if message.get("exited") == self.pid:
                self.returncode = int(message["returncode"])
                return self.returncode

    def release(self) -> None:
        """Let the zygote reap the ended child (once the launcher has killed what it left)."""
        if self.returncode is not None and not self._zygote.broken:
            with contextlib.suppress(OSError):
                send(self._zygote.sock, {"reap": self.pid})


class Zygote:
    """One pre-imported parent process and the socket to it."""

    def __init__(self, argv: list[str], proc: subprocess.Popen[bytes],
                 sock: socket.socket) -> None:
        self.argv = argv
        self.proc = proc
        self.sock = sock
        #: why it can no longer fork ("" while it can)
        self.broken = ""

    @classmethod
    def start(cls, python: str, adapter: str, env: Mapping[str, str], cpus: Sequence[int],
              timeout_s: float, stopped: Callable[[], bool] = lambda: False) -> Zygote | str:
        """Start a zygote for ``adapter`` under ``python`` and wait until it has imported its
        library; the zygote, or why there is none (it failed, refused, or took longer than
        ``timeout_s``; ``stopped`` returned True)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [python, "-P", "-m", "snnbench.executors.zygote", str(theirs.fileno()), adapter]
        try:
            # pinned like a spawned worker: the children inherit the zygote's affinity
            with pinned_thread(cpus):
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, env=dict(env),
                                        pass_fds=(theirs.fileno(),), start_new_session=True)
        except OSError as exc:
            ours.close()
            return f"the zygote could not start: {exc}"
        except BaseException:  # interrupted while starting it: it ends when it sees no socket
            ours.close()
            raise
        finally:
            theirs.close()
        zygote = cls(argv, proc, ours)
        try:
            why = zygote._wait_ready(timeout_s, stopped)
        except BaseException:  # an interrupt while it imports: it ends now, not with us
            zygote.close()
            raise
        if why:
            zygote.close()
            return why
        return zygote

    def _wait_ready(self, timeout_s: float, stopped: Callable[[], bool]) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            if stopped():
                return "stopped"
            if time.monotonic() > deadline:
                return f"the zygote did not import its library within {timeout_s:g} s"
            try:
                message, fds = receive(self.sock, POLL_S)
            except TimeoutError:
                continue
            except ValueError as exc:
                return f"the zygote answered nonsense: {exc}"
            for fd in fds:
                os.close(fd)
            if message is None:
                return f"the zygote exited with code {self.proc.wait()} before it was ready"
            if message.get("ready"):
                return ""
            return str(message.get("why") or "the zygote refused to fork")

    @property
    def alive(self) -> bool:
        """Whether it can still fork cases."""
        return not self.broken and self.proc.poll() is None

    def fork(self, job_path: str, log_fd: int) -> ForkedProcess | None:
        """Fork a child that runs the worker on ``job_path`` with its output on ``log_fd``;
        None when the zygote can no longer fork (the case then starts as a new process)."""
        if not self.alive:
            return None
        try:
            send(self.sock, {"run": job_path}, [log_fd])
            while True:
                message, fds = receive(self.sock, 30.0)
                for fd in fds:
                    os.close(fd)
                if message is None:
                    self.broken = "the zygote died"
                    return None
                if "started" in message:
                    return ForkedProcess(self, int(message["started"]))
                if "failed" in message:
                    self.broken = str(message["failed"])
                    return None
        except (OSError, TimeoutError, ValueError) as exc:
            self.broken = f"the zygote stopped answering: {exc}"
            return None
        except BaseException:
            # interrupted between the request and its answer: a child may run that nobody
            # here knows of; ending the zygote ends it (the sweep is stopping anyway)
            self.broken = "interrupted while forking"
            self.close()
            raise

    def hang_up(self) -> None:
        """Close its socket: the zygote kills its children and exits."""
        with contextlib.suppress(OSError):
            self.sock.close()

    def close(self) -> None:
        """End the zygote: closing its socket makes it kill its children and exit; SIGKILL
        (its process group) if it has not within a few seconds."""
        self.hang_up()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            kill_group(self.proc)


#: a zygote holds its libraries' memory for the whole sweep: none is started when less than
#: this share of the machine's memory (and at least MIN_AVAILABLE_BYTES) would be left
MIN_AVAILABLE_SHARE = 0.25
MIN_AVAILABLE_BYTES = 2 << 30


def memory_short(meminfo: str = "/proc/meminfo") -> str:
    """Why no further zygote should be started (memory is short), "" when one may."""
    values: dict[str, int] = {}
    try:
        with open(meminfo, encoding="ascii") as handle:
            for line in handle:
                name, _, rest = line.partition(":")
                fields = rest.split()
                if fields and fields[0].isdigit():
                    values[name] = int(fields[0]) * 1024
    except OSError:
        return ""
    total, available = values.get("MemTotal"), values.get("MemAvailable")
    if not total or available is None:
        return ""
    floor = max(MIN_AVAILABLE_BYTES, int(total * MIN_AVAILABLE_SHARE))
    if available < floor:
        return (f"memory is short ({available / 2**30:.1f} GiB available of "
                f"{total / 2**30:.1f}): no further zygote is kept")
    return ""


#: what tells zygotes apart: interpreter, adapter, environment variables, CPUs, thread
ZygoteKey = tuple[str, str, tuple[tuple[str, str], ...], tuple[int, ...], int]


class Zygotes:
    """The zygotes of one executor, started on a case's first use and closed with it.

    One per (interpreter, adapter, environment variables, CPUs, the thread that starts it): a
    zygote serves the cases of one executor thread, one at a time, and dies with that thread.
    A zygote that could not start (or refused) is remembered, and its cases spawn; so do the
    cases of one not started because memory is short (:func:`memory_short`).
    """

    def __init__(self) -> None:
        self._zygotes: dict[ZygoteKey, Zygote | str] = {}
        self._lock = threading.Lock()

    def fork(self, python: str, adapter: str, env: Mapping[str, str], cpus: Sequence[int],
             job_path: str, log_fd: int, timeout_s: float,
             stopped: Callable[[], bool] = lambda: False) -> ForkedProcess | str:
        """The case's worker forked from its zygote (started now if need be), or why it was
        not (the caller then spawns it)."""
        key: ZygoteKey = (python, adapter, tuple(sorted(env.items())), tuple(cpus),
                          threading.get_ident())
        with self._lock:
            zygote = self._zygotes.get(key)
        if isinstance(zygote, Zygote) and not zygote.alive:
            zygote.close()
            zygote = None
        if zygote is None:
            short = memory_short()
            if short:  # asked again at the next case: memory may be freed by then
                return short
            zygote = Zygote.start(python, adapter, env, cpus, timeout_s, stopped)
            if zygote == "stopped":
                return zygote
            with self._lock:
                self._zygotes[key] = zygote
        if isinstance(zygote, str):
            return zygote
        child = zygote.fork(job_path, log_fd)
        return child if child is not None else zygote.broken

    def close(self) -> None:
        """End every zygote (and with it any child still running)."""
        with self._lock:
            zygotes = [z for z in self._zygotes.values() if isinstance(z, Zygote)]
            self._zygotes.clear()
        for zygote in zygotes:  # all told at once: they end side by side, not one by one
            zygote.hang_up()
        for zygote in zygotes:
            zygote.close()

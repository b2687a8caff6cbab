"""``ray``: each case is one Ray task that runs the worker subprocess.

A case asks Ray for one GPU (``num_gpus=1``) on a CUDA sweep and none on a CPU sweep, and for
as many CPUs as it uses threads, so Ray never puts more cases on a node than it has room for.
Ray retries nothing: ``max_retries=0``, and tasks its memory monitor kills are not retried
either (``task_oom_retries=0``; Ray's default retries them forever). Ray's own failures map to
statuses: ``OutOfMemoryError`` → ``oom``; ``WorkerCrashedError``, a dead node or a cancelled
task → ``lost`` (``--resume`` runs it again); an exception in the task → ``error``.

The address comes from ``[executor.ray] address``, else ``RAY_ADDRESS``, else a new local Ray
instance is started (and shut down at the end). When Ray is already initialised in this
process (tests share one instance), that connection is used and left open.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snnbench.executors.base import ExecutorError, JobStarted
from snnbench.executors.remote import ClusterExecutor, Owner, beat, run_one
from snnbench.executors.settings import ExecutorSettings
from snnbench.records.contract import CaseRecord, Job

#: how long ray.wait blocks before the loop looks again (an interrupt waits at most this)
POLL_S = 0.25
#: seconds to reach an existing cluster before giving up
CONNECT_TIMEOUT_S = 30


@dataclass(frozen=True)
class RaySettings:
    """``[executor.ray]``: which Ray cluster runs the cases.

    ::

        [executor.ray]
        address = ""              # "" = $RAY_ADDRESS, else a new local Ray instance
    """

    address: str = ""


def import_ray() -> Any:
    """ray, or :class:`ExecutorError` naming the extra to install."""
    try:
        import ray
    except ImportError as exc:
        raise ExecutorError("--executor ray needs Ray: pip install 'snnbench[ray]'") from exc
    return ray


def failure_status(exc: BaseException, ray: Any) -> tuple[str, str]:
    """(status, message) for a case whose Ray task failed."""
    text = " ".join(str(exc).split())[:400]
    errors = ray.exceptions
    if isinstance(exc, errors.OutOfMemoryError):
        return "oom", f"Ray's memory monitor killed the task: {text}"
    if isinstance(exc, errors.WorkerCrashedError | errors.NodeDiedError
                  | errors.TaskCancelledError | errors.ObjectLostError):
        return "lost", f"Ray lost the task ({type(exc).__name__}): {text}"
    return "error", f"the Ray task failed: {text}"


class RayExecutor(ClusterExecutor[RaySettings]):
    """Runs every case as a Ray task; yields the records as the tasks finish."""

    name = "ray"
    settings_type = RaySettings

    @classmethod
    def recorded_commands(cls, settings: ExecutorSettings) -> list[str]:
        """A Ray address: Ray unpickles what the cluster sends back."""
        ray: RaySettings = settings.table(cls.name)
        return [f"Ray address {ray.address!r}"] if ray.address else []

    def __init__(self, settings: RaySettings, device: str = "cpu", threads: int = 1) -> None:
        super().__init__(settings, device, threads)
        self._started = False
        self._refs: dict[Any, Job] = {}

    @property
    def address(self) -> str:
        return self.settings.address or os.environ.get("RAY_ADDRESS", "")

    def check(self) -> None:
        """Connect now (or start a local instance), so an unreachable address writes nothing."""
        ray = import_ray()
        if ray.is_initialized():
            return
        # a task the memory monitor kills must become an `oom` row, not be retried forever;
        # the owner of a task decides its retries, and reads this when it connects
        os.environ.setdefault("RAY_task_oom_retries", "0")
        kwargs: dict[str, Any] = {"logging_level": "WARNING", "log_to_driver": False,
                                  "include_dashboard": False}
        # Ray retries an unreachable address forever, logging as it goes: look first
        reachable(self.address)
        # Ray installs its own SIGTERM handler (it logs and exits 1): ours must stay, so that
        # SIGTERM stops the sweep like Ctrl-C
        handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            if self.address:
                with _timeout_env(CONNECT_TIMEOUT_S), _quiet_stderr():
                    ray.init(address=self.address, **kwargs)
            else:
                ray.init(_system_config={"task_oom_retries": 0}, **kwargs)
            for sig, handler in handlers.items():
                if handler is not None and threading.current_thread() is threading.main_thread():
                    signal.signal(sig, handler)
        except Exception as exc:  # ConnectionError, TimeoutError, RuntimeError...
            with contextlib.suppress(Exception):
                ray.shutdown()
            where = self.address or "a new local instance"
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ExecutorError(f"--executor ray: cannot reach Ray at {where}: {first}") from exc
        self._started = True

    def describe(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "address": self.address or "local"}
        with contextlib.suppress(Exception):
            ray = import_ray()
            if ray.is_initialized():
                data["resources"] = {k: v for k, v in ray.cluster_resources().items()
                                     if k in ("CPU", "GPU")}
        return data

    def _concurrency(self, ray: Any) -> int:
        resources = ray.cluster_resources()
        if self.device == "cuda":
            return max(1, int(resources.get("GPU", 1)))
        return max(1, int(resources.get("CPU", 1)) // max(1, self.threads))

    def run(self, jobs: Iterable[Job], work_dir: Path, log_dir: Path,
            on_start: JobStarted | None = None) -> Iterator[CaseRecord]:
        ray = import_ray()
        jobs = list(jobs)
        if not jobs:
            return
        self.check()
        run_dir = work_dir.parent
        concurrency = self._concurrency(ray)
        task = ray.remote(run_one).options(
            num_gpus=1 if self.device == "cuda" else 0,
            num_cpus=self.threads,
            max_retries=0,
            retry_exceptions=False,
            name="snnbench-case",
            runtime_env={"env_vars": forwarded_env()},
        )
        owner = Owner.me()
        for job in jobs:
            self._refs[task.remote(str(run_dir), job.to_dict(), owner, concurrency)] = job
            if on_start is not None:
                on_start(job)
        while self._refs:
            beat(run_dir)  # tasks on other hosts stop when it goes stale
            ready, _ = ray.wait(list(self._refs), num_returns=1, timeout=POLL_S)
            for ref in ready:
                job = self._refs.pop(ref)
                try:
                    yield CaseRecord.from_dict(ray.get(ref), source="ray task")
                except ray.exceptions.RayError as exc:
                    status, message = failure_status(_cause(exc), ray)
                    record = CaseRecord.for_job(job, status, message)
                    record.placement = _placement(record, "ray", concurrency)
                    yield record

    def close(self) -> None:
        """Cancel the tasks that still run (their workers die with them) and disconnect."""
        ray = import_ray() if (self._refs or self._started) else None
        if ray is None:
            return
        for ref in list(self._refs):
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        if self._refs:
            with contextlib.suppress(Exception):
                ray.wait(list(self._refs), num_returns=len(self._refs), timeout=10)
        self._refs = {}
        if self._started:
            ray.shutdown()
            self._started = False


def forwarded_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """snnbench's own variables (``SNNBENCH_*``), which the manifest records and which can
    change a measurement: sbatch passes the submitting environment on, Ray does not."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if k.startswith("SNNBENCH_")}


def reachable(address: str, timeout_s: float = 5.0) -> None:
    """Raise :class:`ExecutorError` unless something listens at ``address`` (host:port)."""
    if not address or address in ("auto", "local"):
        return  # Ray finds (or starts) a cluster on this machine by itself
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ExecutorError(f"--executor ray: address {address!r} is not host:port")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise ExecutorError(f"--executor ray: cannot reach Ray at {address}: "
                            f"{exc.strerror or exc}") from exc


def _cause(exc: BaseException) -> BaseException:
    """A RayTaskError wraps the task's own exception; a Ray system error stands for itself."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


def _placement(record: CaseRecord, executor: str, concurrency: int) -> Any:
    import dataclasses

    return dataclasses.replace(record.placement, executor=executor, concurrency=concurrency)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence this process's stderr (file descriptor 2) in the block.

    While it connects, Ray's C++ client logs every failed attempt to stderr, once a second;
    a user gets one line from us instead (the exception's text). Only for connecting to an
    existing cluster: no Ray process is started meanwhile to inherit the silenced stream.
    """
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def _timeout_env(seconds: int) -> Iterator[None]:
    """Bound how long ray.init waits for an unreachable GCS (Ray reads it from the env)."""
    name = "RAY_gcs_rpc_server_connect_timeout_s"
    old = os.environ.get(name)
    os.environ[name] = str(seconds)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old

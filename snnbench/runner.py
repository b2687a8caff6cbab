"""The sweep: cases × adapters, one fresh worker process each, results stored as they finish.

A crash, abort, hang or out-of-memory kill costs one row, never the sweep: the parent reads the
worker's result file, and when there is none it classifies the exit (timeout, signal, exit
code) into a status with a message.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from snnbench.adapter import Adapter
from snnbench.config import RunConfig
from snnbench.environment import collect_environment, nvidia_gpus
from snnbench.errors import UserError
from snnbench.registry import AdapterEntry, discover
from snnbench.schema import FAILED_STATUSES
from snnbench.spec import NetworkSpec
from snnbench.storage import RunDir, StorageError, WriteError, case_key, interrupted_write


class SelectionError(UserError, ValueError):
    """An adapter selection names something that does not exist."""


@dataclass(frozen=True)
class Task:
    """One (adapter, variant, case) to run in its own process."""

    adapter: str
    variant: str
    spec: NetworkSpec
    device: str

    @property
    def key(self) -> str:
        return case_key(self.adapter, self.variant, self.device, self.spec.case_id)


@dataclass
class SweepOutcome:
    """What a sweep did: its folder, every record this invocation produced, and counts."""

    run_dir: Path
    run_id: str
    records: list[dict[str, Any]] = field(default_factory=list)
    skipped_existing: int = 0

    @property
    def failed(self) -> bool:
        return any(r["status"] in FAILED_STATUSES for r in self.records)


ProgressCallback = Callable[[str, int, int, Task, dict[str, Any] | None], None]


def new_run_id() -> str:
    """``YYYYmmdd-HHMMSS-xxxx``: sortable by time, unique by the random suffix."""
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def resolve_device(device: str) -> str:
    """``auto`` → ``cuda`` when NVML sees an NVIDIA GPU, else ``cpu``."""
    if device != "auto":
        return device
    return "cuda" if nvidia_gpus() else "cpu"


def select_adapters(
    names: tuple[str, ...], entries: dict[str, AdapterEntry]
) -> list[tuple[str, str | None]]:
    """Parse ``--adapters`` items (``name`` or ``name:variant``; ``all``) into pairs.

    A variant of None means every variant of that adapter.
    """
    chosen: list[tuple[str, str | None]] = []
    for item in names:
        item = item.strip()
        if not item:
            continue
        if item in ("all", "*"):
            chosen.extend((name, None) for name in entries)
            continue
        name, _, variant = item.partition(":")
        if name not in entries:
            known = ", ".join(entries) or "none installed"
            raise SelectionError(f"unknown adapter {name!r} (known: {known})")
        entry = entries[name]
        if variant and entry.adapter_class is not None and (
            variant not in entry.adapter_class.variants
        ):
            raise SelectionError(
                f"adapter {name!r} has no variant {variant!r} "
                f"(variants: {', '.join(entry.adapter_class.variants)})"
            )
        chosen.append((name, variant or None))
    seen: set[tuple[str, str | None]] = set()
    unique = []
    for pair in chosen:
        if pair not in seen:
            seen.add(pair)
            unique.append(pair)
    return unique


def plan_tasks(config: RunConfig, entries: dict[str, AdapterEntry], device: str) -> list[Task]:
    """Every task of the sweep, case-major so all adapters run one size before the next."""
    pairs = select_adapters(config.run.adapters, entries)
    tasks = []
    for spec in config.cases():
        for name, variant in pairs:
            cls = entries[name].adapter_class
            variants = (variant,) if variant else (cls.variants if cls else ("default",))
            for v in variants:
                tasks.append(Task(name, v, spec, device))
    return tasks


def thread_env(threads: int) -> dict[str, str]:
    """Environment giving every library the same CPU thread count."""
    env = {name: str(threads) for name in (
        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    )}
    env["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "")
        + f" --xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'}"
        + f" intra_op_parallelism_threads={threads}"
    ).strip()
    # JAX must not grab 75 % of the GPU up front: peaks would read as the preallocation
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    env["TF_CPP_MIN_LOG_LEVEL"] = env.get("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def _tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:] if line.strip())


def run_task(
    task: Task,
    config: RunConfig,
    log_dir: Path,
    adapter: Adapter | None,
    order: int = 0,
    extra_job: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run one task in a fresh worker process with a timeout; always returns a record."""
    settings = config.run
    job: dict[str, Any] = {
        "adapter": task.adapter,
        "variant": task.variant,
        "device": task.device,
        "spec": task.spec.to_dict(),
        "threads": settings.resolved_threads,
        "phases": list(settings.phases),
        "measure": {
            "repeats": settings.repeats,
            "max_repeats": settings.max_repeats,
            "min_time_s": settings.min_time_s,
            "warmup": settings.warmup,
            "warmup_s": settings.warmup_s,
        },
        "verify": settings.verify,
        "verify_time_steps": settings.verify_time_steps,
        "allow_mismatch": settings.allow_mismatch,
        "energy": settings.energy,
        "order": order,
        **(extra_job or {}),
    }
    env = dict(os.environ)
    env.update(thread_env(settings.resolved_threads))
    if adapter is not None:
        env.update(adapter.worker_env(task.variant))
    env["PYTHONUNBUFFERED"] = "1"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{task.key}.log"
    with tempfile.TemporaryDirectory(prefix="snnbench-job-") as tmp:
        job_path = Path(tmp) / "job.json"
        result_path = Path(tmp) / "result.json"
        job["result_path"] = str(result_path)
        job_path.write_text(json.dumps(job))
        started = time.perf_counter()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "snnbench.worker", str(job_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group: a timeout kills its children too
            )
            timed_out = False
            try:
                proc.wait(timeout=settings.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc)
            except BaseException:
                _kill_group(proc)
                raise
        wall_s = time.perf_counter() - started
        record = _read_result(result_path)
    if record is None:
        record = _failure_record(task, proc.returncode, timed_out, settings.timeout_s, log_path)
    record["order"] = order
    record["wall_s"] = wall_s
    record.setdefault("finished_utc", datetime.now(timezone.utc).isoformat())
    return record


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _read_result(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _failure_record(
    task: Task, returncode: int | None, timed_out: bool, timeout_s: float, log_path: Path
) -> dict[str, Any]:
    tail = _tail(log_path)
    if timed_out:
        status, message = "timeout", f"no result within the {timeout_s:g} s timeout; killed"
    elif returncode is not None and returncode < 0:
        sig = -returncode
        if sig == signal.SIGKILL:
            status = "oom"
            message = "worker killed by SIGKILL (most likely the host ran out of memory)"
        else:
            status, message = "error", f"worker crashed with {_signal_name(sig)}"
    else:
        status, message = "error", f"worker exited with code {returncode} and no result"
    if tail:
        message += f"; last output: {tail[-400:]}"
    return _parent_record(task, status, message)


def _parent_record(task: Task, status: str, message: str, library: str = "") -> dict[str, Any]:
    """A row written by the parent, not a worker (broken plugin, statically skipped case, a
    worker that died without a result)."""
    return {
        "adapter": task.adapter,
        "variant": task.variant,
        "device": task.device,
        "spec": task.spec.to_dict(),
        "case_id": task.spec.case_id,
        "status": status,
        "message": message,
        "library": library,
        "library_version": None,
        "finished_utc": datetime.now(timezone.utc).isoformat(),
    }


def execute(
    tasks: list[Task],
    config: RunConfig,
    run_dir: RunDir,
    run_id: str,
    entries: dict[str, AdapterEntry],
    progress: ProgressCallback | None = None,
) -> Iterator[dict[str, Any]]:
    """Run pending tasks, storing each record and rebuilding the tables as it finishes."""
    done = run_dir.finished_keys()
    pending = [t for t in tasks if t.key not in done]
    total = len(pending)
    for index, task in enumerate(pending, start=1):
        if progress:
            progress("start", index, total, task, None)
        entry = entries[task.adapter]
        adapter: Adapter | None = None
        record: dict[str, Any]
        try:
            adapter = entry.create()
        except Exception as exc:
            record = _parent_record(task, "unavailable", str(exc))
        else:
            # static capability check: no process (and no library import) needed to skip
            reason = adapter.reason_skipped(task.spec, task.device, task.variant)
            if reason:
                record = _parent_record(task, "skipped", reason, adapter.library)
            else:
                record = run_task(task, config, run_dir.path / "logs", adapter, order=index)
        record["order"] = index
        run_dir.write_case(record)
        run_dir.rebuild_tables(run_id)
        if progress:
            progress("done", index, total, task, record)
        yield record


def start_run(
    config: RunConfig,
    out: Path | None,
    results_root: Path,
    resume: bool,
    progress: ProgressCallback | None = None,
) -> SweepOutcome:
    """Create (or resume) a run folder and run the sweep into it."""
    entries = discover()
    if resume:
        if out is None:
            raise StorageError("--resume needs --out pointing at the run folder to finish")
        run_dir = RunDir.open_existing(out)
        run_dir.lock()
        try:
            manifest = run_dir.read_manifest()
            run_id = str(manifest["run_id"])
            config = RunConfig.from_dict(manifest["config"], source=f"{out}/manifest.json")
            device = str(manifest["settings"]["device"])
        except BaseException:  # a damaged manifest: release (and remove) the lock
            run_dir.unlock()
            raise
    else:
        run_id = new_run_id()
        device = resolve_device(config.run.device)
        tasks_probe = plan_tasks(config, entries, device)  # selection errors before any write
        del tasks_probe
        run_dir = RunDir.create(out or results_root / run_id)
        run_dir.lock()
        manifest = {
            "run_id": run_id,
            "created_utc": datetime.now(timezone.utc).isoformat(),
            "finished_utc": None,
            **collect_environment(),
            "settings": {
                "device": device,
                "threads": config.run.resolved_threads,
                "matmul_precisions": sorted({s.matmul_precision for s in config.cases()}),
                "tf32": any(s.matmul_precision == "tf32" for s in config.cases()),
                "seeds": sorted({s.seed for s in config.cases()}),
                "thread_env": thread_env(config.run.resolved_threads),
            },
            "config": config.to_dict(),
            "command": sys.argv,
        }
        try:
            run_dir.write_manifest(manifest)
        except BaseException:  # e.g. a full disk: release (and remove) the lock
            run_dir.unlock()
            raise
    outcome = SweepOutcome(run_dir=run_dir.path, run_id=run_id)
    try:
        tasks = plan_tasks(config, entries, device)
        outcome.skipped_existing = len({t.key for t in tasks} & run_dir.finished_keys())
        for record in execute(tasks, config, run_dir, run_id, entries, progress):
            outcome.records.append(record)
        run_dir.rebuild_tables(run_id)
        manifest = run_dir.read_manifest()
        manifest["finished_utc"] = datetime.now(timezone.utc).isoformat()
        manifest.pop("schema_version", None)
        run_dir.write_manifest(manifest)
    except (WriteError, OSError) as exc:
        # a full disk, a quota, a folder gone read-only: the records written so far are whole
        raise interrupted_write(exc, run_dir.path) from exc
    except KeyboardInterrupt as exc:
        exc.run_dir = run_dir.path  # type: ignore[attr-defined]  # for the CLI's resume hint
        raise
    finally:
        run_dir.unlock()
    return outcome

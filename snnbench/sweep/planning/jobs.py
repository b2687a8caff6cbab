"""Jobs from tasks: the settings each worker gets, the sweep's order, and the static skips
(rows decided without a process)."""

from __future__ import annotations

import os

from snnbench.plugin import Adapter
from snnbench.records.contract import CaseRecord, Job, JobMode, LibraryEnvironment, now_utc
from snnbench.registry import AdapterEntry
from snnbench.sweep.config import RunSettings
from snnbench.sweep.planning.tasks import Task

#: ``[run] thread_wait`` → OMP_WAIT_POLICY (read by libgomp, which torch's oneDNN and MKL
#: run on, and by Intel's libiomp); ``library`` sets nothing
WAIT_POLICIES: dict[str, str] = {"passive": "PASSIVE", "active": "ACTIVE"}


def thread_env(threads: int, wait: str = "passive") -> dict[str, str]:
    """Environment giving every library the same CPU thread count and wait policy.

    Passive waiting by default: with libgomp's default, a thread that finishes its share of a
    GEMM spins on its core before it sleeps; when another process holds the core its
    team-mate needs, the team-mate gets a core back only at a scheduler tick (4 ms at HZ=250),
    so times came in steps of 4-8 ms. A sleeping thread frees its core at once
    (benchmarks/cpu_contention.py, docs/methodology.md).
    """
    env = {name: str(threads) for name in (
        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    )}
    if wait in WAIT_POLICIES:
        env["OMP_WAIT_POLICY"] = WAIT_POLICIES[wait]
    env["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "")
        + f" --xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'}"
        + f" intra_op_parallelism_threads={threads}"
    ).strip()
    # JAX must not grab 75 % of the GPU up front: peaks would read as the preallocation
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    env["TF_CPP_MIN_LOG_LEVEL"] = env.get("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def make_job(
    task: Task,
    settings: RunSettings,
    adapter: Adapter | None,
    order: int = 0,
    mode: JobMode = "run",
    dump_path: str = "",
    replicate: int = 0,
) -> Job:
    """The one place a :class:`~snnbench.records.contract.Job` is built from a task and the
    settings."""
    env = thread_env(settings.resolved_threads, settings.thread_wait)
    if adapter is not None:
        env.update(adapter.worker_env(task.variant))
    return Job(
        adapter=task.adapter,
        variant=task.variant,
        device=task.device,
        workload=task.workload,
        mode=mode,
        threads=settings.resolved_threads,
        phases=tuple(settings.phases),
        measure=settings.measure_settings,
        verify=settings.verify,
        verify_time_steps=settings.verify_time_steps,
        allow_mismatch=settings.allow_mismatch,
        energy=settings.energy,
        instructions=settings.instructions and task.device == "cpu",
        order=order,
        dump_path=dump_path,
        timeout_s=settings.timeout_s,
        prepare_timeout_s=max(settings.prepare_timeout_s, settings.timeout_s),
        env=tuple(sorted(env.items())),
        environment=task.environment,
        replicate=replicate,
    )


def parent_record(job: Job, status: str, message: str, library: str = "") -> CaseRecord:
    """A record written by the parent, not a worker (broken plugin, statically skipped case)."""
    record = CaseRecord.for_job(job, status, message, library)
    record.finished_utc = now_utc()
    return record


def static_record(job: Job, entries: dict[str, AdapterEntry]) -> CaseRecord | None:
    """The record of a job that needs no worker, or None when it must run.

    A broken plugin or an environment that could not be built is ``unavailable`` and a spec
    the adapter cannot honour is ``skipped``, all decided here without a process and without
    importing the library.
    """
    try:
        adapter = entries[job.adapter].create()
    except Exception as exc:  # a broken plugin is a row, never a crash
        return parent_record(job, "unavailable", str(exc))
    return static_adapter_record(job, adapter)


def static_adapter_record(job: Job, adapter: Adapter) -> CaseRecord | None:
    """:func:`static_record` once ``adapter`` is created: ``unavailable`` for an environment
    that could not be built, ``skipped`` for a spec it cannot honour, else None."""
    if job.environment.error:
        return parent_record(job, "unavailable", environment_failure(job.environment),
                             adapter.library)
    reason = static_skip_reason(adapter, job)
    if reason:
        return parent_record(job, "skipped", reason, adapter.library)
    return None


def environment_failure(environment: LibraryEnvironment) -> str:
    """The message of a row whose environment could not be built."""
    return f"environment {environment.name} could not be built: {environment.error}"


def static_skip_reason(adapter: Adapter, job: Job) -> str | None:
    """Why ``job`` is skipped, as far as this process can tell.

    In an overlay the library is another version than the one this process sees, so only the
    adapter's declared capabilities are checked here; the worker, inside the overlay, applies
    the adapter's full rule (which may read the library's version).
    """
    if job.environment.name:
        return Adapter.reason_skipped(adapter, job.workload, job.device, job.variant)
    return adapter.reason_skipped(job.workload, job.device, job.variant)


def replicate_order(tasks: list[Task], replicates: int) -> list[tuple[Task, int]]:
    """(task, replicate) in sweep order: case by case, each case's tasks ``replicates``
    times, in reverse order for every odd replicate (ABBA: A B, B A, A B...), so that a drift
    of the machine during a case weighs on every adapter alike."""
    cases: dict[str, list[Task]] = {}
    for task in tasks:
        cases.setdefault(task.workload.case_id, []).append(task)
    return [(task, r) for group in cases.values() for r in range(replicates)
            for task in (group if r % 2 == 0 else group[::-1])]


def plan_jobs(tasks: list[Task], settings: RunSettings,
              entries: dict[str, AdapterEntry]) -> list[Job]:
    """One job per task and replicate (``settings.replicates`` fresh processes per case,
    :func:`replicate_order`), numbered in sweep order."""
    jobs: list[Job] = []
    adapters: dict[str, Adapter | None] = {}
    for order, (task, replicate) in enumerate(replicate_order(tasks, settings.replicates),
                                              start=1):
        if task.adapter not in adapters:
            try:
                adapters[task.adapter] = entries[task.adapter].create()
            except Exception:  # reported by static_record
                adapters[task.adapter] = None
        jobs.append(make_job(task, settings, adapters[task.adapter], order,
                             replicate=replicate))
    return jobs

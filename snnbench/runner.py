"""The sweep: cases × adapters, one fresh worker process each, results stored as they finish.

A crash, abort, hang or out-of-memory kill costs one row, never the sweep: the parent reads the
worker's result file, and when there is none it classifies the exit (timeout, signal, exit
code) into a status with a message.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import shutil
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from snnbench.adapter import Adapter
from snnbench.config import RunConfig, RunSettings, check_variables
from snnbench.contract import CaseRecord, Job, JobMode, LibraryEnvironment, case_key, now_utc
from snnbench.environment import collect_environment, nvidia_gpus
from snnbench.errors import UserError
from snnbench.executors import Executor, ExecutorSettings, make_executor
from snnbench.executors.placement import hostname
from snnbench.executors.plugins import recorded_commands as recorded_commands
from snnbench.libenv import (
    Base,
    BuildSettings,
    BuiltEnvironment,
    EnvironmentRequest,
    EnvironmentSpecError,
    build_all,
    looks_like_version,
    prepare,
    version_request,
)
from snnbench.lifeline import start_reaper, stop_reaper, termination_signal
from snnbench.machines import read_machine_records, write_machine_record
from snnbench.overhead import NULL, PROBES
from snnbench.preflight import NoiseVerdict, noise_verdict, preflight_check
from snnbench.registry import AdapterEntry, discover
from snnbench.schema import FAILED_STATUSES, JOBS_DIR, RETRY_STATUSES
from snnbench.spec import NetworkSpec
from snnbench.storage import RunDir, StorageError, WriteError, interrupted_write


class SelectionError(UserError, ValueError):
    """An adapter selection names something that does not exist."""


@dataclass(frozen=True)
class Selection:
    """One ``--adapters`` item: an adapter, one variant or all (None), and its environment."""

    adapter: str
    variant: str | None = None
    #: None for the base environment
    environment: EnvironmentRequest | None = None


@dataclass(frozen=True)
class Task:
    """One (adapter, variant, environment, case) to run in its own process."""

    adapter: str
    variant: str
    spec: NetworkSpec
    device: str
    #: the base environment, or an overlay (its ``python`` set once it is built)
    environment: LibraryEnvironment = field(default_factory=LibraryEnvironment)

    @property
    def key(self) -> str:
        return case_key(self.adapter, self.variant, self.device, self.spec.case_id,
                        self.environment.name)


@dataclass
class SweepOutcome:
    """What a sweep did: its folder, every record this invocation produced, and counts."""

    run_dir: Path
    run_id: str
    records: list[CaseRecord] = field(default_factory=list)
    skipped_existing: int = 0
    #: whether the machine was noisy before, during or after the sweep, and why
    noise: NoiseVerdict = field(default_factory=NoiseVerdict)

    @property
    def failed(self) -> bool:
        """True when a case of this invocation failed (error, oom, timeout, mismatch)."""
        return any(r.status in FAILED_STATUSES for r in self.records)


#: progress(event, index, total, job, record): event "start" (record None) or "done"
ProgressCallback = Callable[[str, int, int, Job, CaseRecord | None], None]


def new_run_id() -> str:
    """``YYYYmmdd-HHMMSS-xxxx``: sortable by time, unique by the random suffix."""
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def resolve_device(device: str) -> str:
    """``auto`` → ``cuda`` when NVML sees an NVIDIA GPU, else ``cpu``."""
    if device != "auto":
        return device
    return "cuda" if nvidia_gpus() else "cpu"


def _split_item(item: str) -> tuple[str, str, str]:
    """``name[:variant][@env]`` (or ``name@env:variant``) → (name, variant, env)."""
    left, _, env = item.partition("@")
    name, _, variant = left.partition(":")
    if ":" in env:
        if variant:
            raise SelectionError(f"{item!r}: give the variant once (adapter:variant@version)")
        env, _, variant = env.partition(":")
    if "@" in item and not env:
        raise SelectionError(f"{item!r}: nothing after '@' (adapter@VERSION or "
                             "adapter@ENVIRONMENT)")
    return name.strip(), variant.strip(), env.strip()


def _environment_of(item: str, name: str, env: str, entries: dict[str, AdapterEntry],
                    environments: Mapping[str, tuple[str, ...]]) -> EnvironmentRequest | None:
    if not env:
        return None
    if env in environments:
        return EnvironmentRequest(name=env, requirements=tuple(environments[env]))
    if not looks_like_version(env):
        known = ", ".join(environments) or "none in this config"
        raise SelectionError(f"{item!r}: {env!r} is neither a version nor a configured "
                             f"environment ([environments] tables: {known})")
    cls = entries[name].adapter_class
    if cls is None:
        raise SelectionError(f"{item!r}: adapter {name!r} failed to load, so its library is "
                             f"unknown: {entries[name].error}")
    try:
        return version_request(name, cls.library, env)
    except EnvironmentSpecError as exc:
        raise SelectionError(str(exc)) from exc


def select_adapters(
    names: tuple[str, ...], entries: dict[str, AdapterEntry],
    environments: Mapping[str, tuple[str, ...]] | None = None,
    probes: bool = True,
) -> list[Selection]:
    """Parse ``--adapters`` items into selections.

    An item is ``all``, or ``name[:variant][@VERSION|@ENVIRONMENT]``: ``snntorch@0.9.4`` runs
    the adapter in an environment pinning its library to 0.9.4; ``spikingjelly:torch@legacy``
    in the ``[environments.legacy]`` table of the config. A variant of None means every variant.
    ``probes=False``: ``all`` leaves out the harness probes (``null``), which a sweep adds
    once by itself (``[run] overhead_probe``) rather than at every case.
    """
    environments = environments or {}
    chosen: list[Selection] = []
    for item in names:
        item = item.strip()
        if not item:
            continue
        if item in ("all", "*"):
            chosen.extend(Selection(name) for name in entries if probes or name not in PROBES)
            continue
        name, variant, env = _split_item(item)
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
        chosen.append(Selection(name, variant or None,
                                _environment_of(item, name, env, entries, environments)))
    return list(dict.fromkeys(chosen))


def plan_tasks(config: RunConfig, entries: dict[str, AdapterEntry], device: str) -> list[Task]:
    """Every task of the sweep, case-major so all adapters run one size before the next.

    Tasks of an environment carry its name and requirements; :func:`build_environments`
    gives them the interpreter to run under.
    """
    selections = select_adapters(config.run.adapters, entries, config.environments,
                                 probes=False)
    tasks: list[Task] = []
    for spec in config.cases():
        for sel in selections:
            cls = entries[sel.adapter].adapter_class
            variants = (sel.variant,) if sel.variant else (cls.variants if cls else ("default",))
            env = (LibraryEnvironment(sel.environment.name, sel.environment.requirements)
                   if sel.environment else LibraryEnvironment())
            tasks.extend(Task(sel.adapter, v, spec, device, env) for v in variants)
    tasks = list(dict.fromkeys(tasks))
    return with_overhead_probe(tasks, entries) if config.run.overhead_probe else tasks


def with_overhead_probe(tasks: list[Task], entries: dict[str, AdapterEntry]) -> list[Task]:
    """``tasks`` with one ``null`` task (the harness-overhead probe) per device, at the
    smallest case (fewest n·n·B·T·layers), placed first among that case's tasks; unchanged
    when the sweep already runs ``null`` on that device or no ``null`` adapter is installed."""
    if NULL not in entries:
        return tasks
    out = list(tasks)
    for device in dict.fromkeys(t.device for t in tasks):
        mine = [t for t in out if t.device == device]
        if any(t.adapter == NULL for t in mine):
            continue
        smallest = min(mine, key=lambda t: (t.spec.neurons ** 2 * t.spec.batch_size
                                            * t.spec.time_steps * t.spec.layers))
        out.insert(out.index(smallest), Task(NULL, "default", smallest.spec, device))
    return out


#: notify(line): one line about the environments being prepared (built, reused, failed)
NotifyCallback = Callable[[str], None]


def build_environments(tasks: list[Task], settings: RunSettings,
                       notify: NotifyCallback | None = None
                       ) -> tuple[list[Task], list[BuiltEnvironment]]:
    """Resolve, build (or reuse) every environment the tasks need, in this process.

    Raises :class:`~snnbench.libenv.EnvironmentSpecError` (exit 2) for requirements that cannot
    be resolved, before any case runs. A build that fails is not raised: its tasks carry the
    installer's error and become ``unavailable`` rows. Returns the tasks, each with its
    environment's interpreter, and what was built.
    """
    requests = [EnvironmentRequest(t.environment.name, t.environment.requirements)
                for t in tasks if t.environment.name]
    if not requests:
        return tasks, []
    built = build_requests(requests, BuildSettings.from_run(settings.env_cache,
                                                            settings.wheelhouse), notify)
    resolved = {
        name: LibraryEnvironment(name, env.request.requirements, env.python, env.resolved,
                                 env.error)
        for name, env in built.items()
    }
    tasks = [replace(t, environment=resolved[t.environment.name]) if t.environment.name else t
             for t in tasks]
    return tasks, list(built.values())


def build_requests(requests: list[EnvironmentRequest], settings: BuildSettings,
                   notify: NotifyCallback | None = None) -> dict[str, BuiltEnvironment]:
    """Resolve (exit 2 on bad input) then build or reuse each environment; name → result."""
    requests = list(dict.fromkeys(requests))
    if not requests:
        return {}
    base = Base.current()
    plans = prepare(requests, settings, base)
    if notify:
        for name, plan in plans.items():
            if plan.pins:
                notify(f"environment {name}: building in {settings.cache_dir} "
                       f"({', '.join(plan.pins)})")
    built = build_all(plans, settings, base)
    if notify:
        for env in built.values():
            notify(_environment_line(env))
    return built


def _environment_line(env: BuiltEnvironment) -> str:
    name = env.request.name
    if env.error:
        return f"environment {name}: build failed, its cases are unavailable: {env.error}"
    how = "reused from the cache" if env.reused else f"built in {env.build_s:.1f} s"
    text = f"environment {name}: {how} ({', '.join(env.resolved)})"
    for warning in env.warnings:
        text += f"; warning: {warning}"
    return text


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
    """The one place a :class:`~snnbench.contract.Job` is built from a task and the settings."""
    env = thread_env(settings.resolved_threads, settings.thread_wait)
    if adapter is not None:
        env.update(adapter.worker_env(task.variant))
    return Job(
        adapter=task.adapter,
        variant=task.variant,
        device=task.device,
        spec=task.spec,
        mode=mode,
        threads=settings.resolved_threads,
        phases=tuple(settings.phases),
        measure=settings.measure_settings,
        verify=settings.verify,
        verify_time_steps=settings.verify_time_steps,
        allow_mismatch=settings.allow_mismatch,
        energy=settings.energy,
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
        return Adapter.reason_skipped(adapter, job.spec, job.device, job.variant)
    return adapter.reason_skipped(job.spec, job.device, job.variant)


def replicate_order(tasks: list[Task], replicates: int) -> list[tuple[Task, int]]:
    """(task, replicate) in sweep order: case by case, each case's tasks ``replicates``
    times, in reverse order for every odd replicate (ABBA: A B, B A, A B...), so that a drift
    of the machine during a case weighs on every adapter alike."""
    cases: dict[str, list[Task]] = {}
    for task in tasks:
        cases.setdefault(task.spec.case_id, []).append(task)
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


def retry_attempts(run_dir: RunDir) -> dict[str, int]:
    """Keys whose record says the engine lost the case, with the attempt that lost it."""
    attempts: dict[str, int] = {}
    for path in sorted(run_dir.cases_dir.glob("*.json")):
        with contextlib.suppress(UserError):
            record = CaseRecord.read(path)
            if record.status in RETRY_STATUSES:
                attempts[path.stem] = record.placement.attempt
    return attempts


def execute(
    jobs: list[Job],
    run_dir: RunDir,
    run_id: str,
    entries: dict[str, AdapterEntry],
    executor: Executor,
    progress: ProgressCallback | None = None,
) -> Iterator[CaseRecord]:
    """Run the jobs the folder lacks, storing each record and rebuilding the tables as it
    arrives (in the order the executor finishes them). A case an engine lost runs again, as
    its next attempt."""
    lost = retry_attempts(run_dir)
    done = run_dir.finished_keys() - set(lost)
    pending = []
    for job in jobs:
        if job.key in lost:
            job = dataclasses.replace(job, placement=dataclasses.replace(
                job.placement, attempt=lost[job.key] + 1))
        if job.key not in done:
            pending.append(job)
    total = len(pending)
    finished = 0
    #: cases started so far (or decided without running): the number a "start" shows
    begun = 0

    def store(job: Job, record: CaseRecord) -> CaseRecord:
        nonlocal finished
        finished += 1
        run_dir.write_case(record)
        run_dir.rebuild_tables(run_id)
        if progress:
            progress("done", finished, total, job, record)
        return record

    runnable: list[Job] = []
    for job in pending:
        record = static_record(job, entries)
        if record is None:
            runnable.append(job)
        else:
            begun += 1
            # decided here without running: no case ran beside it
            record.placement = dataclasses.replace(record.placement, executor=executor.name,
                                                   concurrency=0)
            yield store(job, record)
    by_key = {job.key: job for job in runnable}

    def started(job: Job) -> None:
        # counted as cases start (a cluster starts them when it can, not all at submission)
        nonlocal begun
        begun += 1
        if progress:
            progress("start", min(begun, total), total, job, None)

    work_dir = run_dir.path / JOBS_DIR
    # this process's threads make the local job folders: were it killed outright, its guard
    # removes them (cluster tasks own theirs and may go on writing after the sweep stopped)
    reaper = (start_reaper(work_dir, [job.key for job in runnable])
              if runnable and executor.runs_on_this_machine else None)
    records = executor.run(runnable, work_dir, run_dir.path / "logs", started)
    try:
        for record in records:
            yield store(by_key.get(record.key, runnable[0]), record)
    finally:
        # an interrupt or a failure here stops the executor's running cases at once
        with contextlib.suppress(Exception):
            records.close()  # type: ignore[attr-defined]
        executor.close()
        clean_work_dir(work_dir, [job.key for job in runnable], executor.work_files)
        if reaper is not None:
            stop_reaper(reaper)


def clean_work_dir(work_dir: Path, keys: list[str], files: tuple[str, ...] = ()) -> None:
    """Once the executor has stopped: remove what its cases left in the jobs folder (an
    engine may SIGKILL a worker, which then cannot clean up: Ray does on a cancel), then the
    folder itself when nothing else is in it. ``files``: what the executor keeps there beside
    the case folders (:attr:`~snnbench.executors.base.Executor.work_files`)."""
    for key in keys:
        shutil.rmtree(work_dir / key, ignore_errors=True)
    for name in files:
        with contextlib.suppress(OSError):
            (work_dir / name).unlink()
    with contextlib.suppress(OSError):
        work_dir.rmdir()  # only when empty: a cluster task may still own folders there


def choose_executor(settings: ExecutorSettings, device: str, threads: int,
                    notify: NotifyCallback | None = None) -> Executor:
    """The executor for a sweep, checked before anything is written (exit 2 when unusable)."""
    executor = make_executor(settings, device, threads)
    executor.notify = notify
    executor.check()
    return executor


def share_threads(config: RunConfig, executor: Executor) -> RunConfig:
    """``config`` with each case's threads capped to its share of the cores (``--jobs``)."""
    share = executor.threads_per_case()
    if share is None or config.run.resolved_threads <= share:
        return config
    return dataclasses.replace(config, run=dataclasses.replace(config.run, threads=share))


def keep_recorded_threads(config: RunConfig, manifest: dict[str, Any]) -> RunConfig:
    """A resumed run's config with the thread count its manifest recorded (``threads = 0``
    means every core: another machine, or another CPU set, would give another number)."""
    recorded = manifest.get("settings", {}).get("threads")
    if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded > 0:
        return dataclasses.replace(config, run=dataclasses.replace(config.run, threads=recorded))
    return config


def refuse_changed_threads(shared: RunConfig, config: RunConfig, folder: Path) -> None:
    """Refuse a resume whose executor would run cases with fewer threads than the run recorded
    (``--jobs`` shares the cores): its rows would not be comparable with the finished ones."""
    if shared.run.resolved_threads != config.run.resolved_threads:
        raise StorageError(
            f"{folder} was run with {config.run.resolved_threads} threads per case; these "
            f"executor options would give {shared.run.resolved_threads} (--jobs shares the "
            "cores), which changes what is measured: resume with fewer --jobs, or on a "
            "machine with more cores")


def start_run(
    config: RunConfig,
    out: Path | None,
    results_root: Path,
    resume: bool,
    progress: ProgressCallback | None = None,
    executor: Executor | None = None,
    notify: NotifyCallback | None = None,
    executor_settings: ExecutorSettings | None = None,
    trust_folder: bool = False,
) -> SweepOutcome:
    """Create (or resume) a run folder and run the sweep into it.

    Library environments are resolved and built (or reused) before the run folder is touched
    and before any case runs. The executor is ``executor``, else built from
    ``executor_settings``, else from the config's ``[executor]`` table (a resumed run: the one
    given now, any executor works; the recorded one only when it runs no command text the
    folder names, or with ``trust_folder``).
    """
    check_variables()
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
            if "thread_wait" not in manifest["config"].get("run", {}):
                # written before the wait policy existed: its cases ran with the libraries' own
                config = dataclasses.replace(config, run=dataclasses.replace(
                    config.run, thread_wait="library"))
            if executor is None and executor_settings is None and not trust_folder:
                refuse_recorded_commands(config.executor, out)
            run_dir.case_records()  # a damaged, copied or renamed record: refused before work
            read_machine_records(run_dir.path)  # and a damaged host record alike
            device = str(manifest["settings"]["device"])
            tasks = plan_tasks(config, entries, device)
            tasks, built = build_environments(tasks, config.run, notify)
            if built:  # rebuilt environments may have resolved anew
                manifest["environments"] = [env.to_dict() for env in built]
                manifest.pop("schema_version", None)
                run_dir.write_manifest(manifest)
            # the threads the run recorded, not what "all cores" means on this machine
            config = keep_recorded_threads(config, manifest)
            if executor is None:
                executor = choose_executor(executor_settings or config.executor, device,
                                           config.run.resolved_threads, notify)
            refuse_changed_threads(share_threads(config, executor), config, out)
            before = preflight_check(config.run, executor, device, notify)
        except BaseException:  # a damaged manifest, a failed build: release (and remove) the lock
            if executor is not None:
                executor.close()
            run_dir.unlock()
            raise
    else:
        run_id = new_run_id()
        device = resolve_device(config.run.device)
        if executor_settings is not None:
            # the manifest's config says how the sweep ran: the flags over the config file
            config = dataclasses.replace(config, executor=executor_settings)
        tasks = plan_tasks(config, entries, device)  # selection errors before any write
        # an --out that cannot be used is refused first, alone: before an executor starts,
        # an environment is built or the pre-flight check warns
        RunDir.check_new(out or results_root / run_id)
        if executor is None:
            executor = choose_executor(config.executor, device, config.run.resolved_threads,
                                       notify)
        config = share_threads(config, executor)
        locked: RunDir | None = None
        try:
            # environment errors (exit 2) before any write, and every build before any case
            tasks, built = build_environments(tasks, config.run, notify)
            # a noisy machine: warned, or under --strict refused before anything is written;
            # after the input is known good, so a mistake is reported alone, in one line
            before = preflight_check(config.run, executor, device, notify)
            run_dir = RunDir.create(out or results_root / run_id)
            run_dir.lock()
            locked = run_dir
            manifest = new_manifest(run_id, config, tasks, device)
            # recorded now, so an interrupted sweep keeps it
            manifest["preflight"] = [before.to_dict()] if before is not None else []
            if built:
                manifest["environments"] = [env.to_dict() for env in built]
            run_dir.write_manifest(manifest)
        except BaseException as exc:  # e.g. a full disk: release (and remove) the lock
            if locked is not None:
                locked.unlock()
                if isinstance(exc, KeyboardInterrupt):  # the folder is there to resume
                    exc.run_dir = locked.path  # type: ignore[attr-defined]
            executor.close()
            raise
    outcome = SweepOutcome(run_dir=run_dir.path, run_id=run_id)
    started = now_utc()
    try:
        if executor.runs_on_this_machine:
            write_machine_record(run_dir.path, hostname(), executor.name)
        jobs = plan_jobs(tasks, config.run, entries)
        outcome.skipped_existing = len({j.key for j in jobs} & (
            run_dir.finished_keys() - set(retry_attempts(run_dir))))
        # recorded before any case runs: an execution stopped half-way stays in the manifest
        # (finished_utc null), so every execution that ran cases is listed
        execution = {**executor.describe(), "threads": config.run.resolved_threads,
                     "started_utc": started, "finished_utc": None}
        manifest = run_dir.read_manifest()
        manifest.setdefault("executions", []).append(execution)
        manifest.pop("schema_version", None)
        run_dir.write_manifest(manifest)
        for record in execute(jobs, run_dir, run_id, entries, executor, progress):
            outcome.records.append(record)
        run_dir.rebuild_tables(run_id)
        after = preflight_check(config.run, executor, device, None, when="end")
        manifest = run_dir.read_manifest()
        # a new run recorded its start check with the manifest; a resumed one adds it now
        checks = (before if resume else None, after)
        manifest["preflight"] = [*manifest.get("preflight", []),
                                 *(p.to_dict() for p in checks if p is not None)]
        outcome.noise = noise_verdict(manifest["preflight"], run_dir.case_records())
        manifest["noise"] = outcome.noise.to_dict()
        manifest["finished_utc"] = now_utc()
        for entry in manifest.setdefault("executions", []):
            if entry.get("started_utc") == started and entry.get("finished_utc") is None:
                # described again: an engine knows its job ids only once it has run
                entry.update({**executor.describe(), "finished_utc": now_utc()})
        manifest["hosts"] = read_machine_records(run_dir.path)
        manifest.pop("schema_version", None)
        run_dir.write_manifest(manifest)
    except (WriteError, OSError) as exc:
        # a full disk, a quota, a folder gone read-only: the records written so far are whole
        raise interrupted_write(exc, run_dir.path) from exc
    except KeyboardInterrupt as exc:
        exc.run_dir = run_dir.path  # type: ignore[attr-defined]  # for the CLI's resume hint
        # the manifest lists this execution too (the jobs it submitted, e.g. to look them up)
        with contextlib.suppress(Exception):
            executor.close()
            manifest = run_dir.read_manifest()
            stopped = {**executor.describe(), "finished_utc": now_utc(),
                       "interrupted": signal.Signals(termination_signal(exc) or signal.SIGINT).name}
            entries = manifest.setdefault("executions", [])
            # the entry written as it started (a SIGKILL leaves it with finished_utc null)
            mine = [e for e in entries
                    if e.get("started_utc") == started and e.get("finished_utc") is None]
            if mine:
                mine[-1].update(stopped)
            else:  # stopped before its entry was written
                entries.append({**stopped, "started_utc": started})
            manifest.pop("schema_version", None)
            run_dir.write_manifest(manifest)
        raise
    finally:
        run_dir.unlock()
        executor.close()
    return outcome


def refuse_recorded_commands(settings: ExecutorSettings, folder: Path) -> None:
    """Refuse to resume with a manifest's executor that would run what the folder names.

    Run folders are what people send each other: whoever wrote the manifest chose its setup
    lines. They run only when the user gives them again, or says ``--trust-folder``.
    """
    found = recorded_commands(settings)
    if found:
        raise StorageError(
            f"{folder}/manifest.json asks to run {', '.join(found)} with the "
            f"{settings.name} executor; a received folder runs no code: give the executor "
            "options again (e.g. --executor local), or --trust-folder if you wrote this folder")


def merge_run(path: Path) -> int:
    """Rebuild a run folder's tables and its manifest's host list from its case records.

    For a folder cluster tasks wrote into after the submitting process died, or by hand.
    Returns the number of case records. Refused while a live run holds the folder.
    """
    run_dir = RunDir.open_existing(path)
    run_dir.lock()
    try:
        manifest = run_dir.read_manifest()
        run_id = str(manifest["run_id"])
        records = run_dir.case_records()
        if not records:
            raise StorageError(f"{path} has no case records to merge")
        hosts = read_machine_records(run_dir.path)  # refused before anything is rewritten
        run_dir.rebuild_tables(run_id)
        manifest["hosts"] = hosts
        manifest["merged_utc"] = now_utc()
        manifest.pop("schema_version", None)
        run_dir.write_manifest(manifest)
        return len(records)
    finally:
        run_dir.unlock()


def new_manifest(run_id: str, config: RunConfig, tasks: list[Task], device: str) -> dict[str, Any]:
    """The manifest of a new run: machine, versions, settings and the full config."""
    specs = {t.spec.case_id: t.spec for t in tasks}.values()
    return {
        "run_id": run_id,
        "created_utc": now_utc(),
        "finished_utc": None,
        **collect_environment(),
        "settings": {
            "device": device,
            "threads": config.run.resolved_threads,
            "matmul_precisions": sorted({s.matmul_precision for s in specs}),
            "tf32": any(s.matmul_precision == "tf32" for s in specs),
            "seeds": sorted({s.seed for s in specs}),
            "thread_env": thread_env(config.run.resolved_threads, config.run.thread_wait),
            "thread_wait": config.run.thread_wait,
        },
        "config": config.to_dict(),
        "command": sys.argv,
    }

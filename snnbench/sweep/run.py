"""A run's life: create or resume its folder, run the sweep into it, record how it went."""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import signal
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from snnbench.executors import Executor, ExecutorSettings, make_executor
from snnbench.executors.placement import hostname
from snnbench.host.environment import collect_environment
from snnbench.host.lifeline import termination_signal
from snnbench.host.machines import read_machine_records, write_machine_record
from snnbench.host.preflight import NoiseVerdict, Preflight, noise_verdict
from snnbench.records.contract import CaseRecord, now_utc
from snnbench.records.fileio import StorageError, WriteError, interrupted_write
from snnbench.records.schema import FAILED_STATUSES
from snnbench.registry import AdapterEntry, discover
from snnbench.store.manifest import Execution, Manifest, ManifestSettings
from snnbench.store.rundir import RunFolder
from snnbench.sweep.checks import preflight_check
from snnbench.sweep.config import RunConfig, check_variables
from snnbench.sweep.execute import execute, retry_attempts
from snnbench.sweep.plan import Plan, from_manifest, prepare, with_environments, with_executor
from snnbench.sweep.planning.jobs import thread_env
from snnbench.sweep.planning.messages import NotifyCallback, ProgressCallback
from snnbench.sweep.planning.tasks import Task
from snnbench.sweep.received import refuse_recorded_commands, refuse_recorded_environments
from snnbench.sweep.threads import (
    refuse_changed_threads,
    share_threads,
)


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


def new_run_id() -> str:
    """``YYYYmmdd-HHMMSS-xxxx``: sortable by time, unique by the random suffix."""
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def choose_executor(settings: ExecutorSettings, device: str, threads: int,
                    notify: NotifyCallback | None = None) -> Executor:
    """The executor for a sweep, checked before anything is written (exit 2 when unusable)."""
    executor = make_executor(settings, device, threads)
    executor.notify = notify
    executor.check()
    return executor


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
        folder, plan, executor, before = _resume(out, entries, executor, executor_settings,
                                                 trust_folder, notify)
    else:
        folder, plan, executor, before = _begin(config, out, results_root, entries, executor,
                                                executor_settings, notify)
    return _sweep(folder, plan, executor, before, resume, progress)


def _begin(config: RunConfig, out: Path | None, results_root: Path,
           entries: dict[str, AdapterEntry], executor: Executor | None,
           executor_settings: ExecutorSettings | None, notify: NotifyCallback | None,
           ) -> tuple[RunFolder, Plan, Executor, Preflight | None]:
    """A new run: its plan, its executor, its folder (locked) and its manifest."""
    if executor_settings is not None:
        # the manifest's config says how the sweep ran: the flags over the config file
        config = dataclasses.replace(config, executor=executor_settings)
    plan = prepare(config, new_run_id(), entries)  # selection errors before any write
    path = out or results_root / plan.run_id
    # an --out that cannot be used is refused first, alone: before an executor starts,
    # an environment is built or the pre-flight check warns
    RunFolder.check_new(path)
    if executor is None:
        executor = choose_executor(config.executor, plan.device,
                                   config.run.resolved_threads, notify)
    plan = with_executor(plan, executor)
    locked: RunFolder | None = None
    try:
        # environment errors (exit 2) before any write, and every build before any case
        plan = with_environments(plan, notify)
        # a noisy machine: warned, or under --strict refused before anything is written;
        # after the input is known good, so a mistake is reported alone, in one line
        before = preflight_check(plan.config.run, executor, plan.device, notify)
        folder = RunFolder.create(path)
        folder.lock()
        locked = folder
        manifest = new_manifest(plan.run_id, plan.config, plan.tasks, plan.device)
        # recorded now, so an interrupted sweep keeps it
        manifest.preflight = [before.to_dict()] if before is not None else []
        if plan.environments:
            manifest.environments = [env.to_dict() for env in plan.environments]
        folder.write_manifest(manifest)
    except BaseException as exc:  # e.g. a full disk: release (and remove) the lock
        if locked is not None:
            locked.unlock()
            if isinstance(exc, KeyboardInterrupt):  # the folder is there to resume
                exc.run_dir = locked.path  # type: ignore[attr-defined]
        executor.close()
        raise
    return folder, plan, executor, before


def _resume(out: Path | None, entries: dict[str, AdapterEntry], executor: Executor | None,
            executor_settings: ExecutorSettings | None, trust_folder: bool,
            notify: NotifyCallback | None,
            ) -> tuple[RunFolder, Plan, Executor, Preflight | None]:
    """A resumed run: its folder (locked), the plan its manifest recorded, its executor."""
    if out is None:
        raise StorageError("--resume needs --out pointing at the run folder to finish")
    folder = RunFolder.open_existing(out)
    folder.lock()
    try:
        manifest = folder.manifest()
        config = RunConfig.from_dict(manifest.config, source=f"{out}/manifest.json")
        if executor is None and executor_settings is None and not trust_folder:
            refuse_recorded_commands(config.executor, out)
        folder.case_records()  # a damaged, copied or renamed record: refused before work
        read_machine_records(folder.path)  # and a damaged host record alike
        plan = from_manifest(manifest, entries, f"{out}/manifest.json")
        if not trust_folder:
            refuse_recorded_environments(plan, out)
        plan = with_environments(plan, notify)
        if plan.environments:  # rebuilt environments may have resolved anew
            manifest.environments = [env.to_dict() for env in plan.environments]
            folder.write_manifest(manifest)
        if executor is None:
            executor = choose_executor(executor_settings or plan.config.executor, plan.device,
                                       plan.config.run.resolved_threads, notify)
        refuse_changed_threads(share_threads(plan.config, executor), plan.config, out)
        before = preflight_check(plan.config.run, executor, plan.device, notify)
    except BaseException:  # a damaged manifest, a failed build: release (and remove) the lock
        if executor is not None:
            executor.close()
        folder.unlock()
        raise
    return folder, plan, executor, before


def _sweep(folder: RunFolder, plan: Plan, executor: Executor, before: Preflight | None,
           resume: bool, progress: ProgressCallback | None) -> SweepOutcome:
    """Run the plan into its locked folder and record the execution; unlocks the folder."""
    outcome = SweepOutcome(run_dir=folder.path, run_id=plan.run_id)
    started = now_utc()
    try:
        if executor.runs_on_this_machine:
            write_machine_record(folder.path, hostname(), executor.name)
        jobs = plan.jobs()
        outcome.skipped_existing = len({j.key for j in jobs} & (
            folder.finished_keys() - set(retry_attempts(folder))))
        # recorded before any case runs: an execution stopped half-way stays in the manifest
        # (finished_utc null), so every execution that ran cases is listed
        manifest = folder.manifest()
        manifest.add_execution(Execution.model_validate({
            **executor.describe(), "threads": plan.config.run.resolved_threads,
            "started_utc": started, "finished_utc": None}))
        folder.write_manifest(manifest)
        outcome.records.extend(execute(plan, folder, executor, progress, jobs))
        folder.rebuild_tables(plan.run_id)
        after = preflight_check(plan.config.run, executor, plan.device, None, when="end")
        manifest = folder.manifest()
        # a new run recorded its start check with the manifest; a resumed one adds it now
        checks = (before if resume else None, after)
        manifest.preflight = [*manifest.preflight,
                              *(p.to_dict() for p in checks if p is not None)]
        outcome.noise = noise_verdict(manifest.preflight, folder.case_records())
        manifest.noise = outcome.noise.to_dict()
        manifest.finished_utc = now_utc()
        mine = manifest.open_execution(started)
        if mine is not None:
            # described again: an engine knows its job ids only once it has run
            mine.update({**executor.describe(), "finished_utc": now_utc()})
        manifest.hosts = read_machine_records(folder.path)
        folder.write_manifest(manifest)
    except (WriteError, OSError) as exc:
        # a full disk, a quota, a folder gone read-only: the records written so far are whole
        raise interrupted_write(exc, folder.path) from exc
    except KeyboardInterrupt as exc:
        exc.run_dir = folder.path  # type: ignore[attr-defined]  # for the CLI's resume hint
        # the manifest lists this execution too (the jobs it submitted, e.g. to look them up)
        with contextlib.suppress(Exception):
            executor.close()
            manifest = folder.manifest()
            stopped = {**executor.describe(), "finished_utc": now_utc(),
                       "interrupted": signal.Signals(termination_signal(exc) or signal.SIGINT).name}
            # the entry written as it started (a SIGKILL leaves it with finished_utc null)
            mine = manifest.open_execution(started)
            if mine is not None:
                mine.update(stopped)
            else:  # stopped before its entry was written
                manifest.add_execution(Execution.model_validate(
                    {**stopped, "started_utc": started}))
            folder.write_manifest(manifest)
        raise
    finally:
        folder.unlock()
        executor.close()
    return outcome


def merge_run(path: Path) -> int:
    """Rebuild a run folder's tables and its manifest's host list from its case records.

    For a folder cluster tasks wrote into after the submitting process died, or by hand.
    Returns the number of case records. Refused while a live run holds the folder.
    """
    folder = RunFolder.open_existing(path)
    folder.lock()
    try:
        manifest = folder.manifest()
        records = folder.case_records()
        if not records:
            raise StorageError(f"{path} has no case records to merge")
        hosts = read_machine_records(folder.path)  # refused before anything is rewritten
        folder.rebuild_tables(manifest.run_id)
        manifest.hosts = hosts
        manifest.merged_utc = now_utc()
        folder.write_manifest(manifest)
        return len(records)
    finally:
        folder.unlock()


def new_manifest(run_id: str, config: RunConfig, tasks: list[Task], device: str) -> Manifest:
    """The manifest of a new run: machine, versions, settings and the full config."""
    wanted = {t.workload.case_id: t.workload.framework_settings() for t in tasks}.values()
    return Manifest(
        run_id=run_id,
        created_utc=now_utc(),
        finished_utc=None,
        **collect_environment(),
        settings=ManifestSettings.model_validate({
            "device": device,
            "threads": config.run.resolved_threads,
            "matmul_precisions": sorted({s.matmul_precision for s in wanted}),
            "tf32": any(s.matmul_precision == "tf32" for s in wanted),
            "seeds": sorted({s.seed for s in wanted}),
            "thread_env": thread_env(config.run.resolved_threads, config.run.thread_wait),
            "thread_wait": config.run.thread_wait,
        }),
        config=config.to_dict(),
        command=list(sys.argv),
    )

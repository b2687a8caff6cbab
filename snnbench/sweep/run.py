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
from typing import Any

from snnbench.config import RunConfig, check_variables
from snnbench.contract import CaseRecord, now_utc
from snnbench.environment import collect_environment
from snnbench.executors import Executor, ExecutorSettings, make_executor
from snnbench.executors.placement import hostname
from snnbench.executors.plugins import recorded_commands
from snnbench.fileio import StorageError, WriteError, interrupted_write
from snnbench.lifeline import termination_signal
from snnbench.machines import read_machine_records, write_machine_record
from snnbench.preflight import NoiseVerdict, noise_verdict, preflight_check
from snnbench.registry import discover
from snnbench.runfolder import RunDir
from snnbench.schema import FAILED_STATUSES
from snnbench.sweep.execute import execute, retry_attempts
from snnbench.sweep.jobs import plan_jobs
from snnbench.sweep.messages import NotifyCallback, ProgressCallback
from snnbench.sweep.tasks import Task, build_environments, plan_tasks, resolve_device
from snnbench.sweep.threads import (
    keep_recorded_threads,
    refuse_changed_threads,
    share_threads,
    thread_env,
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

"""The execute loop: run the jobs a run folder lacks, store each record as it arrives."""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path

from snnbench.errors import UserError
from snnbench.executors import Executor
from snnbench.host.lifeline import start_reaper, stop_reaper
from snnbench.records.contract import CaseRecord, Job
from snnbench.records.schema import JOBS_DIR, REFERENCES_DIR, RETRY_STATUSES
from snnbench.store.rundir import RunFolder
from snnbench.sweep.plan import Plan
from snnbench.sweep.planning.jobs import static_record
from snnbench.sweep.planning.messages import ProgressCallback


def retry_attempts(folder: RunFolder) -> dict[str, int]:
    """Keys whose record says the engine lost the case, with the attempt that lost it."""
    attempts: dict[str, int] = {}
    for path in sorted(folder.cases_dir.glob("*.json")):
        with contextlib.suppress(UserError):
            record = CaseRecord.read(path)
            if record.status in RETRY_STATUSES:
                attempts[path.stem] = record.placement.attempt
    return attempts


def execute(
    plan: Plan,
    folder: RunFolder,
    executor: Executor,
    progress: ProgressCallback | None = None,
    jobs: list[Job] | None = None,
) -> Iterator[CaseRecord]:
    """Run the plan's jobs (``jobs``: the plan's, already listed) that the folder lacks,
    storing each record as it arrives (in the order the executor finishes them); the tables
    are rebuilt only as the records double (:meth:`~snnbench.store.rundir.RunFolder.add_case`), and
    by the caller at the end. A case an engine lost runs again, as its next attempt."""
    jobs = plan.jobs() if jobs is None else jobs
    lost = retry_attempts(folder)
    done = folder.finished_keys() - set(lost)
    pending = []
    for job in jobs:
        if job.key in lost:
            job = dataclasses.replace(job, placement=dataclasses.replace(
                job.placement, attempt=lost[job.key] + 1))
        if job.key not in done:
            pending.append(job)
    runnable: list[Job] = []
    decided: list[tuple[Job, CaseRecord]] = []
    for job in pending:
        record = static_record(job, plan.entries)
        if record is None:
            runnable.append(job)
        else:
            # decided here without running: no case ran beside it
            record.placement = dataclasses.replace(record.placement, executor=executor.name,
                                                   concurrency=0)
            decided.append((job, record))
    # the progress counts the cases that run: a case decided without a process takes no
    # time, and counted as progress it would make the estimate of the time left too short
    total = len(runnable)
    if pending:
        # before any record is written, here or by a cluster task: until the caller rebuilds
        # the tables at the end, readers build them from the records
        folder.begin_cases()
    finished = 0
    #: cases started so far: the number a "start" shows
    begun = 0

    def store(job: Job, record: CaseRecord) -> CaseRecord:
        nonlocal finished
        finished += 1
        folder.store_case(record)
        # told before the tables are rebuilt: the case's number reaches the terminal first
        # (the record is already on disk, so an interrupt here loses nothing)
        if progress:
            progress("done", finished, total, job, record)
        folder.tables_if_due(plan.run_id)
        return record

    for _, record in decided:
        folder.store_case(record)
    if decided:  # the tables (when due) once for all of them: the first case starts sooner
        folder.tables_if_due(plan.run_id)
    for index, (job, record) in enumerate(decided, start=1):
        if progress:
            progress("decided", index, len(decided), job, record)
        yield record
    by_key = {job.key: job for job in runnable}

    def started(job: Job) -> None:
        # counted as cases start (a cluster starts them when it can, not all at submission)
        nonlocal begun
        begun += 1
        if progress:
            progress("start", min(begun, total), total, job, None)

    work_dir = folder.path / JOBS_DIR
    # the job folders, and the networks' references their workers keep beside them
    leftovers = [*(job.key for job in runnable), REFERENCES_DIR]
    # this process's threads make the local job folders: were it killed outright, its guard
    # removes them (cluster tasks own theirs and may go on writing after the sweep stopped)
    reaper = (start_reaper(work_dir, leftovers)
              if runnable and executor.runs_on_this_machine else None)
    records = executor.run(runnable, work_dir, folder.path / "logs", started)
    try:
        for record in records:
            yield store(by_key.get(record.key, runnable[0]), record)
    finally:
        # an interrupt or a failure here stops the executor's running cases at once
        with contextlib.suppress(Exception):
            records.close()  # type: ignore[attr-defined]
        executor.close()
        clean_work_dir(work_dir, leftovers, executor.work_files)
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

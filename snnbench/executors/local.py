"""``local``: one case at a time on this machine (the default, and the reference for timing)."""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

from snnbench.contract import CaseRecord, Job
from snnbench.executors.base import Executor, JobStarted
from snnbench.launch import run_worker


def job_folder(work_dir: Path, job: Job) -> Path:
    """A fresh folder for ``job``'s files under ``work_dir``."""
    folder = work_dir / job.key
    shutil.rmtree(folder, ignore_errors=True)  # a leftover of a killed earlier attempt
    folder.mkdir(parents=True)
    return folder


class LocalExecutor(Executor):
    """Runs the jobs one after another, each in a fresh worker process."""

    name = "local"

    def run(self, jobs: Iterable[Job], work_dir: Path, log_dir: Path,
            on_start: JobStarted | None = None) -> Iterator[CaseRecord]:
        for job in jobs:
            if on_start is not None:
                on_start(job)
            yield run_in_folder(job, work_dir, log_dir)


def run_in_folder(job: Job, work_dir: Path, log_dir: Path) -> CaseRecord:
    """Run ``job`` in its own folder under ``work_dir`` and remove that folder afterwards."""
    folder = job_folder(work_dir, job)
    try:
        return run_worker(job.with_result_in(folder), folder, log_dir / f"{job.key}.log")
    finally:
        shutil.rmtree(folder, ignore_errors=True)

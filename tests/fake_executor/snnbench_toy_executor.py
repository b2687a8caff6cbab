"""A toy executor from a third party: one file and one entry point (snnbench.executors).

It runs the cases one by one, last first, in fresh worker processes of this machine, and says
it runs elsewhere, so the sweep must not treat it as the local executor.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from snnbench.contract import CaseRecord, Job
from snnbench.executors.base import Executor, JobStarted
from snnbench.executors.local import run_in_folder
from snnbench.executors.settings import ExecutorSettings

#: a file the toy keeps in the jobs folder: the sweep removes it once the toy has stopped
TOY_FLAG = ".toy-was-here"


class ToyExecutor(Executor):
    name = "toy"
    runs_on_this_machine = False
    work_files = (TOY_FLAG,)

    def __init__(self, device: str, threads: int) -> None:
        self.device = device
        self.threads = threads
        self.closed = 0

    @classmethod
    def from_settings(cls, settings: ExecutorSettings, device: str, threads: int,
                      nvml: Any | None = None) -> ToyExecutor:
        return cls(device, threads)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "order": "last first"}

    def run(self, jobs: Iterable[Job], work_dir: Path, log_dir: Path,
            on_start: JobStarted | None = None) -> Iterator[CaseRecord]:
        work_dir.mkdir(parents=True, exist_ok=True)
        log_dir.mkdir(parents=True, exist_ok=True)
        (work_dir / TOY_FLAG).write_text("toy\n")
        for job in reversed(list(jobs)):
            if on_start is not None:
                on_start(job)
            record = run_in_folder(job, work_dir, log_dir)
            record.placement = dataclasses.replace(record.placement, executor=self.name)
            yield record

    def close(self) -> None:
        self.closed += 1

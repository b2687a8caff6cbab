"""A toy executor from a third party: one file and one entry point (snnbench.executors).

It runs the cases one by one, last first (or, with ``[executor.toy] order = "as given"``, in
sweep order), in fresh worker processes of this machine, and says it runs elsewhere, so the
sweep must not treat it as the local executor. Its settings are its own: ``ToySettings`` reads
the ``[executor.toy]`` table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from snnbench.executors import ExecutorError, ExecutorSettings
from snnbench.executors.base import Executor, JobStarted
from snnbench.executors.local import run_in_folder
from snnbench.records.contract import CaseRecord, Job

#: a file the toy keeps in the jobs folder: the sweep removes it once the toy has stopped
TOY_FLAG = ".toy-was-here"
#: the orders the toy knows
ORDERS = ("last first", "as given")


@dataclasses.dataclass(frozen=True)
class ToySettings:
    """``[executor.toy]``: in which order the toy runs the cases."""

    order: str = "last first"

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ExecutorError(f"toy order must be one of {', '.join(ORDERS)}, "
                                f"got {self.order!r}")


class ToyExecutor(Executor):
    name = "toy"
    settings_type = ToySettings
    runs_on_this_machine = False
    work_files = (TOY_FLAG,)

    def __init__(self, device: str, threads: int, order: str = "last first") -> None:
        self.device = device
        self.threads = threads
        self.order = order
        self.closed = 0

    @classmethod
    def from_settings(cls, settings: ExecutorSettings, device: str, threads: int,
                      nvml: Any | None = None) -> ToyExecutor:
        toy: ToySettings = settings.table(cls.name)
        return cls(device, threads, toy.order)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "order": self.order}

    def run(self, jobs: Iterable[Job], work_dir: Path, log_dir: Path,
            on_start: JobStarted | None = None) -> Iterator[CaseRecord]:
        work_dir.mkdir(parents=True, exist_ok=True)
        log_dir.mkdir(parents=True, exist_ok=True)
        (work_dir / TOY_FLAG).write_text("toy\n")
        listed = list(jobs)
        for job in listed if self.order == "as given" else reversed(listed):
            if on_start is not None:
                on_start(job)
            record = run_in_folder(job, work_dir, log_dir)
            record.placement = dataclasses.replace(record.placement, executor=self.name)
            yield record

    def close(self) -> None:
        self.closed += 1

"""The executor interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from snnbench.contract import CaseRecord, Job
from snnbench.errors import UserError

#: called when a job starts running (for progress display)
JobStarted = Callable[[Job], None]


class ExecutorError(UserError):
    """An executor cannot be used as asked (missing engine, bad option); one line."""


class Executor(ABC):
    """Runs jobs somewhere and yields their records as they finish.

    ``work_dir`` holds one folder per job (its ``job.json`` and the worker's result); a cluster
    executor needs it on a filesystem its nodes share. ``log_dir`` receives one log per job,
    named after the job's key.
    """

    #: the name used on the command line (``--executor``) and recorded in each row
    name: str = ""

    @abstractmethod
    def run(self, jobs: Iterable[Job], work_dir: Path, log_dir: Path,
            on_start: JobStarted | None = None) -> Iterator[CaseRecord]:
        """Run every job; yield one record per job, in the order they finish."""

    def close(self) -> None:
        """Release the engine (cluster connections, pools); idempotent."""

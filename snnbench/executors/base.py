"""The executor interface."""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from snnbench.executors.settings import ExecutorError, ExecutorSettings
from snnbench.records.contract import CaseRecord, Job

__all__ = ["Executor", "ExecutorError", "JobStarted"]

#: called when a job starts running (for progress display)
JobStarted = Callable[[Job], None]


class Executor(ABC):
    """Runs jobs somewhere and yields their records as they finish.

    ``work_dir`` holds one folder per job (its ``job.json`` and the worker's result); a cluster
    executor needs it on a filesystem its nodes share. ``log_dir`` receives one log per job,
    named after the job's key.

    The life of an executor: :meth:`check` (before anything is written: a missing engine or a
    bad option is a :class:`ExecutorError`), :meth:`run`, then :meth:`close`, which stops
    whatever still runs (also after an interrupt).
    """

    #: the name used on the command line (``--executor``) and recorded in each row
    name: str = ""
    #: the frozen dataclass that reads this executor's ``[executor.NAME]`` table (unknown keys
    #: refused, a field whose default is a tuple takes a list); None: it takes no table.
    #: :meth:`from_settings` gets it as ``settings.table(cls.name)``
    settings_type: ClassVar[type | None] = None
    #: where one-line notes for the user go (the CLI's console); None: standard error
    notify: Callable[[str], None] | None = None
    #: whether the cases run on this machine, as children of this process: then the sweep
    #: guards their job folders, records this host and checks this machine's load
    runs_on_this_machine: bool = False
    #: files the executor leaves in the jobs folder beside the case folders (a heartbeat, a
    #: cancel flag), removed with them once it has stopped
    work_files: tuple[str, ...] = ()

    @classmethod
    @abstractmethod
    def from_settings(cls, settings: ExecutorSettings, device: str, threads: int,
                      nvml: Any | None = None) -> Executor:
        """The executor ``settings`` describe, for a sweep on ``device`` using ``threads`` per
        case; raise :class:`ExecutorError` for options this machine cannot honour."""

    @classmethod
    def recorded_commands(cls, settings: ExecutorSettings) -> list[str]:
        """What in ``settings`` would make this machine run text or code the settings name
        (setup lines, an image, a cluster address): a received run folder's manifest must not
        run it unasked."""
        return []

    def say(self, line: str) -> None:
        """Tell the user ``line`` (once per call: callers say each thing once)."""
        if self.notify is not None:
            self.notify(line)
        else:
            print(line, file=sys.stderr)

    def check(self) -> None:
        """Raise :class:`ExecutorError` when this executor cannot run here, as configured."""

    @property
    def concurrency(self) -> int:
        """Cases this executor runs at once on this machine (the pre-flight check's share)."""
        return 1

    def threads_per_case(self) -> int | None:
        """The most CPU threads one case may use (its share of the cores), None for no limit."""
        return None

    def describe(self) -> dict[str, Any]:
        """What the manifest records about how the sweep was spread out."""
        return {"name": self.name}

    @abstractmethod
    def run(self, jobs: Iterable[Job], work_dir: Path, log_dir: Path,
            on_start: JobStarted | None = None) -> Iterator[CaseRecord]:
        """Run every job; yield one record per job, in the order they finish."""

    def close(self) -> None:
        """Stop what still runs and release the engine (connections, pools); idempotent."""

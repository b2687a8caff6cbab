"""Executors decide where the cases of a sweep run; every one runs the same worker process.

An :class:`Executor` takes :class:`~snnbench.contract.Job` objects and yields a
:class:`~snnbench.contract.CaseRecord` for each, in the order they finish. Whatever engine it
drives, each case is ``python -m snnbench.worker JOB.json`` in a fresh process
(:func:`snnbench.launch.run_worker`), so a crash, abort, hang or OOM stays one row.
"""

from __future__ import annotations

from snnbench.executors.base import Executor, ExecutorError, JobStarted
from snnbench.executors.local import LocalExecutor

__all__ = ["Executor", "ExecutorError", "JobStarted", "LocalExecutor"]

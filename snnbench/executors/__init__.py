"""Executors decide where the cases of a sweep run; every one runs the same worker process.

An :class:`Executor` takes :class:`~snnbench.records.contract.Job` objects and yields a
:class:`~snnbench.records.contract.CaseRecord` for each, in the order they finish. Whatever engine
it drives, each case is ``python -m snnbench.measure.worker JOB.json`` in a fresh process
(:func:`snnbench.executors.launch.run_worker`), so a crash, abort, hang or OOM stays one row.

* ``local`` (:mod:`.local`): this machine; one case at a time, or ``--jobs N`` CPU cases side
  by side on their own cores, or ``--gpus`` one case per GPU;
* ``slurm`` (:mod:`.slurm`): one array job through submitit (extra ``snnbench[slurm]``);
* ``ray`` (:mod:`.ray_engine`): one Ray task per case (extra ``snnbench[ray]``).

Each is a plugin in the ``snnbench.executors`` entry-point group (:mod:`.plugins`): adding an
executor is one module and one entry point. Each owns its settings: the dataclass its
``settings_type`` names reads its ``[executor.NAME]`` table (:mod:`snnbench.executors.settings`
parses the ``[executor]`` table and asks the plugin).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from snnbench.executors.base import Executor, ExecutorError, JobStarted
from snnbench.executors.plugins import executor_class, make_executor
from snnbench.executors.settings import EXECUTORS, ExecutorSettings

if TYPE_CHECKING:
    from snnbench.executors.local import LocalExecutor

__all__ = ["EXECUTORS", "Executor", "ExecutorError", "ExecutorSettings", "JobStarted",
           "LocalExecutor", "executor_class", "make_executor"]


def __getattr__(name: str) -> Any:
    # loaded on use: importing the settings (config does) must not start the local machinery
    if name == "LocalExecutor":
        from snnbench.executors.local import LocalExecutor

        return LocalExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Executors decide where the cases of a sweep run; every one runs the same worker process.

An :class:`Executor` takes :class:`~snnbench.contract.Job` objects and yields a
:class:`~snnbench.contract.CaseRecord` for each, in the order they finish. Whatever engine it
drives, each case is ``python -m snnbench.worker JOB.json`` in a fresh process
(:func:`snnbench.launch.run_worker`), so a crash, abort, hang or OOM stays one row.

* ``local`` (:mod:`.local`): this machine; one case at a time, or ``--jobs N`` CPU cases side
  by side on their own cores, or ``--gpus`` one case per GPU;
* ``slurm`` (:mod:`.slurm`): one array job through submitit (extra ``snnbench[slurm]``);
* ``ray`` (:mod:`.ray_engine`): one Ray task per case (extra ``snnbench[ray]``).
"""

from __future__ import annotations

from typing import Any

from snnbench.executors.base import Executor, ExecutorError, JobStarted
from snnbench.executors.local import LocalExecutor
from snnbench.executors.settings import EXECUTORS, ExecutorSettings

__all__ = ["EXECUTORS", "Executor", "ExecutorError", "ExecutorSettings", "JobStarted",
           "LocalExecutor", "make_executor"]


def make_executor(settings: ExecutorSettings, device: str, threads: int,
                  nvml: Any | None = None) -> Executor:
    """The executor ``settings`` describe, for a sweep on ``device`` using ``threads`` each.

    Raises :class:`ExecutorError` for options this machine cannot honour (``--jobs`` beyond
    its cores, ``--gpus`` naming a GPU NVML does not see); engines are checked by
    :meth:`Executor.check`.
    """
    from snnbench.executors import placement

    if settings.name == "slurm":
        from snnbench.executors.slurm import SlurmExecutor

        return SlurmExecutor(settings.slurm, device, threads)
    if settings.name == "ray":
        from snnbench.executors.ray_engine import RayExecutor

        return RayExecutor(settings.ray, device, threads)
    if settings.gpus:
        if device == "cpu":
            raise ExecutorError("--gpus runs CUDA cases: use it with --device cuda")
        return LocalExecutor(placement.gpu_slots(settings.gpus, settings.bind_cpus, nvml))
    if settings.jobs > 1:
        if device == "cuda":
            raise ExecutorError("--jobs runs CPU cases side by side; for GPUs use --gpus")
        return LocalExecutor(placement.cpu_slots(settings.jobs))
    return LocalExecutor()

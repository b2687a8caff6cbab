"""Every case's CPU threads: their share of the cores, and the count a resumed run keeps
(the environment that sets them is :func:`snnbench.sweep.planning.jobs.thread_env`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from snnbench.executors import Executor
from snnbench.records.fileio import StorageError
from snnbench.store.manifest import Manifest
from snnbench.sweep.config import RunConfig


def share_threads(config: RunConfig, executor: Executor) -> RunConfig:
    """``config`` with each case's threads capped to its share of the cores (``--jobs``)."""
    share = executor.threads_per_case()
    if share is None or config.run.resolved_threads <= share:
        return config
    return dataclasses.replace(config, run=dataclasses.replace(config.run, threads=share))


def keep_recorded_threads(config: RunConfig, manifest: Manifest) -> RunConfig:
    """A resumed run's config with the thread count its manifest recorded (``threads = 0``
    means every core: another machine, or another CPU set, would give another number)."""
    recorded = manifest.settings.threads
    if recorded > 0:
        return dataclasses.replace(config, run=dataclasses.replace(config.run, threads=recorded))
    return config


def refuse_changed_threads(shared: RunConfig, config: RunConfig, folder: Path) -> None:
    """Refuse a resume whose executor would run cases with fewer threads than the run recorded
    (``--jobs`` shares the cores): its rows would not be comparable with the finished ones."""
    if shared.run.resolved_threads != config.run.resolved_threads:
        raise StorageError(
            f"{folder} was run with {config.run.resolved_threads} threads per case; these "
            f"executor options would give {shared.run.resolved_threads} (--jobs shares the "
            "cores), which changes what is measured: resume with fewer --jobs, or on a "
            "machine with more cores")

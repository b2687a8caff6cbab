"""Every case's CPU threads: the environment that sets them, and their share of the cores."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from snnbench.config import RunConfig
from snnbench.executors import Executor
from snnbench.fileio import StorageError
from snnbench.manifest import Manifest

#: ``[run] thread_wait`` → OMP_WAIT_POLICY (read by libgomp, which torch's oneDNN and MKL
#: run on, and by Intel's libiomp); ``library`` sets nothing
WAIT_POLICIES: dict[str, str] = {"passive": "PASSIVE", "active": "ACTIVE"}


def thread_env(threads: int, wait: str = "passive") -> dict[str, str]:
    """Environment giving every library the same CPU thread count and wait policy.

    Passive waiting by default: with libgomp's default, a thread that finishes its share of a
    GEMM spins on its core before it sleeps; when another process holds the core its
    team-mate needs, the team-mate gets a core back only at a scheduler tick (4 ms at HZ=250),
    so times came in steps of 4-8 ms. A sleeping thread frees its core at once
    (benchmarks/cpu_contention.py, docs/methodology.md).
    """
    env = {name: str(threads) for name in (
        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    )}
    if wait in WAIT_POLICIES:
        env["OMP_WAIT_POLICY"] = WAIT_POLICIES[wait]
    env["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "")
        + f" --xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'}"
        + f" intra_op_parallelism_threads={threads}"
    ).strip()
    # JAX must not grab 75 % of the GPU up front: peaks would read as the preallocation
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    env["TF_CPP_MIN_LOG_LEVEL"] = env.get("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


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

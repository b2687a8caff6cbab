"""The ``[executor]`` table's settings, where the executors have long imported them from.

They live in :mod:`snnbench.executor_settings`, beside the config that holds them, so that
reading a config loads no executor.
"""

from __future__ import annotations

from snnbench.executor_settings import (
    ENTRY_POINT_GROUP,
    EXECUTORS,
    ExecutorError,
    ExecutorSettings,
    RaySettings,
    SlurmSettings,
    executor_names,
)

__all__ = ["ENTRY_POINT_GROUP", "EXECUTORS", "ExecutorError", "ExecutorSettings", "RaySettings",
           "SlurmSettings", "executor_names"]

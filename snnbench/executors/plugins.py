"""Executor discovery through the ``snnbench.executors`` entry-point group.

An executor is a plugin like an adapter: one module with an :class:`~.base.Executor` subclass
and one entry point naming it. The sweep asks the class what it needs
(:attr:`~.base.Executor.runs_on_this_machine`, :attr:`~.base.Executor.work_files`) and never
tests a name.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from snnbench.executors.base import Executor
from snnbench.executors.settings import (
    ENTRY_POINT_GROUP,
    ExecutorError,
    ExecutorSettings,
    load_executor,
)


def executor_class(name: str) -> type[Executor]:
    """The class registered as ``name``; a missing or broken plugin is one clear line."""
    cls = load_executor(name)
    if not (isinstance(cls, type) and issubclass(cls, Executor)):
        value = next((ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
                      if ep.name == name), repr(cls))
        raise ExecutorError(f"executor {name!r} ({value}) is not an Executor subclass")
    return cls


def make_executor(settings: ExecutorSettings, device: str, threads: int,
                  nvml: Any | None = None) -> Executor:
    """The executor ``settings`` describe, for a sweep on ``device`` using ``threads`` each.

    Raises :class:`ExecutorError` for options this machine cannot honour (``--jobs`` beyond
    its cores, ``--gpus`` naming a GPU NVML does not see); engines are checked by
    :meth:`Executor.check`.
    """
    return executor_class(settings.name).from_settings(settings, device, threads, nvml)


def recorded_commands(settings: ExecutorSettings) -> list[str]:
    """What in an ``[executor]`` table makes this machine run text or code the table names
    (each executor says what in its settings does)."""
    return executor_class(settings.name).recorded_commands(settings)

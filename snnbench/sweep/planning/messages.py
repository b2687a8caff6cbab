"""What a sweep tells its caller as it goes: progress events and one-line notes."""

from __future__ import annotations

from collections.abc import Callable

from snnbench.host.libenv import BuiltEnvironment
from snnbench.records.contract import CaseRecord, Job

#: progress(event, index, total, job, record): event "start" (record None) or "done" of a
#: case that runs (index of total such cases), or "decided" of one recorded without running
#: (a static skip: index of total such cases, with its record)
ProgressCallback = Callable[[str, int, int, Job, CaseRecord | None], None]

#: notify(line): one line about the environments being prepared (built, reused, failed)
NotifyCallback = Callable[[str], None]


def environment_line(env: BuiltEnvironment) -> str:
    """The line about one prepared environment: built, reused from the cache, or failed."""
    name = env.request.name
    if env.error:
        return f"environment {name}: build failed, its cases are unavailable: {env.error}"
    how = "reused from the cache" if env.reused else f"built in {env.build_s:.1f} s"
    text = f"environment {name}: {how} ({', '.join(env.resolved)})"
    for warning in env.warnings:
        text += f"; warning: {warning}"
    return text

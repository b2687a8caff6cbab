"""The sweep's check of this machine, before and after its cases (:mod:`snnbench.host.preflight`
measures; this decides when it applies and what a noisy machine does to the sweep)."""

from __future__ import annotations

from collections.abc import Callable

from snnbench.executors import Executor
from snnbench.host.preflight import NoisyMachine, Preflight, Probes, check_machine, refusal
from snnbench.sweep.config import RunSettings


def preflight_check(settings: RunSettings, executor: Executor, device: str,
                    notify: Callable[[str], None] | None, when: str = "start",
                    probes: Probes | None = None) -> Preflight | None:
    """The check a sweep runs before (and after) its cases, on this machine.

    None when the cases run elsewhere (a cluster executor: this machine's load says nothing
    about theirs; each case still records its own, see :class:`CpuMonitor`). At the start,
    ``settings.strict`` turns a warning into :class:`NoisyMachine` (exit 2, nothing written);
    otherwise every warning goes to ``notify``, one line each (notices, which change nothing a
    user must act on, are only recorded; ``snnbench env --check`` shows them).
    """
    if not executor.runs_on_this_machine:
        return None
    jobs = executor.concurrency
    result = check_machine(settings.resolved_threads, jobs, device, when, probes)
    if when == "start" and settings.strict and result.noisy:
        raise NoisyMachine(refusal(result))
    if notify is not None:
        for finding in result.findings:
            if finding.level == "warning":
                notify(f"{finding.level}: {finding.message}")
    return result

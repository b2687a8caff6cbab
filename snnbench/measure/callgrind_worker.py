"""The counting process: ``valgrind --tool=callgrind ... python -m snnbench.measure.callgrind_worker
JOB.json`` (started by :func:`snnbench.measure.callgrind.collect`, after the case was timed).

It builds the job's model with one thread, warms every phase up, then, for each phase of the
job in order, switches callgrind's collection on around :data:`~snnbench.measure.callgrind.CALLS`
calls and dumps the counters (dump 1 is the first phase, dump 2 the second...). The calls are
those of :func:`snnbench.measure.timing.time_block`: a backward's own forward and every
``zero_grad`` stay outside the collected region.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from snnbench.measure.callgrind import CALLS, WARMUP_ROUNDS
from snnbench.measure.worker import apply_framework_settings
from snnbench.plugin import Model
from snnbench.records.contract import Job
from snnbench.registry import get_entry


def _instrument_on() -> None:
    """Switch callgrind's instrumentation on for this process (started with
    ``--instr-atstart=no``: the imports ran uninstrumented, at valgrind's plain speed). A
    failure leaves it off; the counts are then zero and the caller counts again with
    instrumentation from the start."""
    control = shutil.which("callgrind_control")
    if control is None:
        return
    subprocess.run([control, "-i", "on", str(os.getpid())], capture_output=True, timeout=120,
                   check=False)


def _calls(model: Model, phase: str, toggle: Callable[[], None],
           last_off: Callable[[], None]) -> None:
    """:data:`CALLS` calls of ``phase``, each between ``toggle()`` (collection on) and
    ``toggle()`` (off); the last one ends with ``last_off()`` instead (off, and dump)."""
    for i in range(CALLS):
        off = last_off if i == CALLS - 1 else toggle
        model.zero_grad()
        if phase == "forward":
            toggle()
            handle = model.forward()
            off()
        elif phase == "backward":
            handle = model.forward()
            toggle()
            model.backward(handle)
            off()
        else:
            toggle()
            handle = model.step()
            off()
        del handle


def count(job: Job) -> None:
    """Build, warm up, and count each phase of ``job`` (one callgrind dump per phase)."""
    import torch

    adapter = get_entry(job.adapter).create()
    adapter.check_variant(job.variant, job.device)
    apply_framework_settings(adapter.framework, job.workload, 1)
    workload = job.workload
    model = adapter.build(workload, workload.make_data(), job.device, job.variant)
    try:
        def nothing() -> None:
            pass

        for phase in job.phases:
            for _ in range(WARMUP_ROUNDS):
                _calls(model, phase, nothing, nothing)
        _instrument_on()
        for phase in job.phases:
            # the last call's end dumps (and zeroes) the counters: one dump per phase
            _calls(model, phase, torch._C._valgrind_toggle,
                   torch._C._valgrind_toggle_and_dump_stats)
    finally:
        model.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m snnbench.measure.callgrind_worker JOB.json``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m snnbench.measure.callgrind_worker JOB.json", file=sys.stderr)
        return 2
    try:
        count(Job.read(Path(args[0])))
    except Exception as exc:  # the timed worker records the reason; the case stays ok
        print(f"counting failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

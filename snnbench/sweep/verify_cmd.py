"""``snnbench verify``: every adapter against the reference, each check in its own process.

For each adapter × variant × reset × n the worker builds the network on the same weights and
input as the NumPy reference and compares spikes and gradients. ``--dump`` writes the arrays
(time-major, reference layouts) so anyone can re-check an adapter independently. With a sweep
config the checks are the networks that config runs, each as ``run`` checks it before timing.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from snnbench.adapter_shim import as_v2
from snnbench.executors.local import run_in_folder
from snnbench.host.scratch import scratch_folder
from snnbench.records.contract import DUMP_NOT_WRITTEN, CaseRecord, adapter_label, file_safe
from snnbench.records.schema import FAILED_STATUSES
from snnbench.registry import discover
from snnbench.store.storage import StorageError, record_written
from snnbench.sweep.config import RunConfig, RunSettings
from snnbench.sweep.planning.jobs import make_job, parent_record, static_adapter_record
from snnbench.sweep.planning.messages import NotifyCallback
from snnbench.sweep.planning.tasks import Task, build_environments, plan_tasks, resolve_device

# VerifyRequest re-exported: scripts and tests import the request from the command's module
from snnbench.sweep.verify_request import (
    DETACH_CHOICES,
    DEVICES,
    RESET_MODES,
    VerifyRequest as VerifyRequest,
)

#: verify's scratch folder in the temporary folder: ``snnbench-verify-<pid>-<random>``
SCRATCH_PREFIX = "snnbench-verify-"


def run_verification(
    request: VerifyRequest, console: Console | None = None,
    notify: NotifyCallback | None = None,
) -> list[CaseRecord]:
    """Run every check; returns one record per check (status ok, mismatch, skipped...).

    Library environments (``spikingjelly@0.0.0.0.14``) are built, or reused, before any check.
    """
    for reset in request.resets:
        if reset not in RESET_MODES:
            raise ValueError(f"reset must be subtract, zero or both, got {reset!r}")
    if request.device not in DEVICES:
        raise ValueError(f"device must be cpu or cuda, got {request.device!r}")
    entries = discover()
    if request.detach_reset not in DETACH_CHOICES:
        raise ValueError(f"detach-reset must be true, false, both or auto, got "
                         f"{request.detach_reset!r}")
    if request.config is not None:
        # the overhead probe computes no LIF: nothing of it to verify
        config = replace(request.config, run=replace(request.config.run, overhead_probe=False))
        tasks = list(dict.fromkeys(
            replace(task, workload=task.workload.shortened(config.run.verify_time_steps))
            for task in plan_tasks(config, entries, resolve_device(config.run.device))))
    else:
        # a graph's size is its file's: --neurons chooses Linear+LIF cases only
        sizes = {} if request.graph else {"neurons": request.neurons}
        config = RunConfig(
            run=RunSettings(adapters=request.adapters, device=request.device,
                            timeout_s=request.timeout_s, wheelhouse=request.wheelhouse),
            network=request.network(),
            sweeps=({"reset": request.resets, **sizes,
                     "detach_reset": DETACH_CHOICES[request.detach_reset]},),
        )
        tasks = plan_tasks(config, entries, request.device)
        if request.detach_reset == "auto":
            tasks = [_supported_detach(task, entries) for task in tasks]
    tasks, _ = build_environments(tasks, config.run, notify)
    if request.dump_dir is not None:
        request.dump_dir.mkdir(parents=True, exist_ok=True)
    largest = max((task.workload.size for task in tasks), default=0)
    records: list[CaseRecord] = []
    # SIGKILL leaves the folder behind: it names its owner, and the next verify removes it
    with scratch_folder(SCRATCH_PREFIX) as tmp:
        for index, task in enumerate(tasks, start=1):
            if console is not None:
                label = adapter_label(task.adapter, task.variant, task.environment.name)
                console.print(f"  [{index}/{len(tasks)}] {label} {task.workload.label}",
                              highlight=False)
            record = _check(task, config, entries, request, largest, tmp)
            if record.status == "error" and record.message.startswith(DUMP_NOT_WRITTEN):
                # the disk's failure, not the adapter's: said as such (exit 2), never as a
                # failed equivalence; the dumps written before are whole
                raise StorageError(record.message.removeprefix(DUMP_NOT_WRITTEN + ": ")
                                   + "; the dumps written before it are kept whole")
            if record.dump_path and Path(record.dump_path).is_file():
                # the folder's ledger: a later --dump may replace this file, and only this
                record_written(Path(record.dump_path).parent, [Path(record.dump_path)])
            records.append(record)
    return records


def _supported_detach(task: Task, entries: dict[str, Any]) -> Task:
    """``--detach-reset auto``: the task with the reset rule its adapter supports."""
    cls = entries[task.adapter].adapter_class
    if cls is None:
        return task
    workload = task.workload
    knobs = as_v2(cls()).capabilities(task.variant).knobs(workload.kind)
    narrowed = workload.with_supported(knobs, ("detach_reset",))
    return task if narrowed is workload else replace(task, workload=narrowed)


def _check(task: Task, config: RunConfig, entries: dict[str, Any], request: VerifyRequest,
           largest: int, tmp: Path) -> CaseRecord:
    dump_path = ""
    if request.dump_dir is not None and task.workload.size == largest:
        workload = task.workload
        varied = ("detach_reset",) if request.detach_reset == "both" else ()
        env = f"@{task.environment.name}" if task.environment.name else ""
        # a config's cases may differ in any field: its case id keeps their dumps apart
        case = f"-{workload.case_id}" if request.config is not None else ""
        name = file_safe(f"{task.adapter}{env}-{task.variant}-{workload.verify_tag(varied)}"
                         f"{case}.npz")
        dump_path = str((request.dump_dir / name).resolve())
    try:
        adapter = entries[task.adapter].create()
    except Exception as exc:  # a broken plugin is a row, never a crash
        return parent_record(make_job(task, config.run, None, mode="verify"), "unavailable",
                             str(exc))
    job = make_job(task, config.run, adapter, mode="verify", dump_path=dump_path)
    record = static_adapter_record(job, adapter)
    return record if record is not None else run_in_folder(job, tmp / "jobs", tmp / "logs")


def exit_code(records: list[CaseRecord]) -> int:
    """1 when an adapter declaring exact behaviour disagreed or a check broke, else 0."""
    return 1 if any(r.status in FAILED_STATUSES for r in records) else 0

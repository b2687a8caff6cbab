"""The sweep: cases × adapters, one fresh worker process each, results stored as they finish.

A crash, abort, hang or out-of-memory kill costs one row, never the sweep: the parent reads the
worker's result file, and when there is none it classifies the exit (timeout, signal, exit
code) into a status with a message.

The work lives in :mod:`snnbench.planning` (what to run) and :mod:`snnbench.sweep` (running
it), one job per module; this module is its face, the
names callers have long imported from here.
"""

from __future__ import annotations

from snnbench.executors.plugins import recorded_commands
from snnbench.planning.jobs import (
    WAIT_POLICIES,
    environment_failure,
    make_job,
    parent_record,
    plan_jobs,
    replicate_order,
    static_record,
    static_skip_reason,
    thread_env,
)
from snnbench.planning.messages import NotifyCallback, ProgressCallback
from snnbench.planning.selection import Selection, SelectionError, select_adapters
from snnbench.planning.tasks import (
    Task,
    build_environments,
    build_requests,
    plan_tasks,
    resolve_device,
    with_overhead_probe,
)
from snnbench.sweep.execute import clean_work_dir, execute, retry_attempts
from snnbench.sweep.plan import Plan, from_manifest, prepare, with_environments, with_executor
from snnbench.sweep.received import refuse_recorded_commands, refuse_recorded_environments
from snnbench.sweep.run import (
    SweepOutcome,
    choose_executor,
    merge_run,
    new_manifest,
    new_run_id,
    start_run,
)
from snnbench.sweep.threads import (
    keep_recorded_threads,
    refuse_changed_threads,
    share_threads,
)

__all__ = [
    "WAIT_POLICIES",
    "NotifyCallback",
    "Plan",
    "ProgressCallback",
    "Selection",
    "SelectionError",
    "SweepOutcome",
    "Task",
    "build_environments",
    "build_requests",
    "choose_executor",
    "clean_work_dir",
    "environment_failure",
    "execute",
    "from_manifest",
    "keep_recorded_threads",
    "make_job",
    "merge_run",
    "new_manifest",
    "new_run_id",
    "parent_record",
    "plan_jobs",
    "plan_tasks",
    "prepare",
    "recorded_commands",
    "refuse_changed_threads",
    "refuse_recorded_commands",
    "refuse_recorded_environments",
    "replicate_order",
    "resolve_device",
    "retry_attempts",
    "select_adapters",
    "share_threads",
    "start_run",
    "static_record",
    "static_skip_reason",
    "thread_env",
    "with_environments",
    "with_executor",
    "with_overhead_probe",
]

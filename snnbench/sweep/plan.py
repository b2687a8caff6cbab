"""A sweep's plan: what it runs, prepared before its run folder is touched.

``plan = prepare(config, run_id)`` selects the adapters and lists the tasks (a selection error
is refused here, before any write); :func:`with_environments` builds the library environments
they need, :func:`with_executor` gives each case its share of the cores, and
:meth:`Plan.jobs` numbers the jobs in sweep order. A resumed run rebuilds the same plan from
its manifest (:func:`from_manifest`), so a new run and a resume take the same steps.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from snnbench.executors import Executor
from snnbench.host.libenv import BuiltEnvironment
from snnbench.records.contract import Job
from snnbench.registry import AdapterEntry
from snnbench.store.manifest import Manifest
from snnbench.sweep.config import RunConfig
from snnbench.sweep.planning.jobs import plan_jobs
from snnbench.sweep.planning.messages import NotifyCallback
from snnbench.sweep.planning.tasks import Task, build_environments, plan_tasks, resolve_device
from snnbench.sweep.threads import keep_recorded_threads, share_threads


@dataclass(frozen=True)
class Plan:
    """What a sweep runs: the run, its config (threads as each case gets them), the device,
    the tasks and the adapters they name, and the environments built for them."""

    run_id: str
    config: RunConfig
    device: str
    tasks: list[Task]
    entries: dict[str, AdapterEntry]
    environments: list[BuiltEnvironment] = field(default_factory=list)

    def jobs(self) -> list[Job]:
        """One job per task and replicate, numbered in sweep order."""
        return plan_jobs(self.tasks, self.config.run, self.entries)


def prepare(config: RunConfig, run_id: str, entries: dict[str, AdapterEntry],
            device: str | None = None) -> Plan:
    """The plan of ``config`` (on ``device``, else the config's, ``auto`` resolved)."""
    device = device or resolve_device(config.run.device)
    return Plan(run_id, config, device, plan_tasks(config, entries, device), entries)


def from_manifest(manifest: Manifest, entries: dict[str, AdapterEntry], source: str) -> Plan:
    """The plan a run folder's manifest recorded: its config, device and thread count."""
    config = RunConfig.from_dict(manifest.config, source=source)
    if "thread_wait" not in manifest.config.get("run", {}):
        # written before the wait policy existed: its cases ran with the libraries' own
        config = dataclasses.replace(config, run=dataclasses.replace(
            config.run, thread_wait="library"))
    plan = prepare(config, manifest.run_id, entries, manifest.settings.device)
    # the threads the run recorded, not what "all cores" means on this machine
    return dataclasses.replace(plan, config=keep_recorded_threads(plan.config, manifest))


def with_environments(plan: Plan, notify: NotifyCallback | None = None) -> Plan:
    """The plan with every library environment built (or reused), in this process; a build
    that fails makes its tasks ``unavailable`` rows (:func:`.tasks.build_environments`)."""
    tasks, built = build_environments(plan.tasks, plan.config.run, notify)
    return dataclasses.replace(plan, tasks=tasks, environments=built)


def with_executor(plan: Plan, executor: Executor) -> Plan:
    """The plan with each case's threads capped to its share of the cores (``--jobs``)."""
    return dataclasses.replace(plan, config=share_threads(plan.config, executor))

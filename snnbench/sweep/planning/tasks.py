"""The tasks of a sweep: cases × selected adapters, and the library environments they need."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from snnbench.host.environment import nvidia_gpus
from snnbench.host.libenv import (
    Base,
    BuildSettings,
    BuiltEnvironment,
    EnvironmentRequest,
    build_all,
    prepare,
)
from snnbench.plugin import Adapter
from snnbench.records.contract import LibraryEnvironment, case_key
from snnbench.registry import AdapterEntry
from snnbench.store.overhead import NULL
from snnbench.sweep.config import RunConfig, RunSettings
from snnbench.sweep.planning.messages import NotifyCallback, environment_line
from snnbench.sweep.planning.selection import select_adapters
from snnbench.workload import Workload

#: the adapter a sweep over every library runs first in each case (plain PyTorch)
BASELINE_ADAPTER = "torch"


@dataclass(frozen=True)
class Task:
    """One (adapter, variant, environment, case) to run in its own process."""

    adapter: str
    variant: str
    #: what the case computes, of any registered kind; its label and size name it in
    #: progress lines
    workload: Workload
    device: str
    #: the base environment, or an overlay (its ``python`` set once it is built)
    environment: LibraryEnvironment = field(default_factory=LibraryEnvironment)

    @property
    def key(self) -> str:
        return case_key(self.adapter, self.variant, self.device, self.workload.case_id,
                        self.environment.name)


def resolve_device(device: str) -> str:
    """``auto`` → ``cuda`` when NVML sees an NVIDIA GPU, else ``cpu``."""
    if device != "auto":
        return device
    return "cuda" if nvidia_gpus() else "cpu"


def plan_tasks(config: RunConfig, entries: dict[str, AdapterEntry], device: str) -> list[Task]:
    """Every task of the sweep, case-major so all adapters run one size before the next.

    Tasks of an environment carry its name and requirements; :func:`build_environments`
    gives them the interpreter to run under.
    """
    selections = select_adapters(config.run.adapters, entries, config.environments,
                                 probes=False)
    if any(name.strip() in ("all", "*") for name in config.run.adapters):
        # every library: plain PyTorch first in each case, the reference everyone knows and
        # the quickest to start, so a run's first library number comes within seconds (the
        # order of the others is the registry's; each case runs in a process of its own)
        selections.sort(key=lambda sel: sel.adapter != BASELINE_ADAPTER)
    tasks: list[Task] = []
    adapters: dict[str, Adapter | None] = {}
    for workload in config.cases():
        for sel in selections:
            cls = entries[sel.adapter].adapter_class
            env = (LibraryEnvironment(sel.environment.name, sel.environment.requirements)
                   if sel.environment else LibraryEnvironment())
            if sel.variant:
                variants: tuple[str, ...] = (sel.variant,)
            elif cls is None:
                variants = ("default",)
            else:
                if sel.adapter not in adapters:
                    adapters[sel.adapter] = _created(entries[sel.adapter])
                variants = asked_variants(adapters[sel.adapter], cls.variants, workload,
                                          device, bool(env.name))
            tasks.extend(Task(sel.adapter, v, workload, device, env) for v in variants)
    tasks = list(dict.fromkeys(tasks))
    return with_overhead_probe(tasks, entries) if config.run.overhead_probe else tasks


def _created(entry: AdapterEntry) -> Adapter | None:
    try:
        return entry.create()
    except Exception:  # a broken plugin is reported as its rows' status, never here
        return None


def asked_variants(adapter: Adapter | None, variants: tuple[str, ...], workload: Workload,
                   device: str, overlay: bool = False) -> tuple[str, ...]:
    """The variants of an adapter a selection without one (``haiku``, ``all``) runs at a
    case: those it can honour there. A variant made for another device or dtype
    (``fused:cudagraph`` on a CPU run, ``haiku:bf16`` at a float32 case) is not expanded: a
    skipped row nobody asked for says nothing. When no variant can run, the first one stays,
    so the adapter still has a row saying why. ``overlay``: the library is another version
    than this process sees, so only the declared capabilities are read (as
    :func:`snnbench.sweep.planning.jobs.static_skip_reason` does)."""
    if adapter is None or len(variants) < 2:
        return variants

    def honoured(variant: str) -> bool:
        try:
            reason = (Adapter.reason_skipped(adapter, workload, device, variant) if overlay
                      else adapter.reason_skipped(workload, device, variant))
        except Exception:  # decided by the case's own row, as before
            return True
        return reason is None

    return tuple(v for v in variants if honoured(v)) or variants[:1]


def with_overhead_probe(tasks: list[Task], entries: dict[str, AdapterEntry]) -> list[Task]:
    """``tasks`` with one ``null`` task (the harness-overhead probe) per device, at the
    smallest case (fewest operations, the workload's count: n·n·B·T·layers), placed first
    among that case's tasks; unchanged when the sweep already runs ``null`` on that device or
    no ``null`` adapter is installed."""
    if NULL not in entries:
        return tasks
    out = list(tasks)
    for device in dict.fromkeys(t.device for t in tasks):
        mine = [t for t in out if t.device == device]
        if any(t.adapter == NULL for t in mine):
            continue
        smallest = min(mine, key=lambda t: t.workload.operations())
        out.insert(out.index(smallest), Task(NULL, "default", smallest.workload, device))
    return out


def build_environments(tasks: list[Task], settings: RunSettings,
                       notify: NotifyCallback | None = None
                       ) -> tuple[list[Task], list[BuiltEnvironment]]:
    """Resolve, build (or reuse) every environment the tasks need, in this process.

    Raises :class:`~snnbench.host.libenv.EnvironmentSpecError` (exit 2) for requirements that cannot
    be resolved, before any case runs. A build that fails is not raised: its tasks carry the
    installer's error and become ``unavailable`` rows. Returns the tasks, each with its
    environment's interpreter, and what was built.
    """
    requests = [EnvironmentRequest(t.environment.name, t.environment.requirements)
                for t in tasks if t.environment.name]
    if not requests:
        return tasks, []
    built = build_requests(requests, BuildSettings.from_run(settings.env_cache,
                                                            settings.wheelhouse), notify)
    resolved = {
        name: LibraryEnvironment(name, env.request.requirements, env.python, env.resolved,
                                 env.error)
        for name, env in built.items()
    }
    tasks = [replace(t, environment=resolved[t.environment.name]) if t.environment.name else t
             for t in tasks]
    return tasks, list(built.values())


def build_requests(requests: list[EnvironmentRequest], settings: BuildSettings,
                   notify: NotifyCallback | None = None) -> dict[str, BuiltEnvironment]:
    """Resolve (exit 2 on bad input) then build or reuse each environment; name → result."""
    requests = list(dict.fromkeys(requests))
    if not requests:
        return {}
    base = Base.current()
    plans = prepare(requests, settings, base)
    if notify:
        for name, plan in plans.items():
            if plan.pins:
                notify(f"environment {name}: building in {settings.cache_dir} "
                       f"({', '.join(plan.pins)})")
    built = build_all(plans, settings, base)
    if notify:
        for env in built.values():
            notify(environment_line(env))
    return built

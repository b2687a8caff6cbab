"""The ``[executor]`` table of a config (and the flags that override it).

::

    [executor]
    name = "slurm"            # local (default), slurm or ray
    jobs = 1                  # local: CPU cases side by side, each on its own cores
    gpus = []                 # local: GPUs (NVML index or UUID), one case per GPU at a time
    bind_cpus = false         # local --gpus: pin each case to the CPUs nearest its GPU

    [executor.slurm]
    partition = "gpu"
    account = ""
    gpus_per_node = 1         # per array task; 0 for a CPU sweep
    cpus_per_task = 0         # 0: the sweep's thread count
    timeout_min = 240         # per array task (all its cases)
    array_parallelism = 8     # array tasks running at once
    cases_per_task = 4        # cases packed into one array task, run one after another
    setup = ["module load cuda/13.0", "source ~/snnbench/.venv/bin/activate"]
    image = ""                # an Apptainer image: each case runs in `apptainer exec --nv IMAGE`
    container_args = []       # extra `apptainer exec` arguments (e.g. ["--bind", "/scratch"])
    heartbeat_window_s = 600  # tasks on other hosts stop when `snnbench run` is silent this long

    [executor.ray]
    address = ""              # "" = $RAY_ADDRESS, else a new local Ray instance

Nothing here changes what a case measures, except that side-by-side cases share a machine:
their rows record it.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from snnbench.errors import UserError

#: the entry-point group executors register in (like ``snnbench.adapters``)
ENTRY_POINT_GROUP = "snnbench.executors"


class ExecutorError(UserError):
    """An executor cannot be used as asked (missing engine, bad option); one line."""


def executor_names() -> tuple[str, ...]:
    """The executors installed: names in the ``snnbench.executors`` group, none loaded."""
    names = {ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    # the shipped three first, in their documented order; plugins after, by name
    shipped = tuple(n for n in ("local", "slurm", "ray") if n in names)
    return shipped + tuple(sorted(names - set(shipped)))


#: the shipped executors (plugins add theirs: :func:`executor_names`)
EXECUTORS: tuple[str, ...] = ("local", "slurm", "ray")


@dataclass(frozen=True)
class SlurmSettings:
    """``[executor.slurm]``: how the sweep is submitted as one Slurm array job."""

    partition: str = ""
    account: str = ""
    gpus_per_node: int = 1
    cpus_per_task: int = 0
    timeout_min: int = 240
    array_parallelism: int = 8
    cases_per_task: int = 4
    setup: tuple[str, ...] = ()
    image: str = ""
    container_args: tuple[str, ...] = ()
    #: seconds without a heartbeat of the submitting ``snnbench run`` after which the array
    #: tasks on other hosts stop (on its own host they watch its pid)
    heartbeat_window_s: int = 600
    #: submitit cluster: ``slurm``, or ``local`` (tests, a laptop: no Slurm needed)
    cluster: str = "slurm"

    def __post_init__(self) -> None:
        for name in ("gpus_per_node", "cpus_per_task"):
            _check_int(name, getattr(self, name), minimum=0)
        for name in ("timeout_min", "array_parallelism", "cases_per_task",
                     "heartbeat_window_s"):
            _check_int(name, getattr(self, name), minimum=1)
        if self.cluster not in ("slurm", "local"):
            # submitit's "debug" cluster runs pdb on a failure: never
            raise ExecutorError(f"slurm cluster must be slurm or local (submitit's debug cluster "
                                f"would start pdb on a failure), got {self.cluster!r}")


@dataclass(frozen=True)
class RaySettings:
    """``[executor.ray]``: which Ray cluster runs the cases."""

    address: str = ""


@dataclass(frozen=True)
class ExecutorSettings:
    """``[executor]``: which executor runs the sweep, and its options."""

    name: str = "local"
    jobs: int = 1
    gpus: tuple[str, ...] = ()
    bind_cpus: bool = False
    slurm: SlurmSettings = field(default_factory=SlurmSettings)
    ray: RaySettings = field(default_factory=RaySettings)

    def __post_init__(self) -> None:
        if self.name not in EXECUTORS and self.name not in executor_names():
            known = ", ".join(dict.fromkeys(EXECUTORS + executor_names()))
            raise ExecutorError(f"unknown executor {self.name!r} (known: {known})")
        _check_int("jobs", self.jobs, minimum=1, flag="--jobs")
        if self.jobs > 1 and self.gpus:
            raise ExecutorError("--jobs (CPU cases side by side) and --gpus (one case per GPU) "
                                "exclude each other")
        if self.name != "local" and (self.jobs > 1 or self.gpus):
            raise ExecutorError(f"--jobs and --gpus are options of the local executor, not of "
                                f"{self.name!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the manifest's config)."""
        data = dataclasses.asdict(self)
        data["gpus"] = list(self.gpus)
        data["slurm"]["setup"] = list(self.slurm.setup)
        data["slurm"]["container_args"] = list(self.slurm.container_args)
        return data

    @classmethod
    def from_dict(cls, raw: Any, source: str = "config") -> ExecutorSettings:
        """Validate an ``[executor]`` table; unknown keys are errors."""
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise ExecutorError(f"{source}: [executor] must be a table")
        values = dict(raw)
        _no_unknown(values, cls, f"{source}: [executor]")
        if "gpus" in values:
            values["gpus"] = tuple(str(g) for g in _listed(values["gpus"]))
        slurm = dict(values.pop("slurm", None) or {})
        _no_unknown(slurm, SlurmSettings, f"{source}: [executor.slurm]")
        for key in ("setup", "container_args"):
            if key in slurm:
                slurm[key] = tuple(str(v) for v in _listed(slurm[key]))
        ray = dict(values.pop("ray", None) or {})
        _no_unknown(ray, RaySettings, f"{source}: [executor.ray]")
        try:
            return cls(**values, slurm=SlurmSettings(**slurm), ray=RaySettings(**ray))
        except TypeError as exc:
            raise ExecutorError(f"{source}: [executor]: {exc}") from exc

    def with_overrides(self, changes: Mapping[str, Any]) -> ExecutorSettings:
        """Flags over the config: top-level keys, and ``slurm.KEY`` / ``ray.KEY``."""
        top = {k: v for k, v in changes.items() if "." not in k}
        slurm = {k.split(".", 1)[1]: v for k, v in changes.items() if k.startswith("slurm.")}
        ray = {k.split(".", 1)[1]: v for k, v in changes.items() if k.startswith("ray.")}
        return dataclasses.replace(
            self, **top, slurm=dataclasses.replace(self.slurm, **slurm),
            ray=dataclasses.replace(self.ray, **ray))


def _listed(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value)


def _no_unknown(values: Mapping[str, Any], cls: type, where: str) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ExecutorError(f"{where}: unknown key(s) {', '.join(unknown)} "
                            f"(known: {', '.join(sorted(known))})")


def _check_int(name: str, value: Any, minimum: int, flag: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        what = flag or name
        raise ExecutorError(f"{what} must be an integer ≥ {minimum}, got {value!r}")

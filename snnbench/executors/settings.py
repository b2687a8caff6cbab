"""The ``[executor]`` table of a config (and the flags that override it).

::

    [executor]
    name = "slurm"            # local (default), slurm, ray, or an executor plugin's name
    jobs = 1                  # local: CPU cases side by side, each on its own cores
    gpus = []                 # local: GPUs (NVML index or UUID), one case per GPU at a time
    bind_cpus = false         # local --gpus: pin each case to the CPUs nearest its GPU
    start = "auto"            # local: fork each case from a pre-imported parent where it is
                              # safe (auto, the default; fork: insist), or spawn a new
                              # interpreter per case

    [executor.NAME]           # the settings of executor NAME (its plugin's settings_type)

Each executor owns its sub-table: its plugin (the class the ``snnbench.executors`` entry point
names) says which dataclass reads it (``settings_type``), and this module parses the
sub-table with it, refusing unknown keys. The shipped ones document theirs beside their code:
``[executor.slurm]`` in :class:`snnbench.executors.slurm.SlurmSettings`, ``[executor.ray]`` in
:class:`snnbench.executors.ray_engine.RaySettings`. Nothing here names an executor's settings;
a plugin is loaded only when its sub-table is read or asked for.

Nothing here changes what a case measures, except that side-by-side cases share a machine:
their rows record it.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snnbench.errors import UserError

#: the entry-point group executors register in (like ``snnbench.adapters``)
ENTRY_POINT_GROUP = "snnbench.executors"


class ExecutorError(UserError):
    """An executor cannot be used as asked (missing engine, bad option); one line."""


#: the shipped executors (plugins add theirs: :func:`executor_names`)
EXECUTORS: tuple[str, ...] = ("local", "slurm", "ray")


def executor_names() -> tuple[str, ...]:
    """The executors installed: names in the ``snnbench.executors`` group, none loaded."""
    names = {ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    # the shipped three first, in their documented order; plugins after, by name
    shipped = tuple(n for n in EXECUTORS if n in names)
    return shipped + tuple(sorted(names - set(shipped)))


def load_executor(name: str) -> Any:
    """What the ``snnbench.executors`` entry point ``name`` names (an Executor subclass, checked
    by :func:`snnbench.executors.plugins.executor_class`); a missing or broken plugin is one
    clear line."""
    found = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
             if ep.name == name]
    if not found:
        raise ExecutorError(f"unknown executor {name!r}: no {ENTRY_POINT_GROUP} entry point")
    try:
        return found[0].load()
    except Exception as exc:  # a broken plugin is reported, never a traceback
        raise ExecutorError(f"executor {name!r} failed to load ({found[0].value}): "
                            f"{type(exc).__name__}: {exc}") from exc


def settings_type(name: str) -> type | None:
    """The dataclass that reads ``[executor.NAME]`` (the plugin's ``settings_type``); None when
    the executor takes no sub-table."""
    cls = load_executor(name)
    kind = getattr(cls, "settings_type", None)
    if kind is None:
        return None
    if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
        raise ExecutorError(f"executor {name!r}: its settings_type {kind!r} is not a dataclass")
    return kind


def _with_settings() -> tuple[str, ...]:
    """The installed executors that take a sub-table (for an error message: a plugin that
    fails to load is left out, its own sub-table names it)."""
    names = []
    for name in executor_names():
        try:
            if settings_type(name) is not None:
                names.append(name)
        except ExecutorError:
            pass
    return tuple(names)


#: the keys of ``[executor]`` itself (the rest name sub-tables)
_TOP_KEYS: tuple[str, ...] = ("name", "jobs", "gpus", "bind_cpus", "start")
#: ``start``: how the local executor starts a case's worker (auto: fork where it is safe)
START_SETTINGS: tuple[str, ...] = ("auto", "fork", "spawn")


@dataclass(frozen=True, init=False)
class ExecutorSettings:
    """``[executor]``: which executor runs the sweep, and its options.

    ``tables`` holds the sub-tables given (in the config, by flags or as keywords:
    ``ExecutorSettings(name="slurm", slurm=SlurmSettings(...))``) that differ from their
    defaults, each the settings object of the executor it is named after; :meth:`table` (or
    ``settings.NAME``) gives an executor's settings, its defaults when none were given.
    """

    name: str
    jobs: int
    gpus: tuple[str, ...]
    bind_cpus: bool
    #: local: "auto" (the default: fork where it is safe, else spawn), "fork" (each case
    #: forked from a zygote that imported its library once; refused where this machine cannot)
    #: or "spawn" (a new interpreter per case)
    start: str
    #: (executor name, its settings object), by name
    tables: tuple[tuple[str, Any], ...]

    def __init__(self, name: str = "local", jobs: int = 1, gpus: tuple[str, ...] = (),
                 bind_cpus: bool = False, tables: Mapping[str, Any] | None = None,
                 start: str = "auto", **by_name: Any) -> None:
        given = {key: value for key, value in {**dict(tables or {}), **by_name}.items()
                 if not _is_default(value)}
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "jobs", jobs)
        object.__setattr__(self, "gpus", gpus)
        object.__setattr__(self, "bind_cpus", bind_cpus)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "tables", tuple(sorted(given.items())))
        self.__post_init__()

    def __post_init__(self) -> None:
        if self.name not in EXECUTORS and self.name not in executor_names():
            known = ", ".join(dict.fromkeys(EXECUTORS + executor_names()))
            raise ExecutorError(f"unknown executor {self.name!r} (known: {known})")
        check_int("jobs", self.jobs, minimum=1, flag="--jobs")
        if self.jobs > 1 and self.gpus:
            raise ExecutorError("--jobs (CPU cases side by side) and --gpus (one case per GPU) "
                                "exclude each other")
        if self.start not in START_SETTINGS:
            raise ExecutorError(f"start must be one of {', '.join(START_SETTINGS)}, got "
                                f"{self.start!r}")
        if self.name != "local" and self.start == "fork":
            raise ExecutorError(f"--start fork is an option of the local executor; "
                                f"{self.name!r} starts each case as a new process")
        if self.name != "local" and (self.jobs > 1 or self.gpus):
            raise ExecutorError(f"--jobs and --gpus are options of the local executor, not of "
                                f"{self.name!r}")
        if self.tables:
            installed = executor_names()
            for key, value in self.tables:
                if key not in installed or not dataclasses.is_dataclass(value):
                    raise ExecutorError(f"[executor.{key}]: no installed executor takes it as "
                                        f"its settings ({type(value).__name__})")

    def table(self, name: str) -> Any:
        """The settings of executor ``name``: its sub-table as given, else its defaults."""
        for key, value in self.tables:
            if key == name:
                return value
        kind = settings_type(name)
        if kind is None:
            raise ExecutorError(f"the {name} executor takes no [executor.{name}] table")
        return kind()

    def __getattr__(self, name: str) -> Any:
        # settings.slurm: an executor's settings (only for names that are no attribute)
        if name.startswith("_") or name in _FIELDS:  # (a field not set yet: unpickling)
            raise AttributeError(name)
        try:
            return self.table(name)
        except ExecutorError as exc:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r} "
                                 f"({exc})") from None

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the manifest's config): ``[executor]`` and the settings of every installed
        executor that takes a sub-table, defaults included (this loads those plugins)."""
        data: dict[str, Any] = {"name": self.name, "jobs": self.jobs, "gpus": list(self.gpus),
                                "bind_cpus": self.bind_cpus, "start": self.start}
        held = dict(self.tables)
        for key in (*_with_settings(), *held):
            if key not in data:
                value = held[key] if key in held else self.table(key)
                data[key] = {k: list(v) if isinstance(v, tuple) else v
                             for k, v in dataclasses.asdict(value).items()}
        return data

    @classmethod
    def from_dict(cls, raw: Any, source: str = "config") -> ExecutorSettings:
        """Validate an ``[executor]`` table; unknown keys are errors."""
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise ExecutorError(f"{source}: [executor] must be a table")
        values = {k: v for k, v in raw.items() if k in _TOP_KEYS}
        subtables = {k: v for k, v in raw.items() if k not in _TOP_KEYS}
        installed = executor_names()
        if any(str(k) not in installed or settings_type(str(k)) is None for k in subtables):
            known = sorted(_TOP_KEYS + _with_settings())
            unknown = sorted(str(k) for k in subtables if k not in known)
            raise ExecutorError(f"{source}: [executor]: unknown key(s) {', '.join(unknown)} "
                                f"(known: {', '.join(known)})")
        if "gpus" in values:
            values["gpus"] = tuple(str(g) for g in _listed(values["gpus"]))
        tables = {str(k): _parse_table(str(k), v, source) for k, v in subtables.items()}
        try:
            return cls(**values, tables=tables)
        except TypeError as exc:
            raise ExecutorError(f"{source}: [executor]: {exc}") from exc

    def with_overrides(self, changes: Mapping[str, Any]) -> ExecutorSettings:
        """Flags over the config: top-level keys, and ``NAME.KEY`` for executor NAME's table
        (``slurm.partition``)."""
        top = {k: v for k, v in changes.items() if "." not in k}
        tables = dict(self.tables)
        for key, value in changes.items():
            if "." in key:
                name, field = key.split(".", 1)
                current = tables[name] if name in tables else self.table(name)
                tables[name] = dataclasses.replace(current, **{field: value})
        kept = {key: getattr(self, key) for key in _TOP_KEYS}
        return type(self)(**{**kept, **top}, tables=tables)

    def refuse_foreign(self, given: Mapping[str, Any]) -> None:
        """Refuse options (``given`` as :meth:`with_overrides` takes them) that these settings
        would ignore (``--partition`` on a local run, ``--bind-cpus`` without ``--gpus``): a
        silently ignored option is a wrong run. Named as the command line's flags."""
        owners = {"slurm.": "slurm", "ray.": "ray"}
        for key in given:
            owner = next((name for prefix, name in owners.items() if key.startswith(prefix)),
                         None)
            if owner is not None and self.name != owner:
                flag = "--" + key.split(".", 1)[1].replace("_", "-")
                flag = {"--cluster": "--slurm-cluster", "--address": "--ray-address"}.get(flag,
                                                                                          flag)
                raise ExecutorError(f"{flag} is an option of the {owner} executor, not of "
                                    f"{self.name!r} (add --executor {owner}, or leave it out)")
        if given.get("bind_cpus") and (self.name != "local" or not self.gpus):
            raise ExecutorError("--bind-cpus pins cases to the CPUs nearest their GPU: it needs "
                                "the local executor with --gpus")
        image = self.slurm.image if self.name == "slurm" else ""
        if image and not Path(image).is_file():
            # up front, on either submitit cluster: else each array task fails in apptainer
            # and its row says only "the array task failed"
            why = ("is a folder, not an image" if Path(image).is_dir()
                   else "no such Apptainer image")
            raise ExecutorError(f"--image {image}: {why}")


def _is_default(value: Any) -> bool:
    """Whether ``value`` (an executor's settings) equals its type's defaults: such a table is
    not held, so a config and its manifest (which lists every default) compare equal."""
    try:
        return bool(value == type(value)())
    except Exception:  # a settings type with a field that has no default
        return False


_FIELDS = frozenset(f.name for f in dataclasses.fields(ExecutorSettings))


def _parse_table(name: str, raw: Any, source: str) -> Any:
    """``[executor.NAME]`` read by executor NAME's settings type; a field whose default is a
    tuple takes a list (or one text)."""
    where = f"{source}: [executor.{name}]"
    kind = settings_type(name)
    assert kind is not None  # from_dict refused the sub-tables of executors that take none
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ExecutorError(f"{where} must be a table")
    values = dict(raw)
    _no_unknown(values, kind, where)
    for f in dataclasses.fields(kind):
        if f.name in values and isinstance(f.default, tuple):
            values[f.name] = tuple(str(v) for v in _listed(values[f.name]))
    try:
        return kind(**values)
    except TypeError as exc:
        raise ExecutorError(f"{where}: {exc}") from exc


def _listed(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value)


def _no_unknown(values: Mapping[str, Any], cls: type, where: str) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ExecutorError(f"{where}: unknown key(s) {', '.join(unknown)} "
                            f"(known: {', '.join(sorted(known))})")


def check_int(name: str, value: Any, minimum: int, flag: str = "") -> None:
    """Refuse ``value`` unless it is an integer ≥ ``minimum`` (for executors' settings too)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        what = flag or name
        raise ExecutorError(f"{what} must be an integer ≥ {minimum}, got {value!r}")

"""Sweep configuration: TOML files plus command-line overrides → a validated list of cases.

A config has three parts::

    [run]        # how to measure: adapters, device, repeats, warm-up, timeout...
    [network]    # the workload's fields shared by every case (scalars): a Linear+LIF
                 # network's (NetworkSpec), or with ``graph = "net.nir"`` a NIR graph's choices
    [[sweep]]    # zero or more tables; each key is such a field with a list of values,
                 # and the cases are the union over tables of each table's cartesian product
    [environments.NAME]   # zero or more library environments layered over the base one:
    requirements = ["spikingjelly==0.0.0.0.14", "cupy-cuda12x"]   # selected as adapter@NAME
    [executor]   # optional: where the cases run (snnbench.executors.settings)

Unknown keys anywhere are errors: a typo must never silently fall back to a default. The
workload kind owns its fields (:meth:`~snnbench.workload.Workload.from_config`): the kind whose
``config_key`` the tables hold (``graph``: ``nir-graph``), else ``linear-lif``. A relative
graph path is relative to the config file's folder.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, get_type_hints

from pydantic import AfterValidator, PlainSerializer, PlainValidator, TypeAdapter, ValidationError

from snnbench.errors import UserError, shown
from snnbench.executors.settings import ExecutorSettings
from snnbench.records import validation
from snnbench.records.fileio import NotAFile, read_regular
from snnbench.records.sampling import (
    PREPARE_TIMEOUT_S,
    TIMEOUT_S,
    VERIFY_TIME_STEPS,
    Count,
    MeasureSettings,
    Positive,
    Seconds,
    check,
)
from snnbench.records.schema import TIMED_PHASES
from snnbench.workload.base import Workload, config_kind, marked_kind

DEVICES: tuple[str, ...] = ("cpu", "cuda", "auto")
#: the most a config file may hold: the shipped ones are a few KiB
CONFIG_MAX_BYTES = 1 << 20
#: how idle CPU threads wait (``[run] thread_wait``): ``passive`` sleeps at once
#: (OMP_WAIT_POLICY=PASSIVE), ``active`` spins, ``library`` leaves each library's default
THREAD_WAITS: tuple[str, ...] = ("passive", "active", "library")
#: environment variables of snnbench's own that take one of a few values (read, as the
#: adapter reads it, stripped and in lower case): the values snnbench/fused/gemm.py accepts
CHOICE_VARIABLES: dict[str, tuple[str, ...]] = {"SNNBENCH_FUSED_CPU_GEMM": ("onednn", "blas")}


class ConfigError(UserError, ValueError):
    """The configuration is invalid; the message is one line naming the problem."""


# -- field types: each [run] key's check, declared with its field --------------------------------
# A check raises ValueError("must be ..., got ...") and :func:`_config_error` puts the key's name
# in front: one line, never a traceback or an error row halfway through the sweep. The shared
# numeric checks (Positive, Count, Seconds) are snnbench.records.sampling's, which the sampling
# settings declare their fields with.

def _one_of(choices: tuple[str, ...]) -> PlainValidator:
    return check(lambda v: isinstance(v, str) and v in choices, f"one of {', '.join(choices)}")


def _above_zero(value: float) -> float:
    if value <= 0:
        raise ValueError(f"must be > 0, got {value!r}")
    return value


def _absolute(value: str) -> str:
    # recorded absolute: a run resumed from another folder must find the same cache (not
    # build a second one) and the same wheels
    return os.path.abspath(os.path.expanduser(value)) if value else value


def _adapter_names(value: tuple[str, ...]) -> tuple[str, ...]:
    if not value or not all(a.strip() for a in value):
        raise ValueError("must name at least one adapter (or 'all'), and no empty name")
    return value


def _timed_phases(value: tuple[str, ...]) -> tuple[str, ...]:
    bad = [p for p in value if p not in TIMED_PHASES]
    if bad or not value:
        raise ValueError(f"must be a non-empty subset of {', '.join(TIMED_PHASES)}, got {bad}")
    return value


#: a list of names (a tuple in memory, a list in the manifest)
_Names = Annotated[tuple[str, ...], PlainSerializer(list),
                   check(lambda v: isinstance(v, tuple) and all(isinstance(n, str) for n in v),
                         "a list of names")]
_Limit = Annotated[Seconds, AfterValidator(_above_zero)]
_Flag = Annotated[bool, check(lambda v: isinstance(v, bool), "true or false")]
_Path = Annotated[str, check(lambda v: isinstance(v, str), "a path (text)"),
                  AfterValidator(_absolute)]


@dataclass(frozen=True)
class RunSettings(MeasureSettings):
    """How a sweep is measured (the ``[run]`` table): the sampling settings every worker
    applies (inherited from :class:`MeasureSettings`, where they are declared) and the sweep's
    own.

    Every field is checked by its type's validator (:func:`_validate_fields`), also when built
    in code: a wrong value is a one-line :class:`ConfigError`.
    """

    adapters: Annotated[_Names, AfterValidator(_adapter_names)] = ("all",)
    device: Annotated[str, _one_of(DEVICES)] = "auto"
    timeout_s: _Limit = TIMEOUT_S
    #: seconds a worker may spend preparing (library import, first-use extension builds)
    #: before its case starts; the case's own ``timeout_s`` starts after that
    prepare_timeout_s: _Limit = PREPARE_TIMEOUT_S
    #: CPU threads for torch and XLA in every worker; 0 means all cores of this machine
    threads: Count = 0
    phases: Annotated[_Names, AfterValidator(_timed_phases)] = TIMED_PHASES
    verify: _Flag = True
    verify_time_steps: Positive = VERIFY_TIME_STEPS
    allow_mismatch: _Flag = False
    energy: _Flag = True
    #: count each timed phase's instructions under valgrind's callgrind after timing it, in
    #: a process of its own (CPU cases; snnbench.measure.callgrind, docs/instructions.md)
    instructions: _Flag = False
    #: where library environments are cached ("": $SNNBENCH_ENV_CACHE or ~/.cache/snnbench/envs)
    env_cache: _Path = ""
    #: a folder of wheels: build library environments from it alone, offline ("": the index,
    #: or $SNNBENCH_WHEELHOUSE)
    wheelhouse: _Path = ""
    #: fresh worker processes per case (``--replicates``), interleaved across adapters (ABBA)
    replicates: Positive = 1
    #: add one ``null`` case (the harness-overhead probe) per run at its smallest case, so the
    #: report can give the harness overhead; the shipped configs turn it on
    overhead_probe: _Flag = False
    #: refuse to start on a noisy machine (snnbench.host.preflight): exit 2 with the reason
    strict: _Flag = False
    #: how idle CPU threads wait, for every adapter (see THREAD_WAITS, docs/methodology.md)
    thread_wait: Annotated[str, _one_of(THREAD_WAITS)] = "passive"

    def __post_init__(self) -> None:
        _validate_fields(self)

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain data (the manifest's ``config.run``)."""
        return {name: adapter.dump_python(getattr(self, name))
                for name, adapter in _field_adapters().items()}

    @property
    def measure_settings(self) -> MeasureSettings:
        """The sampling settings a worker applies to every phase."""
        return MeasureSettings(**{f.name: getattr(self, f.name)
                                  for f in dataclasses.fields(MeasureSettings)})

    @property
    def resolved_threads(self) -> int:
        """The thread count workers use (``threads`` or every core available)."""
        if self.threads:
            return self.threads
        if hasattr(os, "sched_getaffinity"):
            return len(os.sched_getaffinity(0))
        return os.cpu_count() or 1


#: one TypeAdapter per RunSettings field, built on first use (by field name)
_FIELD_ADAPTERS: dict[str, TypeAdapter[Any]] = {}


def _field_adapters() -> dict[str, TypeAdapter[Any]]:
    if not _FIELD_ADAPTERS:
        hints = get_type_hints(RunSettings, include_extras=True)
        by_type: dict[Any, TypeAdapter[Any]] = {}
        for f in dataclasses.fields(RunSettings):
            hint = hints[f.name]
            if hint not in by_type:
                by_type[hint] = TypeAdapter(hint)
            _FIELD_ADAPTERS[f.name] = by_type[hint]
    return _FIELD_ADAPTERS


def _validate_fields(settings: RunSettings) -> None:
    """Check every field of ``settings`` (and keep the checked value: paths made absolute)."""
    for name, adapter in _field_adapters().items():
        value = getattr(settings, name)
        try:
            checked = adapter.validate_python(value)
        except ValidationError as exc:
            raise _config_error(exc, name) from exc
        if checked is not value:
            object.__setattr__(settings, name, checked)
    if settings.max_repeats < settings.repeats:
        raise ConfigError(
            f"max_repeats ({settings.max_repeats}) must be ≥ repeats ({settings.repeats})"
        )


def _config_error(exc: ValidationError, name: str) -> ConfigError:
    """The one place a validation error of a ``[run]`` key becomes a one-line ConfigError."""
    return ConfigError(f"{name} {validation.problem(validation.first(exc))}")


@dataclass(frozen=True)
class RunConfig:
    """A whole sweep: settings, shared network fields and the sweep tables (a relative path
    among them already made absolute: :meth:`from_dict` does)."""

    run: RunSettings = field(default_factory=RunSettings)
    network: Mapping[str, Any] = field(default_factory=dict)
    sweeps: tuple[Mapping[str, tuple[Any, ...]], ...] = ()
    #: library environments by name (``[environments.NAME] requirements = [...]``)
    environments: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)

    @property
    def kind(self) -> type[Workload]:
        """The workload kind of every case: the one the network tables' keys name."""
        return config_kind(_keys(self.network, self.sweeps))

    def cases(self) -> list[Workload]:
        """Every distinct case, in sweep order (duplicates across tables are dropped)."""
        kind = self.kind
        tables = self.sweeps or ({},)
        seen: set[str] = set()
        workloads: list[Workload] = []
        for table in tables:
            keys = list(table)
            for values in itertools.product(*(table[k] for k in keys)):
                fields = {**self.network, **dict(zip(keys, values, strict=True))}
                try:
                    workload = kind.from_config(fields)
                except UserError as exc:
                    raise ConfigError(str(exc)) from exc
                except TypeError as exc:
                    raise ConfigError(f"invalid network field: {exc}") from exc
                if workload.case_id not in seen:
                    seen.add(workload.case_id)
                    workloads.append(workload)
        return workloads

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data (what the manifest stores and ``--resume`` reloads)."""
        return {
            "run": self.run.to_dict(),
            "network": dict(self.network),
            "sweep": [{k: list(v) for k, v in table.items()} for table in self.sweeps],
            "environments": {name: {"requirements": list(reqs)}
                             for name, reqs in self.environments.items()},
            "executor": self.executor.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "config",
                  folder: Path | None = None) -> RunConfig:
        """Validate plain data (parsed TOML or a manifest's config); a relative path among
        the network fields is relative to ``folder`` (the config file's; default: the
        current one)."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: a config must be a table, got {shown(data)}")
        tables = {"run", "network", "sweep", "environments", "executor"}
        unknown = sorted(str(k) for k in set(data) - tables)
        if unknown:
            raise ConfigError(
                f"{source}: unknown table(s) {', '.join(unknown)} (expected run, network, sweep, "
                "environments, executor)"
            )
        run = _run_settings(data.get("run", {}), source)
        network_raw = data.get("network", {})
        if not isinstance(network_raw, Mapping):
            raise ConfigError(f"{source}: [network] must be a table")
        sweeps_raw = data.get("sweep", [])
        if isinstance(sweeps_raw, Mapping):
            sweeps_raw = [sweeps_raw]
        if not isinstance(sweeps_raw, list):
            raise ConfigError(f"{source}: 'sweep' must be a list of tables ([[sweep]])")
        kind = config_kind(_keys(network_raw, [t for t in sweeps_raw if isinstance(t, Mapping)]))
        network = _network(network_raw, source, kind, folder)
        sweeps = tuple(_sweep_table(t, source, kind, folder) for t in sweeps_raw)
        environments = _environments(data.get("environments", {}), source)
        executor = ExecutorSettings.from_dict(data.get("executor"), source)
        config = cls(run=run, network=network, sweeps=sweeps, environments=environments,
                     executor=executor)
        config.cases()  # validate every case now, not halfway through a sweep
        return config

    def with_overrides(
        self, run: Mapping[str, Any], network_lists: Mapping[str, Sequence[Any]]
    ) -> RunConfig:
        """Command-line overrides: run settings, and network fields given as lists of values.

        A network override applies to every case: it replaces that field in every sweep table.
        Overrides that name another workload kind (``graph``: ``run --network G.nir`` over a
        Linear+LIF config) keep the config's fields that kind shares (T, B, the reset...) and
        leave out the others (``neurons``...); a relative path is relative to the current
        folder.
        """
        run_fields = {**dataclasses.asdict(self.run), **run}
        try:
            settings = RunSettings(**run_fields)
        except TypeError as exc:
            raise ConfigError(str(exc)) from exc
        kind = marked_kind(network_lists) or self.kind
        known = kind.config_fields()
        network = {k: v for k, v in self.network.items() if k in known}
        sweeps = [{k: v for k, v in t.items() if k in known} for t in self.sweeps] or [{}]
        for key, values in network_lists.items():
            if key not in known:
                where = "" if kind is self.kind else f" of a {kind.kind} workload"
                raise ConfigError(f"unknown network field {key!r}{where}")
            network.pop(key, None)
            for table in sweeps:
                table[key] = tuple(_resolved(kind, key, v, None) for v in values)
        config = RunConfig(
            run=settings, network=network, sweeps=tuple(t for t in sweeps if t),
            environments=self.environments,
            executor=self.executor,
        )
        config.cases()
        return config


def _run_settings(raw: Any, source: str) -> RunSettings:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: [run] must be a table")
    known = {f.name for f in dataclasses.fields(RunSettings)}
    unknown = sorted(str(k) for k in set(raw) - known)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) in [run]: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(known))})"
        )
    values = dict(raw)
    for key in ("adapters", "phases"):
        if key in values:
            if isinstance(values[key], str):
                values[key] = [values[key]]
            if not isinstance(values[key], list | tuple):
                raise ConfigError(f"{source}: {key} must be a list of names, got "
                                  f"{shown(values[key])}")
            values[key] = tuple(values[key])
    try:
        return RunSettings(**values)
    except TypeError as exc:
        raise ConfigError(f"{source}: {exc}") from exc


def _keys(network: Mapping[Any, Any], sweeps: Sequence[Mapping[Any, Any]]) -> set[str]:
    """Every key of the network tables (which name the workload kind)."""
    return {str(k) for table in (network, *sweeps) for k in table}


def _resolved(kind: type[Workload], key: str, value: Any, folder: Path | None) -> Any:
    """``value`` of ``key`` as the config keeps it (a path made absolute against ``folder``,
    default: the current one): the kind's :meth:`~snnbench.workload.Workload.config_value`."""
    return kind.config_value(key, value, None if folder is None else str(folder))


def _keys_known(raw: Mapping[Any, Any], table: str, source: str, kind: type[Workload]) -> None:
    """Refuse a key of ``table`` that is no field of the workload kind."""
    fields = kind.config_fields()
    unknown = sorted(str(k) for k in set(raw) - set(fields))
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) in {table}: {', '.join(unknown)} "
            f"(known: {', '.join(fields)})"
        )


def _network(raw: Mapping[Any, Any], source: str, kind: type[Workload],
             folder: Path | None) -> dict[str, Any]:
    _keys_known(raw, "[network]", source, kind)
    # each value on its own, also one that every [[sweep]] table overrides: it is still
    # recorded in the manifest, so it must be a valid value of its field
    for key, value in raw.items():
        try:
            kind.check_config_value(key, value)
        except UserError as exc:
            raise ConfigError(f"{source}: [network] {exc}") from exc
    return {key: _resolved(kind, key, value, folder) for key, value in raw.items()}


def _sweep_table(raw: Any, source: str, kind: type[Workload],
                 folder: Path | None) -> dict[str, tuple[Any, ...]]:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: each [[sweep]] must be a table")
    _keys_known(raw, "[[sweep]]", source, kind)
    table: dict[str, tuple[Any, ...]] = {}
    for key, value in raw.items():
        values = tuple(value) if isinstance(value, list) else (value,)
        if not values:
            raise ConfigError(f"{source}: [[sweep]] {key} is an empty list")
        table[key] = tuple(_resolved(kind, key, v, folder) for v in values)
    return table


def _environments(raw: Any, source: str) -> dict[str, tuple[str, ...]]:
    """``[environments.NAME]`` tables: each holds ``requirements``, a list of PEP 508 strings."""
    from snnbench.host.libenv import EnvironmentSpecError, check_name, check_requirements

    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: [environments] must hold tables ([environments.NAME])")
    environments: dict[str, tuple[str, ...]] = {}
    for name, table in raw.items():
        where = f"{source}: [environments.{name}]"
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where} must be a table with 'requirements'")
        unknown = sorted(set(table) - {"requirements"})
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (known: requirements)")
        if "requirements" not in table:
            raise ConfigError(f"{where} lacks 'requirements'")
        reqs = table["requirements"]
        if isinstance(reqs, str) or not isinstance(reqs, list) or not all(
                isinstance(r, str) for r in reqs):
            raise ConfigError(f"{where}: requirements must be a list of strings")
        try:
            check_name(str(name), where)
            environments[str(name)] = check_requirements(reqs, where)
        except EnvironmentSpecError as exc:
            raise ConfigError(str(exc)) from exc
    return environments


def check_variables() -> None:
    """Refuse a :data:`CHOICE_VARIABLES` variable set to another value, before a sweep or a
    verification starts: else every case of its adapter would be an error row."""
    for name, allowed in CHOICE_VARIABLES.items():
        value = os.environ.get(name)
        if value is not None and value.strip().lower() not in allowed:
            raise ConfigError(f"environment variable {name} must be {' or '.join(allowed)} "
                              f"(or unset), got {shown(value)}")


def load_config(path: Path) -> RunConfig:
    """Read and validate a TOML config file (UTF-8, not empty)."""
    try:
        # a FIFO would block and /dev/zero never ends: a regular file, of a config's size
        data = read_regular(path, CONFIG_MAX_BYTES)
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {path}") from exc
    except NotAFile as exc:
        raise ConfigError(f"cannot read config {path}: {exc} (a config is a TOML file of at "
                          f"most {CONFIG_MAX_BYTES // 1024} KiB)") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); "
            "TOML files are UTF-8"
        ) from exc
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    if not raw:
        # an empty file is a mistake (a truncated copy, the wrong path), never "run everything"
        raise ConfigError(
            f"{path}: the config is empty; give at least one of [run], [network], [[sweep]] "
            "(leave out --config for the default sweep)"
        )
    return RunConfig.from_dict(raw, source=str(path), folder=path.parent)


def builtin_configs() -> tuple[str, ...]:
    """Names of the configs shipped as package data (``configs/*.toml``), ``default`` first."""
    from importlib.resources import files

    names = [p.name.removesuffix(".toml") for p in files("snnbench.configs").iterdir()
             if p.name.endswith(".toml")]
    return tuple(sorted(names, key=lambda name: (name != "default", name)))


#: the shipped configs, by the name ``--config`` takes
BUILTIN_CONFIGS = builtin_configs()


def config_path(name_or_path: str) -> Path:
    """A config file path. A shipped config's bare name (``default``) always means the shipped
    one, even when the current folder holds a file of that name: what a command does must not
    depend on where it runs. Such a file is named as a path (``./default``)."""
    if name_or_path in BUILTIN_CONFIGS:
        from importlib.resources import files

        return Path(str(files("snnbench.configs").joinpath(f"{name_or_path}.toml")))
    return Path(name_or_path)


def build_config(
    config: str | None,
    run_overrides: dict[str, Any],
    network_overrides: dict[str, list[Any]],
) -> RunConfig:
    """Load ``config`` (default: the packaged default sweep) and apply overrides."""
    base = load_config(config_path(config or "default"))
    return base.with_overrides(run_overrides, network_overrides)

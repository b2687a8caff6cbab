"""Sweep configuration: TOML files plus command-line overrides → a validated list of cases.

A config has three parts::

    [run]        # how to measure: adapters, device, repeats, warm-up, timeout...
    [network]    # NetworkSpec fields shared by every case (scalars)
    [[sweep]]    # zero or more tables; each key is a NetworkSpec field with a list of values,
                 # and the cases are the union over tables of each table's cartesian product
    [executor]   # optional: where the cases run (snnbench.executors.settings)

Unknown keys anywhere are errors: a typo must never silently fall back to a default.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from snnbench.errors import UserError
from snnbench.executors.settings import ExecutorSettings
from snnbench.schema import TIMED_PHASES
from snnbench.spec import NetworkSpec, SpecError
from snnbench.timing import MeasureSettings

DEVICES: tuple[str, ...] = ("cpu", "cuda", "auto")
SPEC_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(NetworkSpec))


class ConfigError(UserError, ValueError):
    """The configuration is invalid; the message is one line naming the problem."""


@dataclass(frozen=True)
class RunSettings:
    """How a sweep is measured (the ``[run]`` table)."""

    adapters: tuple[str, ...] = ("all",)
    device: str = "auto"
    repeats: int = 9
    max_repeats: int = 200
    min_time_s: float = 0.5
    warmup: int = 2
    warmup_s: float = 0.2
    timeout_s: float = 900.0
    #: seconds a worker may spend preparing (library import, first-use extension builds)
    #: before its case starts; the case's own ``timeout_s`` starts after that
    prepare_timeout_s: float = 1800.0
    #: CPU threads for torch and XLA in every worker; 0 means all cores of this machine
    threads: int = 0
    phases: tuple[str, ...] = TIMED_PHASES
    verify: bool = True
    verify_time_steps: int = 50
    allow_mismatch: bool = False
    energy: bool = True

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ConfigError(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        positive_ints = ("repeats", "max_repeats", "verify_time_steps")
        for name in positive_ints:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        for name in ("warmup", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be an integer ≥ 0, got {value!r}")
        for name in ("min_time_s", "warmup_s", "timeout_s", "prepare_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"{name} must be a number ≥ 0, got {value!r}")
        for name in ("timeout_s", "prepare_timeout_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if self.max_repeats < self.repeats:
            raise ConfigError(
                f"max_repeats ({self.max_repeats}) must be ≥ repeats ({self.repeats})"
            )
        bad = [p for p in self.phases if p not in TIMED_PHASES]
        if bad or not self.phases:
            raise ConfigError(
                f"phases must be a non-empty subset of {', '.join(TIMED_PHASES)}, got {bad}"
            )
        if not self.adapters:
            raise ConfigError("adapters must name at least one adapter (or 'all')")

    @property
    def measure_settings(self) -> MeasureSettings:
        """The sampling settings a worker applies to every phase."""
        return MeasureSettings(
            repeats=self.repeats, max_repeats=self.max_repeats, min_time_s=self.min_time_s,
            warmup=self.warmup, warmup_s=self.warmup_s,
        )

    @property
    def resolved_threads(self) -> int:
        """The thread count workers use (``threads`` or every core available)."""
        if self.threads:
            return self.threads
        if hasattr(os, "sched_getaffinity"):
            return len(os.sched_getaffinity(0))
        return os.cpu_count() or 1


@dataclass(frozen=True)
class RunConfig:
    """A whole sweep: settings, shared network fields and the sweep tables."""

    run: RunSettings = field(default_factory=RunSettings)
    network: Mapping[str, Any] = field(default_factory=dict)
    sweeps: tuple[Mapping[str, tuple[Any, ...]], ...] = ()
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)

    def cases(self) -> list[NetworkSpec]:
        """Every distinct case, in sweep order (duplicates across tables are dropped)."""
        tables = self.sweeps or ({},)
        seen: set[str] = set()
        specs: list[NetworkSpec] = []
        for table in tables:
            keys = list(table)
            for values in itertools.product(*(table[k] for k in keys)):
                fields = {**self.network, **dict(zip(keys, values, strict=True))}
                try:
                    spec = NetworkSpec.from_dict(fields)
                except SpecError as exc:
                    raise ConfigError(str(exc)) from exc
                except TypeError as exc:
                    raise ConfigError(f"invalid network field: {exc}") from exc
                if spec.case_id not in seen:
                    seen.add(spec.case_id)
                    specs.append(spec)
        return specs

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data (what the manifest stores and ``--resume`` reloads)."""
        run = dataclasses.asdict(self.run)
        run["adapters"] = list(self.run.adapters)
        run["phases"] = list(self.run.phases)
        return {
            "run": run,
            "network": dict(self.network),
            "sweep": [{k: list(v) for k, v in table.items()} for table in self.sweeps],
            "executor": self.executor.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "config") -> RunConfig:
        """Validate plain data (parsed TOML or a manifest's config)."""
        unknown = sorted(set(data) - {"run", "network", "sweep", "executor"})
        if unknown:
            raise ConfigError(
                f"{source}: unknown table(s) {', '.join(unknown)} (expected run, network, sweep, "
                "executor)"
            )
        run = _run_settings(data.get("run", {}), source)
        network = _network(data.get("network", {}), source)
        sweeps_raw = data.get("sweep", [])
        if isinstance(sweeps_raw, Mapping):
            sweeps_raw = [sweeps_raw]
        if not isinstance(sweeps_raw, list):
            raise ConfigError(f"{source}: 'sweep' must be a list of tables ([[sweep]])")
        sweeps = tuple(_sweep_table(t, source) for t in sweeps_raw)
        executor = ExecutorSettings.from_dict(data.get("executor"), source)
        config = cls(run=run, network=network, sweeps=sweeps, executor=executor)
        config.cases()  # validate every case now, not halfway through a sweep
        return config

    def with_overrides(
        self, run: Mapping[str, Any], network_lists: Mapping[str, Sequence[Any]]
    ) -> RunConfig:
        """Command-line overrides: run settings, and network fields given as lists of values.

        A network override applies to every case: it replaces that field in every sweep table.
        """
        run_fields = {**dataclasses.asdict(self.run), **run}
        try:
            settings = RunSettings(**run_fields)
        except TypeError as exc:
            raise ConfigError(str(exc)) from exc
        network = dict(self.network)
        sweeps = [dict(t) for t in self.sweeps] or [{}]
        for key, values in network_lists.items():
            if key not in SPEC_FIELDS:
                raise ConfigError(f"unknown network field {key!r}")
            network.pop(key, None)
            for table in sweeps:
                table[key] = tuple(values)
        config = RunConfig(
            run=settings, network=network, sweeps=tuple(t for t in sweeps if t),
            executor=self.executor,
        )
        config.cases()
        return config


def _run_settings(raw: Any, source: str) -> RunSettings:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: [run] must be a table")
    known = {f.name for f in dataclasses.fields(RunSettings)}
    unknown = sorted(set(raw) - known)
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
            values[key] = tuple(values[key])
    try:
        return RunSettings(**values)
    except TypeError as exc:
        raise ConfigError(f"{source}: {exc}") from exc


def _network(raw: Any, source: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: [network] must be a table")
    unknown = sorted(set(raw) - set(SPEC_FIELDS))
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) in [network]: {', '.join(unknown)} "
            f"(known: {', '.join(SPEC_FIELDS)})"
        )
    return dict(raw)


def _sweep_table(raw: Any, source: str) -> dict[str, tuple[Any, ...]]:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: each [[sweep]] must be a table")
    unknown = sorted(set(raw) - set(SPEC_FIELDS))
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) in [[sweep]]: {', '.join(unknown)} "
            f"(known: {', '.join(SPEC_FIELDS)})"
        )
    table: dict[str, tuple[Any, ...]] = {}
    for key, value in raw.items():
        values = tuple(value) if isinstance(value, list) else (value,)
        if not values:
            raise ConfigError(f"{source}: [[sweep]] {key} is an empty list")
        table[key] = values
    return table


def load_config(path: Path) -> RunConfig:
    """Read and validate a TOML config file."""
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {path}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return RunConfig.from_dict(raw, source=str(path))

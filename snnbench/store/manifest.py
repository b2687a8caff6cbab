"""The manifest of a run folder: a typed, versioned record of how the run was made.

``manifest.json`` says which machine ran the sweep, with which settings and config, how it was
executed (every execution, a resume adds one) and whether the machine was noisy. It is our own
format, so unknown keys are refused; the keys a run adds as it goes (pre-flight checks,
executions, noise, hosts) are optional, so a folder written before they existed still reads.

The format carries :data:`~snnbench.records.schema.SCHEMA_VERSION`. Changing it means a new version
and an entry in :data:`UPGRADES` that turns a manifest of the version before into this one: every
committed folder under ``results/`` must still load.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from snnbench.records import validation
from snnbench.records.fileio import StorageError
from snnbench.records.schema import SCHEMA_VERSION

#: a manifest as JSON data
Document = dict[str, Any]

#: version → the function that turns a manifest of that (older) version into the next one;
#: empty while version 1 is the only format
UPGRADES: dict[int, Callable[[Document], Document]] = {}


class _Strict(BaseModel):
    # our own format: an unknown key is a damaged or foreign file, not something to ignore
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ManifestSettings(_Strict):
    """``settings``: what every case of the run shares (device, threads, precision, seeds)."""

    device: Literal["cpu", "cuda"]
    threads: int = Field(default=0, strict=True)
    matmul_precisions: list[str] = Field(default_factory=list)
    tf32: bool = False
    seeds: list[int] = Field(default_factory=list)
    #: the environment variables every worker got (thread counts, wait policy, JAX flags)
    thread_env: dict[str, str] = Field(default_factory=dict)
    #: absent in a run written before the wait policy existed (its cases ran with the
    #: libraries' own)
    thread_wait: str | None = None


class Execution(BaseModel):
    """One execution of the sweep: the executor's own description (its plugin's keys), the
    thread count, when it started and finished, and the signal that stopped it, if one did."""

    # an executor plugin describes itself with keys of its own (``describe()``)
    model_config = ConfigDict(extra="allow")

    name: str
    threads: int | None = None
    started_utc: str | None = None
    finished_utc: str | None = None
    interrupted: str | None = None

    def update(self, values: dict[str, Any]) -> None:
        """Set ``values`` (the executor's description, when it finished), each one written."""
        for key, value in values.items():
            setattr(self, key, value)


class Manifest(_Strict):
    """``manifest.json``: one per run folder, written by :class:`snnbench.store.storage.RunFolder`.

    Built for a new run by :func:`snnbench.sweep.run.new_manifest`; read back for a resume or
    a merge by :meth:`RunFolder.manifest`. A key is written only when it was set (read from the
    file, given, or assigned), so a manifest round-trips unchanged.
    """

    schema_version: Literal[1] = SCHEMA_VERSION
    run_id: str = Field(min_length=1)
    created_utc: str | None = None
    finished_utc: str | None = None
    #: set by ``snnbench merge``
    merged_utc: str | None = None
    # -- the machine (snnbench.host.environment.collect_environment) -------------------------------
    snnbench: dict[str, Any] | None = None
    python: str | None = None
    python_implementation: str | None = None
    os: str | None = None
    hostname_hash: str | None = None
    cpu: dict[str, Any] | None = None
    ram_bytes: int | None = None
    gpus: list[dict[str, Any]] | None = None
    packages: dict[str, Any] | None = None
    image: Any = None
    env_vars: dict[str, str] | None = None
    # -- the sweep ----------------------------------------------------------------------------
    settings: ManifestSettings
    #: the full config (:meth:`snnbench.sweep.config.RunConfig.to_dict`), executor table included
    config: dict[str, Any]
    command: list[str] = Field(default_factory=list)
    #: library environments built for the run
    #: (:meth:`snnbench.host.libenv.BuiltEnvironment.to_dict`)
    environments: list[dict[str, Any]] = Field(default_factory=list)
    #: the pre-flight checks of this machine (start and end of each execution)
    preflight: list[dict[str, Any]] = Field(default_factory=list)
    executions: list[Execution] = Field(default_factory=list)
    #: whether the machine was noisy, and why (:class:`snnbench.host.preflight.NoiseVerdict`)
    noise: dict[str, Any] | None = None
    #: the machine records of every host that ran cases (:mod:`snnbench.host.machines`)
    hosts: list[dict[str, Any]] | None = None

    @classmethod
    def parse(cls, data: Any, where: Path | str) -> Manifest:
        """Check ``data`` (JSON read from ``where``), upgrading an older version first.

        The one place a validation error becomes a one-line :class:`StorageError`.
        """
        data = upgraded(data, where)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise StorageError(f"{where} is damaged: {_first_problem(exc)}") from exc

    def to_json(self) -> Document:
        """JSON data for the file: the keys that were set, the version first."""
        data = self.model_dump(mode="json", exclude_unset=True, exclude={"schema_version"})
        return {"schema_version": SCHEMA_VERSION, **data}

    def add_execution(self, execution: Execution) -> None:
        """Record one more execution (assigned, so that it is written)."""
        self.executions = [*self.executions, execution]

    def open_execution(self, started_utc: str) -> Execution | None:
        """The execution that started at ``started_utc`` and has not finished, if any."""
        mine = [e for e in self.executions
                if e.started_utc == started_utc and e.finished_utc is None]
        return mine[-1] if mine else None


def upgraded(data: Any, where: Path | str) -> Document:
    """``data`` as a manifest of this version: older versions go through :data:`UPGRADES`;
    a newer or unknown version is refused in one line."""
    if not isinstance(data, dict):
        raise StorageError(f"damaged manifest {where}: not a JSON object")
    version = data.get("schema_version")
    while isinstance(version, int) and version in UPGRADES:
        data = UPGRADES[version](data)
        version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise StorageError(
            f"{where} has schema version {version!r} (schema_version {version!r}); this "
            f"snnbench reads version {SCHEMA_VERSION} (re-run the benchmark, or use the "
            "snnbench that wrote it)")
    return dict(data)


#: what a missing key means to the user, for the keys a resume cannot do without
_MISSING = {
    ("run_id",): "no run_id",
    ("config",): "no config table",
    ("settings",): "no settings table",
    ("settings", "device"): "no settings.device (cpu or cuda)",
}


def _first_problem(exc: ValidationError) -> str:
    """The first error of ``exc`` in a few words: the key and what is wrong with it."""
    error = validation.first(exc)
    loc = tuple(str(part) for part in error["loc"])
    if error["type"] == "missing" and loc in _MISSING:
        return _MISSING[loc]
    where = validation.where(error) or "manifest"
    if loc == ("settings", "device"):
        return f"settings.device must be cpu or cuda, got {error.get('input')!r}"
    if error["type"] in validation.UNKNOWN:
        return f"unknown key {where}"
    return f"{where}: {validation.problem(error)}"

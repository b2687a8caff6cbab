"""The contract between the parent and a worker process: a :class:`Job` in, a
:class:`CaseRecord` out.

Both cross a process boundary (and, with the cluster executors, a machine boundary), so both
are typed, versioned dataclasses that are built in one place and serialised only here:

* a :class:`Job` is made by :func:`snnbench.runner.make_job` and written by
  :meth:`Job.write`; the worker reads it with :meth:`Job.read`;
* a :class:`CaseRecord` is started by :meth:`CaseRecord.for_job` (in the worker, or in the parent
  when no worker ran: a statically skipped case, a broken plugin, a worker that died), written
  atomically by :meth:`CaseRecord.write` and read back by :meth:`CaseRecord.from_dict`, which
  refuses anything that is not a record of a schema this code reads.

The record's ``samples`` map a phase to metric → raw values; ``setup`` and ``case`` hold
one-value metrics (``prepare_s``, ``build_s``, ``first_call_s``; ``firing_rate``, ...).
"""

from __future__ import annotations

import dataclasses
import json
import math
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from snnbench.errors import UserError
from snnbench.fileio import atomic_write_json
from snnbench.sampling import MeasureSettings
from snnbench.schema import STATUSES, TIMED_PHASES
from snnbench.spec import NetworkSpec, SpecError

#: bump when a Job field changes meaning or disappears
JOB_SCHEMA = 1
#: bump when a CaseRecord field changes meaning or disappears
RECORD_SCHEMA = 1

JobMode = Literal["run", "verify"]
JOB_MODES: tuple[str, ...] = get_args(JobMode)

Samples = dict[str, dict[str, list[float]]]


class ContractError(UserError):
    """A job or case record file is not one this snnbench can read; one line naming it."""


def now_utc() -> str:
    """ISO-8601 UTC timestamp with milliseconds."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def case_key(adapter: str, variant: str, device: str, case_id: str, environment: str = "",
             replicate: int = 0) -> str:
    """File-name-safe identity of one (adapter, variant, environment, device, case, replicate).

    The base environment and the first replicate add nothing, so keys of plain runs stay what
    they always were.
    """
    env = f"@{environment_tag(adapter, environment)}" if environment else ""
    rep = f"--r{replicate}" if replicate else ""
    return f"{adapter}{env}--{variant}--{device}--{case_id}{rep}"


def environment_tag(adapter: str, environment: str) -> str:
    """How an environment is named after its adapter: ``0.9.4`` for adapter ``snntorch`` in
    environment ``snntorch@0.9.4`` (so the label reads ``snntorch@0.9.4``), else the name."""
    prefix = f"{adapter}@"
    return environment[len(prefix):] if environment.startswith(prefix) else environment


@dataclass(frozen=True)
class LibraryEnvironment:
    """Where a case's library comes from: the base environment, or a layered overlay.

    ``name`` is "" for the base environment (the one snnbench runs in), else the overlay's
    name (e.g. ``snntorch@0.9.4``); ``python`` is the interpreter the worker runs under.
    """

    name: str = ""
    requirements: tuple[str, ...] = ()
    python: str = ""
    #: the pins installed in the overlay (what the resolver chose), empty for the base
    resolved: tuple[str, ...] = ()
    #: why the overlay could not be built ("" when it was): its cases are ``unavailable``
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {"name": self.name, "requirements": list(self.requirements),
                "python": self.python, "resolved": list(self.resolved), "error": self.error}

    @classmethod
    def from_dict(cls, data: Any) -> LibraryEnvironment:
        """Inverse of :meth:`to_dict` (a missing value is the base environment)."""
        if not data:
            return cls()
        return cls(name=str(data.get("name", "")),
                   requirements=tuple(str(r) for r in data.get("requirements", ())),
                   python=str(data.get("python", "")),
                   resolved=tuple(str(r) for r in data.get("resolved", ())),
                   error=str(data.get("error", "")))


@dataclass(frozen=True)
class Placement:
    """Where and how a case ran: recorded in every row so distributed runs stay honest."""

    #: the executor that ran it (``local``, ``slurm``, ``ray``)
    executor: str = "local"
    host: str = ""
    #: the GPU the case was pinned to (NVML UUID), "" when none was
    gpu_uuid: str = ""
    #: CPU cores the worker was bound to (empty: not bound)
    cpus: tuple[int, ...] = ()
    #: cases that ran side by side on this host, this one included (for Slurm and Ray: the
    #: most the engine was allowed to run at once); 0 for a case decided without running
    concurrency: int = 1
    #: the engine's id for the job that ran it (Slurm array task, Ray task), "" locally
    engine_job_id: str = ""
    #: 1 for the first attempt, more when a cluster engine re-queued it
    attempt: int = 1

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        data = dataclasses.asdict(self)
        data["cpus"] = list(self.cpus)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Placement:
        """Inverse of :meth:`to_dict`; unknown keys are ignored (written by a newer minor)."""
        if not data:
            return cls()
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in dict(data).items() if k in known}
        if "cpus" in values:
            values["cpus"] = tuple(int(c) for c in values["cpus"])
        return cls(**values)


@dataclass(frozen=True)
class Job:
    """Everything a worker needs to run one (adapter, variant, case) and where to report."""

    adapter: str
    variant: str
    device: str
    spec: NetworkSpec
    #: where the worker writes its record; set by the executor (:meth:`with_result_in`)
    result_path: str = ""
    mode: JobMode = "run"
    threads: int = 1
    phases: tuple[str, ...] = TIMED_PHASES
    measure: MeasureSettings = field(default_factory=MeasureSettings)
    verify: bool = True
    #: time steps of the short pre-timing equivalence check (and of the case metrics)
    verify_time_steps: int = 50
    allow_mismatch: bool = False
    energy: bool = True
    #: position in the sweep (orders records that finished in the same millisecond)
    order: int = 0
    #: ``verify --dump``: where to write the arrays (.npz), "" for none
    dump_path: str = ""
    #: seconds allowed for the timed case once preparation is done
    timeout_s: float = 900.0
    #: seconds allowed for first-use preparation (library import, extension builds)
    prepare_timeout_s: float = 1800.0
    #: environment variables the worker needs before any import (threads, backend choice)
    env: tuple[tuple[str, str], ...] = ()
    environment: LibraryEnvironment = field(default_factory=LibraryEnvironment)
    placement: Placement = field(default_factory=Placement)
    #: which fresh process of the case this is (``--replicates``), 0 for the first
    replicate: int = 0
    schema: int = JOB_SCHEMA

    def __post_init__(self) -> None:
        if self.mode not in JOB_MODES:
            raise ContractError(f"job mode must be one of {', '.join(JOB_MODES)}, "
                                f"got {self.mode!r}")

    @property
    def key(self) -> str:
        """The case key of the record this job produces."""
        return case_key(self.adapter, self.variant, self.device, self.spec.case_id,
                        self.environment.name, self.replicate)

    def with_result_in(self, folder: Path) -> Job:
        """This job with its result written to ``folder/result.json``."""
        return dataclasses.replace(self, result_path=str(folder / "result.json"))

    @property
    def env_vars(self) -> dict[str, str]:
        """:attr:`env` as a dict."""
        return dict(self.env)

    @property
    def prepared_marker(self) -> Path:
        """File the worker touches when preparation is over and the timed case begins."""
        return Path(self.result_path + ".prepared")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data."""
        return {
            "schema": self.schema,
            "adapter": self.adapter,
            "variant": self.variant,
            "device": self.device,
            "spec": self.spec.to_dict(),
            "result_path": self.result_path,
            "mode": self.mode,
            "threads": self.threads,
            "phases": list(self.phases),
            "measure": dataclasses.asdict(self.measure),
            "verify": self.verify,
            "verify_time_steps": self.verify_time_steps,
            "allow_mismatch": self.allow_mismatch,
            "energy": self.energy,
            "order": self.order,
            "dump_path": self.dump_path,
            "timeout_s": self.timeout_s,
            "prepare_timeout_s": self.prepare_timeout_s,
            "env": {k: v for k, v in self.env},
            "environment": self.environment.to_dict(),
            "placement": self.placement.to_dict(),
            "replicate": self.replicate,
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "job") -> Job:
        """Validate and build a job; :class:`ContractError` names what is wrong."""
        if not isinstance(data, dict):
            raise ContractError(f"{source} is not a job: not a JSON object")
        if "schema" not in data:
            raise ContractError(f"{source} is not a job: it lacks 'schema'")
        if data["schema"] != JOB_SCHEMA:
            raise ContractError(f"{source} has job schema {data.get('schema')!r}; this snnbench "
                                f"reads {JOB_SCHEMA}")
        # what a job file may leave out takes the field's default
        default = {f.name: f.default for f in dataclasses.fields(cls)}

        def given(name: str) -> Any:
            return data.get(name, default[name])

        try:
            return cls(
                adapter=str(data["adapter"]),
                variant=str(data["variant"]),
                device=str(data["device"]),
                spec=NetworkSpec.from_dict(data["spec"]),
                result_path=str(given("result_path")),
                mode=given("mode"),
                threads=int(given("threads")),
                phases=tuple(given("phases")),
                measure=MeasureSettings(**data.get("measure", {})),
                verify=bool(given("verify")),
                verify_time_steps=int(given("verify_time_steps")),
                allow_mismatch=bool(given("allow_mismatch")),
                energy=bool(given("energy")),
                order=int(given("order")),
                dump_path=str(given("dump_path")),
                timeout_s=float(given("timeout_s")),
                prepare_timeout_s=float(given("prepare_timeout_s")),
                env=tuple(sorted((str(k), str(v)) for k, v in data.get("env", {}).items())),
                environment=LibraryEnvironment.from_dict(data.get("environment")),
                placement=Placement.from_dict(data.get("placement")),
                replicate=int(given("replicate")),
            )
        except KeyError as exc:
            raise ContractError(f"{source} is not a job: it lacks {exc.args[0]!r}") from exc
        except (TypeError, ValueError, AttributeError, SpecError) as exc:
            raise ContractError(f"{source} is not a valid job: {exc}") from exc

    def write(self, path: Path) -> None:
        """Write the job as JSON (atomically: a reader never sees half a job)."""
        atomic_write_json(path, self.to_dict())

    @classmethod
    def read(cls, path: Path) -> Job:
        """Read a job file written by :meth:`write`."""
        return cls.from_dict(_read_json(path, "cannot read job {path}: {exc}"), source=str(path))


def _read_json(path: Path, cannot_read: str) -> Any:
    """The JSON data in ``path``; else a ContractError, ``cannot_read`` filled with path, exc."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ContractError(cannot_read.format(path=path, exc=exc)) from exc


def _opt_float(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


@dataclass
class CaseRecord:
    """The outcome of one (adapter, variant, case): status, provenance and raw samples.

    Built by :meth:`for_job` and filled in by the worker (or the parent when no worker ran).
    """

    adapter: str
    variant: str
    device: str
    spec: NetworkSpec
    status: str = "error"
    message: str = ""
    library: str = ""
    library_version: str | None = None
    spike_match: float | None = None
    grad_cosine: float | None = None
    #: the full equivalence check (:class:`snnbench.verify.Equivalence` as a dict)
    equivalence: dict[str, Any] | None = None
    allow_mismatch: bool = False
    #: ``verify`` only: what the adapter declares
    exact_dynamics: bool | None = None
    exact_gradient: bool | None = None
    approximation_note: str = ""
    dump_path: str = ""
    started_utc: str = ""
    finished_utc: str = ""
    order: int = 0
    #: the worker's wall time, as seen by whoever started it
    wall_s: float | None = None
    #: thread, precision and seed settings the worker applied
    settings: dict[str, Any] = field(default_factory=dict)
    #: measurement details beyond the samples (warm-up steps, timer, block size, clocks...)
    measurement: dict[str, Any] = field(default_factory=dict)
    samples: Samples = field(default_factory=dict)
    environment: LibraryEnvironment = field(default_factory=LibraryEnvironment)
    #: resolved versions of the packages in the case's environment (name → version)
    packages: dict[str, str] = field(default_factory=dict)
    placement: Placement = field(default_factory=Placement)
    replicate: int = 0
    traceback: str = ""
    schema: int = RECORD_SCHEMA

    @classmethod
    def for_job(cls, job: Job, status: str = "error", message: str = "",
                library: str = "") -> CaseRecord:
        """A record of ``job``'s identity, with a status to be filled in."""
        placement = job.placement
        if not placement.host:
            placement = dataclasses.replace(placement, host=socket.gethostname())
        return cls(
            adapter=job.adapter, variant=job.variant, device=job.device, spec=job.spec,
            status=status, message=message, library=library,
            allow_mismatch=job.allow_mismatch, order=job.order,
            environment=job.environment, placement=placement, replicate=job.replicate,
        )

    @property
    def case_id(self) -> str:
        """The spec hash: equal for rows of the same case."""
        return self.spec.case_id

    @property
    def key(self) -> str:
        """Identity of this record in a run folder (its file name without ``.json``)."""
        return case_key(self.adapter, self.variant, self.device, self.case_id,
                        self.environment.name, self.replicate)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (the on-disk form of ``cases/*.json``)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["spec"] = self.spec.to_dict()
        data["case_id"] = self.case_id
        data["environment"] = self.environment.to_dict()
        data["placement"] = self.placement.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Any, source: str = "record") -> CaseRecord:
        """Validate and build a record; :class:`ContractError` names what is wrong."""
        if not isinstance(data, dict):
            raise ContractError(f"{source} is not a case record: not a JSON object")
        if data.get("schema", RECORD_SCHEMA) != RECORD_SCHEMA:
            raise ContractError(f"{source} has record schema {data.get('schema')!r}; this "
                                f"snnbench reads {RECORD_SCHEMA}")
        missing = [k for k in ("adapter", "variant", "device", "spec", "status")
                   if k not in data]
        if missing:
            raise ContractError(f"{source} is not a case record: it lacks "
                                f"{', '.join(repr(m) for m in missing)}")
        if data["status"] not in STATUSES:
            raise ContractError(f"{source} has an unknown status {data['status']!r}")
        try:
            spec = NetworkSpec.from_dict(data["spec"])
            samples = {
                str(phase): {str(m): [float(v) if v is not None else math.nan for v in values]
                             for m, values in metrics.items()}
                for phase, metrics in (data.get("samples") or {}).items()
            }
            record = cls(
                adapter=str(data["adapter"]), variant=str(data["variant"]),
                device=str(data["device"]), spec=spec, status=str(data["status"]),
                message=str(data.get("message") or ""), library=str(data.get("library") or ""),
                library_version=(None if data.get("library_version") is None
                                 else str(data["library_version"])),
                spike_match=_opt_float(data.get("spike_match")),
                grad_cosine=_opt_float(data.get("grad_cosine")),
                equivalence=data.get("equivalence"),
                allow_mismatch=bool(data.get("allow_mismatch", False)),
                exact_dynamics=data.get("exact_dynamics"),
                exact_gradient=data.get("exact_gradient"),
                approximation_note=str(data.get("approximation_note") or ""),
                dump_path=str(data.get("dump_path") or ""),
                started_utc=str(data.get("started_utc") or ""),
                finished_utc=str(data.get("finished_utc") or ""),
                order=int(data.get("order") or 0),
                wall_s=_opt_float(data.get("wall_s")),
                settings=dict(data.get("settings") or {}),
                measurement=dict(data.get("measurement") or {}),
                samples=samples,
                environment=LibraryEnvironment.from_dict(data.get("environment")),
                packages={str(k): str(v) for k, v in (data.get("packages") or {}).items()},
                placement=Placement.from_dict(data.get("placement")),
                replicate=int(data.get("replicate") or 0),
                traceback=str(data.get("traceback") or ""),
            )
        except (TypeError, ValueError, AttributeError, SpecError) as exc:
            raise ContractError(f"{source} is not a valid case record: {exc}") from exc
        if "case_id" in data and data["case_id"] != record.case_id:
            raise ContractError(f"{source}: case_id {data['case_id']!r} does not match its spec "
                                f"({record.case_id})")
        return record

    def write(self, path: Path) -> None:
        """Write the record atomically (temporary file + rename)."""
        atomic_write_json(path, self.to_dict())

    @classmethod
    def read(cls, path: Path) -> CaseRecord:
        """Read a record file; a damaged or foreign one raises :class:`ContractError`."""
        data = _read_json(path, "cannot read case record {path}: damaged or not JSON ({exc})")
        return cls.from_dict(data, source=str(path))


def case_busy_cores(record: CaseRecord) -> float | None:
    """Cores other processes used while the case's phases were timed, less what the cases run
    beside it (``--jobs``) were expected to use; None when the worker did not measure it."""
    cpu = record.measurement.get("cpu")
    if not isinstance(cpu, Mapping) or "others_cores" not in cpu:
        return None
    threads = int(record.settings.get("threads", 1) or 1)
    siblings = max(0, record.placement.concurrency - 1) * threads
    return max(0.0, float(cpu["others_cores"]) - siblings)


def adapter_label(adapter: str, variant: str, environment: str = "") -> str:
    """How an adapter is named in tables and plots: ``torch``, ``norse:compile``, and in a
    library environment ``snntorch@0.9.4`` or ``spikingjelly:torch@legacy``."""
    label = adapter if variant in ("", "default") else f"{adapter}:{variant}"
    return f"{label}@{environment_tag(adapter, environment)}" if environment else label

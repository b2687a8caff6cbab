"""The contract between the parent and a worker process: a :class:`Job` in, a
:class:`CaseRecord` out.

Both cross a process boundary (and, with the cluster executors, a machine boundary), so both
are typed, versioned dataclasses that are built in one place and serialised only here:

* a :class:`Job` is made by :func:`snnbench.sweep.planning.jobs.make_job` and written by
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
from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    PlainValidator,
)

from snnbench.records.fileio import NotAFile, atomic_write_json, parse_json, read_regular
from snnbench.records.sampling import (
    PREPARE_TIMEOUT_S,
    TIMEOUT_S,
    VERIFY_TIME_STEPS,
    MeasureSettings,
)
from snnbench.records.schema import STATUSES, TIMED_PHASES
from snnbench.records.validation import (
    ContractError as ContractError,  # long imported from here
    dump,
    validate,
)
from snnbench.workload import DEFAULT_KIND, Workload, kinds, workload_class

#: bump when a Job field changes meaning or disappears
JOB_SCHEMA = 1
#: bump when a CaseRecord field changes meaning or disappears. 2: the record names its
#: workload's ``kind`` beside its parameters (``spec``)
RECORD_SCHEMA = 2
#: the record schemas this code reads: a schema-1 record names no kind and is ``linear-lif``
READABLE_RECORD_SCHEMAS: tuple[int, ...] = (1, 2)

JobMode = Literal["run", "verify"]
JOB_MODES: tuple[str, ...] = get_args(JobMode)

Samples = dict[str, dict[str, list[float]]]


# -- field types: how a value is checked on the way in and written on the way out ---------------
# The dataclasses below are plain (built in code without checks); the files they come from
# are checked by one pydantic TypeAdapter per type (:func:`snnbench.records.validation.validate`),
# which also writes them.

def _or(default: Any) -> BeforeValidator:
    """A null (or, for containers, empty) value on disk means ``default``."""
    return BeforeValidator(lambda value: default if value is None else value)


def _finite_or_none(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _env_pairs(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), str(v)) for k, v in value.items()))
    raise ValueError("must be a table of names to values")


def _workload(value: Any) -> Workload:
    # a file's ``spec`` and ``kind`` are read into one workload by its header function
    # (:func:`_read_workload`), with messages naming them; here it is built already
    if not isinstance(value, Workload):
        raise ValueError(f"must be a workload, got {type(value).__name__}")
    return value


def _stored(workload: Workload) -> dict[str, Any]:
    return {"kind": workload.kind, "spec": workload.params()}


#: a tuple in memory, a JSON list on disk
Names = Annotated[tuple[str, ...], PlainSerializer(list)]
#: what a case computes: one workload in memory; on disk, as always, its parameters under
#: ``spec`` and its kind under ``kind`` (:func:`_read_workload`, :func:`_on_disk`)
WorkloadField = Annotated[Workload, PlainValidator(_workload), PlainSerializer(_stored)]
#: a sorted tuple of pairs in memory, a JSON object on disk
EnvVars = Annotated[tuple[tuple[str, str], ...], BeforeValidator(_env_pairs),
                    PlainSerializer(dict)]
#: a string a record may hold as null (read as "")
Text = Annotated[str, _or("")]
#: a count a record may hold as null (read as 0)
Count = Annotated[int, _or(0)]
#: an optional number; a non-finite one (NaN written as null) reads as None
OptFloat = Annotated[float | None, AfterValidator(_finite_or_none)]
#: a table a record may hold as null (read as empty)
Table = Annotated[dict[str, Any], _or({})]
#: phase → metric → raw values, a null value read as NaN
SampleData = Annotated[dict[str, dict[str, list[Annotated[float, _or(math.nan)]]]], _or({})]


#: the exit code of a worker that ran its case but could not write its record (a full disk):
#: the parent records the case ``lost``, which ``--resume`` runs again
RESULT_NOT_WRITTEN_EXIT = 75
#: how a ``verify`` record whose dump could not be written begins its message: the parent
#: reports the disk error (exit 2), never a failed equivalence
DUMP_NOT_WRITTEN = "dump not written"


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
    return file_safe(f"{adapter}{env}--{variant}--{device}--{case_id}{rep}")


#: characters a file name built from names must not hold, as written instead: a third-party
#: plugin's entry-point name is any text, and ``../x`` must not put a file outside its folder
_UNSAFE_IN_NAMES = {"%": "%25", "/": "%2F", "\\": "%5C", "\0": "%00"}


def file_safe(name: str) -> str:
    """``name`` as one file-name component: separators (and ``%``) percent-encoded; every
    shipped adapter's names pass unchanged."""
    if not any(c in name for c in _UNSAFE_IN_NAMES):
        return name
    return "".join(_UNSAFE_IN_NAMES.get(c, c) for c in name)


def environment_tag(adapter: str, environment: str) -> str:
    """How an environment is named after its adapter: ``0.9.4`` for adapter ``snntorch`` in
    environment ``snntorch@0.9.4`` (so the label reads ``snntorch@0.9.4``), else the name."""
    prefix = f"{adapter}@"
    return environment[len(prefix):] if environment.startswith(prefix) else environment


class _Part:
    """A part nested in a job and a record (its library environment, its placement): written and
    read through its pydantic adapter, like the job and the record, and a missing part (null)
    is the default one. Unknown keys follow the class's ``__pydantic_config__``."""

    #: how an error names it ("… is not a placement"), and the default source of from_dict
    _what: ClassVar[str]
    _source: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return dump(self)

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> Self:
        """Inverse of :meth:`to_dict`; a missing value (None, {}) is the default part."""
        return validate(cls, data or {}, source or cls._source, cls._what)


@dataclass(frozen=True)
class LibraryEnvironment(_Part):
    """Where a case's library comes from: the base environment, or a layered overlay.

    ``name`` is "" for the base environment (the one snnbench runs in), else the overlay's
    name (e.g. ``snntorch@0.9.4``); ``python`` is the interpreter the worker runs under.
    """

    # unknown keys are ignored: a record of a newer minor may describe more
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="ignore")

    name: str = ""
    requirements: Names = ()
    python: str = ""
    #: the pins installed in the overlay (what the resolver chose), empty for the base
    resolved: Names = ()
    #: why the overlay could not be built ("" when it was): its cases are ``unavailable``
    error: str = ""

    _what: ClassVar[str] = "library environment"
    _source: ClassVar[str] = "environment"


@dataclass(frozen=True)
class Placement(_Part):
    """Where and how a case ran: recorded in every row so distributed runs stay honest."""

    # unknown keys are ignored (written by a newer minor)
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="ignore")

    #: the executor that ran it (``local``, ``slurm``, ``ray``)
    executor: str = "local"
    host: str = ""
    #: the GPU the case was pinned to (NVML UUID), "" when none was
    gpu_uuid: str = ""
    #: CPU cores the worker was bound to (empty: not bound)
    cpus: Annotated[tuple[int, ...], PlainSerializer(list)] = ()
    #: cases that ran side by side on this host, this one included (for Slurm and Ray: the
    #: most the engine was allowed to run at once); 0 for a case decided without running
    concurrency: int = 1
    #: the engine's id for the job that ran it (Slurm array task, Ray task), "" locally
    engine_job_id: str = ""
    #: 1 for the first attempt, more when a cluster engine re-queued it
    attempt: int = 1

    _what: ClassVar[str] = "placement"
    _source: ClassVar[str] = "placement"


@dataclass(frozen=True)
class Job:
    """Everything a worker needs to run one (adapter, variant, case) and where to report."""

    # written and read by the same snnbench: a key it does not know is a setting it would not
    # apply, so it is refused
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    adapter: str
    variant: str
    device: str
    #: what the case computes (on disk: ``spec``, its parameters, and ``kind``)
    workload: WorkloadField
    #: where the worker writes its record; set by the executor (:meth:`with_result_in`)
    result_path: str = ""
    mode: JobMode = "run"
    threads: int = 1
    phases: Names = TIMED_PHASES
    measure: MeasureSettings = field(default_factory=MeasureSettings)
    verify: bool = True
    #: time steps of the short pre-timing equivalence check (and of the case metrics)
    verify_time_steps: int = VERIFY_TIME_STEPS
    allow_mismatch: bool = False
    energy: bool = True
    #: count the timed phases' instructions under callgrind after timing (CPU only,
    #: :mod:`snnbench.measure.callgrind`)
    instructions: bool = False
    #: position in the sweep (orders records that finished in the same millisecond)
    order: int = 0
    #: ``verify --dump``: where to write the arrays (.npz), "" for none
    dump_path: str = ""
    #: seconds allowed for the timed case once preparation is done
    timeout_s: float = TIMEOUT_S
    #: seconds allowed for first-use preparation (library import, extension builds)
    prepare_timeout_s: float = PREPARE_TIMEOUT_S
    #: environment variables the worker needs before any import (threads, backend choice)
    env: EnvVars = ()
    environment: Annotated[LibraryEnvironment, _or({})] = field(
        default_factory=LibraryEnvironment)
    placement: Annotated[Placement, _or({})] = field(default_factory=Placement)
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
        return case_key(self.adapter, self.variant, self.device, self.workload.case_id,
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
        return _on_disk(dump(self))

    @classmethod
    def from_dict(cls, data: Any, source: str = "job") -> Job:
        """Validate and build a job; :class:`ContractError` names what is wrong."""
        return validate(cls, _job_header(data, source), source, "job")

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
        # never a FIFO (it would block), nor a link out of a folder someone sent
        return parse_json(read_regular(path, follow=False).decode("utf-8"))
    except NotAFile as exc:
        raise ContractError(f"damaged folder: {path} is {exc}; remove it") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ContractError(cannot_read.format(path=path, exc=exc)) from exc


def _job_header(data: Any, source: str) -> dict[str, Any]:
    """``data`` if it is a job of the schema this code reads."""
    if not isinstance(data, dict):
        raise ContractError(f"{source} is not a job: not a JSON object")
    if "schema" not in data:
        raise ContractError(f"{source} is not a job: it lacks 'schema'")
    if data["schema"] != JOB_SCHEMA:
        raise ContractError(f"{source} has job schema {data.get('schema')!r}; this snnbench "
                            f"reads {JOB_SCHEMA}")
    missing = [k for k in ("adapter", "variant", "device", "spec") if k not in data]
    if missing:
        raise ContractError(f"{source} is not a job: it lacks "
                            f"{', '.join(repr(m) for m in missing)}")
    return _read_workload(data, source, "job")


def _read_workload(data: dict[str, Any], source: str, what: str) -> dict[str, Any]:
    """``data`` with its ``spec`` (the parameters) and ``kind`` (absent or null: the default,
    ``linear-lif``, as every record before kinds) read as one ``workload``: the one place a
    file's form of a workload becomes the object (:func:`_on_disk` is the inverse)."""
    body = {k: v for k, v in data.items() if k not in ("spec", "kind")}
    kind = data.get("kind")
    kind = DEFAULT_KIND if kind is None else kind
    if not isinstance(kind, str) or kind not in kinds():
        raise ContractError(f"{source} is not a valid {what}: kind: unknown workload kind "
                            f"{kind!r} (known: {', '.join(kinds())})")
    spec = data["spec"]
    if not isinstance(spec, Mapping):
        raise ContractError(f"{source} is not a valid {what}: spec: must be a table of "
                            f"parameters, got {type(spec).__name__}")
    try:
        body["workload"] = workload_class(kind).from_params(spec)
    except (ValueError, TypeError) as exc:  # WorkloadError and SpecError are ValueErrors
        raise ContractError(f"{source} is not a valid {what}: spec: {exc}") from exc
    return body


def _on_disk(data: dict[str, Any]) -> dict[str, Any]:
    """The dumped ``data`` of a job or a record with its ``workload`` written as files have
    always held it: the parameters as ``spec`` in its place, the ``kind`` before ``schema``."""
    out: dict[str, Any] = {}
    stored = data["workload"]
    for key, value in data.items():
        if key == "workload":
            out["spec"] = stored["spec"]
            continue
        if key == "schema":
            out["kind"] = stored["kind"]
        out[key] = value
    out.setdefault("kind", stored["kind"])
    return out


def _record_header(data: Any, source: str) -> dict[str, Any]:
    """``data`` without its ``case_id`` if it is a case record of the schema this code reads
    (the case_id is checked against the spec once that is read)."""
    if not isinstance(data, dict):
        raise ContractError(f"{source} is not a case record: not a JSON object")
    if data.get("schema", RECORD_SCHEMA) not in READABLE_RECORD_SCHEMAS:
        raise ContractError(f"{source} has record schema {data.get('schema')!r}; this "
                            f"snnbench reads {', '.join(map(str, READABLE_RECORD_SCHEMAS))}")
    missing = [k for k in ("adapter", "variant", "device", "spec", "status") if k not in data]
    if missing:
        raise ContractError(f"{source} is not a case record: it lacks "
                            f"{', '.join(repr(m) for m in missing)}")
    if data["status"] not in STATUSES:
        raise ContractError(f"{source} has an unknown status {data['status']!r}")
    # an older schema is read as this one (schema 1 named no kind: linear-lif), so a record
    # read and written again is written whole in today's form
    return _read_workload({k: v for k, v in data.items() if k not in ("case_id", "schema")},
                          source, "case record")


@dataclass
class CaseRecord:
    """The outcome of one (adapter, variant, case): status, provenance and raw samples.

    Built by :meth:`for_job` and filled in by the worker (or the parent when no worker ran).
    """

    # unknown keys are ignored: a record of a newer minor may hold more, and the first records
    # held keys dropped since (``prepare_s``, ``baseline_rss_bytes``, ``warmup_steps``)
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="ignore")

    adapter: str
    variant: str
    device: str
    #: what the case computed (on disk: ``spec``, its parameters, and ``kind``; a schema-1
    #: record has no kind: ``linear-lif``)
    workload: WorkloadField
    status: str = "error"
    message: Text = ""
    library: Text = ""
    library_version: str | None = None
    spike_match: OptFloat = None
    grad_cosine: OptFloat = None
    #: the full equivalence check (:class:`snnbench.measure.verify.Equivalence` as a dict)
    equivalence: dict[str, Any] | None = None
    allow_mismatch: bool = False
    #: ``verify`` only: what the adapter declares
    exact_dynamics: bool | None = None
    exact_gradient: bool | None = None
    approximation_note: Text = ""
    dump_path: Text = ""
    started_utc: Text = ""
    finished_utc: Text = ""
    order: Count = 0
    #: the worker's wall time, as seen by whoever started it
    wall_s: OptFloat = None
    #: how the worker process was started: "spawn" (a new interpreter), "fork" (forked from a
    #: zygote that had imported the library: :mod:`snnbench.executors.forkserver`); "" when no
    #: worker ran (a row decided before running, a record of an older snnbench)
    start: str = ""
    #: where the worker's wall time went outside the timed samples, by phase (seconds):
    #: ``start`` (process creation to the case's first step), ``reference``, ``load``, ``import``,
    #: ``prepare``, ``settings``, ``verify``, ``build``, ``first_call``, ``warmup``,
    #: ``timing`` (the timed phases, samples included), ``metrics``, ``instructions``;
    #: a phase the case never reached is absent (:class:`snnbench.measure.worker.Laps`)
    overhead_s: Annotated[dict[str, float], _or({})] = field(default_factory=dict)
    #: thread, precision and seed settings the worker applied
    settings: Table = field(default_factory=dict)
    #: measurement details beyond the samples (warm-up steps, timer, block size, clocks...)
    measurement: Table = field(default_factory=dict)
    samples: SampleData = field(default_factory=dict)
    environment: Annotated[LibraryEnvironment, _or({})] = field(
        default_factory=LibraryEnvironment)
    #: resolved versions of the packages in the case's environment (name → version)
    packages: Annotated[dict[str, str], _or({})] = field(default_factory=dict)
    placement: Annotated[Placement, _or({})] = field(default_factory=Placement)
    replicate: Count = 0
    traceback: Text = ""
    schema: int = RECORD_SCHEMA

    @classmethod
    def for_job(cls, job: Job, status: str = "error", message: str = "",
                library: str = "") -> CaseRecord:
        """A record of ``job``'s identity, with a status to be filled in."""
        placement = job.placement
        if not placement.host:
            placement = dataclasses.replace(placement, host=socket.gethostname())
        return cls(
            adapter=job.adapter, variant=job.variant, device=job.device,
            workload=job.workload, status=status, message=message, library=library,
            allow_mismatch=job.allow_mismatch, order=job.order,
            environment=job.environment, placement=placement, replicate=job.replicate,
        )

    @property
    def case_id(self) -> str:
        """The workload's identity (for ``linear-lif`` the spec hash): equal for rows of the
        same case."""
        return self.workload.case_id

    @property
    def key(self) -> str:
        """Identity of this record in a run folder (its file name without ``.json``)."""
        return case_key(self.adapter, self.variant, self.device, self.case_id,
                        self.environment.name, self.replicate)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (the on-disk form of ``cases/*.json``)."""
        return {**_on_disk(dump(self)), "case_id": self.case_id}

    @classmethod
    def from_dict(cls, data: Any, source: str = "record") -> CaseRecord:
        """Validate and build a record; :class:`ContractError` names what is wrong."""
        record = validate(cls, _record_header(data, source), source, "case record")
        if data.get("case_id", record.case_id) != record.case_id:
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

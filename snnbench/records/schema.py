"""The on-disk format of a run folder: file names, table columns, statuses and units.

Consumers (``report``, ``compare``, CI scripts) depend on these names; bump
:data:`SCHEMA_VERSION` whenever a column changes meaning or disappears.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal, get_args

from snnbench.records.metrics import UNITS
from snnbench.records.roofline import ROOFLINE_COLUMNS, ROOFLINE_FLOAT_COLUMNS
from snnbench.workload import DEFAULT_KIND, Workload, kinds, row_workload_class, workload_class

SCHEMA_VERSION: Final = 1

MANIFEST_FILE: Final = "manifest.json"
SUMMARY_PARQUET: Final = "summary.parquet"
SUMMARY_CSV: Final = "summary.csv"
SAMPLES_PARQUET: Final = "samples.parquet"
#: one JSON record per finished (adapter, variant, case): the source the tables are built from
CASES_DIR: Final = "cases"
LOCK_FILE: Final = ".lock"
#: one folder per running case (its job file and the worker's result), removed when it is stored
JOBS_DIR: Final = "jobs"
#: beside the job folders: the reference result of each network the sweep's cases check
#: against, computed once per network (``snnbench.measure.verify.cached_reference``); removed with
#: them
REFERENCES_DIR: Final = ".references"
#: one machine record per host that ran cases (``<host>.json``); the manifest lists them
HOSTS_DIR: Final = "hosts"

#: ``lost``: the case was stopped from outside before it reported (a Slurm cancel, preemption
#: or node failure, a worker killed by someone other than the kernel's OOM killer);
#: ``--resume`` runs it again
Status = Literal["ok", "unavailable", "skipped", "mismatch", "error", "oom", "timeout", "lost"]
STATUSES: Final[tuple[str, ...]] = get_args(Status)
#: statuses that mean the case broke (exit code 1)
FAILED_STATUSES: Final = frozenset({"mismatch", "error", "oom", "timeout", "lost"})
#: statuses ``--resume`` runs again (with the limits given then: ``--timeout-min``): the
#: engine lost the case, or it ran out of time
RETRY_STATUSES: Final = frozenset({"lost", "timeout"})

#: timed phases, in the order they are measured
TIMED_PHASES: Final[tuple[str, ...]] = ("forward", "backward", "step")

#: metric name → unit (from the metrics registry, :mod:`snnbench.records.metrics`); units are also
#: carried in each row's ``unit`` column
METRIC_UNITS: Final[dict[str, str]] = UNITS

#: the workload whose parameters are the tables' case columns: every run folder so far holds
#: ``linear-lif`` cases, and a record without a kind is one (:data:`DEFAULT_KIND`)
_WORKLOAD: Final[type[Workload]] = workload_class(DEFAULT_KIND)

#: the case's device and its size in words (the workload's key columns: for Linear+LIF the
#: dtype, its numbers and the reset): the run folder's tables list them in this order
_CASE_SIZE: Final[tuple[str, ...]] = ("device", *_WORKLOAD.key_columns)
#: the same, for readers that group by it
CASE_SIZE: Final[tuple[str, ...]] = _CASE_SIZE

#: the workload's parameters beyond the size block: with :data:`_CASE_SIZE` (less the device)
#: they are every parameter, each a column of the summary ("" or NaN where a run did not say)
NETWORK_COLUMNS: Final[tuple[str, ...]] = _WORKLOAD.network_columns()
#: the network columns holding floats (NaN where a run did not say), the others text
_NETWORK_FLOATS: Final[tuple[str, ...]] = tuple(c for c in NETWORK_COLUMNS
                                               if c in _WORKLOAD.float_columns)

#: the derived column naming the network fields that vary between the cases read together
#: (``amp-bf16``, ``surrogate=atan slope=4``; "" when none varies): readers fill it in, so
#: that two networks of one size never share a title, a label or a series
NETWORK: Final = "network"

#: what a case is: two rows with equal identity ran the same spec (``case_id``, the spec's
#: hash) with the same adapter, variant, device and library environment
CASE_IDENTITY: Final[tuple[str, ...]] = ("adapter", "variant", "device", "environment", "case_id")

#: the column naming each row's workload kind (``nir-graph``): a table of ``linear-lif`` cases
#: only (every run folder written before other kinds) has none, and its rows are that kind
KIND: Final = "kind"

#: key of a case row, its identity with the columns that say it in words, as a reader sees a
#: table (:data:`READ_SUMMARY_COLUMNS`: every registered kind's columns, "" or NaN where a
#: row's kind has none); together with phase and metric it is the summary's key
CASE_KEY: Final[tuple[str, ...]] = (
    "adapter",
    "variant",
    KIND,
    # the case's size in words, of every kind: ("device", "dtype", "neurons"... )
    "device",
    *dict.fromkeys(c for k in kinds() for c in workload_class(k).key_columns),
    # the library environment ("" for the base one): two versions of a library are two cases
    "environment",
    NETWORK,
    "case_id",
)

#: summary.parquet / summary.csv columns, in this order (the first block is a public contract)
SUMMARY_COLUMNS: Final[tuple[str, ...]] = (
    "run_id",
    "adapter",
    "variant",
    "library",
    "library_version",
    *_CASE_SIZE,
    "phase",
    "metric",
    "unit",
    "median",
    "q1",
    "q3",
    "iqr",
    "mean",
    "std",
    "min",
    "max",
    "n_samples",
    "ci99_low",
    "ci99_high",
    "status",
    "message",
    "spike_match",
    "grad_cosine",
    # additions after the contract block
    "case_id",
    "outliers",
    "warning",
    "floor_ratio",
    "allow_mismatch",
    # the library environment: its name ("" for the base), requirements and the versions the
    # worker found of the packages it installed ("; "-separated)
    "environment",
    "requirements",
    "packages",
    # placement: where and beside how many other cases it ran
    "executor",
    "host",
    "gpu_uuid",
    "concurrency",
    # how it was timed (snnbench.measure.timing): the timer, its null-region time, iterations per
    # sample, why the warm-up stopped, and the GPU's state before and after the timed phases
    "timer",
    "timer_null_s",
    "block_size",
    "warmup_stop",
    "sm_clock_before_mhz",
    "sm_clock_after_mhz",
    "temperature_before_c",
    "temperature_after_c",
    "power_before_w",
    "power_after_w",
    # --replicates: fresh processes pooled into the row, and the spread between their medians
    # ((max - min) / median of the replicate medians) beside the spread within one (median of
    # each replicate's IQR / median)
    "replicates",
    "replicate_spread",
    "within_spread",
    # cores other processes kept busy while the case was timed (snnbench.host.preflight)
    "busy_cores",
    # which network it was beyond the key (a sweep over one of them is otherwise two rows
    # that look alike): every other parameter of the workload (for Linear+LIF the surrogate
    # and slope, whether the reset is detached, bias, input kind, matmul precision, beta,
    # threshold, input spread and rate, seed; flags as "true"/"false"; "" in runs written
    # before these columns)
    *NETWORK_COLUMNS,
    # the network fields that vary in the run, in words (NETWORK)
    NETWORK,
    # a GPU row against its device's datasheet peaks (snnbench.records.roofline): the least FLOPs
    # and bytes of the phase, the shares of peak reached, the floor time and whether the row was
    # measured below it (impossible); NaN and False where there is no roofline (CPU rows)
    *ROOFLINE_COLUMNS,
)

#: samples.parquet columns: one row per raw timed sample
SAMPLE_COLUMNS: Final[tuple[str, ...]] = (
    "run_id",
    "adapter",
    "variant",
    "case_id",
    *_CASE_SIZE,
    "phase",
    "metric",
    "unit",
    "sample_index",
    "value",
    "environment",
    # which fresh process of the case took the sample (0 for the first; --replicates)
    "replicate",
)

#: columns added after runs were first written, with the value every older run implicitly
#: had: readers fill them in, so older run folders (baselines) stay readable
ADDED_COLUMN_DEFAULTS: Final[dict[str, str | int | float]] = {
    "environment": "",
    "requirements": "",
    "packages": "",
    "executor": "local",
    "host": "",
    "gpu_uuid": "",
    "concurrency": 1,
    # older runs timed every sample with the host clock, one iteration at a time
    "timer": "host",
    "timer_null_s": float("nan"),
    "block_size": 1,
    "warmup_stop": "",
    "sm_clock_before_mhz": float("nan"),
    "sm_clock_after_mhz": float("nan"),
    "temperature_before_c": float("nan"),
    "temperature_after_c": float("nan"),
    "power_before_w": float("nan"),
    "power_after_w": float("nan"),
    "replicates": 1,
    "replicate_spread": float("nan"),
    "within_spread": float("nan"),
    "replicate": 0,
    "busy_cores": float("nan"),
    # runs before these columns did not say: unknown, never a guessed default (NaN for a
    # number, "" for text: the seed is text, as the flags are, so that "" says unknown where a
    # number would guess 0)
    **{c: float("nan") if c in _NETWORK_FLOATS else "" for c in NETWORK_COLUMNS},
    NETWORK: "",
    # the roofline is computed again on every read (snnbench.store.rundir): these only fill a frame
    **dict.fromkeys(ROOFLINE_FLOAT_COLUMNS, float("nan")),
    "impossible": False,
}

#: summary columns holding floats (NaN where a case has no statistic)
SUMMARY_FLOAT_COLUMNS: Final[tuple[str, ...]] = (
    "median", "q1", "q3", "iqr", "mean", "std", "min", "max", "ci99_low", "ci99_high",
    "spike_match", "grad_cosine", "floor_ratio", "timer_null_s", "sm_clock_before_mhz",
    "sm_clock_after_mhz", "temperature_before_c", "temperature_after_c", "power_before_w",
    "power_after_w",
    "replicate_spread", "within_spread", "busy_cores", *_NETWORK_FLOATS,
    *ROOFLINE_FLOAT_COLUMNS,
)
#: summary columns holding integers
#: the case's whole numbers (its size block's integers: neurons, batch_size, time_steps,
#: layers): every row has them, a failed case's too, each ≥ 1
CASE_INT_COLUMNS: Final[tuple[str, ...]] = tuple(c for c in _CASE_SIZE
                                                 if c in _WORKLOAD.int_columns)
SUMMARY_INT_COLUMNS: Final[tuple[str, ...]] = (
    *CASE_INT_COLUMNS, "n_samples", "outliers",
    "concurrency", "block_size", "replicates",
)
#: samples.parquet columns holding integers
SAMPLE_INT_COLUMNS: Final[tuple[str, ...]] = (*CASE_INT_COLUMNS, "sample_index", "replicate")
#: samples.parquet columns holding text
SAMPLE_TEXT_COLUMNS: Final[tuple[str, ...]] = tuple(
    c for c in SAMPLE_COLUMNS if c not in SAMPLE_INT_COLUMNS and c != "value")
#: summary columns holding booleans (False where missing)
SUMMARY_BOOL_COLUMNS: Final[tuple[str, ...]] = ("allow_mismatch", "impossible")
#: summary columns holding text ("" where missing, so joins and comparisons stay plain)
SUMMARY_TEXT_COLUMNS: Final[tuple[str, ...]] = (
    "run_id", "adapter", "variant", "library", "library_version", "device",
    *(c for c in _WORKLOAD.key_columns
      if c not in _WORKLOAD.int_columns and c not in _WORKLOAD.float_columns),
    "phase", "metric", "unit", "status", "message", "case_id", "warning", "environment",
    "requirements", "packages", "executor", "host", "gpu_uuid", "timer", "warmup_stop",
    *(c for c in NETWORK_COLUMNS if c not in _NETWORK_FLOATS), NETWORK,
)

#: the GEMM floor's adapter (not a library): its rows come last in a group
FLOOR: Final = "floor"

#: case columns that, apart from the size and the adapter, define one group of comparable
#: rows: the kind, every kind's group words (device, dtype, B, T, layers, reset; a graph's
#: name, dt...), and the network column, which keeps two precisions, surrogates... of one
#: size in groups of their own
GROUP_COLUMNS: tuple[str, ...] = (
    KIND, *dict.fromkeys(c for k in kinds() for c, _ in workload_class(k).group_parts), NETWORK)

#: how a varying network field reads in a label (the kinds' words)
NETWORK_FORMATS: Final[dict[str, str]] = {
    c: f for k in reversed(kinds()) for c, f in workload_class(k).network_formats}


# -- the tables of the kinds a folder holds --------------------------------------------------
def _classes(kinds_: Iterable[str] | None) -> tuple[type[Workload], ...]:
    """The workload classes of ``kinds_`` (None: every registered one), in registry order."""
    if kinds_ is None:
        return tuple(workload_class(k) for k in kinds())
    wanted = set(kinds_)
    for kind in wanted:
        workload_class(kind)  # an unknown kind is an error naming it
    return tuple(workload_class(k) for k in kinds() if k in wanted)


def table_kinds(kinds_: Iterable[str]) -> tuple[str, ...]:
    """The kinds of a table's rows in registry order (none: :data:`DEFAULT_KIND`)."""
    present = tuple(cls.kind for cls in _classes(set(kinds_)))
    return present or (DEFAULT_KIND,)


def _is_default(kinds_: Iterable[str] | None) -> bool:
    return kinds_ is not None and set(kinds_) <= {DEFAULT_KIND}


def case_size(kinds_: Iterable[str] | None = None) -> tuple[str, ...]:
    """The device and the key columns of each kind of ``kinds_`` (None: every registered
    kind), in registry order, each once: the size block of a table of those kinds."""
    return ("device", *dict.fromkeys(c for cls in _classes(kinds_) for c in cls.key_columns))


def network_columns(kinds_: Iterable[str] | None = None) -> tuple[str, ...]:
    """The kinds' parameters beyond :func:`case_size`, in registry order, each once."""
    size = set(case_size(kinds_))
    return tuple(dict.fromkeys(c for cls in _classes(kinds_) for c in cls.network_columns()
                               if c not in size))


def _int_float(kinds_: Iterable[str] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The case columns of the kinds holding integers and those holding floats: a column is
    whole where every kind that has it says so and every kind has it (else a row of a kind
    without it is NaN: a float)."""
    classes = _classes(kinds_)
    columns = (*case_size(kinds_)[1:], *network_columns(kinds_))
    ints = tuple(c for c in columns if all(c in cls.int_columns for cls in classes))
    floats = tuple(c for c in columns if c not in ints and any(
        c in cls.int_columns or c in cls.float_columns for cls in classes))
    return ints, floats


def summary_columns(kinds_: Iterable[str] | None = None) -> tuple[str, ...]:
    """The summary's columns for rows of ``kinds_`` (None: every registered kind, what a
    reader holds): :data:`SUMMARY_COLUMNS` with the kinds' size block and network columns,
    and :data:`KIND` after ``case_id`` unless every row is :data:`DEFAULT_KIND` (so a folder
    of ``linear-lif`` cases writes the very tables it always did)."""
    if _is_default(kinds_):
        return SUMMARY_COLUMNS
    size, network = case_size(kinds_), network_columns(kinds_)
    out: list[str] = []
    for column in SUMMARY_COLUMNS:
        if column == "device":
            out.extend(size)
        elif column in _CASE_SIZE or column in NETWORK_COLUMNS:
            continue
        elif column == NETWORK:
            out.extend((*network, NETWORK))
        elif column == "case_id":
            out.extend(("case_id", KIND))
        else:
            out.append(column)
    return tuple(out)


def sample_columns(kinds_: Iterable[str] | None = None) -> tuple[str, ...]:
    """samples.parquet's columns for rows of ``kinds_`` (as :func:`summary_columns`)."""
    if _is_default(kinds_):
        return SAMPLE_COLUMNS
    out: list[str] = []
    for column in SAMPLE_COLUMNS:
        if column == "device":
            out.extend(case_size(kinds_))
        elif column in _CASE_SIZE:
            continue
        elif column == "case_id":
            out.extend(("case_id", KIND))
        else:
            out.append(column)
    return tuple(out)


def summary_types(kinds_: Iterable[str] | None = None
                  ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The float, integer and text columns of :func:`summary_columns` (the booleans are
    :data:`SUMMARY_BOOL_COLUMNS`)."""
    if _is_default(kinds_):
        return SUMMARY_FLOAT_COLUMNS, SUMMARY_INT_COLUMNS, SUMMARY_TEXT_COLUMNS
    ints, floats = _int_float(kinds_)
    case = set(_CASE_SIZE) | set(NETWORK_COLUMNS)
    harness_floats = tuple(c for c in SUMMARY_FLOAT_COLUMNS if c not in case)
    harness_ints = tuple(c for c in SUMMARY_INT_COLUMNS if c not in case)
    all_floats = (*harness_floats, *floats)
    all_ints = (*(c for c in case_size(kinds_) if c in ints), *harness_ints)
    typed = {*all_floats, *all_ints, *SUMMARY_BOOL_COLUMNS}
    texts = tuple(c for c in summary_columns(kinds_) if c not in typed)
    return all_floats, all_ints, texts


def sample_int_columns(kinds_: Iterable[str] | None = None) -> tuple[str, ...]:
    """samples.parquet's integer columns for rows of ``kinds_``."""
    if _is_default(kinds_):
        return SAMPLE_INT_COLUMNS
    ints, _ = _int_float(kinds_)
    return (*(c for c in case_size(kinds_) if c in ints), "sample_index", "replicate")


def sample_float_columns(kinds_: Iterable[str] | None = None) -> tuple[str, ...]:
    """samples.parquet's float columns for rows of ``kinds_`` (the value, and a size one
    kind lacks)."""
    _, floats = _int_float(kinds_)
    return (*(c for c in case_size(kinds_) if c in floats), "value")


def kind_int_columns(kind: str) -> tuple[str, ...]:
    """The whole numbers every row of ``kind`` has, each ≥ 1 (its size block's integers)."""
    cls = workload_class(kind)
    return tuple(c for c in cls.key_columns if c in cls.int_columns)


#: what a reader holds: every registered kind's columns ("" or NaN where a row's kind has
#: none), :data:`KIND` included
READ_SUMMARY_COLUMNS: Final[tuple[str, ...]] = summary_columns(None)
READ_SAMPLE_COLUMNS: Final[tuple[str, ...]] = sample_columns(None)
#: every kind's network columns, in registry order
READ_NETWORK_COLUMNS: Final[tuple[str, ...]] = network_columns(None)


def network_value(row: Any, column: str) -> str:
    """A network column of ``row`` as text ("" where the run did not say): ``4`` for 4.0."""
    value = row[column]
    if isinstance(value, float):
        return f"{value:g}" if math.isfinite(value) else ""
    return "" if value is None else str(value)


def network_text(row: Any, fields: Sequence[str]) -> str:
    """``amp-bf16 surrogate=atan``: the network ``fields`` of ``row`` that it states, in words."""
    parts = []
    for column in fields:
        value = network_value(row, column)
        if value:
            parts.append(NETWORK_FORMATS[column].format(value))
    return " ".join(parts)


def case_text(row: Any) -> str:
    """The case without the adapter: ``cpu float32 n=64 B=4 T=20 L=1 subtract``, with the
    network column when the run varies more than the size (``... subtract · amp-bf16``).
    Every table, plot and history series names a case with it; the words are the workload's
    (:meth:`~snnbench.workload.Workload.row_label`)."""
    text = row_workload_class(row).row_label(row)
    network = _network_of(row)
    return f"{text} · {network}" if network else text


def _network_of(row: Any) -> str:
    try:
        value = row[NETWORK]
    except (KeyError, IndexError):
        return ""
    return str(value) if isinstance(value, str) else ""


def rows_workload(rows: Any) -> type[Workload]:
    """The workload class of a table's rows (a DataFrame, read by its first row's ``kind``;
    :data:`~snnbench.workload.DEFAULT_KIND` when it has none): what says which column is
    the size, and how a size, a case and a group read."""
    if len(rows) == 0:
        return workload_class(DEFAULT_KIND)
    return row_workload_class(rows.iloc[0])


def group_title(row: Any) -> str:
    """"cpu, float32, B=16, T=100, layers=1, reset=zero" for a row (or mapping) of a group,
    with its network column when the run varies more (``... reset=zero · amp-bf16``)."""
    title = row_workload_class(row).group_label(row)
    network = _network_of(row)
    return f"{title} · {network}" if network else title

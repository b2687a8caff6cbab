"""Run folders on disk: case records, derived tables, manifest, lock — all written atomically.

The source of truth is one JSON record per finished case in ``cases/``; ``summary.*`` and
``samples.parquet`` are rebuilt from those records (when: :mod:`snnbench.store.rundir`). Each file
is written to a temporary name and renamed over the old one, so a kill at any instant leaves either
the previous or the new complete file. Nothing here is pickled: results are plain data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from snnbench.measure.measurement import MeasurementInfo
from snnbench.records.contract import CaseRecord, case_busy_cores, case_key

# the file layer, re-exported under the names callers long found here
from snnbench.records.fileio import (
    WRITTEN_LEDGER as WRITTEN_LEDGER,
    StorageError as StorageError,
    WriteError as WriteError,
    atomic_path as atomic_path,
    atomic_write_bytes as atomic_write_bytes,
    atomic_write_json as atomic_write_json,
    check_creatable as check_creatable,
    check_folder as check_folder,
    claim_folder as claim_folder,
    file_mode as file_mode,
    interrupted_write as interrupted_write,
    os_reason as os_reason,
    read_json as read_json,
    record_written as record_written,
    write_recorded as write_recorded,
    written_by_snnbench as written_by_snnbench,
    written_files as written_files,
)
from snnbench.records.schema import (
    ADDED_COLUMN_DEFAULTS,
    KIND,
    METRIC_UNITS,
    NETWORK,
    NETWORK_FORMATS,
    READ_NETWORK_COLUMNS,
    READ_SAMPLE_COLUMNS,
    READ_SUMMARY_COLUMNS,
    SUMMARY_BOOL_COLUMNS,
    SUMMARY_COLUMNS,
    SUMMARY_PARQUET,
    network_text,
    network_value,
    sample_columns,
    sample_float_columns,
    sample_int_columns,
    summary_columns,
    summary_types,
    table_kinds,
)
from snnbench.store.stats import (
    noise_warning,
    replicate_spread,
    replicate_warning,
    summarize,
    within_spread,
)
from snnbench.workload import DEFAULT_KIND, Workload, workload_class


def _case_columns(record: CaseRecord) -> dict[str, Any]:
    workload = record.workload
    cells = workload.cells(workload.params())
    return {
        "adapter": record.adapter,
        "variant": record.variant,
        # a table without the column (every row linear-lif) leaves it out
        KIND: workload.kind,
        "device": record.device,
        # the case's size in words: the workload's key columns (dtype, neurons... reset)
        **{column: cells[column] for column in workload.key_columns},
        "environment": record.environment.name,
    }


def summary_frame(records: list[CaseRecord], run_id: str) -> pd.DataFrame:
    """One row per adapter × case × phase × metric (one status row for a non-ok case).

    The replicates of a case (``--replicates``: fresh processes) make one row per phase and
    metric, its statistics over the samples of every ok replicate, with the replicate count
    and the spread between and within replicates; a replicate that did not finish ok adds a
    status row (one per distinct status and message).
    """
    rows: list[dict[str, Any]] = []
    for group in _replicate_groups(records).values():
        done = [r for r in group if r.status == "ok" and r.samples]
        for record in _distinct_failures([r for r in group if not any(r is d for d in done)]):
            rows.append({**_base_columns(record, run_id, group), "phase": "", "metric": "",
                         "unit": "", "n_samples": 0,
                         "replicates": sum(_same_outcome(r, record) for r in group)})
        if done:
            rows.extend(_metric_rows(done, run_id))
    # the case columns of the kinds present: a folder of linear-lif cases writes the tables
    # it always did
    kinds = table_kinds(r.workload.kind for r in records)
    frame = pd.DataFrame(rows, columns=list(summary_columns(kinds)))
    frame = _add_floor_ratio(frame)
    return label_networks([_typed_summary(frame, kinds)])[0]


def _measurement_columns(infos: list[MeasurementInfo], phase: str) -> dict[str, Any]:
    """The timer, block and GPU-state columns of one phase's rows, from a case's ok replicates
    in order: the GPU before the first and after the last; the timer's null time and the block
    of the first (replicates of one case differ only by noise in them)."""
    first = infos[0]
    before, after = first.gpu_before, infos[-1].gpu_after
    return {
        "timer": _joined([info.timer for info in infos]),
        "timer_null_s": first.timer_null_s,
        "block_size": first.block_size.get(phase, 1),
        "warmup_stop": _joined([info.warmup_stop for info in infos]),
        "sm_clock_before_mhz": before.sm_clock_mhz if before else math.nan,
        "sm_clock_after_mhz": after.sm_clock_mhz if after else math.nan,
        "temperature_before_c": before.temperature_c if before else math.nan,
        "temperature_after_c": after.temperature_c if after else math.nan,
        "power_before_w": before.power_w if before else math.nan,
        "power_after_w": after.power_w if after else math.nan,
    }


def _replicate_groups(records: list[CaseRecord]) -> dict[str, list[CaseRecord]]:
    """Records by case (their key without the replicate), in the order cases first finished."""
    groups: dict[str, list[CaseRecord]] = {}
    for record in records:
        key = case_key(record.adapter, record.variant, record.device, record.case_id,
                       record.environment.name)
        groups.setdefault(key, []).append(record)
    for group in groups.values():
        group.sort(key=lambda r: r.replicate)
    return groups


def _same_outcome(a: CaseRecord, b: CaseRecord) -> bool:
    return (a.status, a.message) == (b.status, b.message)


def _distinct_failures(records: list[CaseRecord]) -> list[CaseRecord]:
    """One record per distinct (status, message): replicates skipped alike are one row."""
    out: list[CaseRecord] = []
    for record in records:
        if not any(_same_outcome(record, r) for r in out):
            out.append(record)
    return out


def _joined(values: list[str]) -> str:
    return "; ".join(v for v in dict.fromkeys(values) if v)


def _base_columns(record: CaseRecord, run_id: str, group: list[CaseRecord]) -> dict[str, Any]:
    """The case columns of a row, from ``record``; where the replicates ran, from them all."""
    return {
        "run_id": run_id,
        **_case_columns(record),
        "library": record.library,
        "library_version": record.library_version or "",
        "status": record.status,
        "message": record.message,
        "spike_match": _num(record.spike_match),
        "grad_cosine": _num(record.grad_cosine),
        "case_id": record.case_id,
        "allow_mismatch": record.allow_mismatch,
        "requirements": "; ".join(record.environment.requirements),
        "packages": environment_packages(record),
        "executor": _joined([r.placement.executor for r in group]),
        "host": _joined([r.placement.host for r in group]),
        "gpu_uuid": _joined([r.placement.gpu_uuid for r in group]),
        "concurrency": max(r.placement.concurrency for r in group),
        # the busiest replicate: one busy process is enough to make the row doubtful
        "busy_cores": max((busy for r in group if (busy := case_busy_cores(r)) is not None),
                          default=math.nan),
        **network_columns(record),
    }


def network_columns(record: CaseRecord) -> dict[str, Any]:
    """The workload's parameters beyond the case's size
    (:data:`~snnbench.records.schema.NETWORK_COLUMNS`), as the summary stores them."""
    return workload_network_columns(record.workload)


def workload_network_columns(workload: Workload) -> dict[str, Any]:
    """The network columns of ``workload``, as the summary stores them
    (:meth:`~snnbench.workload.Workload.cells`: for Linear+LIF the surrogate and slope, the
    detached reset and bias as "true"/"false", input kind, matmul precision, beta, threshold,
    input spread and rate, the seed as text: "" is how a run that did not say reads)."""
    cells = workload.cells(workload.params())
    return {column: cells[column] for column in workload.network_columns()}


def varying_network(frames: Sequence[pd.DataFrame], kind: str | None = None) -> list[str]:
    """The network columns holding more than one stated value over ``frames`` (read together:
    a run, both sides of a comparison, a history), in the kinds' column order; with ``kind``,
    over the rows of that kind only and among its columns."""
    columns = (READ_NETWORK_COLUMNS if kind is None
               else workload_class(kind).network_columns())
    tied = () if kind is None else workload_class(kind).tied_columns
    varying = []
    for column in columns:
        if column not in NETWORK_FORMATS:
            continue  # a column no label words (a graph's file): its key column names it
        if column in tied:
            if _differs_within_key(frames, kind, column):
                varying.append(column)
            continue
        values: set[str] = set()
        for frame in frames:
            if column in frame.columns:
                rows = frame if kind is None else frame[_kinds_of(frame) == kind]
                values.update(network_value({column: v}, column)
                              for v in rows[column].drop_duplicates())
        if len(values - {""}) > 1:
            varying.append(column)
    return varying


def _differs_within_key(frames: Sequence[pd.DataFrame], kind: str | None, column: str) -> bool:
    """Whether two rows of ``kind`` with equal key columns hold two stated values of
    ``column`` (a tied column: :attr:`~snnbench.workload.Workload.tied_columns`)."""
    if kind is None:
        return False
    key = [c for c in workload_class(kind).key_columns]
    seen: dict[tuple[str, ...], str] = {}
    for frame in frames:
        if column not in frame.columns or any(c not in frame.columns for c in key):
            continue
        rows = frame[_kinds_of(frame) == kind]
        for values in zip(*(rows[c] for c in (*key, column)), strict=True):
            text = network_value({column: values[-1]}, column)
            if not text:
                continue
            words = tuple(network_value({c: v}, c) for c, v in zip(key, values, strict=False))
            if seen.setdefault(words, text) != text:
                return True
    return False


def _kinds_of(frame: pd.DataFrame) -> pd.Series:
    """Each row's workload kind (:data:`DEFAULT_KIND` where a table has no kind column)."""
    if KIND not in frame.columns:
        return pd.Series(DEFAULT_KIND, index=frame.index, dtype=object)
    return frame[KIND].astype(object).where(frame[KIND].astype(str) != "", DEFAULT_KIND)


def label_networks(frames: Sequence[pd.DataFrame]) -> list[pd.DataFrame]:
    """``frames`` with the :data:`~snnbench.records.schema.NETWORK` column set: the network fields
    of a row's kind that vary over the rows of that kind in all of them, in words, so that
    read together two networks of one size never share a label (a field one frame does not
    state is left out of its rows)."""
    kinds = sorted({str(k) for frame in frames for k in _kinds_of(frame).unique()})
    fields = {kind: varying_network(frames, kind) for kind in kinds}
    out = []
    for frame in frames:
        frame = frame.copy()
        frame[NETWORK] = ""
        if frame.empty:
            out.append(frame)
            continue
        row_kinds = _kinds_of(frame)
        for kind in kinds:
            present = [c for c in fields[kind] if c in frame.columns]
            mine = row_kinds == kind
            if not present or not mine.any():
                continue
            texts: dict[tuple[str, ...], str] = {}
            column = []
            for values in zip(*(frame.loc[mine, c] for c in present), strict=True):
                row = dict(zip(present, values, strict=True))
                key = tuple(network_value(row, c) for c in present)
                if key not in texts:
                    texts[key] = network_text(row, present)
                column.append(texts[key])
            frame.loc[mine, NETWORK] = column
        out.append(frame)
    return out


def _metric_rows(done: list[CaseRecord], run_id: str) -> list[dict[str, Any]]:
    """The statistics rows of a case from its ok replicates (one record when not replicated)."""
    base = _base_columns(done[0], run_id, done)
    pairs: dict[tuple[str, str], None] = {}
    for record in done:
        for phase, metrics in record.samples.items():
            pairs.update(dict.fromkeys((phase, metric) for metric in metrics))
    infos = [MeasurementInfo.from_dict(r.measurement) for r in done]
    throttled = [info.warning for info in infos]
    rows = []
    for phase, metric in pairs:
        per_replicate = [[float(v) for v in r.samples.get(phase, {}).get(metric, [])
                          if v is not None] for r in done]
        per_replicate = [values for values in per_replicate if values]
        summary = summarize([v for values in per_replicate for v in values])
        spread = replicate_spread([summarize(values).median for values in per_replicate])
        within = within_spread(per_replicate)
        warning = ""
        if metric == "time_s":
            warning = _joined([noise_warning(summary), replicate_warning(spread, within),
                               *throttled])
        rows.append({
            **base,
            "phase": phase,
            "metric": metric,
            "unit": METRIC_UNITS.get(metric, ""),
            "median": summary.median,
            "q1": summary.q1,
            "q3": summary.q3,
            "iqr": summary.iqr,
            "mean": summary.mean,
            "std": summary.std,
            "min": summary.min,
            "max": summary.max,
            "n_samples": summary.n,
            "ci99_low": summary.ci99_low,
            "ci99_high": summary.ci99_high,
            "outliers": summary.outliers,
            "warning": warning,
            "replicates": len(per_replicate),
            "replicate_spread": spread,
            "within_spread": within,
            **_measurement_columns(infos, phase),
        })
    return rows


def environment_packages(record: CaseRecord) -> str:
    """``name==version; ...`` of the packages the record's environment installed, with the
    versions its worker found (``?`` where it found none); "" for the base environment."""
    from snnbench.host.libenv import pin_names

    names = pin_names(record.environment.resolved)
    return "; ".join(f"{n}=={record.packages.get(n, '?')}" for n in names)


def _add_floor_ratio(frame: pd.DataFrame) -> pd.DataFrame:
    """floor_ratio = step time / the ``floor`` adapter's step time on the same case."""
    frame["floor_ratio"] = float("nan")
    is_step = (frame["phase"] == "step") & (frame["metric"] == "time_s") & (frame["status"] == "ok")
    floor = frame[is_step & (frame["adapter"] == "floor")]
    if floor.empty:
        return frame
    floor_median: dict[tuple[str, str], float] = {}
    for _, row in floor.iterrows():
        key = (str(row["case_id"]), str(row["device"]))
        floor_median[key] = min(float(row["median"]), floor_median.get(key, math.inf))
    for index in frame.index[is_step]:
        key = (str(frame.at[index, "case_id"]), str(frame.at[index, "device"]))
        base = floor_median.get(key, 0.0)
        if base > 0:
            frame.at[index, "floor_ratio"] = float(frame.at[index, "median"]) / base  # type: ignore[arg-type]
    return frame


def _typed_summary(frame: pd.DataFrame, kinds: tuple[str, ...]) -> pd.DataFrame:
    floats, ints, texts = summary_types(kinds)
    for col in floats:
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    for col in ints:
        frame[col] = pd.to_numeric(frame[col], errors="coerce").fillna(0).astype("int64")
    for col in texts:
        frame[col] = frame[col].astype(object).where(frame[col].notna(), "").astype(str)
    for col in SUMMARY_BOOL_COLUMNS:
        # NaN (a column no row filled) is False; fillna(False) on float64 is deprecated
        frame[col] = frame[col].eq(True).astype(bool)
    return frame


def samples_frame(records: list[CaseRecord], run_id: str) -> pd.DataFrame:
    """One row per raw sample of every ok case."""
    rows: list[dict[str, Any]] = []
    for record in records:
        if record.status != "ok":
            continue
        cols = _case_columns(record)
        for phase, metrics in record.samples.items():
            for metric, values in metrics.items():
                for index, value in enumerate(values):
                    rows.append(
                        {
                            "run_id": run_id,
                            **cols,
                            "case_id": record.case_id,
                            "phase": phase,
                            "metric": metric,
                            "unit": METRIC_UNITS.get(metric, ""),
                            "sample_index": index,
                            "value": _num(value),
                            "replicate": record.replicate,
                        }
                    )
    kinds = table_kinds(r.workload.kind for r in records)
    frame = pd.DataFrame(rows, columns=list(sample_columns(kinds)))
    for col in sample_float_columns(kinds):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    for col in sample_int_columns(kinds):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").fillna(0).astype("int64")
    return frame


def _num(value: Any) -> float:
    if value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def read_summary(path: Path) -> pd.DataFrame:
    """Read a run folder's summary table; a damaged or missing one raises StorageError."""
    parquet = path / SUMMARY_PARQUET
    if not parquet.exists():
        raise StorageError(f"{path} has no {SUMMARY_PARQUET}: not a finished run folder")
    try:
        frame = pd.read_parquet(parquet)
    except Exception as exc:  # pyarrow raises several types for a torn or foreign file
        raise StorageError(f"cannot read {parquet}: damaged ({type(exc).__name__})") from exc
    frame = with_added_columns(frame)
    missing = [c for c in frame_columns(frame) if c not in frame.columns]
    if missing:
        raise StorageError(f"{parquet} lacks columns {', '.join(missing)}: wrong schema")
    return with_read_columns(frame)


def with_added_columns(frame: pd.DataFrame,
                       columns: tuple[str, ...] = SUMMARY_COLUMNS) -> pd.DataFrame:
    """A copy of ``frame`` (a table with ``columns``) with the columns of
    :data:`ADDED_COLUMN_DEFAULTS` it lacks (a run written before they existed), filled
    with their defaults."""
    frame = frame.copy()
    for column, default in ADDED_COLUMN_DEFAULTS.items():
        if column in columns and column not in frame.columns:
            frame[column] = default
    return frame


def frame_kinds(frame: pd.DataFrame) -> tuple[str, ...]:
    """The workload kinds of a table's rows, in registry order (a table without a kind
    column: :data:`~snnbench.workload.DEFAULT_KIND`); an unknown kind raises
    :class:`StorageError`."""
    try:
        return table_kinds(str(k) for k in _kinds_of(frame).unique())
    except ValueError as exc:  # WorkloadError: a kind this snnbench does not know
        raise StorageError(f"{exc}") from None


def frame_columns(frame: pd.DataFrame, samples: bool = False) -> tuple[str, ...]:
    """The columns a table of the kinds of ``frame``'s rows must have."""
    kinds = frame_kinds(frame)
    return sample_columns(kinds) if samples else summary_columns(kinds)


def with_read_columns(frame: pd.DataFrame, samples: bool = False) -> pd.DataFrame:
    """``frame`` with every registered kind's columns a reader holds
    (:data:`~snnbench.records.schema.READ_SUMMARY_COLUMNS`): its rows' kind in :data:`KIND`,
    a column another kind has "" (text) or NaN (a number) on them."""
    floats, ints, _ = summary_types(None)
    numbers = {*floats, *ints}
    frame = frame.copy()
    frame[KIND] = _kinds_of(frame)
    for column in (READ_SAMPLE_COLUMNS if samples else READ_SUMMARY_COLUMNS):
        if column not in frame.columns:
            frame[column] = float("nan") if column in numbers else ""
    return frame


@dataclass
class Run:
    """One run folder, loaded (:func:`snnbench.store.rundir.load_run`).

    ``summary`` has every column of
    :data:`~snnbench.records.schema.READ_SUMMARY_COLUMNS` (every registered workload kind's,
    ``kind`` included; text columns with "" for missing values, numeric columns as floats/ints
    with NaN, a column of another kind than a row's blank on it). ``samples`` is None when the
    run kept no raw samples.
    """

    path: Path
    manifest: dict[str, Any]
    summary: pd.DataFrame
    samples: pd.DataFrame | None

    @property
    def run_id(self) -> str:
        """The run's id from the manifest (the folder name when the manifest has none)."""
        return str(self.manifest.get("run_id") or self.path.name)

    @property
    def gpu_names(self) -> list[str]:
        """GPU model names from the manifest (empty on a machine without GPU)."""
        return [str(g.get("name", "?")) for g in _gpus(self.manifest)]

    @property
    def gpu_drivers(self) -> list[str]:
        """GPU driver versions from the manifest, one per GPU."""
        return [str(g.get("driver", "?")) for g in _gpus(self.manifest)]


def _gpus(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    gpus = manifest.get("gpus") or []
    return [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []

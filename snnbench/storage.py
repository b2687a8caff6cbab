"""Run folders on disk: case records, derived tables, manifest, lock — all written atomically.

The source of truth is one JSON record per finished case in ``cases/``; ``summary.*`` and
``samples.parquet`` are rebuilt from those records after every case. Each file is written to a
temporary name and renamed over the old one, so a kill at any instant leaves either the previous
or the new complete file. Nothing here is pickled: results are plain data.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pandas as pd

from snnbench.contract import CaseRecord
from snnbench.errors import UserError
from snnbench.rundir import schema_columns_added
from snnbench.schema import (
    CASES_DIR,
    LOCK_FILE,
    MANIFEST_FILE,
    METRIC_UNITS,
    SAMPLE_COLUMNS,
    SAMPLES_PARQUET,
    SCHEMA_VERSION,
    SUMMARY_COLUMNS,
    SUMMARY_CSV,
    SUMMARY_FLOAT_COLUMNS,
    SUMMARY_INT_COLUMNS,
    SUMMARY_PARQUET,
    SUMMARY_TEXT_COLUMNS,
)
from snnbench.stats import noise_warning, summarize


class StorageError(UserError):
    """A run folder cannot be used (unwritable, busy, damaged); one clear line."""


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and a rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    """Atomically write ``obj`` as indented JSON (NaN written as null)."""
    text = json.dumps(_clean_json(obj), indent=2, sort_keys=True)
    atomic_write_bytes(path, (text + "\n").encode())


def _clean_json(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _clean_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean_json(v) for v in obj]
    return obj


@contextlib.contextmanager
def _atomic_path(path: Path) -> Iterator[Path]:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> Any:
    """Read a JSON file; a damaged one raises :class:`StorageError` naming it."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise StorageError(f"missing {path}") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StorageError(f"cannot read {path}: damaged or not JSON ({exc})") from exc


@dataclass
class RunDir:
    """An output folder holding one run."""

    path: Path
    _lock_handle: IO[str] | None = None

    @property
    def cases_dir(self) -> Path:
        return self.path / CASES_DIR

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST_FILE

    # -- creation and locking -------------------------------------------------------------
    @classmethod
    def create(cls, path: Path) -> RunDir:
        """Prepare a new run folder; refuse one that already holds a run or cannot be written."""
        if (path / MANIFEST_FILE).exists() or (path / CASES_DIR).exists():
            raise StorageError(
                f"{path} already holds a run: use --resume to finish it, or choose another --out"
            )
        try:
            (path / CASES_DIR).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create output folder {path}: {exc.strerror}") from exc
        if not os.access(path, os.W_OK):
            raise StorageError(f"output folder {path} is not writable")
        return cls(path)

    @classmethod
    def open_existing(cls, path: Path) -> RunDir:
        """An existing run folder (for ``--resume``); it must hold a readable manifest."""
        if not path.is_dir():
            raise StorageError(f"no run folder at {path}")
        if not (path / MANIFEST_FILE).exists():
            raise StorageError(f"{path} has no {MANIFEST_FILE}: not a run folder")
        if not os.access(path, os.W_OK):
            raise StorageError(f"output folder {path} is not writable")
        (path / CASES_DIR).mkdir(exist_ok=True)
        return cls(path)

    def lock(self) -> None:
        """Hold an exclusive lock for this process; another live run on the folder is refused."""
        try:
            handle = open(self.path / LOCK_FILE, "a+")  # noqa: SIM115 - held until unlock()
        except OSError as exc:
            raise StorageError(f"cannot write to {self.path}: {exc.strerror}") from exc
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise StorageError(
                    f"{self.path} is in use by another live run ({holder}); wait for it or "
                    "choose another --out"
                ) from exc
            raise StorageError(f"cannot lock {self.path}: {exc.strerror}") from exc
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        self._lock_handle = handle

    def unlock(self) -> None:
        """Release the lock (also released by the OS if the process dies)."""
        if self._lock_handle is not None:
            fcntl.flock(self._lock_handle.fileno(), fcntl.LOCK_UN)
            self._lock_handle.close()
            self._lock_handle = None

    # -- manifest and case records ---------------------------------------------------------
    def write_manifest(self, manifest: dict[str, Any]) -> None:
        atomic_write_json(self.manifest_path, {"schema_version": SCHEMA_VERSION, **manifest})

    def read_manifest(self) -> dict[str, Any]:
        data = read_json(self.manifest_path)
        if not isinstance(data, dict):
            raise StorageError(f"{self.manifest_path} is damaged: not a JSON object")
        if data.get("schema_version") != SCHEMA_VERSION:
            raise StorageError(
                f"{self.manifest_path} has schema version {data.get('schema_version')!r}; "
                f"this snnbench reads version {SCHEMA_VERSION}"
            )
        return data

    def write_case(self, record: CaseRecord) -> None:
        """Store one finished case's record (atomically) under its key."""
        record.write(self.cases_dir / f"{record.key}.json")

    def finished_keys(self) -> set[str]:
        """Keys of the cases already recorded (``--resume`` skips them)."""
        if not self.cases_dir.is_dir():
            return set()
        return {p.stem for p in self.cases_dir.glob("*.json")}

    def case_records(self) -> list[CaseRecord]:
        """Every case record, ordered by the time it finished.

        A file that is not a case record of this schema raises a
        :class:`~snnbench.contract.ContractError` naming it.
        """
        records = [CaseRecord.read(path) for path in sorted(self.cases_dir.glob("*.json"))]
        records.sort(key=lambda r: (r.finished_utc, r.order))
        return records

    # -- derived tables ------------------------------------------------------------------
    def rebuild_tables(self, run_id: str) -> pd.DataFrame:
        """Rebuild summary.parquet, summary.csv and samples.parquet from the case records."""
        records = self.case_records()
        summary = summary_frame(records, run_id)
        samples = samples_frame(records, run_id)
        with _atomic_path(self.path / SAMPLES_PARQUET) as tmp:
            samples.to_parquet(tmp, index=False)
        with _atomic_path(self.path / SUMMARY_PARQUET) as tmp:
            summary.to_parquet(tmp, index=False)
        with _atomic_path(self.path / SUMMARY_CSV) as tmp:
            summary.to_csv(tmp, index=False)
        return summary


def _case_columns(record: CaseRecord) -> dict[str, Any]:
    spec = record.spec
    return {
        "adapter": record.adapter,
        "variant": record.variant,
        "device": record.device,
        "dtype": spec.dtype,
        "neurons": spec.neurons,
        "batch_size": spec.batch_size,
        "time_steps": spec.time_steps,
        "layers": spec.layers,
        "reset": spec.reset,
    }


def summary_frame(records: list[CaseRecord], run_id: str) -> pd.DataFrame:
    """One row per adapter × case × phase × metric (one status row for a non-ok case)."""
    rows: list[dict[str, Any]] = []
    for record in records:
        base = {
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
            "executor": record.placement.executor,
            "host": record.placement.host,
            "gpu_uuid": record.placement.gpu_uuid,
            "concurrency": record.placement.concurrency,
        }
        measurements = record.samples
        if record.status != "ok" or not measurements:
            rows.append({**base, "phase": "", "metric": "", "unit": "", "n_samples": 0})
            continue
        for phase, metrics in measurements.items():
            for metric, values in metrics.items():
                summary = summarize([float(v) for v in values if v is not None])
                warning = noise_warning(summary) if metric == "time_s" else ""
                rows.append(
                    {
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
                    }
                )
    frame = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    frame = _add_floor_ratio(frame)
    return _typed_summary(frame)


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


def _typed_summary(frame: pd.DataFrame) -> pd.DataFrame:
    for col in SUMMARY_FLOAT_COLUMNS:
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    for col in SUMMARY_INT_COLUMNS:
        frame[col] = pd.to_numeric(frame[col], errors="coerce").fillna(0).astype("int64")
    for col in SUMMARY_TEXT_COLUMNS:
        frame[col] = frame[col].astype(object).where(frame[col].notna(), "").astype(str)
    frame["allow_mismatch"] = frame["allow_mismatch"].fillna(False).astype(bool)
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
                        }
                    )
    frame = pd.DataFrame(rows, columns=list(SAMPLE_COLUMNS))
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype("float64")
    for col in ("neurons", "batch_size", "time_steps", "layers", "sample_index"):
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
    frame = schema_columns_added(frame)
    missing = [c for c in SUMMARY_COLUMNS if c not in frame.columns]
    if missing:
        raise StorageError(f"{parquet} lacks columns {', '.join(missing)}: wrong schema")
    return frame

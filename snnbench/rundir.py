"""Reading a finished run folder (``manifest.json``, ``summary.parquet``, ``samples.parquet``).

``report``, ``compare`` and ``show`` all start from :func:`load_run`. Anything that makes a folder
unusable (missing, not a run, a schema version this code does not read, a table without the
contract columns) raises :class:`RunDirError` with one line that says what and where; the CLI
prints it and exits with code 2, never a traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from snnbench import schema
from snnbench.errors import UserError
from snnbench.storage import RunDir
from snnbench.storage import with_added_columns as with_added_columns  # re-exported

#: summary columns that hold numbers (CSV fallbacks read them as text when a cell is empty)
_NUMERIC_SUMMARY = schema.SUMMARY_INT_COLUMNS + schema.SUMMARY_FLOAT_COLUMNS
#: summary columns that hold text; missing values become "" so comparisons and joins are plain
_TEXT_SUMMARY = schema.SUMMARY_TEXT_COLUMNS


class RunDirError(UserError):
    """The folder is not a readable run of this schema; the message is one line for the user."""


@dataclass
class Run:
    """One run folder, loaded.

    ``summary`` has every column of :data:`snnbench.schema.SUMMARY_COLUMNS` (text columns with ""
    for missing values, numeric columns as floats/ints with NaN). ``samples`` is None when the run
    kept no raw samples.
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


def _read_table(path: Path, what: str) -> pd.DataFrame:
    try:
        if path.suffix == ".csv":
            # keep_default_na=False: "" (no phase, no message) must stay "", not NaN
            return pd.read_csv(path, keep_default_na=False, na_values=["nan", "NaN"])
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow/pandas raise many types for a damaged file
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RunDirError(f"cannot read {what} {path}: {first}") from exc


def _normalise(frame: pd.DataFrame, numeric: tuple[str, ...], text: tuple[str, ...]) -> None:
    for col in numeric:
        if col in frame.columns:
            frame[col] = pd.to_numeric(frame[col], errors="coerce")
    for col in text:
        if col in frame.columns:
            frame[col] = frame[col].astype(object).where(frame[col].notna(), "").astype(str)


def load_manifest(path: Path) -> dict[str, Any]:
    """Read and check ``manifest.json`` of run folder ``path``; raise :class:`RunDirError`."""
    file = path / schema.MANIFEST_FILE
    if not file.is_file():
        raise RunDirError(f"{path} is not a run folder: no {schema.MANIFEST_FILE}")
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunDirError(f"damaged manifest {file}: {exc}") from exc
    if not isinstance(manifest, dict):
        raise RunDirError(f"damaged manifest {file}: not a JSON object")
    version = manifest.get("schema_version")
    if version != schema.SCHEMA_VERSION:
        raise RunDirError(
            f"{path} has schema_version {version!r}; this snnbench reads version "
            f"{schema.SCHEMA_VERSION} (re-run the benchmark, or use the snnbench that wrote it)"
        )
    return manifest


def load_run(path: str | Path, *, samples: bool = True) -> Run:
    """Load a run folder and check it against :mod:`snnbench.schema`.

    ``samples=False`` skips ``samples.parquet`` (it can be large; tables and plots do not need
    it). Raises :class:`RunDirError` when the folder is missing, is not a run, has another
    schema version, or its summary is unreadable, lacks contract columns or has no rows. The
    summary is read from Parquet, falling back to ``summary.csv`` when the Parquet file is absent.
    """
    root = Path(path)
    if not root.exists():
        raise RunDirError(f"run folder {root} does not exist")
    if not root.is_dir():
        raise RunDirError(f"{root} is not a folder")
    manifest = load_manifest(root)
    holder = RunDir(root).live_holder()
    if holder is not None:
        # its tables change with every case that finishes: read it once the run has ended
        raise RunDirError(f"{root} is in use by a live run ({holder}): wait for it to finish")

    parquet, csv = root / schema.SUMMARY_PARQUET, root / schema.SUMMARY_CSV
    if parquet.is_file():
        summary = _read_table(parquet, "summary")
    elif csv.is_file():
        summary = _read_table(csv, "summary")
    else:
        raise RunDirError(
            f"{root} has no {schema.SUMMARY_PARQUET}: the run did not finish "
            "(resume it, or point at a finished run)"
        )
    summary = with_added_columns(summary)
    missing = [c for c in schema.SUMMARY_COLUMNS if c not in summary.columns]
    if missing:
        raise RunDirError(f"damaged summary in {root}: missing columns {', '.join(missing)}")
    if summary.empty:
        raise RunDirError(f"empty run {root}: the summary has no rows")
    _normalise(summary, _NUMERIC_SUMMARY, _TEXT_SUMMARY)
    # a bool in Parquet, the text "True"/"False" in the CSV fallback
    summary["allow_mismatch"] = [str(v).strip().lower() in ("true", "1", "1.0")
                                 for v in summary["allow_mismatch"]]

    sample_frame: pd.DataFrame | None = None
    sample_file = root / schema.SAMPLES_PARQUET
    if samples and sample_file.is_file():
        sample_frame = with_added_columns(_read_table(sample_file, "samples"),
                                          schema.SAMPLE_COLUMNS)
        missing = [c for c in schema.SAMPLE_COLUMNS if c not in sample_frame.columns]
        if missing:
            raise RunDirError(f"damaged samples in {root}: missing columns {', '.join(missing)}")
        sample_frame = sample_frame.copy()
        _normalise(
            sample_frame,
            ("neurons", "batch_size", "time_steps", "layers", "sample_index", "value",
             "replicate"),
            ("run_id", "adapter", "variant", "case_id", "device", "dtype", "reset", "phase",
             "metric", "unit", "environment"),
        )
    return Run(path=root, manifest=manifest, summary=summary, samples=sample_frame)


def adapter_label(adapter: str, variant: str, environment: str = "") -> str:
    """How an adapter is named in tables and plots: ``torch``, ``norse:compile``, and in a
    library environment ``snntorch@0.9.4`` or ``spikingjelly:torch@legacy``."""
    from snnbench.contract import environment_tag

    label = adapter if variant in ("", "default") else f"{adapter}:{variant}"
    return f"{label}@{environment_tag(adapter, environment)}" if environment else label

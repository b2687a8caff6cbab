"""Reading a finished run folder (``manifest.json``, ``summary.parquet``, ``samples.parquet``).

``report``, ``compare`` and ``show`` all start from :func:`load_run`, which
:class:`snnbench.runfolder.RunFolder` (the one reader and writer of a run folder) provides;
this module keeps the names they import, and how an adapter is labelled. Anything that
makes a folder unusable (missing, not a run, a schema version this code does not read, a
table without the contract columns) raises :class:`RunDirError` with one line that says what
and where; the CLI prints it and exits with code 2, never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from snnbench.contract import adapter_label as adapter_label
from snnbench.fileio import StorageError
from snnbench.runfolder import Run as Run
from snnbench.runfolder import RunFolder
from snnbench.runfolder import load_run as load_run
from snnbench.storage import with_added_columns as with_added_columns

#: the error of an unreadable run folder: one kind for every reader of a run folder
RunDirError = StorageError


def load_manifest(path: Path) -> dict[str, Any]:
    """Read and check ``manifest.json`` of run folder ``path``; raise :class:`RunDirError`."""
    return RunFolder(path).manifest_data()

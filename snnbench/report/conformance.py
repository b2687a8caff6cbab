"""``nir-check`` results kept in a run folder, and the report's section that shows them.

``snnbench nir-check G.nir --out RUN`` keeps its result (:meth:`ConformanceReport.to_dict`)
as ``RUN/nir-check/<network>-<check id>.json`` (:func:`save_check`), written atomically and
recorded in that folder's ledger: the same check again replaces its own file, and a file of
that name that snnbench did not write, or that was changed since, is never overwritten.
``snnbench report RUN`` draws one "Importer conformance (nir-check)" table per file
(:func:`conformance_blocks`). A run folder may come from someone else: its files are read
without following links out of it, size-limited and checked whole; a bad one is one line
naming it, and the report is drawn all the same.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Final

from snnbench.records.fileio import (
    WRITTEN_LEDGER,
    NotAFile,
    StorageError,
    parse_json,
    read_regular,
    write_recorded,
    written_by_snnbench,
    written_files,
)
from snnbench.render import Table
from snnbench.report.export.base import Block
from snnbench.store.rundir import load_manifest
from snnbench.workload.graph.conformance.render import heading
from snnbench.workload.graph.conformance.result import ConformanceReport

#: the run folder's subfolder of nir-check results
NIR_CHECK_DIR: Final = "nir-check"
#: the largest result file read (a check of six libraries is a few kB)
MAX_BYTES: Final = 1 << 20
#: the most result files a report shows (a folder someone sent may hold thousands)
MAX_FILES: Final = 50
TITLE: Final = "Importer conformance (nir-check)"
NOTE: Final = ("Each library's own NIR importer against snnbench's float64 reference of the "
               "graph: exact, exact up to a scale, a different model (what its probes "
               "found), unsupported (why) or unavailable.")


def check_folder(run_dir: Path) -> Path:
    """The run folder's ``nir-check/`` folder (not created): ``run_dir`` must be a run folder
    (a readable manifest), and ``nir-check`` in it a folder, or nothing, never a link.
    Raises a one-line :class:`StorageError`; called before a check runs, and again before
    its result is written."""
    load_manifest(run_dir)
    folder = run_dir / NIR_CHECK_DIR
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise StorageError(f"{folder} is not a folder of the run (a link or a file): remove "
                           "it; nothing was written")
    return folder


def save_check(run_dir: Path, report: ConformanceReport) -> Path:
    """Write ``report`` into run folder ``run_dir`` (:data:`NIR_CHECK_DIR`); returns the
    file. The same check written before is replaced; any other file of that name is left
    untouched and raises :class:`StorageError`."""
    folder = check_folder(run_dir)
    if folder.is_dir() and written_files(folder) is None:
        raise StorageError(f"{folder / WRITTEN_LEDGER} is not a ledger snnbench wrote "
                           "(damaged, or someone else's file): it was left as it is; "
                           "nothing was written")
    target = folder / report.file_name
    if (target.exists() or target.is_symlink()) and not written_by_snnbench(target):
        raise StorageError(f"{target} exists and is not a nir-check result snnbench wrote "
                           "(or it was changed since): it was left as it is; move it away "
                           "and check again")
    try:
        folder.mkdir(exist_ok=True)
    except OSError as exc:
        raise StorageError(f"cannot create {folder}: {exc.strerror or exc}") from exc
    text = json.dumps(_finite(report.to_dict()), indent=2, ensure_ascii=False) + "\n"
    write_recorded(target, text.encode("utf-8"))
    return target


def _finite(obj: Any) -> Any:
    """``obj`` with NaN and infinities as null (JSON has none)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def load_checks(run_dir: Path) -> tuple[list[tuple[str, ConformanceReport]],
                                        list[tuple[str, str]]]:
    """The nir-check results kept in ``run_dir``, by file name, and the files that could not
    be read as one, each with why (in one line). A run folder with none gives two empty
    lists."""
    folder = run_dir / NIR_CHECK_DIR
    if folder.is_symlink():
        return [], [(NIR_CHECK_DIR, "a symbolic link, which is not followed here")]
    if not folder.is_dir():
        return [], []
    try:
        names = sorted(p.name for p in folder.iterdir()
                       if p.name.endswith(".json") and not p.name.startswith("."))
    except OSError as exc:
        return [], [(NIR_CHECK_DIR, f"cannot be read: {exc.strerror or exc}")]
    found: list[tuple[str, ConformanceReport]] = []
    bad: list[tuple[str, str]] = []
    if len(names) > MAX_FILES:
        bad.append((NIR_CHECK_DIR, f"holds {len(names)} results: the first {MAX_FILES} "
                    "are shown"))
        names = names[:MAX_FILES]
    for name in names:
        where = f"{NIR_CHECK_DIR}/{name}"
        try:
            data = parse_json(read_regular(folder / name, MAX_BYTES, follow=False)
                              .decode("utf-8"))
            found.append((where, ConformanceReport.from_dict(data)))
        except NotAFile as exc:
            bad.append((where, str(exc)))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            bad.append((where, f"damaged or not JSON ({exc})"))
        except ValueError as exc:
            bad.append((where, str(exc)))
    return found, bad


def check_table(report: ConformanceReport) -> Table:
    """One row per library: its version, verdict, what was found, how it was called."""
    rows = [[c.library, c.version or "-", c.verdict, c.summary() or "-", c.called or "-"]
            for c in report.checks]
    return Table(["library", "version", "result", "what was found", "called as"], rows)


def conformance_blocks(run_dir: Path) -> list[Block]:
    """The report's blocks of the nir-check results kept in ``run_dir``: one per result, and
    one that names each file that could not be read (none when there is no result)."""
    found, bad = load_checks(run_dir)
    blocks = [Block(f"{TITLE}: {report.network}", check_table(report),
                    f"{'; '.join(heading(report))} ({where}). {NOTE}",
                    anchor=f"nir-check-{report.check_id}")
              for where, report in found]
    if bad:
        blocks.append(Block(f"{TITLE}: files that could not be read",
                            Table(["file", "why"], [[w, why] for w, why in bad]),
                            "These files were left out; the rest of the report stands.",
                            bad=True))
    return blocks

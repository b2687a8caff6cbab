"""A run folder on disk: its manifest, lock, case records and tables, read and written here.

``run`` writes one through :class:`RunFolder`; ``report``, ``compare`` and ``show`` start from
:func:`load_run`.
The source of truth is one JSON record per finished case in ``cases/``; ``summary.*`` and
``samples.parquet`` are built from those records (:mod:`snnbench.store.storage`). A sweep writes
each case's record as it finishes and rebuilds the tables only now and then (after 1, 2, 4, 8...
records, so the bookkeeping stays linear in the cases) and at its end; while the tables may lag
the records, a mark (:data:`TABLES_STALE`) says so, and :func:`load_run` then builds them from
the records, so a sweep killed at any moment leaves a folder every reader takes whole.
Each file is written to a temporary name and renamed over the old one, so a kill at any instant
leaves either the previous or the new complete file. Anything that makes a folder unusable
(missing, not a run, a schema version this code does not read, a table without the contract
columns) raises :class:`RunDirError` with one line that says what and where; the CLI prints
it and exits with code 2, never a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import json
import math
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pandas as pd

from snnbench.errors import UserError
from snnbench.records import roofline
from snnbench.records.contract import (
    CaseRecord,
    adapter_label as adapter_label,  # long imported from here
)
from snnbench.records.fileio import (
    StorageError,
    WriteError,
    atomic_path,
    atomic_write_bytes,
    atomic_write_json,
    check_creatable,
    check_folder,
    claim_folder,
    file_mode,
    os_reason,
    parse_json,
    read_regular,
)
from snnbench.records.schema import (
    CASE_KEY,
    CASES_DIR,
    HOSTS_DIR,
    JOBS_DIR,
    KIND,
    LOCK_FILE,
    MANIFEST_FILE,
    READ_NETWORK_COLUMNS,
    READ_SAMPLE_COLUMNS,
    SAMPLES_PARQUET,
    SCHEMA_VERSION,
    SUMMARY_CSV,
    SUMMARY_PARQUET,
    kind_int_columns,
    sample_float_columns,
    sample_int_columns,
    summary_types,
)
from snnbench.store.manifest import Manifest, upgraded
from snnbench.store.overhead import PROBES
from snnbench.store.storage import (
    Run as Run,  # long imported from here
    frame_columns,
    label_networks,
    samples_frame,
    summary_frame,
    with_added_columns as with_added_columns,  # long imported from here
    with_read_columns,
    workload_network_columns,
)
from snnbench.workload import row_workload_class, workload_class, workload_from_dict
from snnbench.workload.base import Work

#: summary columns that hold numbers (CSV fallbacks read them as text when a cell is empty),
#: of every kind a reader holds
_NUMERIC_SUMMARY = summary_types(None)[1] + summary_types(None)[0]
#: summary columns that hold text; missing values become "" so comparisons and joins are plain
_TEXT_SUMMARY = summary_types(None)[2]
#: samples.parquet's numbers and text, of every kind
_NUMERIC_SAMPLES = (*sample_int_columns(None), *sample_float_columns(None))
_TEXT_SAMPLES = tuple(c for c in READ_SAMPLE_COLUMNS if c not in _NUMERIC_SAMPLES)


def row_work(row: Mapping[str, object]) -> Work | None:
    """The least work of a summary row, as its workload counts it (the GPU floor)."""
    return row_workload_class(row).row_work(row)


#: present while the tables may lag the case records: written before a sweep writes its first
#: record, removed once the tables are rebuilt from every record (end of the sweep, ``merge``)
TABLES_STALE = ".tables-stale"


def _may_hold_new_run(path: Path) -> bool:
    # an empty cases/ is what a run leaves when it stopped before writing its manifest
    return path.name == CASES_DIR and path.is_dir() and not any(path.iterdir())


@dataclass
class RunFolder:
    """One run folder: everything in it is read and written here.

    Its manifest (:class:`~snnbench.store.manifest.Manifest`), its lock, its case records (the
    source of truth) and the tables rebuilt from them; :meth:`load` reads a finished run for
    ``show``, ``report`` and ``compare``.
    """

    path: Path
    _lock_handle: IO[str] | None = None
    #: whether this object wrote the stale mark (and has not cleared it since)
    _marked: bool = False
    #: records in the folder, counted from :meth:`begin_cases` on (by :meth:`add_case`)
    _stored: int = 0
    #: the record count at which :meth:`add_case` rebuilds the tables next
    _next_tables: int = 1

    @property
    def cases_dir(self) -> Path:
        return self.path / CASES_DIR

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST_FILE

    # -- creation and locking -------------------------------------------------------------
    @staticmethod
    def check_new(path: Path) -> None:
        """Refuse, touching nothing, a folder that cannot become a new run folder: one that
        already holds a run (pointing at ``--resume``) or any other non-empty folder (with
        ``--out /`` the results would land among system files). Called before any slow
        preparation, and again by :meth:`create`."""
        if (path / MANIFEST_FILE).exists():
            raise StorageError(
                f"{path} already holds a run: use --resume to finish it, or choose another --out"
            )
        check_folder(path, "--out", _may_hold_new_run)
        check_creatable(path, "--out")

    @classmethod
    def create(cls, path: Path) -> RunDir:
        """Prepare a new run folder: ``path`` must be new or empty, never a folder with files."""
        cls.check_new(path)
        claim_folder(path, "--out", _may_hold_new_run)
        try:
            (path / CASES_DIR).mkdir(exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create {path / CASES_DIR}: {os_reason(exc)}") from exc
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
        for name in (CASES_DIR, HOSTS_DIR, JOBS_DIR, "logs"):
            # a folder someone sent may point one elsewhere: records, logs and job files
            # would be written there
            inner = path / name
            if inner.is_symlink() or (inner.exists() and not inner.is_dir()):
                raise StorageError(f"damaged folder: {inner} is not a folder of the run "
                                   "(a link or a file); remove it (nothing was written)")
        try:
            (path / CASES_DIR).mkdir(exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create {path / CASES_DIR}: {os_reason(exc)}") from exc
        return cls(path)

    def live_holder(self) -> str | None:
        """Who holds the folder's lock (``pid N``) while a live run writes into it, else None.
        Only tests the lock (a shared, non-blocking try): readers write nothing."""
        try:
            # non-blocking and not through a link: a FIFO planted there must not hang a reader
            fd = os.open(self.path / LOCK_FILE,
                         os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None  # no lock file: no live run
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None  # no run locks anything but its own regular file
        with open(fd) as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    with contextlib.suppress(OSError, UnicodeDecodeError):
                        return handle.read().strip() or "another process"
                    return "another process"
                return None
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return None

    def lock(self) -> None:
        """Hold an exclusive lock for this process; another live run on the folder is refused.

        The lock file is removed by :meth:`unlock`. A process that opened it just before
        that removal would lock an unlinked file, so the lock counts only when the locked
        file is still the one at the path (else it is retried on the new file).
        """
        path = self.path / LOCK_FILE
        for _ in range(10):
            handle = _open_lock_file(path)
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
                raise StorageError(f"cannot lock {self.path}: {os_reason(exc)}") from exc
            try:
                same = os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            handle.close()
        else:
            raise StorageError(f"cannot lock {self.path}: its lock file keeps changing")
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()}\n")
            handle.flush()
        except OSError as exc:
            handle.close()
            raise WriteError(path, exc) from exc
        self._lock_handle = handle

    def unlock(self) -> None:
        """Release the lock and remove the lock file (the OS releases it if the process dies)."""
        if self._lock_handle is not None:
            # removed while still held, so no other run can lock the file and then lose it
            with contextlib.suppress(OSError):
                os.unlink(self.path / LOCK_FILE)
            fcntl.flock(self._lock_handle.fileno(), fcntl.LOCK_UN)
            self._lock_handle.close()
            self._lock_handle = None

    # -- manifest and case records ---------------------------------------------------------
    def write_manifest(self, manifest: Manifest | Mapping[str, Any]) -> None:
        """Write the manifest atomically. Raw JSON data (tools, tests) is written as given,
        under this version."""
        data = (manifest.to_json() if isinstance(manifest, Manifest)
                else {"schema_version": SCHEMA_VERSION, **manifest})
        atomic_write_json(self.manifest_path, data)

    def manifest_data(self) -> dict[str, Any]:
        """The manifest as JSON data, of this schema version (an older one upgraded): all
        that ``show``, ``report`` and ``compare`` need. A missing, damaged or foreign file
        raises :class:`StorageError` in one line."""
        file = self.manifest_path
        if not file.is_file():
            raise StorageError(f"{self.path} is not a run folder: no {MANIFEST_FILE}")
        try:
            data = parse_json(read_regular(file).decode("utf-8"))  # a FIFO never blocks
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise StorageError(f"damaged manifest {file}: cannot read it: damaged or not JSON "
                               f"({exc})") from exc
        return upgraded(data, file)

    def manifest(self) -> Manifest:
        """The typed manifest, checked whole: what a resume or a merge goes on from."""
        return Manifest.parse(self.manifest_data(), self.manifest_path)

    def read_manifest(self) -> dict[str, Any]:
        """The checked manifest as JSON data (:meth:`manifest`, as the file holds it)."""
        return self.manifest().to_json()

    def begin_cases(self) -> None:
        """Mark the tables stale before records are written (by this process, or by cluster
        tasks straight into ``cases/``): until :meth:`rebuild_tables` clears the mark, readers
        build the tables from the records. Idempotent for one sweep."""
        if self._marked:
            return
        atomic_write_bytes(self.path / TABLES_STALE,
                           b"the tables may lag cases/: readers build them from the records\n")
        self._marked = True
        self._stored = sum(1 for _ in self.cases_dir.glob("*.json"))
        self._next_tables = max(1, 2 * self._stored)

    def write_case(self, record: CaseRecord) -> None:
        """Store one finished case's record (atomically) under its key, the tables marked stale
        first."""
        self.begin_cases()
        record.write(self.cases_dir / f"{record.key}.json")

    def add_case(self, record: CaseRecord, run_id: str) -> None:
        """A sweep's bookkeeping for one finished case: its record, and the tables rebuilt only
        when the records have doubled since they last were (after 1, 2, 4, 8... records).

        The total work stays linear in the cases (the rebuilds read at most twice as many
        records as the sweep stores), yet a sweep killed mid-way leaves tables on disk that hold
        at least half its cases; the stale mark stays until :meth:`rebuild_tables`, so readers
        still see all of them.
        """
        self.store_case(record)
        self.tables_if_due(run_id)

    def store_case(self, record: CaseRecord) -> None:
        """The first half of :meth:`add_case`: the record written and counted (a sweep tells
        the terminal about the case between the two halves, before any table is rebuilt)."""
        self.write_case(record)
        self._stored += 1

    def tables_if_due(self, run_id: str) -> None:
        """The second half of :meth:`add_case`: the tables rebuilt if the records doubled."""
        if self._stored >= self._next_tables:
            self._write_tables(run_id)
            self._next_tables = 2 * self._stored

    def finished_keys(self) -> set[str]:
        """Keys of the cases already recorded (``--resume`` skips them): the keys the records
        hold, never only their file names (:meth:`case_records` checks that both agree)."""
        if not self.cases_dir.is_dir():
            return set()
        return {record.key for record in self.case_records()}

    def case_records(self) -> list[CaseRecord]:
        """Every case record, ordered by the time it finished.

        A file that is not a case record of this schema raises a
        :class:`~snnbench.records.contract.ContractError` naming it; one whose name is not its
        record's key (a record copied or renamed by hand) raises :class:`StorageError`: a copy
        would count as a second replicate, a renamed one would hide the case it is named after.
        """
        records = []
        for path in sorted(self.cases_dir.glob("*.json")):
            record = CaseRecord.read(path)
            if record.key != path.stem:
                raise StorageError(
                    f"{path} holds the record of case {record.key}, not {path.stem} (copied "
                    f"or renamed by hand): restore its name ({record.key}.json) or remove it")
            records.append(record)
        records.sort(key=lambda r: (r.finished_utc, r.order))
        return records

    def load(self, *, samples: bool = True) -> Run:
        """The finished run, checked (:func:`load_run`)."""
        return load_run(self.path, samples=samples)

    def _gpu_models(self) -> dict[str, str]:
        """Each host's GPU model for the roofline columns; none while the manifest is
        unreadable (the tables are still written; a reader fills the columns again)."""
        try:
            return roofline.gpu_models(self.manifest_data())
        except StorageError:
            return {}

    # -- derived tables ------------------------------------------------------------------
    def tables_stale(self) -> bool:
        """True while the tables may lag the case records (a sweep under way, or killed)."""
        return os.path.lexists(self.path / TABLES_STALE)

    def rebuild_tables(self, run_id: str) -> pd.DataFrame:
        """Rebuild summary.parquet, summary.csv and samples.parquet from the case records, then
        clear the stale mark (the end of a sweep, ``merge``).

        The mark stays when a record came or changed while the tables were built (a cluster
        task still writing): those tables may lack it, so readers keep going to the records.
        """
        before = self._case_files()
        summary = self._write_tables(run_id)
        if self._case_files() == before:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path / TABLES_STALE)
            self._marked = False
        return summary

    def _case_files(self) -> dict[str, tuple[int, int]]:
        """Each record file's name with its inode and change time: a record written anew
        (atomically: a new inode) changes it."""
        files = {}
        for path in self.cases_dir.glob("*.json"):
            with contextlib.suppress(OSError):
                info = path.lstat()
                files[path.name] = (info.st_ino, info.st_mtime_ns)
        return files

    def tables_from_records(self, run_id: str, records: list[CaseRecord] | None = None,
                            *, samples: bool = True,
                            ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """The summary (and, with ``samples``, the samples table) the case records make, in
        memory: what :meth:`rebuild_tables` writes."""
        records = self.case_records() if records is None else records
        summary = roofline.annotate(summary_frame(records, run_id), self._gpu_models(), row_work,
                                    PROBES)
        return summary, (samples_frame(records, run_id) if samples else None)

    def _write_tables(self, run_id: str) -> pd.DataFrame:
        """Write the three tables from the case records; the stale mark is left as it is."""
        records = self.case_records()
        summary, _ = self.tables_from_records(run_id, records, samples=False)
        samples = samples_frame(records, run_id)
        with atomic_path(self.path / SAMPLES_PARQUET) as tmp:
            samples.to_parquet(tmp, index=False)
        with atomic_path(self.path / SUMMARY_PARQUET) as tmp:
            summary.to_parquet(tmp, index=False)
        with atomic_path(self.path / SUMMARY_CSV) as tmp:
            summary.to_csv(tmp, index=False)
        return summary


def _open_lock_file(path: Path) -> IO[str]:
    """The lock file, opened for reading and writing (created if missing), never through a
    link and never a FIFO: a folder someone sent may hold a ``.lock`` that points at a file
    elsewhere, which locking would truncate and write."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     file_mode())
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StorageError(f"damaged folder: {path} is a symbolic link, not a lock file; "
                               "remove it (nothing was written)") from exc
        raise StorageError(f"cannot write to {path.parent}: {os_reason(exc)}") from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise StorageError(f"damaged folder: {path} is not a regular file (a FIFO or a device); "
                           "remove it (nothing was written)")
    os.set_blocking(fd, True)
    return open(fd, "r+")


def _read_table(path: Path, what: str) -> pd.DataFrame:
    try:
        if path.suffix == ".csv":
            # keep_default_na=False: "" (no phase, no message) must stay "", not NaN
            return pd.read_csv(path, keep_default_na=False, na_values=["nan", "NaN"])
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow/pandas raise many types for a damaged file
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StorageError(f"cannot read {what} {path}: {first}") from exc


def _normalise(frame: pd.DataFrame, numeric: tuple[str, ...], text: tuple[str, ...]) -> None:
    for col in numeric:
        if col in frame.columns:
            frame[col] = pd.to_numeric(frame[col], errors="coerce")
    for col in text:
        if col in frame.columns:
            frame[col] = frame[col].astype(object).where(frame[col].notna(), "").astype(str)


def _unstated(frame: pd.DataFrame) -> pd.Series:
    """Rows that leave a network column of their kind unsaid (a run written before the
    column existed)."""
    floats = set(summary_types(None)[0])
    missing = pd.Series(False, index=frame.index)
    for kind in frame[KIND].unique():
        mine = frame[KIND] == kind
        for column in workload_class(str(kind)).network_columns():
            values = frame.loc[mine, column]
            missing.loc[mine] |= values.isna() if column in floats else values.eq("")
    return missing


def _with_network_columns(summary: pd.DataFrame, cases: Path) -> pd.DataFrame:
    """``summary`` with the network columns an older run did not write taken from the spec
    in its case records (matched by ``case_id``); those still unknown stay "" or NaN. A record
    that is not a plain readable file is passed over: the readers of tables never block on a
    FIFO or fail on a record ``merge`` and ``--resume`` would name."""
    unstated = _unstated(summary)
    if not unstated.any() or not cases.is_dir():
        return summary
    wanted = set(summary.loc[unstated, "case_id"])
    specs: dict[str, dict[str, Any]] = {}
    for path in sorted(cases.glob("*.json")):
        if len(specs) == len(wanted):
            break
        try:
            if path.is_symlink() or not path.is_file():
                continue
            data = json.loads(path.read_text(encoding="utf-8"))
            case_id = str(data["case_id"])
            if case_id in wanted and case_id not in specs:
                specs[case_id] = workload_network_columns(
                    workload_from_dict(data["spec"], data.get("kind")))
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            continue
    if not specs:
        return summary
    summary = summary.copy()
    for index in summary.index[unstated]:
        known = specs.get(str(summary.at[index, "case_id"]))
        if known is None:
            continue
        for column, value in known.items():
            current = summary.at[index, column]
            if current == "" or (isinstance(current, float) and math.isnan(current)):
                summary.at[index, column] = value
    return summary


#: what one timed row of the summary is: one case (its key, its spec's hash and the network
#: fields beyond the key), phase and metric; a failed case may have several rows (one per
#: distinct failure), without a phase
_ROW_IDENTITY = tuple(dict.fromkeys((*CASE_KEY, "case_id", *READ_NETWORK_COLUMNS, "phase",
                                     "metric")))


def _check_rows(summary: pd.DataFrame, given: pd.DataFrame, root: Path) -> None:
    """Refuse, in one line, a summary no snnbench wrote: a case size of a row's kind that is
    not a whole number ≥ 1 (``given``: the table as read, to name the value), or a timed row
    twice (a table, a plot or a comparison would have two values for one cell)."""
    for kind in summary[KIND].unique():
        mine = (summary[KIND] == kind).to_numpy()
        for col in kind_int_columns(str(kind)):
            values = summary.loc[mine, col]
            bad = ~(values.notna() & (values >= 1) & (values == values.round()))
            if bad.any():
                shown = given.loc[mine, col][bad.to_numpy()].iloc[0]
                raise StorageError(f"damaged summary in {root}: column {col} holds {shown!r}, "
                                   f"not a whole number ≥ 1 (a {kind} case)")
    timed = summary[summary["phase"] != ""]
    twice = timed.duplicated(list(_ROW_IDENTITY), keep=False)
    if twice.any():
        row = timed[twice].iloc[0]
        raise StorageError(
            f"damaged summary in {root}: {int(twice.sum())} rows repeat another's case, phase "
            f"and metric (e.g. {row['adapter']} case {row['case_id']} "
            f"{row['phase']}/{row['metric']})")


def _as_written(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as a Parquet file of it reads back: the reader of tables built in memory
    sees the very types it would see in the files a rebuild writes."""
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    buffer.seek(0)
    return pd.read_parquet(buffer)


def _tables_from_records(folder: RunFolder, manifest: Mapping[str, Any], samples: bool,
                         ) -> tuple[pd.DataFrame, pd.DataFrame | None] | None:
    """The tables of a folder whose table files lag its records or are missing (a sweep
    killed before its end), built from the records in memory; None when it holds no record
    (the table files, if any, are then all there is). A damaged record is one line."""
    if not folder.cases_dir.is_dir():
        return None
    try:
        records = folder.case_records()
    except UserError as exc:  # a damaged, copied or renamed record
        raise StorageError(f"{exc} (the run did not finish, so its tables are built from its "
                           "case records)") from exc
    if not records:
        return None
    run_id = str(manifest.get("run_id") or folder.path.name)
    summary, sample_frame = folder.tables_from_records(run_id, records, samples=samples)
    return (_as_written(summary),
            None if sample_frame is None else _as_written(sample_frame))


def load_run(path: str | Path, *, samples: bool = True) -> Run:
    """Load a run folder and check it against :mod:`snnbench.records.schema`.

    ``samples=False`` skips ``samples.parquet`` (it can be large; tables and plots do not need
    it). Raises :class:`StorageError` when the folder is missing, is not a run, has another
    schema version, or its summary is unreadable, lacks contract columns or has no rows. The
    summary is read from Parquet, falling back to ``summary.csv`` when the Parquet file is absent.
    """
    root = Path(path)
    if not root.exists():
        raise StorageError(f"run folder {root} does not exist")
    if not root.is_dir():
        raise StorageError(f"{root} is not a folder")
    folder = RunFolder(root)
    manifest = folder.manifest_data()
    holder = folder.live_holder()
    if holder is not None:
        # its records change with every case that finishes: read it once the run has ended
        raise StorageError(f"{root} is in use by a live run ({holder}): wait for it to finish")

    parquet, csv = root / SUMMARY_PARQUET, root / SUMMARY_CSV
    sample_file = root / SAMPLES_PARQUET
    built = None
    if folder.tables_stale() or not (parquet.is_file() or csv.is_file()):
        built = _tables_from_records(folder, manifest, samples)
    raw_samples: pd.DataFrame | None = None
    if built is not None:
        summary, raw_samples = built
    elif parquet.is_file():
        summary = _read_table(parquet, "summary")
    elif csv.is_file():
        summary = _read_table(csv, "summary")
    else:
        raise StorageError(
            f"{root} has no {SUMMARY_PARQUET}: the run did not finish "
            "(resume it, or point at a finished run)"
        )
    if built is None and samples and sample_file.is_file():
        raw_samples = _read_table(sample_file, "samples")
    summary = with_added_columns(summary)
    # the columns of the kinds its rows are (a folder of linear-lif cases: the ones it always
    # had); then every other kind's, blank, so that a reader holds one set of columns
    missing = [c for c in frame_columns(summary) if c not in summary.columns]
    if missing:
        raise StorageError(f"damaged summary in {root}: missing columns {', '.join(missing)}")
    if summary.empty:
        raise StorageError(f"empty run {root}: the summary has no rows")
    summary = with_read_columns(summary)
    given = summary.copy()
    _normalise(summary, _NUMERIC_SUMMARY, _TEXT_SUMMARY)
    _check_rows(summary, given, root)
    # a bool in Parquet, the text "True"/"False" in the CSV fallback
    summary["allow_mismatch"] = [str(v).strip().lower() in ("true", "1", "1.0")
                                 for v in summary["allow_mismatch"]]
    summary = label_networks([_with_network_columns(summary, root / CASES_DIR)])[0]
    # computed anew on every read: an older folder gets the columns, a corrected peak applies
    summary = roofline.annotate(summary, roofline.gpu_models(manifest), row_work, PROBES)

    sample_frame: pd.DataFrame | None = None
    if raw_samples is not None:
        columns = frame_columns(raw_samples, samples=True)
        sample_frame = with_added_columns(raw_samples, columns)
        missing = [c for c in columns if c not in sample_frame.columns]
        if missing:
            raise StorageError(f"damaged samples in {root}: missing columns {', '.join(missing)}")
        sample_frame = with_read_columns(sample_frame, samples=True)
        _normalise(sample_frame, _NUMERIC_SAMPLES, _TEXT_SAMPLES)
    return Run(path=root, manifest=manifest, summary=summary, samples=sample_frame)


#: the name this class long had
RunDir = RunFolder

#: the error of an unreadable run folder: one kind for every reader of a run folder
RunDirError = StorageError


def load_manifest(path: Path) -> dict[str, Any]:
    """Read and check ``manifest.json`` of run folder ``path``; raise :class:`RunDirError`."""
    return RunFolder(path).manifest_data()

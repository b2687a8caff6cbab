"""Files written whole or not at all, and output folders that never lose a user's file.

Every file snnbench writes goes through a temporary file in the same folder and a rename, so a
kill at any instant leaves either the previous or the new complete file. Output folders keep a
ledger of what snnbench wrote there, so a later command replaces only its own files.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from snnbench.errors import UserError


class StorageError(UserError):
    """A run folder cannot be used (unwritable, busy, damaged); one clear line."""


class WriteError(StorageError):
    """A file could not be written (a full disk, a quota, a read-only folder...).

    ``path`` is the file; the message names it and the cause. Whatever was written before
    stays whole: every write goes through a temporary file and a rename.
    """

    def __init__(self, path: Path, exc: OSError) -> None:
        self.path = path
        self.cause = os_reason(exc)
        super().__init__(f"cannot write {path}: {self.cause}")


def interrupted_write(exc: OSError | WriteError, run_folder: Path) -> StorageError:
    """The one line for a sweep stopped by a failed write: what, why, and how to finish."""
    if isinstance(exc, WriteError):
        what = f"{exc.path}: {exc.cause}"
    else:
        what = f"{exc.filename or run_folder}: {os_reason(exc)}"
    return StorageError(
        f"cannot write {what}; the cases finished so far are kept: free space (or fix the "
        f"folder), then finish with 'snnbench run --resume --out {run_folder}'"
    )


def os_reason(exc: OSError) -> str:
    """The cause of an OSError in a few words (``No space left on device``)."""
    if exc.errno:
        return os.strerror(exc.errno)
    # pyarrow raises OSError with no errno and the cause in the text
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def file_mode() -> int:
    """The mode ``open()`` gives a new file under the current umask (0o644 under umask 022).

    ``mkstemp`` creates 0600 files; results and logs must share one convention, the umask's.
    """
    # os.umask can only be read by setting it: set it back at once
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _temporary(path: Path) -> str:
    """A new temporary file beside ``path`` with the umask's mode; returns its name."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, file_mode())
    finally:
        os.close(fd)
    return tmp


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and a rename.

    An OSError (full disk...) raises :class:`WriteError`; ``path`` keeps its old content and
    no temporary file is left behind.
    """
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


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
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path to write; renamed over ``path`` when the block ends without error."""
    tmp: str | None = None
    try:
        tmp = _temporary(path)
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(exc, OSError):
            raise WriteError(path, exc) from exc
        raise


#: the ledger of an output folder (``report --out``, ``verify --dump``): every file snnbench
#: wrote there, with its SHA-256. A later command replaces exactly those, unchanged since;
#: a file of the same name that the user wrote or edited is never touched. Its ``pending``
#: table holds the hash of a file being replaced (:func:`write_recorded`): either content is
#: ours, so an interrupt between the replacement and the ledger's update loses nothing
WRITTEN_LEDGER = ".snnbench-written.json"


def _sha256(path: Path) -> str:
    import hashlib

    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def written_files(folder: Path) -> dict[str, str] | None:
    """File name → SHA-256 of what snnbench wrote in ``folder``; {} when it has no ledger,
    None when its ledger is not one (damaged, or a foreign file of that name)."""
    ledger = _ledger(folder)
    return None if ledger is None else ledger[0]


def _ledger(folder: Path) -> tuple[dict[str, str], dict[str, str]] | None:
    """The ledger's files and pending tables (name → SHA-256); empty ones when ``folder`` has
    no ledger, None when its ledger is not one (damaged, or a foreign file of that name)."""
    ledger = folder / WRITTEN_LEDGER
    if not ledger.is_file():
        return {}, {}
    try:
        data = parse_json(ledger.read_text())
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or data.get("written_by") != "snnbench":
        return None
    pending = data.get("pending") or {}
    if not isinstance(pending, dict):
        return None
    return ({str(k): str(v) for k, v in files.items()},
            {str(k): str(v) for k, v in pending.items()})


def written_by_snnbench(path: Path) -> bool:
    """True for a file snnbench wrote (per its folder's ledger) and nobody changed since, and
    for a sound ledger itself: what an output folder may hold and a command may replace."""
    if path.is_symlink() or not path.is_file():
        return False
    ledger = _ledger(path.parent)
    if ledger is None:
        return False
    if path.name == WRITTEN_LEDGER or _leftover(path.name, ledger[1]):
        return True
    # the recorded content, or the one a replacement that was interrupted was writing
    expected = {table[path.name] for table in ledger if path.name in table}
    try:
        return bool(expected) and _sha256(path) in expected
    except OSError:
        return False


def _leftover(name: str, pending: dict[str, str]) -> bool:
    """True for the temporary file (``.NAME.xxxxxxxx.tmp``, :func:`atomic_path`) that a write
    killed outright (SIGKILL, a power cut) left of the ledger or of a file it has pending."""
    if not (name.startswith(".") and name.endswith(".tmp")):
        return False
    # mkstemp's random part has no dot: what precedes it is the file's name
    stem = name[1:-len(".tmp")].rpartition(".")[0]
    return stem == WRITTEN_LEDGER or stem in pending


def _write_ledger(folder: Path, files: dict[str, str], pending: dict[str, str]) -> None:
    data: dict[str, Any] = {"written_by": "snnbench", "files": files}
    if pending:
        data["pending"] = pending
    atomic_write_json(folder / WRITTEN_LEDGER, data)


def record_written(folder: Path, paths: list[Path]) -> None:
    """Add ``paths`` (files just written in ``folder``) to its ledger, atomically."""
    files, pending = _ledger(folder) or ({}, {})
    for path in paths:
        files[path.name] = _sha256(path)
        pending.pop(path.name, None)
    _write_ledger(folder, files, pending)


def write_recorded(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (atomically) and record it in its folder's ledger, so that
    an interrupt at any instant leaves a folder a later command accepts as its own.

    The new content's hash is recorded as pending first, then the file is replaced, then the
    ledger confirms it: the file on disk always matches the ledger's old or pending entry.
    """
    import hashlib

    folder = path.parent
    digest = hashlib.sha256(data).hexdigest()
    files, pending = _ledger(folder) or ({}, {})
    # what a killed write of this file or of the ledger left behind goes (nothing else)
    for stale in (*folder.glob(f".{path.name}.*.tmp"), *folder.glob(f".{WRITTEN_LEDGER}.*.tmp")):
        if _leftover(stale.name, pending) and not stale.is_symlink():
            with contextlib.suppress(OSError):
                stale.unlink()
    _write_ledger(folder, files, {**pending, path.name: digest})
    atomic_write_bytes(path, data)
    pending.pop(path.name, None)
    _write_ledger(folder, {**files, path.name: digest}, pending)


def claim_folder(path: Path, flag: str, may_hold: Callable[[Path], bool]) -> None:
    """Make ``path`` an output folder, refusing one that holds anything ``may_hold`` rejects.

    The rule for every output folder: new, empty, or holding only what this command writes
    there itself (an earlier report, earlier dumps). Nothing else in it is ever overwritten;
    a refusal touches nothing.
    """
    check_folder(path, flag, may_hold)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(
            f"cannot create output folder {path} ({flag}): {os_reason(exc)}"
        ) from exc
    if not os.access(path, os.W_OK):
        raise StorageError(f"output folder {path} ({flag}) is not writable")


def check_folder(path: Path, flag: str, may_hold: Callable[[Path], bool]) -> None:
    """The refusals of :func:`claim_folder`, without creating anything."""
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise StorageError(f"{flag} {path} exists and is not a folder")
        try:
            foreign = sorted(p.name for p in path.iterdir() if not may_hold(p))
        except OSError as exc:
            raise StorageError(f"cannot read {flag} folder {path}: {os_reason(exc)}") from exc
        if foreign:
            shown = ", ".join(foreign[:3]) + (", …" if len(foreign) > 3 else "")
            raise StorageError(
                f"{flag} {path} is not empty ({shown}): choose a new or empty folder (only "
                "files snnbench wrote there, unchanged, are replaced); nothing in it was touched"
            )


def check_creatable(path: Path, flag: str) -> None:
    """Refuse, leaving nothing behind, an output folder that could not be made or written
    (a read-only or pseudo file system, a file where a folder goes, no access): a probe
    folder is made in it, or in its nearest existing parent, and removed at once.
    ``os.access`` cannot tell: root passes it on a read-only or pseudo file system."""
    where = path
    while not (where.exists() or where.is_symlink()) and where != where.parent:
        where = where.parent
    if not where.is_dir():
        raise StorageError(f"cannot create output folder {path} ({flag}): {where} is not a "
                           "folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".snnbench-probe-", dir=where))
    except OSError as exc:
        what = "write into" if where == path else "create"
        raise StorageError(f"cannot {what} output folder {path} ({flag}): "
                           f"{os_reason(exc)}") from exc


class NotAFile(OSError):
    """What a reader found at a path is no regular file (a FIFO, a device, a link it must not
    follow) or is larger than what it reads: ``str()`` says which, in a few words."""


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a folder")):
        if test(mode):
            return kind
    return "not a regular file"


def read_regular(path: Path, limit: int | None = None, *, follow: bool = True) -> bytes:
    """The bytes of the regular file at ``path``, opened without blocking.

    A FIFO would block the reader forever and ``/dev/zero`` never ends: anything but a regular
    file raises :class:`NotAFile` before a byte is read, as does a file over ``limit`` bytes
    and, with ``follow=False``, a symbolic link (a run folder someone sent may point its files
    anywhere). Other failures are the OSError ``open()`` raises.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow and exc.errno == errno.ELOOP:
            raise NotAFile("a symbolic link, which is not followed here") from exc
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _kind(mode)
            raise NotAFile(f"{kind}, not a regular file" if kind.startswith("a ") else kind)
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if limit is not None and size > limit:
                raise NotAFile(f"larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def replace_with_new_file(path: Path) -> int:
    """A new, empty file at ``path``, open for writing (its descriptor).

    Whatever was at ``path`` (an earlier log, or in a received folder a symbolic link to a
    file elsewhere, or a FIFO) is removed first, never opened: writing through it would
    truncate a file outside the folder, or block.
    """
    with contextlib.suppress(FileNotFoundError, IsADirectoryError):
        os.unlink(path)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                   0o666)


#: JSON nested deeper than this is no file snnbench wrote (a case record nests five levels):
#: it is refused as damaged before any recursive code, the parser's included, overflows
#: Python's stack on it (a RecursionError traceback)
MAX_JSON_DEPTH = 64


def parse_json(text: str) -> Any:
    """``json.loads(text)``; a text nested deeper than :data:`MAX_JSON_DEPTH` raises
    :class:`json.JSONDecodeError`, as damaged JSON does, so every reader says "damaged"."""
    try:
        data = json.loads(text)
    except RecursionError as exc:
        raise json.JSONDecodeError("nested too deeply", text, 0) from exc
    # walked without recursion: the point is to never recurse on it
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        children = (node.values() if isinstance(node, dict)
                    else node if isinstance(node, list) else ())
        if children and depth >= MAX_JSON_DEPTH:
            raise json.JSONDecodeError(f"nested more than {MAX_JSON_DEPTH} levels deep", text, 0)
        stack.extend((child, depth + 1) for child in children)
    return data


def read_json(path: Path, *, follow: bool = True) -> Any:
    """Read a JSON file; a damaged one (or no regular file: :func:`read_regular`, or JSON
    nested too deeply: :func:`parse_json`) raises :class:`StorageError` naming it."""
    try:
        return parse_json(read_regular(path, follow=follow).decode("utf-8"))
    except FileNotFoundError as exc:
        raise StorageError(f"missing {path}") from exc
    except NotAFile as exc:
        raise StorageError(f"damaged folder: {path} is {exc}; remove it") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StorageError(f"cannot read {path}: damaged or not JSON ({exc})") from exc

"""Scratch folders in the system's temporary folder that never pile up.

A command's scratch folder is removed when the command ends, by an interrupt or ``SIGTERM``
too (the context manager unwinds). ``SIGKILL`` leaves it behind, so its name carries the
owner's pid (``snnbench-verify-<pid>-<random>``) and the next command of that kind removes
the folders of owners that are gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from snnbench.host.lifeline import alive


def remove_stale(prefix: str, root: Path | None = None) -> list[Path]:
    """Remove this user's ``<prefix><pid>-*`` folders under ``root`` (default: the temporary
    folder) whose owner pid is no longer running; returns what was removed."""
    root = Path(tempfile.gettempdir()) if root is None else root
    removed: list[Path] = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for path in entries:
        pid_text, dash, _ = path.name.removeprefix(prefix).partition("-")
        if not path.name.startswith(prefix) or not dash or not pid_text.isdigit():
            continue
        try:
            info = path.lstat()
        except OSError:
            continue
        # a link or a file of that name, or another user's folder, is not ours to remove
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        pid = int(pid_text)
        if pid == os.getpid() or alive(pid):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


@contextlib.contextmanager
def scratch_folder(prefix: str) -> Iterator[Path]:
    """A fresh ``<prefix><pid>-*`` folder, removed at the end of the block, after the stale
    folders of earlier owners killed outright are removed."""
    remove_stale(prefix)
    with tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}-") as tmp:
        yield Path(tmp)

"""What keeps a library's import from installing anything.

Importing Rockpool imports the package index's ``samna`` stub, whose ``__init__`` runs ``pip
install --force-reinstall samna`` from an outside server. An importer runs in a process of
its own (:mod:`.worker`) that calls :func:`forbid_installs` before it imports any library:
``samna`` (and ``pip``) cannot be imported, pip is told to use no index, and an audit hook,
which nothing in the process can remove, refuses to start any process that runs pip.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from typing import Any

#: set in the environment of the importer's process (and of anything it starts)
NO_INSTALL_ENV: dict[str, str] = {
    "PIP_NO_INDEX": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_NO_INPUT": "1",
    "PIP_REQUIRE_VIRTUALENV": "1",
}
#: modules that must not be imported there: ``samna``'s stub installs on import
BLOCKED_MODULES: tuple[str, ...] = ("samna", "pip")
#: audit events that start a process
_SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
                           "os.spawn", "os.startfile"})
_INSTALLER = re.compile(r"(^|[\s/\\'\"])(pip[0-9.]*|ensurepip|easy_install|uv|conda|mamba)"
                        r"($|[\s'\"])|-m\s*pip\b|\bpip\s+install\b")


class InstallBlocked(RuntimeError):
    """A package install was attempted where none may run."""


def _words(value: Any) -> Iterable[str]:
    if isinstance(value, str | bytes | os.PathLike):
        yield os.fsdecode(value)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _words(item)


def runs_installer(args: Any) -> bool:
    """Whether a process started with ``args`` (a command line, list or string) runs an
    installer (pip, ensurepip, uv, conda)."""
    return bool(_INSTALLER.search(" ".join(_words(args))))


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in _SPAWN_EVENTS and runs_installer(args):
        raise InstallBlocked(f"a package install was attempted ({event}) and refused")


def forbid_installs() -> None:
    """Make this process unable to install packages (call it before importing a library)."""
    os.environ.update(NO_INSTALL_ENV)
    for name in BLOCKED_MODULES:
        # None in sys.modules: ``import name`` raises ImportError, and the stub never runs
        sys.modules[name] = None  # type: ignore[assignment]
    sys.addaudithook(_audit)

"""Adapter discovery through the ``snnbench.adapters`` entry-point group.

Each entry point is loaded on its own and guarded: a plugin that fails to import, or that is not
an :class:`~snnbench.adapter.Adapter` subclass, is reported with its error and never stops the
discovery of the others (pluggy's unguarded ``ep.load()`` is the trap avoided here).
Discovery reads the entry points' metadata only; a module is imported when a command first
needs its adapter, and a third-party one in a thread under a time limit, its printing sent to
stderr: a plugin that hangs at import is a broken row, never a hung command.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

from snnbench.adapter import Adapter, AdapterUnavailable
from snnbench.adapter_shim import AdapterClass, as_v2
from snnbench.plugin import Adapter as AdapterV2

ENTRY_POINT_GROUP = "snnbench.adapters"
#: seconds a third-party plugin's module may take to import in this process before its
#: adapter is reported as broken (``list --timeout`` sets its own)
IMPORT_TIMEOUT_S = 60.0


class AdapterEntry:
    """One discovered entry point: its adapter class, or why it could not be loaded.

    A third-party plugin's module is imported on first use of :attr:`adapter_class` (or
    :attr:`error`), only for the adapters a command needs, in a thread under a time limit and
    with its printing sent to stderr: a plugin that hangs at import makes that adapter broken,
    never the command hung, and one that prints never corrupts a command's output.
    """

    def __init__(self, name: str, target: str, adapter_class: AdapterClass | None = None,
                 error: str = "", distribution: str = "", *,
                 entry_point: importlib.metadata.EntryPoint | None = None,
                 timeout_s: float | None = IMPORT_TIMEOUT_S) -> None:
        self.name = name
        self.target = target
        #: the distribution that registers it (the plugin's own package; ``snnbench`` for the
        #: shipped adapters): every row records its version in ``packages``
        self.distribution = distribution
        self._entry_point = entry_point
        self._timeout_s = timeout_s
        self._loaded: tuple[AdapterClass | None, str] | None = (
            None if entry_point is not None else (adapter_class, error))
        self._lock = threading.Lock()

    def _resolve(self) -> tuple[AdapterClass | None, str]:
        with self._lock:
            if self._loaded is None:
                assert self._entry_point is not None
                self._loaded = _load(self._entry_point, self._timeout_s)
            return self._loaded

    @property
    def adapter_class(self) -> AdapterClass | None:
        """The adapter class (imported now if not yet), None when it could not be loaded."""
        return self._resolve()[0]

    @property
    def error(self) -> str:
        """Why the adapter could not be loaded ("" when it was)."""
        return self._resolve()[1]

    def create(self) -> AdapterV2:
        """An adapter instance as the plugin API v2 (:mod:`snnbench.plugin`) the harness
        speaks: a plugin written against v1 comes through the shim
        (:func:`snnbench.adapter_shim.as_v2`); else :class:`AdapterUnavailable` with the load
        error."""
        cls, error = self._resolve()
        if cls is None:
            raise AdapterUnavailable(error)
        return as_v2(cls())

    def __repr__(self) -> str:
        return f"AdapterEntry({self.name!r}, {self.target!r})"


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def shipped(module: str) -> bool:
    """True for a module of snnbench itself (imported here at once: no library in it)."""
    return module == "snnbench" or module.startswith("snnbench.")


class _Import:
    """One third-party module imported in a daemon thread (a hung one is left behind)."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.error = ""
        self.done = threading.Event()
        self.started = time.monotonic()
        threading.Thread(target=self._run, name=f"snnbench-import-{module}",
                         daemon=True).start()

    def _run(self) -> None:
        try:
            importlib.import_module(self.module)
        except BaseException as exc:  # SystemExit too: a plugin never ends the command
            self.error = f"plugin failed to load: {exc!r}"
        finally:
            self.done.set()


_IMPORTS: dict[str, _Import] = {}
_IMPORTS_LOCK = threading.Lock()
_QUIET_LOCK = threading.Lock()
_QUIET: list[TextIO] = []


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send what is printed to stderr while any plugin import runs (re-entrant across
    threads: the first to enter swaps ``sys.stdout``, the last to leave restores it), so
    that a plugin printing at import never corrupts ``list --json``."""
    with _QUIET_LOCK:
        if not _QUIET:
            _QUIET.append(sys.stdout)
        _QUIET.append(sys.stderr)
        sys.stdout = sys.stderr
    try:
        yield
    finally:
        with _QUIET_LOCK:
            _QUIET.pop()
            if len(_QUIET) == 1:
                sys.stdout = _QUIET.pop()


def _import_module(module: str, timeout_s: float) -> str:
    """Import a third-party ``module`` under ``timeout_s`` seconds (counted from its first
    attempt); "" when it is imported, else why not."""
    with _stdout_to_stderr():
        with _IMPORTS_LOCK:
            attempt = _IMPORTS.get(module)
            if attempt is None:
                attempt = _IMPORTS[module] = _Import(module)
        left = attempt.started + timeout_s - time.monotonic()
        if not attempt.done.wait(max(0.0, left)):
            return (f"plugin module {module!r} did not finish importing within {timeout_s:g} s "
                    "(it hangs at import); not loaded")
    return attempt.error


def _load(ep: importlib.metadata.EntryPoint,
          timeout_s: float | None = IMPORT_TIMEOUT_S) -> tuple[AdapterClass | None, str]:
    """The adapter class of ``ep`` or why not; ``timeout_s`` None imports a third-party
    module in this thread, unguarded (a worker or a probe: its parent's limit guards it)."""
    guarded = timeout_s is not None and not shipped(ep.module)
    if guarded:
        assert timeout_s is not None
        error = _import_module(ep.module, timeout_s)
        if error:
            return None, error
    try:
        # a third-party module is imported by now: this only looks up the class
        with _stdout_to_stderr() if guarded else contextlib.nullcontext():
            obj = ep.load()
    except Exception as exc:  # a broken plugin is a row in `list`, never a crash
        return None, f"plugin failed to load: {exc!r}"
    # an adapter of the plugin API v2 (snnbench.api) or v1 (snnbench.adapter)
    if not (isinstance(obj, type) and issubclass(obj, Adapter | AdapterV2)):
        return None, f"plugin {ep.value} is not an snnbench Adapter subclass"
    if obj.name and obj.name != ep.name:
        return None, (f"plugin {ep.value} declares name {obj.name!r} but is registered as "
                      f"{ep.name!r}")
    return obj, ""


def _distribution(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return (dist.metadata["Name"] or "") if dist is not None else ""


def discover(timeout_s: float | None = IMPORT_TIMEOUT_S) -> dict[str, AdapterEntry]:
    """All adapters registered in the environment, by name (first registration wins).

    Only the entry points' metadata is read here; each adapter's module is imported when the
    entry is first used, a third-party one under ``timeout_s`` seconds (None: unguarded, in
    the thread that uses it).
    """
    found: dict[str, AdapterEntry] = {}
    for ep in _entry_points():
        if ep.name not in found:
            found[ep.name] = AdapterEntry(ep.name, ep.value, distribution=_distribution(ep),
                                          entry_point=ep, timeout_s=timeout_s)
    return dict(sorted(found.items()))


def get_entry(name: str) -> AdapterEntry:
    """The entry for ``name``; KeyError with the known names if there is none.

    Only that adapter's module is imported, in this thread (a worker or a probe, under its
    parent's time limit): another plugin that hangs at import holds up neither.
    """
    entries = discover(timeout_s=None)
    if name not in entries:
        raise KeyError(name)
    return entries[name]

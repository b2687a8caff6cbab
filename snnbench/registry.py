"""Adapter discovery through the ``snnbench.adapters`` entry-point group.

Each entry point is loaded on its own and guarded: a plugin that fails to import, or that is not
an :class:`~snnbench.adapter.Adapter` subclass, is reported with its error and never stops the
discovery of the others (pluggy's unguarded ``ep.load()`` is the trap avoided here).
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass, replace

from snnbench.adapter import Adapter, AdapterUnavailable

ENTRY_POINT_GROUP = "snnbench.adapters"


@dataclass(frozen=True)
class AdapterEntry:
    """One discovered entry point: its adapter class, or why it could not be loaded."""

    name: str
    target: str
    adapter_class: type[Adapter] | None
    error: str = ""
    #: the distribution that registers it (the plugin's own package; ``snnbench`` for the
    #: shipped adapters): every row records its version in ``packages``
    distribution: str = ""

    def create(self) -> Adapter:
        """An adapter instance, or :class:`AdapterUnavailable` with the load error."""
        if self.adapter_class is None:
            raise AdapterUnavailable(self.error)
        return self.adapter_class()


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def _load(ep: importlib.metadata.EntryPoint) -> AdapterEntry:
    try:
        obj = ep.load()
    except Exception as exc:  # a broken plugin is a row in `list`, never a crash
        return AdapterEntry(ep.name, ep.value, None, f"plugin failed to load: {exc!r}")
    if not (isinstance(obj, type) and issubclass(obj, Adapter)):
        return AdapterEntry(
            ep.name, ep.value, None, f"plugin {ep.value} is not an snnbench Adapter subclass"
        )
    if obj.name and obj.name != ep.name:
        return AdapterEntry(
            ep.name,
            ep.value,
            None,
            f"plugin {ep.value} declares name {obj.name!r} but is registered as {ep.name!r}",
        )
    return AdapterEntry(ep.name, ep.value, obj)


def discover() -> dict[str, AdapterEntry]:
    """All adapters registered in the environment, by name (first registration wins)."""
    found: dict[str, AdapterEntry] = {}
    for ep in _entry_points():
        if ep.name not in found:
            dist = getattr(ep, "dist", None)
            name = (dist.metadata["Name"] or "") if dist is not None else ""
            found[ep.name] = replace(_load(ep), distribution=name)
    return dict(sorted(found.items()))


def get_entry(name: str) -> AdapterEntry:
    """The entry for ``name``; KeyError with the known names if there is none."""
    entries = discover()
    if name not in entries:
        raise KeyError(name)
    return entries[name]

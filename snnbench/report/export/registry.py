"""The one registry of output formats: a format's name (what ``--format`` takes) to its
:class:`~snnbench.report.export.base.Exporter`, in the order the commands list them. Each
command's choices are the formats that draw its kind of result (:meth:`Registry.formats`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from snnbench.errors import UserError
from snnbench.report.export.base import Exporter


class ExportError(UserError, ValueError):
    """A format no exporter draws for this kind of result; one line."""


def choices_text(names: Iterable[str]) -> str:
    """``text, md, html or json``: a list of choices as an error line says it."""
    listed = list(names)
    if len(listed) < 2:
        return "".join(listed)
    return f"{', '.join(listed[:-1])} or {listed[-1]}"


class Registry:
    """Exporters by name, in the order they were registered."""

    def __init__(self, exporters: Iterable[Exporter] = ()) -> None:
        self._exporters: dict[str, Exporter] = {}
        for exporter in exporters:
            self.register(exporter)

    def register(self, exporter: Exporter) -> Exporter:
        """Add ``exporter``: its format becomes a choice of every command whose kind of
        result it draws. A name already taken is refused (a format has one exporter)."""
        if exporter.name in self._exporters:
            raise ValueError(f"a format named {exporter.name!r} is registered already")
        self._exporters[exporter.name] = exporter
        return exporter

    def unregister(self, name: str) -> None:
        """Remove the format ``name`` (a test's own exporter, once done)."""
        self._exporters.pop(name, None)

    def __iter__(self) -> Iterator[Exporter]:
        return iter(list(self._exporters.values()))

    def formats(self, kind: type) -> tuple[str, ...]:
        """The formats that draw results of ``kind``, in their order."""
        return tuple(name for name, e in self._exporters.items() if e.draws(kind))

    def get(self, name: str, kind: type, flag: str = "--format") -> Exporter:
        """The exporter of format ``name`` for ``kind``; else :class:`ExportError`, naming
        ``flag`` and the formats there are."""
        exporter = self._exporters.get(name)
        if exporter is None or not exporter.draws(kind):
            raise ExportError(f"{flag} must be {choices_text(self.formats(kind))}, "
                              f"got {name!r}")
        return exporter

"""Every output format of ``show``, ``report`` and ``compare``, through one registry.

hyperfine's ``src/export/mod.rs`` is the model: one :class:`Exporter` protocol
(:mod:`.base`), one module per format (:mod:`.terminal`, :mod:`.markdown`, :mod:`.html`,
:mod:`.json`), and :data:`EXPORTERS`, the registry from a format's name to its exporter. Each
exporter is fed the whole result (a run, a comparison, a report page) and returns its text;
a command's ``--format`` choices are the formats that draw its kind of result. Adding a
format is a module with an :class:`Exporter` and one line in :data:`EXPORTERS`.
"""

from __future__ import annotations

from pathlib import Path

from snnbench.gate.verdict import Comparison
from snnbench.report.export import html, json, markdown, terminal
from snnbench.report.export.base import (
    Exporter,
    ReportPage,
    Result,
    RunResult,
    load_run_result,
)
from snnbench.report.export.registry import ExportError, Registry, choices_text

#: every output format, in the order ``--format`` lists them
EXPORTERS = Registry([
    terminal.Terminal(),
    markdown.Markdown(),
    html.Html(),
    json.Json(),
])


def format_comparison(cmp: Comparison, fmt: str = "text") -> str:
    """``cmp`` as format ``fmt`` (``text``: the terminal's view as plain text)."""
    return EXPORTERS.get(fmt, Comparison).serialize(cmp)


def refuse_existing(path: Path, flag: str) -> None:
    """Refuse, before anything runs, an export path that exists (nothing is overwritten) or
    whose folder does not; ``flag`` is how the user named it."""
    if path.exists() or path.is_symlink():
        raise ExportError(f"{flag} {path} exists; an export never overwrites a file: give a "
                          "new path")
    if not path.parent.is_dir():
        raise ExportError(f"{flag} {path}: the folder {path.parent} does not exist")


def write_new(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, created exclusively: a file that appeared meanwhile is not
    overwritten either (:class:`FileExistsError`)."""
    with path.open("x", encoding="utf-8") as handle:
        handle.write(text)


__all__ = [
    "EXPORTERS", "ExportError", "Exporter", "Registry", "ReportPage", "Result", "RunResult",
    "choices_text", "format_comparison", "load_run_result", "refuse_existing", "write_new",
]

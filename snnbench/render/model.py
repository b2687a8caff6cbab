"""The one table model every command and report draws from.

A :class:`Table` holds strings only: headers, rows, and what goes around them (a title,
numbered footnotes, per-row styles, per-column alignment). Building one is the job of the
module that knows the data (:mod:`snnbench.report.pages`, :mod:`snnbench.compare_render`,
:mod:`snnbench.cli_tables`); drawing it is the job of one back-end per format
(:mod:`snnbench.render.formats`). Nothing here knows a metric or a run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

Justify = Literal["left", "right"]
T = TypeVar("T")


@dataclass
class Table:
    """A table of strings: ``headers`` and ``rows`` (each row as long as ``headers``).

    The optional parts are for the back-ends that can show them: ``title`` above the table,
    ``footnotes`` numbered below it (:class:`Footnotes` numbers them), ``styles`` one rich
    style per row ("" for none), ``justify`` per column, ``show_header``, and a ``caption``
    line under it.
    """

    headers: list[str]
    rows: list[list[str]]
    title: str = ""
    footnotes: list[str] = field(default_factory=list)
    styles: list[str] = field(default_factory=list)
    justify: dict[str, Justify] = field(default_factory=dict)
    show_header: bool = True
    #: a line under the table (the terminal's back-end draws it; "" for none)
    caption: str = ""

    def add_row(self, cells: Sequence[str], style: str = "") -> None:
        """Append one row (as long as the headers) with an optional rich style."""
        self.rows.append(list(cells))
        self.styles.append(style)

    def row_style(self, index: int) -> str:
        """The rich style of row ``index`` ("" when none was given)."""
        return self.styles[index] if index < len(self.styles) else ""

    def records(self) -> list[dict[str, str]]:
        """The rows as header → cell mappings (for JSON)."""
        return [dict(zip(self.headers, row, strict=True)) for row in self.rows]


@dataclass
class Document:
    """What one command prints: ``lead`` lines, tables, the footnotes numbered across all of
    them, then ``tail`` lines (hints, the grouped cases that did not run)."""

    lead: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    footnotes: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)


class Footnotes:
    """Numbered notes: the same note gets the same number, the first seen is 1."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def mark(self, note: str) -> str:
        """The reference for ``note`` ("" for no note), numbering it when it is new."""
        if not note:
            return ""
        if note not in self.notes:
            self.notes.append(note)
        return str(self.notes.index(note) + 1)

    @staticmethod
    def numbered(notes: Iterable[str]) -> list[str]:
        """``  1. note`` per note, in their order."""
        return [f"  {number}. {note}" for number, note in enumerate(notes, start=1)]


def count_groups(items: Iterable[T],
                 key: Callable[[T], tuple[str, ...]]) -> dict[tuple[str, ...], int]:
    """How many ``items`` share each ``key``, in first-seen order (the "not run" summary)."""
    grouped: dict[tuple[str, ...], int] = {}
    for item in items:
        k = key(item)
        grouped[k] = grouped.get(k, 0) + 1
    return grouped

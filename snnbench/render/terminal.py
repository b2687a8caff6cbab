"""The rich back-end of the table model: a :class:`rich.table.Table` for the terminal.

Cells are escaped: a reason quoting ``[red]`` prints as written. The look (box, padding) is
chosen by the caller through :class:`Look`, so every command's table keeps its shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich import box as boxes
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from snnbench.render.model import Document, Footnotes, Table


@dataclass(frozen=True)
class Look:
    """How a table is boxed: ``compact`` is the borderless head-rule style of the run tables;
    otherwise rich's default box. ``no_wrap`` keeps cells on one line; ``fold`` folds them."""

    compact: bool = False
    no_wrap: bool = False
    fold: bool = False
    collapse_padding: bool = False
    tight: bool = False
    title_left: bool = False


def to_rich(table: Table, look: Look = Look()) -> RichTable:
    """``table`` as a rich table (footnotes are not part of it: see :func:`print_table`)."""
    options: dict[str, Any] = {"show_header": table.show_header}
    if table.title:
        options["title"] = escape(table.title)
    if look.compact:
        options.update(box=boxes.SIMPLE_HEAD, pad_edge=False)
    if look.collapse_padding:
        options["collapse_padding"] = True
    if look.tight:
        options["padding"] = (0, 1, 0, 0)
    if look.title_left:
        options["title_justify"] = "left"
    out = RichTable(**options)
    for header in table.headers:
        column: dict[str, Any] = {"justify": table.justify.get(header, "left")}
        if look.no_wrap:
            column["no_wrap"] = True
        if look.fold:
            column["overflow"] = "fold"
        out.add_column(escape(header), **column)
    for index, row in enumerate(table.rows):
        out.add_row(*(escape(c) for c in row), style=table.row_style(index))
    return out


def print_table(console: Console, table: Table, look: Look = Look()) -> None:
    """Print ``table`` and then its numbered footnotes."""
    print_document(console, Document(tables=[table], footnotes=table.footnotes), look)


def print_document(console: Console, doc: Document, look: Look = Look()) -> None:
    """Print the lead lines, each table, the shared footnotes and the tail lines."""
    for line in doc.lead:
        console.print(escape(line), highlight=False)
    for table in doc.tables:
        console.print(to_rich(table, look))
    for line in [*Footnotes.numbered(doc.footnotes), *doc.tail]:
        console.print(escape(line), highlight=False)

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
from rich.padding import Padding
from rich.table import Table as RichTable
from rich.text import Text

from snnbench.render.model import Document, Footnotes, Table


@dataclass(frozen=True)
class Look:
    """How a table is boxed: ``compact`` is the borderless head-rule style of the run tables;
    otherwise rich's default box. ``no_wrap`` keeps cells on one line; ``fold`` folds them;
    ``whole_first`` never wraps or cuts the first column (the adapter's name), whatever the
    width: the other columns wrap instead."""

    compact: bool = False
    no_wrap: bool = False
    whole_first: bool = False
    fold: bool = False
    collapse_padding: bool = False
    tight: bool = False
    #: the title as a line of its own above the table, wrapped to the terminal's width
    title_left: bool = False


def to_rich(table: Table, look: Look = Look()) -> RichTable:
    """``table`` as a rich table (its footnotes and caption are not part of it: see
    :func:`print_document`)."""
    options: dict[str, Any] = {"show_header": table.show_header}
    if table.title and not look.title_left:  # a left title is a line of its own
        options["title"] = escape(table.title)
    if look.compact:
        options.update(box=boxes.SIMPLE_HEAD, pad_edge=False)
    if look.collapse_padding:
        options["collapse_padding"] = True
    if look.tight:
        options["padding"] = (0, 1, 0, 0)
    out = RichTable(**options)
    for index, header in enumerate(table.headers):
        column: dict[str, Any] = {"justify": table.justify.get(header, "left")}
        if look.no_wrap:
            column["no_wrap"] = True
        if look.fold:
            column["overflow"] = "fold"
        if look.whole_first:
            # a cell wraps at its spaces (``0.614`` / ``±7%``), never inside a word: each
            # column is at least as wide as its longest word, the first (the adapter's
            # name) as its longest name
            cells = [row[index] for row in table.rows]
            if index == 0:
                column.update(no_wrap=True, min_width=max(map(len, [header, *cells])))
            else:
                words = [w for text in [header, *cells] for w in text.split()]
                column.update(overflow="fold", min_width=max(map(len, words), default=1))
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
        if table.title and look.title_left:
            # above the table as wide as the terminal, not folded to the table's width
            print_hanging(console, table.title)
        console.print(to_rich(table, look))
        if table.caption:  # under the table, as wide as the terminal; then a blank line
            print_hanging(console, f" {table.caption}")
            console.print()
    for line in [*Footnotes.numbered(doc.footnotes), *doc.tail]:
        print_hanging(console, line)


def print_hanging(console: Console, line: str) -> None:
    """Print ``line`` wrapped at words with a hanging indent: its continuation lines start
    under its text (after its leading spaces and a ``1.`` number), not at the left edge."""
    text = line.lstrip(" ")
    indent = len(line) - len(text)
    head, _, rest = text.partition(" ")
    if head[:-1].isdigit() and head.endswith(".") and rest:
        grid = RichTable.grid(padding=(0, 1, 0, 0))
        grid.add_column(no_wrap=True)
        grid.add_column()
        grid.add_row(Text(" " * indent + head), Text(rest))
        console.print(grid)
        return
    console.print(Padding(Text(text), (0, 0, 0, indent), expand=False), highlight=False)


def print_labelled(console: Console, label: str, text: str, style: str = "") -> None:
    """``label text`` wrapped at words, its continuation lines under the text (``noisy run:
    other processes keep 2.0 cores busy ...``): a long warning never breaks mid-word."""
    grid = RichTable.grid(padding=(0, 1, 0, 0))
    grid.add_column(no_wrap=True, style=style)
    grid.add_column()
    grid.add_row(Text(label), Text(text))
    console.print(grid)

"""The render layer: one table model, one back-end per format."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from snnbench.render import Document, Footnotes, Table, count_groups, render
from snnbench.render.terminal import Look, print_document


def _table() -> Table:
    table = Table(["name", "value"], [], title="facts")
    table.add_row(["a|b", "<1>"])
    table.add_row(["c", "[red]2[/]"], style="red")
    return table


def test_each_format_draws_the_same_cells() -> None:
    table = _table()
    assert render(table, "md").splitlines() == [
        "| name | value |", "|---|---|", "| a\\|b | <1> |", "| c | [red]2[/] |"]
    assert render(table, "text").splitlines()[0] == "name  value"
    assert "<td>&lt;1&gt;</td>" in render(table, "html")
    doc = json.loads(render(table, "json"))
    assert doc["rows"][1] == {"name": "c", "value": "[red]2[/]"}
    with pytest.raises(ValueError, match="unknown table format"):
        render(table, "xml")


def test_footnotes_number_each_note_once() -> None:
    notes = Footnotes()
    assert [notes.mark(n) for n in ("x", "", "y", "x")] == ["1", "", "2", "1"]
    assert Footnotes.numbered(notes.notes) == ["  1. x", "  2. y"]


def test_count_groups_keeps_first_seen_order() -> None:
    rows = [("b", "skipped"), ("a", "skipped"), ("b", "skipped")]
    assert list(count_groups(rows, lambda r: r).items()) == [
        (("b", "skipped"), 2), (("a", "skipped"), 1)]


def test_the_terminal_prints_cells_as_written_then_the_notes() -> None:
    buffer = io.StringIO()
    doc = Document(lead=["run x"], tables=[_table()], footnotes=["see [here]"], tail=["done"])
    print_document(Console(file=buffer, width=80, no_color=True), doc, Look(compact=True))
    out = buffer.getvalue()
    # rich markup inside a cell is text, not a style
    assert "[red]2[/]" in out and "1. see [here]" in out
    assert out.index("run x") < out.index("facts") < out.index("done")

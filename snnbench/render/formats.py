"""String back-ends of the table model: one small function per format, as hyperfine has one
exporter per format. :func:`render` picks one by name; rich (the terminal) is
:mod:`snnbench.render.terminal`.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from typing import Final

from snnbench.render.model import Table


def markdown(table: Table) -> str:
    """GitHub-flavoured Markdown (pipes in cells escaped, newlines turned into spaces)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(table.headers) + " |", "|" + "---|" * len(table.headers)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def text(table: Table) -> str:
    """Plain text with columns aligned by spaces (for terminals and logs)."""
    widths = [len(h) for h in table.headers]
    for row in table.rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*table.headers), "  ".join("-" * w for w in widths)]
    lines += [fmt.format(*row).rstrip() for row in table.rows]
    return "\n".join(line.rstrip() for line in lines)


def html_table(table: Table) -> str:
    """An HTML ``<table>`` with escaped cells."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
        for row in table.rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


#: the style sheet of an HTML page, inlined: the page fetches nothing
PAGE_CSS: Final = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1200px;
margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.85em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3} img{max-width:100%;border:1px solid #eee;margin:.5em 0}
.bad{color:#a00}
"""


def html_page(title: str, body: str) -> str:
    """A self-contained HTML page: ``title`` (escaped), :data:`PAGE_CSS` and ``body`` (HTML,
    as given)."""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{PAGE_CSS}</style></head>"
        f"<body>{body}</body></html>\n"
    )


def json_table(table: Table) -> str:
    """The table as JSON: title, rows as header → cell objects, and footnotes."""
    doc = {"title": table.title, "rows": table.records(), "footnotes": table.footnotes}
    return json.dumps(doc, indent=2, ensure_ascii=False)


#: format name → back-end
FORMATS: Final[dict[str, Callable[[Table], str]]] = {
    "md": markdown,
    "text": text,
    "html": html_table,
    "json": json_table,
}


def render(table: Table, fmt: str) -> str:
    """``table`` in format ``fmt`` (one of :data:`FORMATS`)."""
    backend = FORMATS.get(fmt)
    if backend is None:
        raise ValueError(f"unknown table format {fmt!r} ({', '.join(FORMATS)})")
    return backend(table)

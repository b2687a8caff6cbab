"""The render layer: one table model (:mod:`.model`) and a back-end per format — text,
Markdown, HTML and JSON (:mod:`.formats`), rich for the terminal (:mod:`.terminal`).
Commands build a :class:`Table` and pick a format; they do not draw."""

from snnbench.render.formats import FORMATS, render
from snnbench.render.model import Document, Footnotes, Table, count_groups

__all__ = ["FORMATS", "Document", "Footnotes", "Table", "count_groups", "render"]

"""JSON schemas of snnbench's machine output, shipped as package data.

``show.schema.json``: the document ``snnbench show --format json`` prints and ``snnbench run
--export-json`` writes (:func:`snnbench.report.views.show_json`).
"""

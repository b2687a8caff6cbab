"""``snnbench show``: a run folder printed, as a table per case fastest first, Markdown, HTML
or typed JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from snnbench.cli import output


def show(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (results/<run_id>).")],
    format: Annotated[str, typer.Option(
        "--format", "-f", help="text (a table per case, fastest first, then who is fastest "
        "by how much), md, html or json (typed: numbers, units in the field names; the schema "
        "is snnbench/schemas/show.schema.json).")] = "text",
    skipped: Annotated[bool, typer.Option(
        "--skipped", help="List the cases that did not run (skipped or unavailable), grouped "
        "by reason, instead of counting them.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Every column (the status too) and every case not run.")]
        = False,
    color: Annotated[str, typer.Option(
        "--color", help="auto (honours NO_COLOR), always or never.")] = "auto",
) -> None:
    """Print a run: per case its libraries fastest first (median step time ±IQR), the probes
    apart, then who is fastest and by how much, with an interval."""
    from snnbench.report.export import EXPORTERS, RunResult, load_run_result

    output.set_color(color)
    exporter = EXPORTERS.get(format, RunResult)  # the choices: the formats that draw a run
    hint = "" if skipped else f"'snnbench show {run_dir} --skipped'"
    exporter.print(load_run_result(run_dir, verbose=verbose, skipped_hint=hint),
                   output.console)


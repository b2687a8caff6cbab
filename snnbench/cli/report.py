"""``snnbench report``: PNG plots, a self-contained HTML page and a Markdown summary of a run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from snnbench.cli import output
from snnbench.cli.output import fail


def report(
    run_dir: Annotated[Path, typer.Argument(help="A run folder.")],
    out: Annotated[Path | None, typer.Option(
        help="Output folder (default RUN_DIR/report): new, empty, or an earlier report.",
    )] = None,
    targets: Annotated[bool, typer.Option(
        "--targets", help="Add the fused backend's targets (for snnbench's own developers; "
        "docs/fused.md).")] = False,
) -> None:
    """Write PNG plots, a self-contained HTML page and a Markdown summary of a run."""
    from snnbench.report.pages import report as write_report

    folder = out or run_dir / "report"
    try:
        # the default folder is the library's to check
        paths = write_report(run_dir, out, targets=targets)
    except OSError as exc:  # a full disk, a read-only folder: the user's to fix
        where = exc.filename or folder
        fail(f"cannot write the report to {where}: {exc.strerror or exc}")
    for path in paths:
        output.console.print(str(path))


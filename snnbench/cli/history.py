"""``snnbench history``: many runs drawn as a static offline site."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from snnbench.cli import output
from snnbench.cli.output import fail


def history(
    runs: Annotated[list[Path], typer.Argument(
        help="Run folders, or folders holding run folders.", show_default=False)],
    out: Annotated[Path, typer.Option(
        help="Output folder: new, empty, or an earlier history site.")] = Path("history"),
    x: Annotated[str, typer.Option(
        "--x", help="The x axis: date, version (library version) or commit (snnbench's).")]
        = "date",
    machine: Annotated[str | None, typer.Option(
        help="Draw only the runs of this machine (its key, as the error lists them).")] = None,
    per_machine: Annotated[bool, typer.Option(
        "--per-machine", help="Runs from several machines: draw each machine's lines apart.")]
        = False,
) -> None:
    """Draw many runs as a static offline site: a trend per adapter, case and metric.

    snnbench history results/ --out site   (then open site/index.html)

    Points carry their IQR and link to their run's report; steps are detected (PELT). Runs
    from different machines are never drawn on one line: pick one with --machine, or
    --per-machine.
    """
    from snnbench.report.history import X_AXES, collect, write_site

    if x not in X_AXES:
        fail(f"--x must be {', '.join(X_AXES)}, got {x!r}")
    found = collect(runs, machine=machine, per_machine=per_machine)
    try:
        paths = write_site(found, out, x=x, per_machine=per_machine)  # type: ignore[arg-type]
    except OSError as exc:  # a full disk, a read-only folder: the user's to fix
        fail(f"cannot write the site to {exc.filename or out}: {exc.strerror or exc}")
    output.console.print(f"{len(found.runs)} runs, {len(found.series)} series → {paths[0]}")

"""``snnbench merge``: a run's tables and host list rebuilt from its case records."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from snnbench.cli import output


def merge(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (results/<run_id>).")],
) -> None:
    """Rebuild a run's tables and host list from its case records.

    For a folder that cluster tasks kept writing into after 'snnbench run' stopped, or that
    was assembled from several machines; 'run' does this by itself when it ends.
    """
    from snnbench.sweep.run import merge_run

    count = merge_run(run_dir)
    output.console.print(f"merged {count} case records into {run_dir}")


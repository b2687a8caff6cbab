"""``snnbench export-nir``: a Linear+LIF network or a shipped example written as a NIR graph."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from snnbench.cli import output


def export_nir(
    out: Annotated[Path, typer.Argument(help="The .nir file to write (a new file).")],
    example: Annotated[str, typer.Option(
        help="linear-lif (the network of the flags below), shd-mlp, cuba-mlp or conv.")]
        = "linear-lif",
    neurons: Annotated[int | None, typer.Option(help="linear-lif: neurons per layer.")] = None,
    layers: Annotated[int | None, typer.Option(help="linear-lif: Linear+LIF layers.")] = None,
    seed: Annotated[int | None, typer.Option(help="linear-lif: the weights' seed.")] = None,
    dt: Annotated[float, typer.Option(
        help="linear-lif: the time step (s) its time constants are written for.")] = 1e-3,
) -> None:
    """Write a Linear+LIF network or a shipped example as a NIR graph.

    linear-lif: the stack a linear-lif case runs (the weights its seed draws; τ and r such
    that forward Euler at --dt steps as beta does). The reset and the surrogate are not part
    of a NIR graph (docs/nir.md)."""
    from snnbench.workload.graph.examples import export_graph
    from snnbench.workload.linear_lif.spec import NetworkSpec

    given = {k: v for k, v in (("neurons", neurons), ("layers", layers), ("seed", seed))
             if v is not None}
    spec = NetworkSpec.from_dict(given) if given else None
    written = export_graph(out, example, spec, dt)
    output.console.print(f"wrote {escape(str(written))}", highlight=False)

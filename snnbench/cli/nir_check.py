"""``snnbench nir-check``: each library's own NIR importer against snnbench's reference."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from snnbench.cli import output


def nir_check(
    graph: Annotated[Path, typer.Argument(help="The .nir file to check.")],
    dt: Annotated[float | None, typer.Option(
        help="The time step (s) the graph means: a NIR graph states none. Required.")] = None,
    libraries: Annotated[str | None, typer.Option(
        help="Comma list of snntorch, norse, sinabs, rockpool, spyx, spikingjelly "
             "(default: all).")] = None,
    time_steps: Annotated[int, typer.Option("--time-steps", "-T",
                                            help="Time steps of the input.")] = 100,
    batch_size: Annotated[int, typer.Option("--batch-size", "-B",
                                            help="Samples in the input.")] = 4,
    seed: Annotated[int, typer.Option(help="The input's seed.")] = 0,
    input_std: Annotated[float, typer.Option(
        help="The Gaussian input current's standard deviation.")] = 1.0,
    reset: Annotated[str, typer.Option(
        help="The reference's reset: zero (a NIR ≥ 1.0.6 LIF resets to v_reset) or "
             "subtract.")] = "zero",
    discretisation: Annotated[str, typer.Option(
        help="The reference's step: euler or exponential.")] = "euler",
    timeout: Annotated[float, typer.Option(
        help="Seconds each library's importer may take (it runs in its own process).")]
        = 300.0,
    format: Annotated[str, typer.Option(
        "--format", "-f", help="terminal (a table), json or markdown.")] = "terminal",
    out: Annotated[Path | None, typer.Option(
        help="A run folder to keep the result in (nir-check/<network>-<id>.json), which "
             "'snnbench report' then shows.")] = None,
) -> None:
    """Import a NIR graph with each library's own importer and classify what it computes.

    Each importer (snnTorch, Norse, Sinabs, Rockpool, Spyx, SpikingJelly) runs in a process
    of its own, which cannot install packages, on a Gaussian input; its output is compared
    with snnbench's float64 reference of the graph at --dt: exact, exact up to a scale
    (another dt, a read-out off by a factor), a different model (with the differences its
    probes found: the dt it behaves as, r ignored, reset, spike rule, a step late, dropped
    nodes), unsupported (the importer failed: why) or unavailable (not installed). With
    --out RUN the result is also kept in run folder RUN, for its report. Exit 0 when it
    ran, 2 for bad input."""
    from snnbench.workload.graph.conformance.check import check_graph, parse_libraries
    from snnbench.workload.graph.conformance.render import FORMATS, render
    from snnbench.workload.graph.load import GraphError

    if format not in FORMATS:
        raise GraphError(f"--format must be {', '.join(FORMATS)}, got {format!r}")
    if dt is None:
        raise GraphError("--dt is missing: a NIR graph states no time step; give one "
                         "(seconds, e.g. --dt 1e-3)")
    names = parse_libraries(libraries)
    if out is not None:
        from snnbench.report.conformance import check_folder

        check_folder(out)  # a folder that cannot take the result is refused before the check

    def progress(library: str) -> None:
        if format == "terminal":
            output.err_console.print(f"checking {escape(library)}…", highlight=False)

    report = check_graph(graph, dt, names, timeout=timeout, progress=progress,
                         time_steps=time_steps, batch_size=batch_size, seed=seed,
                         input_std=input_std, reset=reset, discretisation=discretisation)
    output.console.print(escape(render(report, format)), highlight=False, soft_wrap=True)
    if out is not None:
        from snnbench.report.conformance import save_check

        saved = save_check(out, report)
        if format == "terminal":
            output.err_console.print(f"kept in {escape(str(saved))}", highlight=False)

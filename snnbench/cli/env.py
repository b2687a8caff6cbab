"""``snnbench env``: the environment a run here would record, or the pre-flight noise check."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape

from snnbench.cli import output
from snnbench.cli.options import choice


def env(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    check: Annotated[bool, typer.Option(
        "--check", help="Run the pre-flight noise check a run starts with (load, other GPU "
        "processes, governor, turbo, threads against free cores) and print its findings.")
    ] = False,
    threads: Annotated[int, typer.Option(
        help="--check: CPU threads per case (0 = all cores).", min=0)] = 0,
    jobs: Annotated[int, typer.Option(help="--check: cases side by side.", min=1)] = 1,
    device: Annotated[str, typer.Option(help="--check: cpu or cuda.")] = "cpu",
) -> None:
    """Show the environment a run here would record (machine, GPU, versions).

    With --check, the pre-flight noise check instead (as pyperf's 'system show'); exit 0
    when the machine is quiet, 1 when a finding would make a run noisy.
    """
    from snnbench.host.environment import collect_environment

    if check:
        from snnbench.host.preflight import check_machine
        from snnbench.sweep.config import RunSettings

        choice("--device", device, [device], ("cpu", "cuda"))
        result = check_machine(RunSettings(threads=threads).resolved_threads, jobs, device)
        if as_json:
            print(json.dumps(result.to_dict(), indent=2))
        else:
            colors = {"ok": "green", "notice": "yellow", "warning": "red"}
            for finding in result.findings:
                output.console.print(f"[{colors[finding.level]}]{finding.level:7}[/] "
                                     f"{finding.check:13} {escape(finding.message)}",
                                     highlight=False)
        raise typer.Exit(1 if result.noisy else 0)
    data = collect_environment()
    if as_json:
        print(json.dumps(data, indent=2))
        return
    from snnbench.render.terminal import Look, print_table
    from snnbench.report.facts import environment_facts_table

    print_table(output.console, environment_facts_table(data), Look(fold=True))


"""``snnbench compare``: a candidate gated against a baseline, pass (0), fail (1) or
inconclusive (3)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from snnbench.cli import output
from snnbench.cli.options import split
from snnbench.cli.output import fail

#: the library's threshold parameters, as this command's flags name them
_FLAGS = {"factor": "--factor", "count_factor": "--count-factor",
          "mem_threshold": "--mem-threshold", "alpha": "--alpha",
          "time_floor_s": "--time-floor-ms", "process_spread": "--process-spread",
          "mem_floor_bytes": "--mem-floor-mib"}


def compare(
    baseline: Annotated[Path, typer.Argument(help="Baseline run folder.")],
    candidate: Annotated[Path | None, typer.Argument(
        help="Candidate run folder (default: the baseline, to compare two --envs of one run).",
        show_default=False)] = None,
    factor: Annotated[float, typer.Option(
        help="Median time ratio that counts as a regression.")] = 1.10,
    mem_threshold: Annotated[float, typer.Option(
        help="Relative peak-memory growth that counts.")] = 0.05,
    alpha: Annotated[float, typer.Option(
        help="The time intervals are two-sided at 1 - alpha (0.01: 99 %).")] = 0.01,
    time_floor_ms: Annotated[float | None, typer.Option(
        help="Last resort, off by default: median time differences below this pass whatever "
        "the interval (a baseline from another day without replicates; see "
        "docs/report-compare.md).")] = None,
    mem_floor_mib: Annotated[float | None, typer.Option(
        help="Peak-memory differences below this are unchanged (default per device: 10 MiB "
        "on cpu, 1 MiB on cuda).")] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="text, md or json.")] = "text",
    envs: Annotated[str | None, typer.Option(
        help="BASELINE_ENV,CANDIDATE_ENV: compare two library environments (e.g. "
        "snntorch@1.0.0,snntorch@1.1.0; 'base' is the base one), of one run or of two.")] = None,
    seed: Annotated[int, typer.Option(
        help="Seed of the bootstrap: the same runs and seed give the same verdict.")] = 0,
    metric: Annotated[str | None, typer.Option(
        help="Comma list of the metrics that gate (time_s, peak_mem_bytes, instructions); the "
        "others are shown as info. 'instructions' alone: a deterministic CPU gate for a shared "
        "runner (runs made with 'run --instructions').")] = None,
    count_factor: Annotated[float, typer.Option(
        help="Instruction-count ratio that counts as a regression (counts are deterministic: "
        "no interval).")] = 1.02,
    process_spread: Annotated[float | None, typer.Option(
        help="The spread between processes you know for pairs with one process a side (0.3: "
        "±30 %): their interval is widened by it and may then fail or improve; without it "
        "they are at most inconclusive.")] = None,
) -> None:
    """Gate a candidate against a baseline: pass (exit 0), fail (1) or inconclusive (3).

    A library maintainer gates a release against the last one, both in one run, with
    replicates (fresh processes, in ABBA order):

    snnbench run --adapters snntorch@1.0.0,snntorch@1.1.0 --replicates 5 --out results/gate

    snnbench compare results/gate --envs snntorch@1.0.0,snntorch@1.1.0

    Each time pair gets an interval of the median ratio with the process as the unit (within one
    run, Student's t over the replicate-by-replicate ratios of the processes' medians or, when
    those leave it open, of their fastest samples, each at half the error rate; else over the
    replicates' medians; a bootstrap of the samples with one process a side): fail when it lies
    above --factor, inconclusive when it straddles it (the verdict says how many replicates
    would resolve it), pass below. The rule: a time regression or improvement needs replicates
    on both sides or a stated --process-spread, and, unless paired, a change larger than the
    noise of a noisy run; otherwise the pair is at most inconclusive; identical samples always
    pass. A case going from ok to error/oom/timeout/lost/mismatch fails. Exit codes: 0 pass, 1
    fail, 3 inconclusive, 2 usage errors, unusable folders or nothing comparable.
    """
    from snnbench.gate.compare import check_thresholds, compare as compare_runs
    from snnbench.gate.verdict import Comparison
    from snnbench.report.export import EXPORTERS

    exporter = EXPORTERS.get(format, Comparison)  # the choices: the formats that draw one
    # the library's one check, said with the flags' names; a floor is checked in the flag's
    # own unit (its bound, 0, holds in any)
    check_thresholds({"factor": factor, "count_factor": count_factor,
                      "mem_threshold": mem_threshold, "alpha": alpha,
                      "time_floor_s": time_floor_ms, "process_spread": process_spread,
                      "mem_floor_bytes": mem_floor_mib}, _FLAGS)
    # in bytes it must stay a number too (1e308 MiB is not): said with the flag's name, never
    # the library's parameter
    if mem_floor_mib is not None and not math.isfinite(mem_floor_mib * 2**20):
        fail(f"--mem-floor-mib is too large to be a number of bytes: {mem_floor_mib:g}")
    environments: tuple[str, str] | None = None
    if envs is not None:
        names = split(envs)
        if len(names) != 2:
            fail(f"--envs takes two environments, BASELINE_ENV,CANDIDATE_ENV; got {envs!r}")
        environments = (names[0], names[1])
    elif candidate is None:
        fail("give a candidate run folder, or --envs to compare two environments of one run")
    gated: tuple[str, ...] | None = None
    if metric is not None:
        from snnbench.gate.compare import check_gated_metrics

        gated = check_gated_metrics(tuple(split(metric)))
    result = compare_runs(
        baseline, candidate or baseline, factor=factor, mem_threshold=mem_threshold,
        alpha=alpha, environments=environments, seed=seed, count_factor=count_factor,
        gated_metrics=gated, process_spread=process_spread,
        time_floor_s=None if time_floor_ms is None else time_floor_ms / 1e3,
        mem_floor_bytes=None if mem_floor_mib is None else mem_floor_mib * 2**20,
    )
    exporter.print(result, output.console)
    raise typer.Exit(result.exit_code)


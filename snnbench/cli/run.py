"""``snnbench run``: a sweep from a config and flags, one isolated worker process per adapter
× case, with a progress bar, a line per case, and the run printed at the end."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.padding import Padding
from rich.progress import TaskID
from rich.text import Text

from snnbench.cli import output
from snnbench.cli.options import (
    EXEC_PANEL,
    OUTPUT_PANEL,
    finite,
    ints,
    names,
    refuse_network_flags,
)
from snnbench.cli.output import fail
from snnbench.sweep.config import BUILTIN_CONFIGS, RunConfig, build_config


def run(
    config: Annotated[str | None, typer.Option(
        "--config", "-c", help="TOML sweep file, or a shipped one by name: "
        + ", ".join(BUILTIN_CONFIGS) + " (default: default); a shipped name always means "
        "the shipped config, a file of that name here is ./NAME.")] = None,
    adapters: Annotated[str | None, typer.Option(
        help="Comma list of adapters (name, name:variant, name@VERSION for that library "
        "version in its own environment, name@ENV for a config's \\[environments.ENV]), or "
        "'all'.")] = None,
    network: Annotated[str | None, typer.Option(
        "--network", help="A NIR graph to run instead of the Linear+LIF network: a .nir file, "
        "or example:NAME for a shipped example (export-nir --help names them). The config's "
        "choices a graph shares (T, B, dtype, reset...) apply; --neurons, --layers and "
        "--precision do not (docs/nir.md).")] = None,
    dt: Annotated[float | None, typer.Option(
        help="A graph's time step in seconds (a NIR graph states none), e.g. 1e-3.")] = None,
    neurons: Annotated[str | None, typer.Option(help="Comma list of n (Linear n→n).")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Batch size B.")] = None,
    steps: Annotated[int | None, typer.Option(help="Time steps T.")] = None,
    layers: Annotated[int | None, typer.Option(help="Linear+LIF layers.")] = None,
    dtype: Annotated[str | None, typer.Option(
        help="float32, bfloat16 or float16 (comma list allowed).")] = None,
    precision: Annotated[str | None, typer.Option(
        help="Matmul precision (the spec's matmul_precision; comma list allowed): strict, "
        "tf32, amp-bf16 or amp-fp16 (automatic mixed precision: float32 weights, state and "
        "gradients, 16-bit matmuls).")] = None,
    device: Annotated[str | None, typer.Option(help="cpu, cuda or auto.")] = None,
    reset: Annotated[str | None, typer.Option(help="subtract, zero or both.")] = None,
    detach_reset: Annotated[bool | None, typer.Option(
        "--detach-reset/--no-detach-reset",
        help="Detach the reset term from the gradient (default: the config's; the default "
        "config does not).")] = None,
    repeats: Annotated[int | None, typer.Option(help="Minimum timed samples per phase.")] = None,
    warmup: Annotated[int | None, typer.Option(help="Minimum warm-up steps.")] = None,
    timeout: Annotated[float | None, typer.Option(
        help="Seconds per case before it is killed.")] = None,
    threads: Annotated[int | None, typer.Option(help="CPU threads per worker (0 = all).")] = None,
    replicates: Annotated[int | None, typer.Option(
        help="Fresh worker processes per case (default 1; 3 or more to see the spread between "
        "processes), interleaved across adapters in ABBA order.")] = None,
    out: Annotated[Path | None, typer.Option(
        help="The run folder itself (default results/<run_id>): a new or empty folder, or "
        "with --resume a run folder.")] = None,
    resume: Annotated[bool, typer.Option(
        help="Finish the run in --out: run only the cases it lacks.")] = False,
    trust_folder: Annotated[bool, typer.Option(
        help="With --resume: run the setup lines, Apptainer image and Ray address the "
        "folder's manifest records (without executor options), build the library "
        "environments it names and use its environment cache (refused otherwise: a folder "
        "someone sent runs no code).")] = False,
    allow_mismatch: Annotated[bool, typer.Option(
        help="Time adapters even when their spikes disagree with the reference.")] = False,
    executor: Annotated[str | None, typer.Option(
        help="Where cases run: local (this machine, default), slurm (one array job, through "
        "submitit) or ray.", rich_help_panel=EXEC_PANEL)] = None,
    jobs: Annotated[int | None, typer.Option(
        help="local: N CPU cases side by side, each on its own cores with its share of the "
        "threads. Off by default: side-by-side timings are not comparable with one case at a "
        "time (every row records its concurrency).", rich_help_panel=EXEC_PANEL)] = None,
    gpus: Annotated[str | None, typer.Option(
        help="local: GPUs to use, one case per GPU at a time (NVML indices or UUIDs, e.g. "
        "0,1); each case is pinned by UUID.", rich_help_panel=EXEC_PANEL)] = None,
    bind_cpus: Annotated[bool | None, typer.Option(
        "--bind-cpus/--no-bind-cpus",
        help="local --gpus: pin each case to the CPUs nearest its GPU.",
        rich_help_panel=EXEC_PANEL)] = None,
    start: Annotated[str | None, typer.Option(
        help="local: how each case's fresh worker process starts: fork (from a parent that "
        "imported the case's library once per sweep and touched no device), spawn (a new "
        "interpreter per case, importing its library each time) or auto (fork on Linux where "
        "the parent found it safe, else spawn; the default). Every row records which.",
        rich_help_panel=EXEC_PANEL)] = None,
    partition: Annotated[str | None, typer.Option(
        help="slurm: partition.", rich_help_panel=EXEC_PANEL)] = None,
    account: Annotated[str | None, typer.Option(
        help="slurm: account.", rich_help_panel=EXEC_PANEL)] = None,
    gpus_per_node: Annotated[int | None, typer.Option(
        help="slurm: GPUs per array task (CUDA sweeps; default 1).",
        rich_help_panel=EXEC_PANEL)] = None,
    timeout_min: Annotated[int | None, typer.Option(
        help="slurm: time limit of one array task, in minutes.",
        rich_help_panel=EXEC_PANEL)] = None,
    array_parallelism: Annotated[int | None, typer.Option(
        help="slurm: array tasks running at once.", rich_help_panel=EXEC_PANEL)] = None,
    cases_per_task: Annotated[int | None, typer.Option(
        help="slurm: cases packed into one array task (run one after another).",
        rich_help_panel=EXEC_PANEL)] = None,
    setup: Annotated[list[str] | None, typer.Option(
        help="slurm: a shell line run before each array task (module load, activating an "
        "environment); repeatable.", rich_help_panel=EXEC_PANEL)] = None,
    image: Annotated[str | None, typer.Option(
        help="slurm: an Apptainer image; each case runs in 'apptainer exec --nv IMAGE'.",
        rich_help_panel=EXEC_PANEL)] = None,
    slurm_cluster: Annotated[str | None, typer.Option(
        help="slurm: 'slurm', or 'local' for submitit's local cluster on this machine (a "
        "rehearsal without Slurm; never for GPU concurrency).",
        rich_help_panel=EXEC_PANEL)] = None,
    ray_address: Annotated[str | None, typer.Option(
        help="ray: the cluster's address (default $RAY_ADDRESS, else a new local instance).",
        rich_help_panel=EXEC_PANEL)] = None,
    wheelhouse: Annotated[str | None, typer.Option(
        help="Folder of wheels: build library environments (adapter@VERSION) from it alone, "
        "offline.")] = None,
    strict: Annotated[bool, typer.Option(
        help="Refuse to run on a noisy machine (other processes busy, threads beyond the free "
        "cores, other processes on the GPU): exit 2 with the reason, nothing written.")] = False,
    thread_wait: Annotated[str | None, typer.Option(
        help="How idle CPU threads wait, for every adapter: passive (default: sleep at once, "
        "robust on a busy machine), active (spin), library (each library's own default).")
    ] = None,
    instructions: Annotated[bool | None, typer.Option(
        "--instructions/--no-instructions",
        help="After timing each CPU case, count its phases' instructions under valgrind's "
        "callgrind in a process of its own (a deterministic metric for 'compare --metric "
        "instructions'; ~50x slower than the case, keep it small; docs/instructions.md).")
    ] = None,
    export_json: Annotated[Path | None, typer.Option(
        "--export-json", help="Also write the run as typed JSON ('show --format json') to "
        "this new file (never over an existing one).",
        rich_help_panel=OUTPUT_PANEL)] = None,
    export_markdown: Annotated[Path | None, typer.Option(
        "--export-markdown", help="Also write who is fastest and the table as Markdown to "
        "this new file (never over an existing one).",
        rich_help_panel=OUTPUT_PANEL)] = None,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="No progress bar, no line per case.",
        rich_help_panel=OUTPUT_PANEL)] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="A line for skipped cases too; every column and every case "
        "not run at the end.", rich_help_panel=OUTPUT_PANEL)] = False,
    color: Annotated[str, typer.Option(
        "--color", help="auto (honours NO_COLOR), always or never.",
        rich_help_panel=OUTPUT_PANEL)] = "auto",
) -> None:
    """Run a benchmark sweep: one isolated worker process per adapter × case.

    --adapters snntorch@0.9.4,snntorch@1.0.0 runs each library version in its own
    environment layered over this one (built with uv, cached, reused offline).

    --out must be a new or empty folder (or, with --resume, a run folder): nothing already in
    another folder is ever overwritten.

    SIGINT (Ctrl-C) or SIGTERM stops it: finished cases are kept, running workers are killed
    and 'snnbench run --resume --out DIR' finishes it, with any executor.
    """
    from snnbench.executors import ExecutorSettings
    from snnbench.host.lifeline import terminate_as_interrupt, termination_signal
    from snnbench.records.contract import CaseRecord, Job, adapter_label
    from snnbench.report.views import case_line
    from snnbench.sweep.received import recorded_executor, refuse_recorded_commands
    from snnbench.sweep.run import start_run

    output.set_color(color)
    if quiet and verbose:
        fail("--quiet and --verbose contradict each other: give one")
    exports = {"json": export_json, "md": export_markdown}
    refuse_exports(exports)
    run_overrides: dict[str, Any] = {}
    network_overrides: dict[str, list[Any]] = {}
    if adapters is not None:
        run_overrides["adapters"] = tuple(names(adapters, "--adapters"))
    for key, value in (("device", device), ("repeats", repeats), ("warmup", warmup),
                       ("timeout_s", timeout), ("threads", threads)):
        if value is not None:
            run_overrides[key] = value
    if replicates is not None:
        if replicates < 1:
            fail(f"--replicates must be an integer ≥ 1, got {replicates}")
        run_overrides["replicates"] = replicates
    if allow_mismatch:
        run_overrides["allow_mismatch"] = True
    if strict:
        run_overrides["strict"] = True
    if thread_wait is not None:
        run_overrides["thread_wait"] = thread_wait
    if instructions is not None:
        run_overrides["instructions"] = instructions
    if wheelhouse is not None:
        run_overrides["wheelhouse"] = wheelhouse
    if network is not None:
        refuse_network_flags({"--neurons": neurons, "--layers": layers,
                              "--precision": precision})
        network_overrides["graph"] = [network]
    if dt is not None:
        finite(dt, "--dt", low=0)
        network_overrides["dt"] = [dt]
    if neurons is not None:
        network_overrides["neurons"] = list(ints(neurons, "--neurons"))
    for key, ivalue in (("batch_size", batch_size), ("time_steps", steps), ("layers", layers)):
        if ivalue is not None:
            network_overrides[key] = [ivalue]
    if dtype is not None:
        network_overrides["dtype"] = names(dtype, "--dtype")
    if precision is not None:
        network_overrides["matmul_precision"] = names(precision, "--precision")
    if reset is not None:
        network_overrides["reset"] = (["subtract", "zero"] if reset == "both"
                                      else names(reset, "--reset"))
    if detach_reset is not None:
        network_overrides["detach_reset"] = [detach_reset]
    if resume and (config or run_overrides or network_overrides):
        fail("--resume finishes a run with its recorded settings: give only --out (and, if "
             "you like, executor options)")
    if trust_folder and not resume:
        fail("--trust-folder applies to --resume only")
    exec_overrides: dict[str, Any] = {}
    for key, option in (("name", executor), ("jobs", jobs), ("bind_cpus", bind_cpus),
                        ("start", start), ("slurm.partition", partition),
                        ("slurm.account", account),
                        ("slurm.gpus_per_node", gpus_per_node),
                        ("slurm.timeout_min", timeout_min),
                        ("slurm.array_parallelism", array_parallelism),
                        ("slurm.cases_per_task", cases_per_task), ("slurm.image", image),
                        ("slurm.cluster", slurm_cluster), ("ray.address", ray_address)):
        if option is not None:
            exec_overrides[key] = option
    if gpus is not None:
        exec_overrides["gpus"] = tuple(names(gpus, "--gpus"))
    if setup:
        exec_overrides["slurm.setup"] = tuple(setup)
    cfg = RunConfig() if resume else build_config(config, run_overrides, network_overrides)
    executor_settings = None
    if exec_overrides or not resume:
        base = cfg.executor
        if resume:
            # executor options alone (--timeout-min 10) change the executor the run used;
            # --executor starts from that executor's defaults
            base = (ExecutorSettings() if "name" in exec_overrides
                    else recorded_executor(Path(out or ".")))
            if "name" not in exec_overrides and not trust_folder:
                refuse_recorded_commands(base, Path(out or "."), exec_overrides)
        executor_settings = base.with_overrides(exec_overrides)
        executor_settings.refuse_foreign(exec_overrides)

    # the bar starts with the first case: an error before it (a bad selection, an --out that
    # is not empty) stays one line on stderr
    progress = output.progress_bar("[bold]{task.description}", eta=True, transient=False)
    bars: list[TaskID] = []

    def on_progress(event: str, index: int, total: int, task: Job,
                    record: CaseRecord | None) -> None:
        name = adapter_label(task.adapter, task.variant, task.environment.name)
        if event == "decided":
            # a case skipped without running (its adapter cannot honour it): no progress, so
            # the ETA counts only cases that run; counted at the end, listed with --verbose
            if verbose and record is not None:
                line, tint = case_line(name, task.workload.label, record, verbose)
                output.err_console.print(Padding(Text(line, style=tint), (0, 0, 0, 2),
                                                 expand=False))
            return
        if quiet:
            return
        if not bars:
            progress.start()
            bars.append(progress.add_task("starting", total=total))
        label = f"case {index}/{total} {name} {task.workload.size_label}"
        if event == "start":
            progress.update(bars[0], total=total, description=label)
        else:
            assert record is not None
            progress.advance(bars[0])
            line, tint = case_line(name, task.workload.label, record, verbose)
            # indented as a whole: a line wrapped at 80 columns stays under its start
            progress.console.print(Padding(Text(line, style=tint), (0, 0, 0, 2), expand=False))

    def on_environment(line: str) -> None:
        from snnbench.render.terminal import print_labelled

        where = progress.console if bars else output.err_console
        label, _, text = line.partition(": ")
        if label in ("warning", "notice") and text:
            # wrapped at words under its text: a long warning never breaks mid-word
            print_labelled(where, f"{label}:", text, "yellow")
        else:
            where.print(escape(line), highlight=False)

    try:
        with terminate_as_interrupt():
            outcome = start_run(cfg, out, Path("results"), resume, on_progress,
                                notify=on_environment, executor_settings=executor_settings,
                                trust_folder=trust_folder)
    except KeyboardInterrupt as exc:
        if bars:
            progress.stop()
            bars.clear()
        signum = termination_signal(exc)
        code, what = ((128 + signum, f"stopped by {signal.Signals(signum).name}")
                      if signum else (130, "interrupted"))
        folder = getattr(exc, "run_dir", None) or (out if resume else None)
        if folder is None:
            # stopped while preparing (an environment build, the pre-flight check): no run
            # folder exists, so there is nothing to resume
            output.err_console.print(f"{what} before the run started: nothing was written",
                                     highlight=False, soft_wrap=True)
        else:
            output.err_console.print(
                f"{what}: finished cases are kept, running workers were stopped; finish with "
                f"'snnbench run --resume --out {folder}'",
                highlight=False, soft_wrap=True,
            )
        raise typer.Exit(code) from None
    finally:
        if bars:  # a Progress never started would still print an empty line when stopped
            progress.stop()
    from snnbench.report.export import EXPORTERS, RunResult, load_run_result

    shown = load_run_result(outcome.run_dir, verbose=verbose,
                            skipped_hint=f"'snnbench show {outcome.run_dir} --skipped'")
    EXPORTERS.get("text", RunResult).print(shown, output.console)
    export_run(outcome.run_dir, exports)
    from snnbench.render.terminal import print_labelled

    for reason in outcome.noise.reasons:
        print_labelled(output.err_console, "noisy run:", reason, "yellow")
    output.console.print(f"results: {outcome.run_dir}")
    if outcome.skipped_existing:
        output.console.print(f"({outcome.skipped_existing} cases were already done and kept)")
    raise typer.Exit(1 if outcome.failed else 0)


#: ``run``'s export flags, by the format each writes
EXPORT_FLAGS = {"json": "--export-json", "md": "--export-markdown"}


def refuse_exports(exports: dict[str, Path | None]) -> None:
    """Refuse, before anything runs, an export path that exists (nothing is overwritten) or
    whose folder does not."""
    from snnbench.report.export import refuse_existing

    for fmt, path in exports.items():
        if path is not None:
            refuse_existing(path, EXPORT_FLAGS[fmt])


def export_run(run_dir: Path, exports: dict[str, Path | None]) -> None:
    """Write ``run``'s ``--export-json`` / ``--export-markdown`` files, each created
    exclusively: a file that appeared while the run ran is not overwritten either."""
    from snnbench.report.export import EXPORTERS, RunResult, load_run_result, write_new
    from snnbench.store.storage import os_reason

    wanted = {fmt: path for fmt, path in exports.items() if path is not None}
    if not wanted:
        return
    result = load_run_result(run_dir, page=True)
    for fmt, path in wanted.items():
        text = EXPORTERS.get(fmt, RunResult, EXPORT_FLAGS[fmt]).serialize(result)
        try:
            write_new(path, text)
        except OSError as exc:
            fail(f"{EXPORT_FLAGS[fmt]} {path}: {os_reason(exc)} (the run is kept in "
                 f"{run_dir})")
        output.console.print(f"exported {path}", highlight=False)

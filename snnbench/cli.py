"""The ``snnbench`` command line: parse, call the library, map outcomes to exit codes.

Exit codes: 0 every case ok, unavailable or skipped; 1 a case failed (error, oom, timeout, lost,
mismatch) or a regression was found; 2 usage or input errors (one line on stderr, nothing
already written is touched).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from snnbench import __version__
from snnbench.config import RunConfig, load_config
from snnbench.registry import discover

app = typer.Typer(
    name="snnbench",
    help="Honest, reproducible benchmarks of spiking neural network training libraries.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)
EXEC_PANEL = "Executors (where cases run)"

def _builtin_configs() -> tuple[str, ...]:
    """Names of the configs shipped as package data (``configs/*.toml``)."""
    from importlib.resources import files

    names = [p.name.removesuffix(".toml") for p in files("snnbench.configs").iterdir()
             if p.name.endswith(".toml")]
    return tuple(sorted(names, key=lambda name: (name != "default", name)))


BUILTIN_CONFIGS = _builtin_configs()


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one clear line on stderr and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def config_path(name_or_path: str) -> Path:
    """A config file path; bare names of the shipped configs resolve to the packaged files."""
    path = Path(name_or_path)
    if path.exists() or path.suffix:
        return path
    from importlib.resources import files

    if name_or_path in BUILTIN_CONFIGS:
        return Path(str(files("snnbench.configs").joinpath(f"{name_or_path}.toml")))
    return path


def _version_callback(value: bool) -> None:
    if value:
        console.print(f"snnbench {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version_callback, is_eager=True,
                           help="Show the version and exit.")
    ] = False,
) -> None:
    """Honest, reproducible benchmarks of spiking neural network training libraries."""


# -- list ---------------------------------------------------------------------------------
def _probe(name: str, timeout_s: float) -> dict[str, Any]:
    from snnbench.probe import MARKER

    try:
        proc = subprocess.run(
            [sys.executable, "-m", "snnbench.probe", name],
            capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return {"name": name, "available": False, "reason": f"import hung > {timeout_s:g} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARKER):
            result: dict[str, Any] = json.loads(line[len(MARKER):])
            return result
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"name": name, "available": False,
            "reason": f"probe crashed (exit {proc.returncode}): {tail}"}


@app.command("list")
def list_adapters(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds allowed per library import.")] = 180.0,
) -> None:
    """List adapters: variants, library version, or why each is unavailable.

    Each library is imported in its own short-lived process, never in this one.
    """
    entries = discover()
    broken = {n: e.error for n, e in entries.items() if e.adapter_class is None}
    names = [n for n in entries if n not in broken]
    with ThreadPoolExecutor(max_workers=4) as pool:
        probed = dict(zip(names, pool.map(lambda n: _probe(n, timeout), names), strict=True))
    results: list[dict[str, Any]] = []
    for name in entries:
        if name in broken:
            results.append({"name": name, "available": False, "reason": broken[name],
                            "variants": [], "library": "", "version": None})
        else:
            results.append(probed[name])
    if as_json:
        console.print_json(json.dumps(results))
        return
    table = Table(title=f"snnbench {__version__}: adapters")
    for col in ("adapter", "variants", "library", "version", "status"):
        table.add_column(col, overflow="fold")
    for r in results:
        status = ("[green]available[/]" if r.get("available")
                  else f"[red]unavailable[/]: {escape(str(r.get('reason', '')))}")
        variants = ", ".join(str(v) for v in r.get("variants") or [])
        table.add_row(str(r["name"]), variants, str(r.get("library") or ""),
                      str(r.get("version") or ""), status)
    console.print(table)


# -- run ----------------------------------------------------------------------------------
def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in _split(text)]
    except ValueError:
        fail(f"{what} must be comma-separated integers, got {text!r}")
    if not values:
        fail(f"{what} is empty")
    return values


def build_config(
    config: str | None,
    run_overrides: dict[str, Any],
    network_overrides: dict[str, list[Any]],
) -> RunConfig:
    """Load ``config`` (default: the packaged default sweep) and apply overrides."""
    base = load_config(config_path(config or "default"))
    return base.with_overrides(run_overrides, network_overrides)


@app.command()
def run(
    config: Annotated[str | None, typer.Option(
        "--config", "-c", help="TOML sweep file, or a shipped one by name: "
        + ", ".join(BUILTIN_CONFIGS) + " (default: default).")] = None,
    adapters: Annotated[str | None, typer.Option(
        help="Comma list of adapters (name or name:variant), or 'all'.")] = None,
    neurons: Annotated[str | None, typer.Option(help="Comma list of n (Linear n→n).")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Batch size B.")] = None,
    steps: Annotated[int | None, typer.Option(help="Time steps T.")] = None,
    layers: Annotated[int | None, typer.Option(help="Linear+LIF layers.")] = None,
    dtype: Annotated[str | None, typer.Option(
        help="float32, bfloat16 or float16 (comma list allowed).")] = None,
    device: Annotated[str | None, typer.Option(help="cpu, cuda or auto.")] = None,
    reset: Annotated[str | None, typer.Option(help="subtract, zero or both.")] = None,
    detach_reset: Annotated[bool | None, typer.Option(
        "--detach-reset/--no-detach-reset",
        help="Detach the reset term from the gradient (default from the config: yes).")] = None,
    repeats: Annotated[int | None, typer.Option(help="Minimum timed samples per phase.")] = None,
    warmup: Annotated[int | None, typer.Option(help="Minimum warm-up steps.")] = None,
    timeout: Annotated[float | None, typer.Option(
        help="Seconds per case before it is killed.")] = None,
    threads: Annotated[int | None, typer.Option(help="CPU threads per worker (0 = all).")] = None,
    out: Annotated[Path | None, typer.Option(
        help="The run folder itself (default results/<run_id>).")] = None,
    resume: Annotated[bool, typer.Option(
        help="Finish the run in --out: run only the cases it lacks.")] = False,
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
) -> None:
    """Run a benchmark sweep: one isolated worker process per adapter × case.

    SIGINT (Ctrl-C) or SIGTERM stops it: finished cases are kept, running workers are killed
    and 'snnbench run --resume --out DIR' finishes it, with any executor.
    """
    from snnbench.contract import CaseRecord, Job
    from snnbench.errors import UserError
    from snnbench.executors import ExecutorSettings
    from snnbench.lifeline import terminate_as_interrupt, termination_signal
    from snnbench.runner import start_run

    run_overrides: dict[str, Any] = {}
    network_overrides: dict[str, list[Any]] = {}
    if adapters is not None:
        run_overrides["adapters"] = tuple(_split(adapters))
    for key, value in (("device", device), ("repeats", repeats), ("warmup", warmup),
                       ("timeout_s", timeout), ("threads", threads)):
        if value is not None:
            run_overrides[key] = value
    if allow_mismatch:
        run_overrides["allow_mismatch"] = True
    if neurons is not None:
        network_overrides["neurons"] = list(_ints(neurons, "--neurons"))
    for key, ivalue in (("batch_size", batch_size), ("time_steps", steps), ("layers", layers)):
        if ivalue is not None:
            network_overrides[key] = [ivalue]
    if dtype is not None:
        network_overrides["dtype"] = _split(dtype)
    if reset is not None:
        network_overrides["reset"] = ["subtract", "zero"] if reset == "both" else _split(reset)
    if detach_reset is not None:
        network_overrides["detach_reset"] = [detach_reset]
    if resume and (config or run_overrides or network_overrides):
        fail("--resume finishes a run with its recorded settings: give only --out (and, if "
             "you like, executor options)")
    exec_overrides: dict[str, Any] = {}
    for key, option in (("name", executor), ("jobs", jobs), ("bind_cpus", bind_cpus),
                        ("slurm.partition", partition), ("slurm.account", account),
                        ("slurm.gpus_per_node", gpus_per_node),
                        ("slurm.timeout_min", timeout_min),
                        ("slurm.array_parallelism", array_parallelism),
                        ("slurm.cases_per_task", cases_per_task), ("slurm.image", image),
                        ("slurm.cluster", slurm_cluster), ("ray.address", ray_address)):
        if option is not None:
            exec_overrides[key] = option
    if gpus is not None:
        exec_overrides["gpus"] = tuple(_split(gpus))
    if setup:
        exec_overrides["slurm.setup"] = tuple(setup)
    try:
        cfg = RunConfig() if resume else build_config(config, run_overrides, network_overrides)
        executor_settings = None
        if exec_overrides or not resume:
            base = ExecutorSettings() if resume else cfg.executor
            executor_settings = base.with_overrides(exec_overrides)
    except UserError as exc:
        fail(str(exc))

    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    # started by the first case, so an input error before it prints its one line and no bar
    progress = Progress(*columns, console=err_console, transient=False)
    bar = progress.add_task("starting", total=None)
    try:

        def on_progress(event: str, index: int, total: int, task: Job,
                        record: CaseRecord | None) -> None:
            if not progress.live.is_started:
                progress.start()
            label = f"case {index}/{total} {task.adapter}:{task.variant} n={task.spec.neurons}"
            if event == "start":
                progress.update(bar, total=total, description=label)
            else:
                assert record is not None
                progress.advance(bar)
                status = record.status
                color = {"ok": "green", "skipped": "yellow",
                         "unavailable": "yellow"}.get(status, "red")
                progress.console.print(
                    f"  {task.adapter}:{task.variant} {task.spec.label}: [{color}]{status}[/]"
                    + ("" if status == "ok"
                       else f" — {escape(record.message[:160])}"),
                    highlight=False,
                )

        try:
            with terminate_as_interrupt():
                outcome = start_run(cfg, out, Path("results"), resume, on_progress,
                                    executor_settings=executor_settings)
        except UserError as exc:
            fail(str(exc))
        except KeyboardInterrupt as exc:
            signum = termination_signal(exc)
            code, what = ((128 + signum, f"stopped by {signal.Signals(signum).name}")
                          if signum else (130, "interrupted"))
            where = f" --out {out}" if out else ""
            err_console.print(
                f"{what}: finished cases are kept, running workers were stopped; finish with "
                f"'snnbench run --resume{where}'"
            )
            raise typer.Exit(code) from None
    finally:
        if progress.live.is_started:
            progress.stop()
    _print_run(outcome.run_dir, "text")
    console.print(f"results: {outcome.run_dir}")
    if outcome.skipped_existing:
        console.print(f"({outcome.skipped_existing} cases were already done and kept)")
    raise typer.Exit(1 if outcome.failed else 0)


def _print_run(run_dir: Path, fmt: str) -> None:
    from snnbench.storage import read_summary
    from snnbench.tables import HEADERS, case_rows, markdown_table

    summary = read_summary(run_dir)
    rows = case_rows(summary)
    if fmt == "md":
        print(markdown_table(HEADERS, rows))
        return
    _print_text(run_dir, rows)


def _print_text(run_dir: Path, rows: list[tuple[str, ...]]) -> None:
    """One compact table per case; cases not run are grouped by reason underneath."""
    from snnbench.tables import HEADERS, NOISE_HINT, NOISY_NOTE

    col = {name: HEADERS.index(name) for name in HEADERS}
    benign = ("skipped", "unavailable")
    notes: list[str] = []
    cases: dict[str, list[tuple[str, ...]]] = {}
    for row in rows:
        if row[col["status"]] in benign:
            continue
        label = (f"n={row[col['n']]} B={row[col['B']]} T={row[col['T']]} {row[col['dtype']]} "
                 f"reset={row[col['reset']]} {row[col['device']]}")
        cases.setdefault(label, []).append(row)
    console.print(f"run {run_dir.name} — times: median ms ±IQR/median; peak MiB of the step "
                  "phase; floor× = step time / GEMM floor", highlight=False)
    for label, case in cases.items():
        table = Table(title=label, box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
        columns: tuple[str, ...] = ("status", "forward ms", "backward ms", "step ms",
                                    "step peak MiB", "floor×", "spike match")
        # constant columns carry no information in an 80-column terminal: say it once instead
        if all(r[col["status"]] == "ok" for r in case):
            columns = tuple(c for c in columns if c != "status")
        if all(r[col["spike match"]] in ("", "1") for r in case):
            columns = tuple(c for c in columns if c != "spike match")
            table.title = f"{label} — every verified adapter's spikes match the reference"
        if all(r[col["floor×"]] == "" for r in case):
            columns = tuple(c for c in columns if c != "floor×")
        table.add_column("adapter", no_wrap=True)
        for name in columns:
            short = {"forward ms": "fwd ms", "backward ms": "bwd ms", "step peak MiB": "MiB",
                     "spike match": "spikes"}.get(name, name)
            table.add_column(short, no_wrap=True, justify="left" if name == "status" else "right")
        table.add_column("#", no_wrap=True)
        for row in case:
            name = row[0] if row[1] == "default" else f"{row[0]}:{row[1]}"
            mark = ""
            if row[-1]:
                if row[-1] not in notes:
                    notes.append(row[-1])
                mark = str(notes.index(row[-1]) + 1)
            style = "" if row[col["status"]] == "ok" else "red"
            table.add_row(name, *(row[col[c]] for c in columns), mark, style=style)
        console.print(table)
    for number, note in enumerate(notes, start=1):
        console.print(f"  {number}. {escape(note)}", highlight=False)
    if any(NOISY_NOTE in n for n in notes):
        console.print(f"  {NOISE_HINT}", highlight=False)
    not_run = [r for r in rows if r[col["status"]] in benign]
    if not_run:
        grouped: dict[tuple[str, str, str], int] = {}
        for r in not_run:
            name = r[0] if r[1] == "default" else f"{r[0]}:{r[1]}"
            key = (name, r[col["status"]], r[-1])
            grouped[key] = grouped.get(key, 0) + 1
        console.print(f"not run ({len(not_run)} cases):", highlight=False)
        for (name, status, reason), count in grouped.items():
            console.print(escape(f"  {name} [{status} ×{count}]: {reason}"), highlight=False)


# -- show / env ---------------------------------------------------------------------------
@app.command()
def show(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (results/<run_id>).")],
    format: Annotated[str, typer.Option("--format", "-f", help="text or md.")] = "text",
) -> None:
    """Print a run as a table (medians, IQR as ±%, peak memory, status and reasons)."""
    from snnbench.storage import StorageError

    if format not in ("text", "md"):
        fail(f"--format must be text or md, got {format!r}")
    try:
        _print_run(run_dir, format)
    except StorageError as exc:
        fail(str(exc))


@app.command()
def merge(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (results/<run_id>).")],
) -> None:
    """Rebuild a run's tables and host list from its case records.

    For a folder that cluster tasks kept writing into after 'snnbench run' stopped, or that
    was assembled from several machines; 'run' does this by itself as cases finish.
    """
    from snnbench.errors import UserError
    from snnbench.runner import merge_run

    try:
        count = merge_run(run_dir)
    except UserError as exc:
        fail(str(exc))
    console.print(f"merged {count} case records into {run_dir}")


@app.command()
def env(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show the environment a run here would record (machine, GPU, versions)."""
    from snnbench.environment import collect_environment

    data = collect_environment()
    if as_json:
        print(json.dumps(data, indent=2))
        return
    table = Table(title="environment", show_header=False)
    table.add_column("key")
    table.add_column("value", overflow="fold")
    for key, value in data.items():
        if key == "packages":
            for pkg, ver in value.items():
                table.add_row(f"package {pkg}", ver or "not installed")
        elif key == "gpus":
            if not value:
                table.add_row("gpu", "absent (no NVIDIA driver/GPU seen by NVML)")
            for gpu in value:
                table.add_row(f"gpu {gpu['index']}",
                              f"{gpu['name']}, driver {gpu['driver']}, CUDA {gpu['cuda']}, "
                              f"{gpu['memory_bytes'] / 2**30:.1f} GiB")
        else:
            table.add_row(key, json.dumps(value) if isinstance(value, dict) else str(value))
    console.print(table)


# -- verify -------------------------------------------------------------------------------
@app.command()
def verify(
    adapters: Annotated[str, typer.Option(help="Comma list of adapters, or 'all'.")] = "all",
    reset: Annotated[str, typer.Option(help="subtract, zero or both.")] = "both",
    neurons: Annotated[str, typer.Option(help="Comma list of n.")] = "64,256",
    steps: Annotated[int, typer.Option(help="Time steps T.")] = 50,
    batch_size: Annotated[int, typer.Option(help="Batch size B.")] = 4,
    dtype: Annotated[str, typer.Option(help="float32, bfloat16 or float16.")] = "float32",
    device: Annotated[str, typer.Option(help="cpu or cuda.")] = "cpu",
    detach_reset: Annotated[str, typer.Option(
        help="true, false, both, or auto (the spec default where supported, else the "
        "adapter's rule).")] = "auto",
    surrogate: Annotated[str, typer.Option(
        help="fast_sigmoid, atan or sigmoid.")] = "fast_sigmoid",
    surrogate_slope: Annotated[float, typer.Option(help="The surrogate's slope.")] = 25.0,
    dump: Annotated[Path | None, typer.Option(
        help="Write <adapter>-<variant>-<reset>.npz per check (largest n) into this folder.",
    )] = None,
    timeout: Annotated[float, typer.Option(help="Seconds per check.")] = 600.0,
) -> None:
    """Check every adapter's spikes and gradients against the reference (exit 1 on mismatch)."""
    from snnbench.verify_cmd import VerifyRequest, run_verification

    resets = ["subtract", "zero"] if reset == "both" else _split(reset)
    try:
        request = VerifyRequest(
            adapters=tuple(_split(adapters)), resets=tuple(resets),
            neurons=tuple(_ints(neurons, "--neurons")), time_steps=steps,
            batch_size=batch_size, dtype=dtype, device=device, dump_dir=dump,
            detach_reset=detach_reset, surrogate=surrogate, surrogate_slope=surrogate_slope,
            timeout_s=timeout,
        )
        rows = run_verification(request, console=err_console)
    except (ValueError, OSError) as exc:
        fail(str(exc))
    from snnbench.verify_cmd import VERIFY_HEADERS, exit_code, verify_rows

    status_col = VERIFY_HEADERS.index("status")
    checked = [r for r in verify_rows(rows) if r[status_col] not in ("skipped", "unavailable")]
    # columns with one value on every row go to the title, so the table fits 80 columns
    keep = [i for i, h in enumerate(VERIFY_HEADERS[:-1])
            if h in ("adapter", "status", "spikes", "cos dW")
            or len({r[i] for r in checked}) > 1 or (h == "1st diff" and checked
                                                   and checked[0][i] != "none")]
    fixed = [f"{VERIFY_HEADERS[i]}={checked[0][i]}" for i in range(len(VERIFY_HEADERS) - 1)
             if checked and i not in keep and VERIFY_HEADERS[i] not in ("1st diff",)]
    title = (f"equivalence with the reference: T={steps} B={batch_size} {dtype} {surrogate} "
             f"slope {surrogate_slope:g} {device} " + " ".join(fixed))
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                  padding=(0, 1, 0, 0))
    for i in keep:
        table.add_column(VERIFY_HEADERS[i], no_wrap=True)
    table.add_column("#", no_wrap=True)
    notes: list[str] = []
    for row in checked:
        mark = ""
        if row[-1]:
            if row[-1] not in notes:
                notes.append(row[-1])
            mark = str(notes.index(row[-1]) + 1)
        bad = row[status_col] not in ("ok",)
        table.add_row(*(row[i] for i in keep), mark, style="red" if bad else "")
    console.print(table)
    for number, note in enumerate(notes, start=1):
        console.print(f"  {number}. {escape(note)}", highlight=False)
    grouped: dict[tuple[str, str, str], int] = {}
    for row in verify_rows(rows):
        if row[status_col] in ("skipped", "unavailable"):
            name = row[0] if row[1] == "default" else f"{row[0]}:{row[1]}"
            key = (name, row[status_col], row[-1])
            grouped[key] = grouped.get(key, 0) + 1
    if grouped:
        console.print(f"not checked ({sum(grouped.values())} checks):")
        for (name, status, reason), count in grouped.items():
            console.print(escape(f"  {name} [{status} ×{count}]: {reason}"), highlight=False)
    raise typer.Exit(exit_code(rows))


# -- report / compare ---------------------------------------------------------------------
@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run folder.")],
    out: Annotated[Path | None, typer.Option(
        help="Output folder (default RUN_DIR/report).")] = None,
) -> None:
    """Write PNG plots, a self-contained HTML page and a Markdown summary of a run."""
    from snnbench.report import write_report
    from snnbench.rundir import RunDirError

    try:
        paths = write_report(run_dir, out or run_dir / "report")
    except RunDirError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write the report: {exc}")
    for path in paths:
        console.print(str(path))


@app.command()
def compare(
    baseline: Annotated[Path, typer.Argument(help="Baseline run folder.")],
    candidate: Annotated[Path, typer.Argument(help="Candidate run folder.")],
    factor: Annotated[float, typer.Option(
        help="Median time ratio that counts as a change.")] = 1.10,
    mem_threshold: Annotated[float, typer.Option(
        help="Relative peak-memory growth that counts.")] = 0.05,
    alpha: Annotated[float, typer.Option(
        help="Significance level of the Mann–Whitney U test.")] = 0.01,
    format: Annotated[str, typer.Option("--format", "-f", help="text, md or json.")] = "text",
) -> None:
    """Compare two runs: exit 1 on a significant regression, 2 if nothing is comparable.

    A time change counts only when the median ratio passes --factor AND the samples differ
    significantly (Mann–Whitney U, or non-overlapping 99 % CIs of the median); past the factor
    but not significant is shown as noise. ok → error/oom/timeout/lost/mismatch is a regression.
    """
    from snnbench.compare import compare_runs, render
    from snnbench.rundir import RunDirError

    if format not in ("text", "md", "json"):
        fail(f"--format must be text, md or json, got {format!r}")
    if factor <= 1.0:
        fail(f"--factor must be > 1, got {factor}")
    if mem_threshold < 0:
        fail(f"--mem-threshold must be ≥ 0, got {mem_threshold}")
    if not 0 < alpha < 1:
        fail(f"--alpha must be between 0 and 1, got {alpha}")
    try:
        result = compare_runs(baseline, candidate, factor=factor, mem_threshold=mem_threshold,
                              alpha=alpha)
    except (RunDirError, ValueError) as exc:
        fail(str(exc))
    render(result, format, console)
    raise typer.Exit(result.exit_code)


def main() -> None:
    """Console-script entry point."""
    app()

"""The ``snnbench`` command line: parse, call the library, map outcomes to exit codes.

Exit codes: 0 every case ok, unavailable or skipped (compare: pass); 1 a case failed (error, oom,
timeout, lost, mismatch) or a regression was found (compare: fail); 2 usage or input errors (one
line on stderr, nothing already written is touched); 3 compare was inconclusive.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text
from typer.core import TyperGroup

try:  # typer ≥ 0.22 vendors click; the exception classes are its own
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - an older typer uses the click package
    from click.exceptions import UsageError  # type: ignore[no-redef,assignment]

from snnbench import __version__
from snnbench.config import RunConfig, check_variables, load_config
from snnbench.errors import UserError
from snnbench.neuron import RESET_MODES
from snnbench.registry import discover
from snnbench.verify_request import DETACH_CHOICES, DEVICES as VERIFY_DEVICES, VerifyRequest

console = Console()
err_console = Console(stderr=True)
#: ``verify``'s option defaults are the request's own
_VERIFY = VerifyRequest()


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one clear line on stderr and exit with ``code``."""
    line = " ".join(str(message).split())  # one line, whatever the message holds
    err_console.print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


#: ``--color``'s values
COLOR_MODES = ("auto", "always", "never")


def _set_color(mode: str) -> None:
    """Point the command's consoles at ``--color``: ``auto`` colours a terminal and leaves
    colour out when ``NO_COLOR`` is set (rich's rule), ``always`` colours a pipe too,
    ``never`` prints no escape code at all."""
    global console, err_console
    if mode not in COLOR_MODES:
        fail(f"--color must be {', '.join(COLOR_MODES)}, got {mode!r}")
    modes: dict[str, dict[str, Any]] = {
        "auto": {}, "always": {"force_terminal": True, "no_color": False},
        "never": {"no_color": True, "color_system": None}}
    options = modes[mode]
    console = Console(**options)
    err_console = Console(stderr=True, **options)


class _Commands(TyperGroup):
    """Every command runs under one rule: bad input is one line on stderr and exit 2.

    That is a :class:`UserError` from the library, or a usage error typer finds while parsing
    a command's flags (a text where a number goes, an unknown flag, a missing argument), which
    typer would otherwise draw as a boxed panel under the usage. Nothing else is caught:
    anything else is a bug and keeps its traceback, and typer's own Exit passes through.
    """

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except UserError as exc:
            fail(str(exc))
        except UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "snnbench"
            fail(f"{exc.format_message()} (see '{where} --help')")
        except OSError as exc:
            # a path that cannot be used (a name over 255 bytes, a folder without access) or
            # an output that cannot take more (stdout on a full disk, a closed pipe): the
            # user's to fix, so one line and exit 2, never 1 (compare's "regression")
            fail(os_error_line(exc))


def os_error_line(exc: OSError) -> str:
    """One line for an OSError that reached the command line: the path and why it cannot be
    used, or, for one without a path, that the output could not be written. Standard output
    is then pointed at /dev/null, so the interpreter's last flush cannot fail again."""
    from snnbench.storage import os_reason

    if exc.filename is not None:
        where = str(exc.filename)
        if exc.filename2 is not None:
            where += f" → {exc.filename2}"
        return f"cannot use {where}: {os_reason(exc)}"
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return f"cannot write the output: {os_reason(exc)}"


app = typer.Typer(
    name="snnbench",
    cls=_Commands,
    help="Honest, reproducible benchmarks of spiking neural network training libraries.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXEC_PANEL = "Executors (where cases run)"
OUTPUT_PANEL = "Output (what is printed and exported)"

def _builtin_configs() -> tuple[str, ...]:
    """Names of the configs shipped as package data (``configs/*.toml``)."""
    from importlib.resources import files

    names = [p.name.removesuffix(".toml") for p in files("snnbench.configs").iterdir()
             if p.name.endswith(".toml")]
    return tuple(sorted(names, key=lambda name: (name != "default", name)))


BUILTIN_CONFIGS = _builtin_configs()


def _finite(value: float, flag: str, *, low: float, inclusive: bool = False) -> None:
    """Refuse NaN, infinities and values below ``low`` for a float flag, in one line."""
    ok = math.isfinite(value) and (value >= low if inclusive else value > low)
    if not ok:
        bound = f"≥ {low:g}" if inclusive else f"> {low:g}"
        fail(f"{flag} must be a finite number {bound}, got {value}")


def _choice(flag: str, given: str, values: list[str], allowed: tuple[str, ...]) -> None:
    """Refuse a flag whose (comma-split) ``values`` are not all in ``allowed``."""
    if not values or any(v not in allowed for v in values):
        fail(f"{flag} must be {', '.join(allowed)}, got {given!r}")


def config_path(name_or_path: str) -> Path:
    """A config file path. A shipped config's bare name (``default``) always means the shipped
    one, even when the current folder holds a file of that name: what a command does must not
    depend on where it runs. Such a file is named as a path (``./default``)."""
    if name_or_path in BUILTIN_CONFIGS:
        from importlib.resources import files

        return Path(str(files("snnbench.configs").joinpath(f"{name_or_path}.toml")))
    return Path(name_or_path)


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
def _probe(name: str, timeout_s: float, python: str = "") -> tuple[dict[str, Any], bool]:
    """The probe's answer for adapter ``name``, and whether the probe gave it (True) or it
    hung or crashed (False: a passing failure, never cached)."""
    from snnbench.probe import MARKER
    from snnbench.processes import run_captured

    try:
        proc = run_captured([python or sys.executable, "-P", "-m", "snnbench.probe", name],
                            timeout_s)
    except subprocess.TimeoutExpired:
        return {"name": name, "available": False,
                "reason": f"import hung > {timeout_s:g} s"}, False
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARKER):
            result: dict[str, Any] = json.loads(line[len(MARKER):])
            return result, True
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"name": name, "available": False,
            "reason": f"probe crashed (exit {proc.returncode}): {tail}"}, False


class _ProbeProgress:
    """``list``'s progress while probes run (none when every answer is cached): a transient
    bar on a terminal, else one line per finished probe; on stderr either way."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.finished = 0
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> _ProbeProgress:
        what = (f"probing {self.total} adapter{'s' if self.total != 1 else ''}, each library "
                "in its own process (kept for the next list)")
        if err_console.is_terminal:
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(),
                                 console=err_console, transient=True)
            self._bar.start()
            self._task = self._bar.add_task(what, total=self.total)
        else:
            err_console.print(f"{what}…", highlight=False, soft_wrap=True)
        return self

    def done(self, label: str, result: dict[str, Any], seconds: float) -> None:
        """One probe finished: its adapter, what it found, how long it took."""
        self.finished += 1
        found = (str(result.get("version") or "available") if result.get("available")
                 else "unavailable")
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, advance=1)
        else:
            err_console.print(f"  [{self.finished}/{self.total}] {escape(label)}: "
                              f"{escape(found)} ({seconds:.1f} s)", highlight=False,
                              soft_wrap=True)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


@app.command("list")
def list_adapters(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    timeout: Annotated[float, typer.Option(
        help="Seconds allowed per library import (and per plugin module import).")] = 180.0,
    adapters: Annotated[str, typer.Option(
        help="Comma list of adapters, or 'all'; name@VERSION probes that library version in "
        "its own environment (built or reused first).")] = "all",
    wheelhouse: Annotated[str, typer.Option(
        help="Folder of wheels to build library environments from, offline.")] = "",
    refresh: Annotated[bool, typer.Option(
        "--refresh", help="Probe every adapter again, ignoring the answers kept from earlier "
        "lists (they are replaced).")] = False,
) -> None:
    """List adapters: variants, library version, or why each is unavailable.

    Each library is imported in its own short-lived process, never in this one; a
    third-party plugin's own module is imported here under --timeout (one that hangs or fails
    at import is listed as unavailable, with the reason).

    A probe's answer is kept (in $SNNBENCH_CACHE_DIR, else ~/.cache/snnbench) and reused
    until a version it depends on changes: the installed versions of the adapter's library,
    framework and their requirements, snnbench's and the adapter's code, the interpreter, the
    machine's GPUs. A changed adapter alone is probed again; --refresh probes every one.
    """
    from snnbench.contract import environment_tag
    from snnbench.libenv import BuildSettings
    from snnbench.planning.selection import select_adapters
    from snnbench.planning.tasks import build_requests

    _finite(timeout, "--timeout", low=0)
    # a third-party plugin's module is imported here under the same limit as a library
    entries = discover(timeout_s=timeout)
    try:
        selections = list(dict.fromkeys(
            (s.adapter, s.environment) for s in select_adapters(tuple(_split(adapters)), entries)))
        built = build_requests([env for _, env in selections if env is not None],
                               BuildSettings.from_run(wheelhouse=wheelhouse),
                               lambda line: err_console.print(escape(line), highlight=False))
    except UserError as exc:
        fail(str(exc))

    from snnbench.probe_cache import ProbeCache

    cache = ProbeCache(refresh=refresh)

    def label(item: tuple[str, Any]) -> str:
        name, env = item
        return f"{name}@{environment_tag(name, env.name)}" if env else name

    def known(item: tuple[str, Any]) -> dict[str, Any] | None:
        """The answer without a probe (a plugin that did not load, an environment that was
        not built, a cached answer), or None."""
        name, env = item
        if entries[name].adapter_class is None:
            return {"available": False, "reason": entries[name].error,
                    "variants": [], "library": "", "version": None}
        if env is not None and built[env.name].error:
            return {"available": False, "variants": [], "library": "", "version": None,
                    "reason": f"environment could not be built: {built[env.name].error}"}
        return cache.get(entries[name], built[env.name].python if env else "")

    def probe(item: tuple[str, Any]) -> tuple[dict[str, Any], float]:
        name, env = item
        python = built[env.name].python if env else ""
        start = time.monotonic()
        result, answered = _probe(name, timeout, python)
        if answered:
            cache.put(entries[name], python, result)
        return result, time.monotonic() - start

    # side by side: a third-party plugin's module is imported here, each under --timeout
    with ThreadPoolExecutor(max_workers=4) as pool:
        found = list(pool.map(known, selections))
    answers = {index: answer for index, answer in enumerate(found) if answer is not None}
    todo = [index for index, answer in enumerate(found) if answer is None]
    if todo:
        with _ProbeProgress(len(todo)) as progress, ThreadPoolExecutor(max_workers=4) as pool:
            running = {pool.submit(probe, selections[index]): index for index in todo}
            for future in as_completed(running):
                index = running[future]
                answers[index], seconds = future.result()
                progress.done(label(selections[index]), answers[index], seconds)
    results = [{**answers[index], "name": label(item),
                "environment": item[1].name if item[1] else ""}
               for index, item in enumerate(selections)]
    if as_json:
        console.print_json(json.dumps(results))
        return
    from snnbench.render.terminal import Look, print_table
    from snnbench.views import adapters_table

    print_table(console, adapters_table(results, __version__), Look(fold=True))


# -- run ----------------------------------------------------------------------------------
def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _names(text: str, what: str) -> list[str]:
    """The items of a comma list of names (``--dtype float32,bfloat16``), refusing an empty
    list or an empty item before anything is made: ``--dtype ''`` would sweep nothing."""
    parts = [part.strip() for part in text.split(",")]
    if not any(parts):
        fail(f"{what} must name at least one value, got {text!r}")
    if not all(parts):
        # "float32,,bfloat16" is a typo (a value left out), not the list of two
        fail(f"{what} has an empty item: {text!r}")
    return parts


def _ints(text: str, what: str) -> list[int]:
    parts = [part.strip() for part in text.split(",")]
    if len(parts) > 1 and not all(parts):
        # "1,,2" is a typo (a value left out), not the list [1, 2]
        fail(f"{what} has an empty item: {text!r}")
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
        + ", ".join(BUILTIN_CONFIGS) + " (default: default); a shipped name always means "
        "the shipped config, a file of that name here is ./NAME.")] = None,
    adapters: Annotated[str | None, typer.Option(
        help="Comma list of adapters (name, name:variant, name@VERSION for that library "
        "version in its own environment, name@ENV for a config's \\[environments.ENV]), or "
        "'all'.")] = None,
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
    from snnbench.contract import CaseRecord, Job, adapter_label
    from snnbench.executors import ExecutorSettings
    from snnbench.lifeline import terminate_as_interrupt, termination_signal
    from snnbench.sweep.run import start_run
    from snnbench.views import case_line

    _set_color(color)
    if quiet and verbose:
        fail("--quiet and --verbose contradict each other: give one")
    exports = {"json": export_json, "md": export_markdown}
    _refuse_exports(exports)
    run_overrides: dict[str, Any] = {}
    network_overrides: dict[str, list[Any]] = {}
    if adapters is not None:
        run_overrides["adapters"] = tuple(_names(adapters, "--adapters"))
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
    if neurons is not None:
        network_overrides["neurons"] = list(_ints(neurons, "--neurons"))
    for key, ivalue in (("batch_size", batch_size), ("time_steps", steps), ("layers", layers)):
        if ivalue is not None:
            network_overrides[key] = [ivalue]
    if dtype is not None:
        network_overrides["dtype"] = _names(dtype, "--dtype")
    if precision is not None:
        network_overrides["matmul_precision"] = _names(precision, "--precision")
    if reset is not None:
        network_overrides["reset"] = (["subtract", "zero"] if reset == "both"
                                      else _names(reset, "--reset"))
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
        exec_overrides["gpus"] = tuple(_names(gpus, "--gpus"))
    if setup:
        exec_overrides["slurm.setup"] = tuple(setup)
    cfg = RunConfig() if resume else build_config(config, run_overrides, network_overrides)
    executor_settings = None
    if exec_overrides or not resume:
        base = cfg.executor
        if resume:
            # executor options alone (--timeout-min 10) change the executor the run used;
            # --executor starts from that executor's defaults
            base = ExecutorSettings() if "name" in exec_overrides else _recorded_executor(out)
            if "name" not in exec_overrides and not trust_folder:
                _refuse_recorded_commands(base, exec_overrides, out)
        executor_settings = base.with_overrides(exec_overrides)
        _refuse_foreign_options(executor_settings, exec_overrides)

    # the bar starts with the first case: an error before it (a bad selection, an --out that
    # is not empty) stays one line on stderr
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                        TimeRemainingColumn(), console=err_console, transient=False)
    bars: list[TaskID] = []

    def on_progress(event: str, index: int, total: int, task: Job,
                    record: CaseRecord | None) -> None:
        name = adapter_label(task.adapter, task.variant, task.environment.name)
        if event == "decided":
            # a case skipped without running (its adapter cannot honour it): no progress, so
            # the ETA counts only cases that run; counted at the end, listed with --verbose
            if verbose and record is not None:
                line, tint = case_line(name, task.spec.label, record, verbose)
                err_console.print(Padding(Text(line, style=tint), (0, 0, 0, 2), expand=False))
            return
        if quiet:
            return
        if not bars:
            progress.start()
            bars.append(progress.add_task("starting", total=total))
        label = f"case {index}/{total} {name} n={task.spec.neurons}"
        if event == "start":
            progress.update(bars[0], total=total, description=label)
        else:
            assert record is not None
            progress.advance(bars[0])
            line, tint = case_line(name, task.spec.label, record, verbose)
            # indented as a whole: a line wrapped at 80 columns stays under its start
            progress.console.print(Padding(Text(line, style=tint), (0, 0, 0, 2), expand=False))

    def on_environment(line: str) -> None:
        from snnbench.render.terminal import print_labelled

        where = progress.console if bars else err_console
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
            err_console.print(f"{what} before the run started: nothing was written",
                              highlight=False, soft_wrap=True)
        else:
            err_console.print(
                f"{what}: finished cases are kept, running workers were stopped; finish with "
                f"'snnbench run --resume --out {folder}'",
                highlight=False, soft_wrap=True,
            )
        raise typer.Exit(code) from None
    finally:
        if bars:  # a Progress never started would still print an empty line when stopped
            progress.stop()
    _print_run(outcome.run_dir, "text", verbose=verbose,
               skipped_hint=f"'snnbench show {outcome.run_dir} --skipped'")
    _export(outcome.run_dir, exports)
    from snnbench.render.terminal import print_labelled

    for reason in outcome.noise.reasons:
        print_labelled(err_console, "noisy run:", reason, "yellow")
    console.print(f"results: {outcome.run_dir}")
    if outcome.skipped_existing:
        console.print(f"({outcome.skipped_existing} cases were already done and kept)")
    raise typer.Exit(1 if outcome.failed else 0)


def _refuse_foreign_options(settings: Any, given: dict[str, Any]) -> None:
    """Refuse executor flags that the chosen executor would ignore (``--partition`` on a local
    run, ``--bind-cpus`` without ``--gpus``): a silently ignored option is a wrong run."""
    flags = {"slurm.": "slurm", "ray.": "ray"}
    for key in given:
        owner = next((name for prefix, name in flags.items() if key.startswith(prefix)), None)
        if owner is not None and settings.name != owner:
            flag = "--" + key.split(".", 1)[1].replace("_", "-")
            flag = {"--cluster": "--slurm-cluster", "--address": "--ray-address"}.get(flag, flag)
            fail(f"{flag} is an option of the {owner} executor, not of {settings.name!r} "
                 f"(add --executor {owner}, or leave it out)")
    if "bind_cpus" in given and given["bind_cpus"] and (settings.name != "local"
                                                        or not settings.gpus):
        fail("--bind-cpus pins cases to the CPUs nearest their GPU: it needs the local "
             "executor with --gpus")
    image = settings.slurm.image if settings.name == "slurm" else ""
    if image and not Path(image).is_file():
        # up front, on either submitit cluster: else each array task fails in apptainer and
        # its row says only "the array task failed"
        why = "is a folder, not an image" if Path(image).is_dir() else "no such Apptainer image"
        fail(f"--image {image}: {why}")


#: the executor options that name text or code to run (runner.recorded_commands), as flags
_COMMAND_OPTIONS = {"slurm.setup": (), "slurm.image": "", "slurm.container_args": (),
                    "ray.address": ""}


def _refuse_recorded_commands(recorded: Any, given: dict[str, Any], out: Path | None) -> None:
    """A resume that keeps the recorded executor (``--resume --timeout-min 30``) must not run
    the setup, image or address the received manifest names, unless given again."""
    from snnbench.executors.plugins import recorded_commands

    # what the user gives again is theirs; what only the manifest names is not
    stripped = recorded.with_overrides({k: v for k, v in _COMMAND_OPTIONS.items() if k in given})
    found = recorded_commands(stripped)
    if found:
        fail(f"{Path(out or '.')}/manifest.json asks to run {', '.join(found)} with the "
             f"{recorded.name} executor; a received folder runs no code: give the executor "
             "options again (e.g. --executor local), or --trust-folder if you wrote this folder")


def _recorded_executor(out: Path | None) -> Any:
    """The ``[executor]`` a run folder's manifest records; the default one when it cannot be
    read (resuming reports a missing or damaged manifest by itself)."""
    from snnbench.executors import ExecutorSettings
    from snnbench.fileio import parse_json, read_regular

    try:
        # never blocking: a FIFO there is a damaged folder, which resuming reports
        manifest = parse_json(read_regular(Path(out or ".") / "manifest.json").decode("utf-8"))
        return ExecutorSettings.from_dict(manifest["config"].get("executor"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UserError):
        return ExecutorSettings()


def _run_views(run_dir: Path, fmt: str, *, verbose: bool = False,
               skipped_hint: str = "", page: bool = False) -> Any:
    """A run folder as ``fmt``: the typed JSON document (a dict), a Markdown or HTML table (a
    string; ``page``: Markdown with a heading and who is fastest above the table, as
    ``--export-markdown`` writes), or the terminal's document (``text``)."""
    from snnbench.ranking import rank_run
    from snnbench.render import Table, render
    from snnbench.rundir import load_run
    from snnbench.tables import HEADERS, case_rows, typed_rows
    from snnbench.views import answer_lines, run_document, show_json

    # the reader of report and compare, with their rules: a manifest of this schema, a
    # complete summary, no live run writing into it
    run = load_run(run_dir, samples=False)
    if fmt != "html":
        # the raw samples give the speed-ups their intervals; without them (a folder that
        # kept none, or damaged ones) the ratios are shown alone: what show reads is what
        # report reads
        with contextlib.suppress(UserError, OSError, ValueError):
            run = replace(run, samples=load_run(run_dir).samples)
    if fmt in ("md", "html"):
        table = render(Table(list(HEADERS), [list(r) for r in case_rows(run.summary)]), fmt)
        if fmt == "html" or not page:
            return table
        lines = answer_lines(rank_run(run))
        answer = "".join([f"{lines[0]}\n\n", *(f"- {line.strip()}\n" for line in lines[1:]),
                          "\n"]) if lines else ""
        return f"# snnbench run {run.run_id}\n\n{answer}{table}\n"
    rankings = rank_run(run)
    records = typed_rows(run.summary)
    if fmt == "json":
        return show_json(run.run_id, records, rankings)
    return run_document(run_dir.name, records, rankings, verbose=verbose,
                        skipped_hint=skipped_hint)


def _print_run(run_dir: Path, fmt: str, *, verbose: bool = False,
               skipped_hint: str = "") -> None:
    from snnbench.render.terminal import Look, print_document

    view = _run_views(run_dir, fmt, verbose=verbose, skipped_hint=skipped_hint)
    if fmt == "json":
        print(json.dumps(view, indent=2, ensure_ascii=False, allow_nan=False))
    elif fmt != "text":
        print(view.rstrip("\n"))
    else:
        print_document(console, view, Look(compact=True, whole_first=True, title_left=True,
                                           collapse_padding=True))


#: ``run``'s export flags, by the format each writes
_EXPORT_FLAGS = {"json": "--export-json", "md": "--export-markdown"}


def _refuse_exports(exports: dict[str, Path | None]) -> None:
    """Refuse, before anything runs, an export path that exists (nothing is overwritten) or
    whose folder does not."""
    for fmt, path in exports.items():
        if path is None:
            continue
        flag = _EXPORT_FLAGS[fmt]
        if path.exists() or path.is_symlink():
            fail(f"{flag} {path} exists; an export never overwrites a file: give a new path")
        if not path.parent.is_dir():
            fail(f"{flag} {path}: the folder {path.parent} does not exist")


def _export(run_dir: Path, exports: dict[str, Path | None]) -> None:
    """Write ``run``'s ``--export-json`` / ``--export-markdown`` files, each created
    exclusively: a file that appeared while the run ran is not overwritten either."""
    from snnbench.storage import os_reason

    for fmt, path in exports.items():
        if path is None:
            continue
        view = _run_views(run_dir, fmt, page=True)
        text = (json.dumps(view, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
                if fmt == "json" else view)
        try:
            with path.open("x", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            fail(f"{_EXPORT_FLAGS[fmt]} {path}: {os_reason(exc)} (the run is kept in "
                 f"{run_dir})")
        console.print(f"exported {path}", highlight=False)


# -- show / env ---------------------------------------------------------------------------
@app.command()
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
    _set_color(color)
    if format not in ("text", "md", "html", "json"):
        fail(f"--format must be text, md, html or json, got {format!r}")
    hint = "" if skipped else f"'snnbench show {run_dir} --skipped'"
    _print_run(run_dir, format, verbose=verbose, skipped_hint=hint)


@app.command()
def merge(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (results/<run_id>).")],
) -> None:
    """Rebuild a run's tables and host list from its case records.

    For a folder that cluster tasks kept writing into after 'snnbench run' stopped, or that
    was assembled from several machines; 'run' does this by itself when it ends.
    """
    from snnbench.sweep.run import merge_run

    count = merge_run(run_dir)
    console.print(f"merged {count} case records into {run_dir}")


@app.command()
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
    from snnbench.environment import collect_environment

    if check:
        from snnbench.config import RunSettings
        from snnbench.preflight import check_machine

        _choice("--device", device, [device], ("cpu", "cuda"))
        result = check_machine(RunSettings(threads=threads).resolved_threads, jobs, device)
        if as_json:
            print(json.dumps(result.to_dict(), indent=2))
        else:
            colors = {"ok": "green", "notice": "yellow", "warning": "red"}
            for finding in result.findings:
                console.print(f"[{colors[finding.level]}]{finding.level:7}[/] "
                              f"{finding.check:13} {escape(finding.message)}", highlight=False)
        raise typer.Exit(1 if result.noisy else 0)
    data = collect_environment()
    if as_json:
        print(json.dumps(data, indent=2))
        return
    from snnbench.render.terminal import Look, print_table
    from snnbench.views import environment_facts_table

    print_table(console, environment_facts_table(data), Look(fold=True))


# -- verify -------------------------------------------------------------------------------
@app.command()
def verify(
    ctx: typer.Context,
    adapters: Annotated[str, typer.Option(
        help="Comma list of adapters (name, name:variant, name@VERSION for that library version "
        "in its own environment), or 'all'.")] = ",".join(_VERIFY.adapters),
    config: Annotated[str | None, typer.Option(
        "--config", "-c", help="Check the networks this sweep (a TOML file, or a shipped one "
        "by name) runs, as 'run' checks each before timing: its adapters, environments and "
        "cases, T cut to its verify_time_steps; the options given with it override its "
        "values.")] = None,
    reset: Annotated[str, typer.Option(help="subtract, zero or both.")] = "both",
    neurons: Annotated[str, typer.Option(help="Comma list of n.")] = ",".join(
        str(n) for n in _VERIFY.neurons),
    steps: Annotated[int, typer.Option(help="Time steps T.")] = _VERIFY.time_steps,
    batch_size: Annotated[int, typer.Option(help="Batch size B.")] = _VERIFY.batch_size,
    dtype: Annotated[str, typer.Option(help="float32, bfloat16 or float16.")] = _VERIFY.dtype,
    precision: Annotated[str, typer.Option(
        help="Matmul precision: strict, tf32, amp-bf16 or amp-fp16 (automatic mixed "
        "precision, checked against the reference's autocast emulation).")
    ] = _VERIFY.matmul_precision,
    device: Annotated[str, typer.Option(help="cpu or cuda.")] = _VERIFY.device,
    detach_reset: Annotated[str, typer.Option(
        help="true, false, both, or auto (the spec default where supported, else the "
        "adapter's rule).")] = _VERIFY.detach_reset,
    surrogate: Annotated[str, typer.Option(
        help="fast_sigmoid, atan or sigmoid.")] = _VERIFY.surrogate,
    surrogate_slope: Annotated[float, typer.Option(
        help="The surrogate's slope.")] = _VERIFY.surrogate_slope,
    layers: Annotated[int, typer.Option(
        help="Linear+LIF layers (layer l+1 takes layer l's spikes).")] = _VERIFY.layers,
    bias: Annotated[bool, typer.Option("--bias/--no-bias", help="Linear layers with a bias.")
                    ] = _VERIFY.bias,
    input_kind: Annotated[str, typer.Option(
        help="gaussian (current) or bernoulli (spikes).")] = _VERIFY.input_kind,
    dump: Annotated[Path | None, typer.Option(
        help="Write <adapter>-<variant>-<reset>.npz per check (largest n) into this folder "
        "(new, empty, or holding earlier dumps only).",
    )] = None,
    timeout: Annotated[float, typer.Option(help="Seconds per check.")] = _VERIFY.timeout_s,
    wheelhouse: Annotated[str, typer.Option(
        help="Folder of wheels: build library environments (adapter@VERSION) from it alone, "
        "offline.")] = _VERIFY.wheelhouse,
) -> None:
    """Check every adapter's spikes and gradients against the reference.

    The defaults check the spec's own network (reset subtract and zero, reset detached,
    fast_sigmoid slope 25, T=50, B=4), not the one a plain 'snnbench run' times (the default
    config: reset zero, not detached, sigmoid slope 4, B=16); '--config default' checks
    exactly those.

    --adapters spikingjelly@0.0.0.0.14 checks that library version in its own environment.
    Exit 0 when every check that ran matched, 1 on a mismatch or a broken check, 2 when
    nothing could be checked at all (every check skipped or unavailable): no evidence is not
    a pass.
    """
    from snnbench.storage import claim_folder, written_by_snnbench
    from snnbench.verify_cmd import run_verification

    resets = list(RESET_MODES) if reset == "both" else _names(reset, "--reset")
    _choice("--reset", reset, resets, (*RESET_MODES, "both"))
    _choice("--device", device, [device], VERIFY_DEVICES)
    _choice("--detach-reset", detach_reset, [detach_reset], tuple(DETACH_CHOICES))
    request = VerifyRequest(
        adapters=tuple(_names(adapters, "--adapters")), resets=tuple(resets),
        neurons=tuple(_ints(neurons, "--neurons")), time_steps=steps,
        batch_size=batch_size, dtype=dtype, matmul_precision=precision, device=device,
        dump_dir=dump,
        detach_reset=detach_reset, surrogate=surrogate, surrogate_slope=surrogate_slope,
        timeout_s=timeout, wheelhouse=wheelhouse, layers=layers, bias=bias,
        input_kind=input_kind,
    )
    # the same validation a run applies, before any folder is made or process started
    network = request.network()
    RunConfig(network=network).with_overrides({"timeout_s": timeout},
                                              {"neurons": request.neurons})
    if config is not None:
        request = replace(request, config=_verify_config(ctx, config, request, network))
    check_variables()
    if dump is not None:
        # earlier dumps (in the folder's ledger, unchanged) may be refreshed; anything else in
        # the folder, a user's own .npz included, is never overwritten
        claim_folder(dump, "--dump", written_by_snnbench)
    from snnbench.lifeline import terminate_as_interrupt, termination_signal

    try:
        # SIGTERM unwinds like Ctrl-C: the running worker is killed, the scratch folder goes
        with terminate_as_interrupt():
            rows = run_verification(
                request, console=err_console,
                notify=lambda line: err_console.print(escape(line), highlight=False))
    except KeyboardInterrupt as exc:
        signum = termination_signal(exc)
        what = f"stopped by {signal.Signals(signum).name}" if signum else "interrupted"
        err_console.print(f"verify {what}: no verdict; its scratch folder was removed",
                          highlight=False, soft_wrap=True)
        raise typer.Exit(128 + signum if signum else 130) from None
    from snnbench.render.terminal import Look, print_document
    from snnbench.verify_cmd import exit_code
    from snnbench.views import VERIFY_HEADERS, verify_document, verify_rows

    status_col = VERIFY_HEADERS.index("status")
    doc, checked = verify_document(verify_rows(rows), precision)
    print_document(console, doc, Look(compact=True, no_wrap=True, collapse_padding=True,
                                      tight=True))
    if not checked:
        fail(f"nothing was verified: {len(rows)} of {len(rows)} checks skipped or unavailable "
             "(reasons above); no evidence is not a pass")
    code = exit_code(rows)
    passed = sum(1 for r in checked if r[status_col] == "ok")
    console.print(f"{'OK' if code == 0 else 'FAILED'}: {passed} of {len(checked)} checks "
                  f"matched the reference" + (f"; {len(rows) - len(checked)} not checked"
                                              if len(rows) > len(checked) else ""),
                  highlight=False)
    raise typer.Exit(code)


def _verify_config(ctx: typer.Context, name: str, request: Any,
                   network: dict[str, Any]) -> RunConfig:
    """The sweep ``verify --config`` checks: the config, with the options given on the command
    line (not their defaults) overriding its values as they would on ``run``."""
    def given(option: str) -> bool:
        source = ctx.get_parameter_source(option)
        return source is not None and source.name != "DEFAULT"

    run_overrides: dict[str, Any] = {}
    for option, key, value in (("adapters", "adapters", request.adapters),
                               ("device", "device", request.device),
                               ("timeout", "timeout_s", request.timeout_s),
                               ("wheelhouse", "wheelhouse", request.wheelhouse)):
        if given(option):
            run_overrides[key] = value
    overrides = {key: [value] for key, value in network.items()
                 if given({"time_steps": "steps"}.get(key, key))}
    if given("neurons"):
        overrides["neurons"] = list(request.neurons)
    if given("reset"):
        overrides["reset"] = list(request.resets)
    if given("detach_reset") and request.detach_reset != "auto":  # auto: the config's own
        overrides["detach_reset"] = list(DETACH_CHOICES[request.detach_reset])
    return build_config(name, run_overrides, overrides)


# -- report / compare ---------------------------------------------------------------------
@app.command()
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
    from snnbench.report import report as write_report

    folder = out or run_dir / "report"
    try:
        # the default folder is the library's to check
        paths = write_report(run_dir, out, targets=targets)
    except OSError as exc:  # a full disk, a read-only folder: the user's to fix
        where = exc.filename or folder
        fail(f"cannot write the report to {where}: {exc.strerror or exc}")
    for path in paths:
        console.print(str(path))


@app.command()
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
    from snnbench.compare import compare as compare_runs
    from snnbench.compare_output import render

    if format not in ("text", "md", "json"):
        fail(f"--format must be text, md or json, got {format!r}")
    _finite(factor, "--factor", low=1.0)
    _finite(count_factor, "--count-factor", low=1.0)
    _finite(mem_threshold, "--mem-threshold", low=0.0, inclusive=True)
    if not 0 < alpha < 1:
        fail(f"--alpha must be between 0 and 1, got {alpha}")
    if time_floor_ms is not None:
        _finite(time_floor_ms, "--time-floor-ms", low=0.0, inclusive=True)
    if process_spread is not None:
        _finite(process_spread, "--process-spread", low=0.0, inclusive=True)
    if mem_floor_mib is not None:
        _finite(mem_floor_mib, "--mem-floor-mib", low=0.0, inclusive=True)
        # in bytes it must stay a number too (1e308 MiB is not): said with the flag's name,
        # never the library's parameter
        if not math.isfinite(mem_floor_mib * 2**20):
            fail(f"--mem-floor-mib is too large to be a number of bytes: {mem_floor_mib:g}")
    environments: tuple[str, str] | None = None
    if envs is not None:
        names = _split(envs)
        if len(names) != 2:
            fail(f"--envs takes two environments, BASELINE_ENV,CANDIDATE_ENV; got {envs!r}")
        environments = (names[0], names[1])
    elif candidate is None:
        fail("give a candidate run folder, or --envs to compare two environments of one run")
    gated: tuple[str, ...] | None = None
    if metric is not None:
        from snnbench.compare import CompareError, check_gated_metrics

        try:
            gated = check_gated_metrics(tuple(_split(metric)))
        except CompareError as exc:
            fail(str(exc))
    result = compare_runs(
        baseline, candidate or baseline, factor=factor, mem_threshold=mem_threshold,
        alpha=alpha, environments=environments, seed=seed, count_factor=count_factor,
        gated_metrics=gated, process_spread=process_spread,
        time_floor_s=None if time_floor_ms is None else time_floor_ms / 1e3,
        mem_floor_bytes=None if mem_floor_mib is None else mem_floor_mib * 2**20,
    )
    render(result, format, console)
    raise typer.Exit(result.exit_code)


@app.command()
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
    from snnbench.history import X_AXES, collect, write_site

    if x not in X_AXES:
        fail(f"--x must be {', '.join(X_AXES)}, got {x!r}")
    found = collect(runs, machine=machine, per_machine=per_machine)
    try:
        paths = write_site(found, out, x=x, per_machine=per_machine)  # type: ignore[arg-type]
    except OSError as exc:  # a full disk, a read-only folder: the user's to fix
        fail(f"cannot write the site to {exc.filename or out}: {exc.strerror or exc}")
    console.print(f"{len(found.runs)} runs, {len(found.series)} series → {paths[0]}")


def _rewrapped(text: str) -> str:
    """``text`` with each paragraph on one line: typer's rich help keeps a docstring's single
    line breaks, which at 80 columns cut every source line in two; paragraphs (blank-line
    separated, as the example command lines are) stay apart and rewrap to the terminal."""
    return "\n\n".join(" ".join(part.split())
                        for part in inspect.cleandoc(text).split("\n\n"))


for _info in app.registered_commands:
    if _info.callback is not None and _info.help is None and _info.callback.__doc__:
        _info.help = _rewrapped(_info.callback.__doc__)


def _hide_flag_types() -> None:
    """A flag takes no value: typer ≥ 0.22 still draws a type beside it (``--version
    <bool>``, ``--resume --no-resume <bool>``), which reads as if it wanted one. Flags get
    no type column; options that take a value keep theirs."""
    try:
        from typer.core import TyperOption
    except ImportError:  # pragma: no cover - an older typer draws no type for flags
        return
    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "_snnbench", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        return None if getattr(self, "is_flag", False) else shown(self, ctx)

    display_type_rich._snnbench = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_hide_flag_types()


def main() -> None:
    """Console-script entry point."""
    app()

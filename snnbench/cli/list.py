"""``snnbench list``: every adapter, its variants and library version, or why it is
unavailable; each library probed in a process of its own, its answer kept for the next list."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import Progress, TaskID

from snnbench import __version__
from snnbench.cli import output
from snnbench.cli.options import finite, split
from snnbench.registry import discover


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
        if output.err_console.is_terminal:
            self._bar = output.progress_bar("{task.description}", eta=False, transient=True)
            self._bar.start()
            self._task = self._bar.add_task(what, total=self.total)
        else:
            output.err_console.print(f"{what}…", highlight=False, soft_wrap=True)
        return self

    def done(self, label: str, result: dict[str, Any], seconds: float) -> None:
        """One probe finished: its adapter, what it found, how long it took."""
        self.finished += 1
        found = (str(result.get("version") or "available") if result.get("available")
                 else "unavailable")
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, advance=1)
        else:
            output.err_console.print(f"  [{self.finished}/{self.total}] {escape(label)}: "
                                     f"{escape(found)} ({seconds:.1f} s)", highlight=False,
                                     soft_wrap=True)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()



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
    from snnbench.host.libenv import BuildSettings
    from snnbench.records.contract import environment_tag
    from snnbench.sweep.planning.selection import select_adapters
    from snnbench.sweep.planning.tasks import build_requests

    finite(timeout, "--timeout", low=0)
    # a third-party plugin's module is imported here under the same limit as a library
    entries = discover(timeout_s=timeout)
    selections = list(dict.fromkeys(
        (s.adapter, s.environment) for s in select_adapters(tuple(split(adapters)), entries)))
    built = build_requests([env for _, env in selections if env is not None],
                           BuildSettings.from_run(wheelhouse=wheelhouse),
                           lambda line: output.err_console.print(escape(line),
                                                                 highlight=False))

    from snnbench import probe as probes
    from snnbench.probe_cache import ProbeCache

    cache = ProbeCache(refresh=refresh)

    def label(item: tuple[str, Any]) -> str:
        name, env = item
        return f"{name}@{environment_tag(name, env.name)}" if env else name

    def known(item: tuple[str, Any]) -> dict[str, Any] | None:
        name, env = item
        return cache.known(entries[name], built[env.name] if env else None)

    def probe(item: tuple[str, Any]) -> tuple[dict[str, Any], float]:
        name, env = item
        python = built[env.name].python if env else ""
        start = time.monotonic()
        result, answered = probes.run_probe(name, timeout, python)
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
        output.console.print_json(json.dumps(results))
        return
    from snnbench.render.terminal import Look, print_table
    from snnbench.report.facts import adapters_table

    print_table(output.console, adapters_table(results, __version__), Look(fold=True))

"""Where the commands print: the two consoles, ``--color``, and the one-line refusal.

Every command module reads :data:`console` and :data:`err_console` from here when it prints
(``output.console``), never a copy taken at import: ``--color`` replaces them.
"""

from __future__ import annotations

from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console()
err_console = Console(stderr=True)

#: ``--color``'s values
COLOR_MODES = ("auto", "always", "never")


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one clear line on stderr and exit with ``code``."""
    line = " ".join(str(message).split())  # one line, whatever the message holds
    err_console.print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def set_color(mode: str) -> None:
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


def progress_bar(description: str, *, eta: bool, transient: bool) -> Progress:
    """A progress bar on stderr: ``description`` (a column format), the bar, done/total and
    the time elapsed, with ``eta`` the time left too; ``transient``: gone once stopped."""
    columns: list[ProgressColumn] = [TextColumn(description), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn()]
    if eta:
        columns += [TextColumn("ETA"), TimeRemainingColumn()]
    return Progress(*columns, console=err_console, transient=transient)

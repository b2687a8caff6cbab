"""The ``snnbench`` Typer app: its commands in their order, ``--version``, and the one rule
that maps what goes wrong to an exit code.

Exit codes: 0 every case ok, unavailable or skipped (compare: pass); 1 a case failed (error, oom,
timeout, lost, mismatch) or a regression was found (compare: fail); 2 usage or input errors (one
line on stderr, nothing already written is touched); 3 compare was inconclusive.

Each command is a module of its own (:mod:`snnbench.cli.run`, ...): it parses its flags, calls
the library and maps the outcome to an exit code. Adding one is a module and a line in
:data:`COMMANDS`.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

try:  # typer ≥ 0.22 vendors click; the exception classes are its own
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - an older typer uses the click package
    from click.exceptions import UsageError  # type: ignore[no-redef,assignment]

from snnbench import __version__
from snnbench.cli import (
    compare,
    env,
    export_nir,
    history,
    list as list_command,
    merge,
    nir_check,
    output,
    report,
    run,
    show,
    verify,
)
from snnbench.cli.output import fail
from snnbench.errors import UserError


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
    from snnbench.store.storage import os_reason

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


def _version_callback(value: bool) -> None:
    if value:
        output.console.print(f"snnbench {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version_callback, is_eager=True,
                           help="Show the version and exit.")
    ] = False,
) -> None:
    """Honest, reproducible benchmarks of spiking neural network training libraries."""


#: the commands, by name, in the order ``snnbench --help`` lists them
COMMANDS: dict[str, Callable[..., Any]] = {
    "list": list_command.list_adapters,
    "run": run.run,
    "show": show.show,
    "merge": merge.merge,
    "env": env.env,
    "export-nir": export_nir.export_nir,
    "nir-check": nir_check.nir_check,
    "verify": verify.verify,
    "report": report.report,
    "compare": compare.compare,
    "history": history.history,
}


def _rewrapped(text: str) -> str:
    """``text`` with each paragraph on one line: typer's rich help keeps a docstring's single
    line breaks, which at 80 columns cut every source line in two; paragraphs (blank-line
    separated, as the example command lines are) stay apart and rewrap to the terminal."""
    return "\n\n".join(" ".join(part.split())
                       for part in inspect.cleandoc(text).split("\n\n"))


for _name, _callback in COMMANDS.items():
    app.command(_name, help=_rewrapped(_callback.__doc__) if _callback.__doc__ else None)(
        _callback)


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

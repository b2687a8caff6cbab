"""One base class for every error a user can cause or fix.

The CLI maps :class:`UserError` to one line on stderr and exit code 2; anything else is a bug
and keeps its traceback for the developer (asv's ``UserError`` is the model).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


class UserError(Exception):
    """Bad input, or a folder or environment that cannot be used; the message is one line."""


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters: how a wrong value appears in a one-line
    message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def exit_status(prog: str, body: Callable[[], int]) -> int:
    """``body()``'s exit status, where a :class:`UserError` it raises becomes one line on
    stderr, ``<prog>: <message>``, and exit status 2: the rule of every snnbench command, kept
    here once for the entry points that parse their own arguments (``gpu_check``,
    ``gpu_setup``). Anything else is a bug and keeps its traceback."""
    try:
        return body()
    except UserError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2

"""What every part of gpu_setup shares: the answer marker, the misuse error, a tool's tail line."""

from __future__ import annotations

import re

from snnbench.errors import UserError

#: what a check or the probe prints before its JSON answer
MARKER = "SNNBENCH-GPU-SETUP "


class SetupError(UserError):
    """A misuse of gpu_setup (exit status 2); the message is one line.

    A :class:`~snnbench.errors.UserError`: snnbench.errors is standard library only, so it
    comes along wherever this package runs (the Docker GPU stage copies it).
    """


def tail(text: str, limit: int = 300) -> str:
    """The most telling line of a tool's output: the last error line, else the last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.match(r"^(ERROR|error|\w*Error|fatal|RuntimeError)", ln)]
    found = (errors or lines or [""])[-1]
    return found if len(found) <= limit else found[: limit - 1] + "…"


"""What several commands parse alike: comma lists, numbers that must be finite, choices, and
the help panels their options are grouped under. Each refusal is one line and exit 2."""

from __future__ import annotations

import math

from snnbench.cli.output import fail

EXEC_PANEL = "Executors (where cases run)"
OUTPUT_PANEL = "Output (what is printed and exported)"


def split(text: str) -> list[str]:
    """The non-empty, stripped items of a comma list."""
    return [part.strip() for part in text.split(",") if part.strip()]


def names(text: str, what: str) -> list[str]:
    """The items of a comma list of names (``--dtype float32,bfloat16``), refusing an empty
    list or an empty item before anything is made: ``--dtype ''`` would sweep nothing."""
    parts = [part.strip() for part in text.split(",")]
    if not any(parts):
        fail(f"{what} must name at least one value, got {text!r}")
    if not all(parts):
        # "float32,,bfloat16" is a typo (a value left out), not the list of two
        fail(f"{what} has an empty item: {text!r}")
    return parts


def ints(text: str, what: str) -> list[int]:
    """The integers of a comma list (``--neurons 64,128``), refusing an empty one."""
    parts = [part.strip() for part in text.split(",")]
    if len(parts) > 1 and not all(parts):
        # "1,,2" is a typo (a value left out), not the list [1, 2]
        fail(f"{what} has an empty item: {text!r}")
    try:
        values = [int(v) for v in split(text)]
    except ValueError:
        fail(f"{what} must be comma-separated integers, got {text!r}")
    if not values:
        fail(f"{what} is empty")
    return values


def finite(value: float, flag: str, *, low: float, inclusive: bool = False) -> None:
    """Refuse NaN, infinities and values below ``low`` for a float flag, in one line."""
    ok = math.isfinite(value) and (value >= low if inclusive else value > low)
    if not ok:
        bound = f"≥ {low:g}" if inclusive else f"> {low:g}"
        fail(f"{flag} must be a finite number {bound}, got {value}")


def choice(flag: str, given: str, values: list[str], allowed: tuple[str, ...]) -> None:
    """Refuse a flag whose (comma-split) ``values`` are not all in ``allowed``."""
    if not values or any(v not in allowed for v in values):
        fail(f"{flag} must be {', '.join(allowed)}, got {given!r}")


def refuse_network_flags(given: dict[str, object]) -> None:
    """With ``--network`` (a NIR graph), refuse a Linear+LIF network flag that was given
    (``{"--neurons": value or None, ...}``): a graph is its own network."""
    for flag, value in given.items():
        if value is not None:
            fail(f"{flag} sets the Linear+LIF network; a graph (--network) is its own network "
                 "(its size is its file's)")

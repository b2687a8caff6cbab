"""How a pydantic ``ValidationError`` reads in one line: shared by every file snnbench
validates with pydantic (the manifest, job and case-record files, the ``[run]`` table), each of
which words its own sentence around these parts (``StorageError``, ``ContractError``,
``ConfigError``: one line, exit 2, never a traceback)."""

from __future__ import annotations

from pydantic import ValidationError
from pydantic_core import ErrorDetails

#: error types of a key that is required and absent
MISSING = ("missing", "missing_argument", "missing_keyword_only_argument")
#: error types of a key the format does not know
UNKNOWN = ("extra_forbidden", "unexpected_keyword_argument")


def where(error: ErrorDetails) -> str:
    """The dotted path of the value at fault (``placement.cpus.0``), "" for the whole."""
    return ".".join(str(part) for part in error["loc"])


def problem(error: ErrorDetails) -> str:
    """What is wrong, in a few words: a check of our own (a ``ValueError`` raised by a field's
    validator) as its message says it; an unknown key as "unknown key"; else pydantic's text."""
    if error["type"] in UNKNOWN:
        return "unknown key"
    if error["type"] == "value_error":
        return str(error.get("ctx", {}).get("error", error["msg"]))
    return error["msg"]


def missing_keys(exc: ValidationError) -> list[str]:
    """The top-level keys ``exc`` says are required and absent, in its order."""
    return [str(e["loc"][0]) for e in exc.errors() if e["type"] in MISSING and len(e["loc"]) == 1]


def first(exc: ValidationError) -> ErrorDetails:
    """The first error of ``exc``: the one a one-line message names."""
    return exc.errors()[0]

"""How a pydantic ``ValidationError`` reads in one line: shared by every file snnbench
validates with pydantic (the manifest, job and case-record files, the ``[run]`` table), each of
which words its own sentence around these parts (``StorageError``, ``ContractError``,
``ConfigError``: one line, exit 2, never a traceback).

It also holds the one pydantic ``TypeAdapter`` per contract dataclass that reads and writes the
typed files which cross a process boundary (jobs, case records and their parts): it stands at
the bottom of the house, so a part such as ``MeasurementInfo`` can read and write itself without
importing the whole contract."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from snnbench.errors import UserError

T = TypeVar("T")

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


class ContractError(UserError):
    """A job or case record file is not one this snnbench can read; one line naming it."""


#: one TypeAdapter per contract type, built on first use
_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def _adapter(cls: type[T]) -> TypeAdapter[T]:
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


def validate(cls: type[T], data: Any, source: str, what: str) -> T:
    """``data`` (JSON read from ``source``) checked and built as a ``cls``; else a
    :class:`ContractError` that names ``source`` and ``what`` it should have been."""
    try:
        return _adapter(cls).validate_python(data)
    except ValidationError as exc:
        raise contract_error(exc, source, what) from exc


def dump(obj: Any) -> dict[str, Any]:
    """The JSON data of a contract object (the inverse of :func:`validate`)."""
    data: dict[str, Any] = _adapter(type(obj)).dump_python(obj)
    return data


def contract_error(exc: ValidationError, source: str, what: str) -> ContractError:
    """The one place a validation error becomes a one-line :class:`ContractError`: the keys
    that are missing, else the first problem and where it is."""
    missing = missing_keys(exc)
    if missing:
        return ContractError(f"{source} is not a {what}: it lacks "
                             f"{', '.join(repr(m) for m in missing)}")
    error = first(exc)
    at = where(error)
    return ContractError(f"{source} is not a valid {what}: "
                         f"{f'{at}: ' if at else ''}{problem(error)}")

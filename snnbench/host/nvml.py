"""One way into NVML (package ``nvidia-ml-py``, module ``pynvml``) for every part that reads the
GPU: the machine record, the pre-flight check, ``--gpus`` placement, the clock monitor and the
energy meter. Each used to import, initialise and shut NVML down on its own.

A machine without the package or without an NVIDIA driver is normal (a CPU box, a laptop), so
failing to open NVML is a typed :class:`NvmlUnavailable` that each caller turns into its own
outcome: an empty list, ``None``, or a one-line error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used here; ``missing`` is True when the package is not installed."""

    def __init__(self, message: str, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


def load() -> Any:
    """The ``pynvml`` module; a seam the tests replace with a fake."""
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable("nvidia-ml-py (pynvml) is not installed", missing=True) from exc
    return pynvml


def init(lib: Any | None = None) -> Any:
    """``lib`` (default :func:`load`'s module) initialised; the caller calls :func:`shutdown`."""
    lib = load() if lib is None else lib
    try:
        lib.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded: no NVIDIA GPU here
        raise NvmlUnavailable(f"NVML cannot be initialised: {exc}") from exc
    return lib


def shutdown(lib: Any) -> None:
    """Release NVML; never raises (it runs in ``finally`` blocks)."""
    with contextlib.suppress(Exception):
        lib.nvmlShutdown()


@contextlib.contextmanager
def session(lib: Any | None = None) -> Iterator[Any]:
    """NVML initialised for the block, shut down after it."""
    opened = init(lib)
    try:
        yield opened
    finally:
        shutdown(opened)


def text(value: Any) -> str:
    """NVML's strings are bytes in older bindings and str in newer ones."""
    return value.decode() if isinstance(value, bytes) else str(value)

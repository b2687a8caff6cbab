"""First-use work inside :meth:`~snnbench.adapter.Adapter.check_variant`, never in a timed case.

Several CUDA backends compile or load code the first time they run: Triton kernels
(SpikingJelly's ``triton`` backend), CuPy's NVRTC kernels (SpikingJelly 0.0.0.0.x's ``cupy``
backend), lava-dl's JIT-compiled extension, the EXODUS kernels (whose first launch is also where
"no kernel image is available for this GPU" shows). The worker calls ``check_variant`` before the
case's clock and timeout start and records its duration as ``prepare_s``, so running a tiny
forward + backward there moves that one-off work out of the case, and a backend that cannot run
on this GPU becomes an ``unavailable`` row with its error instead of an error mid-case. Each
library caches what it compiled on disk (Triton and CuPy in their cache folders, torch
extensions under ``TORCH_EXTENSIONS_DIR``), so the next case only loads it.

The tiny network uses the settings the adapter supports (a sigmoid surrogate where possible, as
the GPU sweeps use); shape-specialised kernels (Triton specialises on sizes) may still compile
once more at the case's size, which then shows in ``first_call_s``.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from snnbench.adapter import Adapter, AdapterUnavailable, Capabilities
from snnbench.workload.linear_lif.spec import NetworkSpec, make_case_data

#: the tiny network: small enough to cost milliseconds, a multiple of 16 like real sizes
WARM_UP_SPEC = NetworkSpec(neurons=32, batch_size=2, time_steps=8, seed=0)


def _preferred(allowed: tuple[object, ...], *wanted: object) -> object:
    for value in wanted:
        if value in allowed:
            return value
    return allowed[0]


def warm_up_spec(capabilities: Capabilities) -> NetworkSpec:
    """:data:`WARM_UP_SPEC` with the first settings ``capabilities`` allow (float32, subtract,
    sigmoid slope 4, reset not detached where possible)."""
    return WARM_UP_SPEC.replace(
        dtype=_preferred(capabilities.dtypes, "float32"),
        reset=_preferred(capabilities.resets, "subtract"),
        surrogate=_preferred(capabilities.surrogates, "sigmoid"),
        surrogate_slope=4.0,
        detach_reset=_preferred(capabilities.detach_reset, False),
        bias=_preferred(capabilities.bias, True),
        input_kind=_preferred(capabilities.input_kinds, "gaussian"),
        matmul_precision=_preferred(capabilities.matmul_precisions, "strict"),
    )


def warm_up(adapter: Adapter, variant: str, device: str, what: str) -> None:
    """Build and run one forward + backward of a tiny network on ``device``.

    Any failure raises :class:`AdapterUnavailable` naming ``what`` (e.g. "the triton backend").
    Nothing happens when the adapter refuses the tiny network itself (a skipped case stays a
    skipped case).
    """
    spec = warm_up_spec(adapter.capabilities(variant))
    if adapter.reason_skipped(spec, device, variant) is not None:
        return
    try:
        model = adapter.build(spec, make_case_data(spec), device, variant)
        try:
            model.zero_grad()
            handle = model.forward()
            model.backward(handle)
            model.synchronize()
        finally:
            model.close()
    except AdapterUnavailable:
        raise
    except Exception as exc:  # a backend that cannot run here is unavailable, with its error
        first = (str(exc).strip().splitlines() or [""])[0]
        raise AdapterUnavailable(
            f"{what} failed a tiny forward/backward on {device}: {type(exc).__name__}: {first}"
        ) from exc


def ensure_ninja_on_path() -> str | None:
    """Put this interpreter's ``ninja`` on ``PATH`` if it is not there; returns its path.

    torch's extension builder (lava-dl's JIT build) runs ``ninja`` from ``PATH``; pip installs
    it in the environment's bin folder, which is not on ``PATH`` unless the environment is
    activated (a worker started as ``/path/to/venv/bin/python -m snnbench.measure.worker``).
    """
    found = shutil.which("ninja")
    if found:
        return found
    for folder in (sysconfig.get_paths()["scripts"], str(Path(sys.executable).parent)):
        candidate = Path(folder) / "ninja"
        if candidate.exists():
            os.environ["PATH"] = folder + os.pathsep + os.environ.get("PATH", "")
            return str(candidate)
    return None

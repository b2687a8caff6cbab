"""A fused Linear + LIF layer: the reference fast backend of snnbench.

``FusedLinearLIF`` (an ``nn.Module``) and ``fused_linear_lif`` (functional) compute spiking
Linear + leaky integrate-and-fire layers over time-major (T, B, n) sequences with one GEMM for
all time steps and one compiled scan over T: Triton kernels on CUDA, a small C++ library
compiled at first use on the CPU. Gradients are exact BPTT with a surrogate spike derivative.
See docs/fused.md.

Importing this package imports torch but not Triton (imported only when the Triton backend
runs) and compiles nothing (the CPU library is built on first CPU use, or by
:func:`build_cpu`).
"""

from __future__ import annotations

from snnbench.fused.autograd import (
    BACKENDS,
    FusedLinearLIFFunction,
    fused_linear_lif,
    resolve_backend,
)
from snnbench.fused.layer import FusedLinearLIF
from snnbench.fused.params import RESETS, SURROGATES, LIFParams


def build_cpu() -> float:
    """Compile (or load the cached) CPU scan now; returns the seconds spent compiling.

    Raises :class:`snnbench.fused.cpu.BuildError` with the compiler's message on failure.
    """
    from snnbench.fused import cpu

    return cpu.build().compile_s


__all__ = [
    "BACKENDS",
    "RESETS",
    "SURROGATES",
    "FusedLinearLIF",
    "FusedLinearLIFFunction",
    "LIFParams",
    "build_cpu",
    "fused_linear_lif",
    "resolve_backend",
]

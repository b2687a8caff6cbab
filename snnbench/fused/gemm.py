"""The three GEMMs of a fused layer (Y = X Wᵀ + b, dW = dYᵀ X, dX = dY W) on the fastest path.

CUDA: ``torch.addmm`` / ``torch.mm`` (cuBLAS; TF32 follows torch's global setting).

CPU, float32: oneDNN through ``torch.ops.mkldnn._linear_pointwise`` (the op torch's inductor
emits for CPU linears), when torch was built with oneDNN. It takes the transposed operands as
strided views, without copies. Measured on the development machine (AMD EPYC Zen 5, 2 cores,
torch 2.13.0+cpu; T·B = 1600 rows; minimum of 11; ms, 2 threads):

    ===========  =================  ===============  ===============
    n            Y = X Wᵀ + b       dW = dYᵀ X       dX = dY W
    ===========  =================  ===============  ===============
    128          0.13 (MKL 0.25)    0.22 (0.28)      0.12 (0.25)
    512          1.77 (MKL 3.93)    2.03 (4.05)      1.76 (3.93)
    1024         7.34 (MKL 15.7)    8.72 (16.4)      7.78 (16.5)
    ===========  =================  ===============  ===============

MKL, which ``torch.addmm`` calls on the CPU, runs at about 105 GFLOP/s per core there against
230 for oneDNN (MKL does not use its AVX-512 kernels on AMD CPUs); XLA's CPU GEMM, which the JAX
adapters use, reaches the oneDNN figures. Set ``SNNBENCH_FUSED_CPU_GEMM=blas`` to use
``torch.addmm``/``torch.mm`` instead (e.g. to compare on an Intel CPU). Other dtypes on the CPU
use ``torch.addmm``/``torch.mm``, which already dispatch bfloat16 to oneDNN.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import torch

#: environment variable choosing the CPU float32 GEMM: "onednn" (default) or "blas"
CPU_GEMM_ENV = "SNNBENCH_FUSED_CPU_GEMM"


@functools.lru_cache(maxsize=1)
def _onednn_linear() -> Callable[..., torch.Tensor] | None:
    choice = os.environ.get(CPU_GEMM_ENV, "onednn").strip().lower()
    if choice not in ("onednn", "blas"):
        raise ValueError(f"{CPU_GEMM_ENV} must be 'onednn' or 'blas', got {choice!r}")
    if choice == "blas" or not torch.backends.mkldnn.is_available():  # type: ignore[no-untyped-call,unused-ignore]
        return None
    try:
        op: Callable[..., torch.Tensor] = torch.ops.mkldnn._linear_pointwise
    except (AttributeError, RuntimeError):
        return None
    return op


def cpu_gemm_backend() -> str:
    """``onednn`` or ``blas``: the library the CPU float32 GEMMs go through here."""
    return "onednn" if _onednn_linear() is not None else "blas"


def _onednn_for(t: torch.Tensor) -> Callable[..., torch.Tensor] | None:
    if t.device.type != "cpu" or t.dtype != torch.float32:
        return None
    return _onednn_linear()


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x (M, in) Wᵀ + b → (M, out), contiguous."""
    op = _onednn_for(x)
    if op is not None:
        return op(x, weight, bias, "none", [], "")
    if bias is not None:
        return torch.addmm(bias, x, weight.t())
    return torch.mm(x, weight.t())


def _transposed(dy: torch.Tensor) -> torch.Tensor:
    """dyᵀ for oneDNN's first operand: a contiguous copy from the CPU scan library when it is
    loaded, else the strided view (which oneDNN copies itself, about twice as slowly)."""
    from snnbench.fused import cpu

    if cpu.is_loaded() and dy.is_contiguous():
        return cpu.transpose(dy)
    return dy.t()


def grad_weight(dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """dW = dyᵀ x: dy (M, out), x (M, in) → (out, in).

    oneDNN wants its first operand contiguous and copies a transposed view inside each call
    (75 µs of the 290 µs dW at n=128, M=1600, one thread); its second may stay strided. With
    the CPU scan library loaded, dyᵀ is made by its tiled transpose (36 µs) instead.
    """
    op = _onednn_for(dy)
    if op is not None:
        return op(_transposed(dy), x.t(), None, "none", [], "")
    return torch.mm(dy.t(), x)


def grad_input(dy: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """dX = dy W: dy (M, out), W (out, in) → (M, in)."""
    op = _onednn_for(dy)
    if op is not None:
        return op(dy, weight.t(), None, "none", [], "")
    return torch.mm(dy, weight)

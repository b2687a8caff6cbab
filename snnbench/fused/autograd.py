"""The fused Linear + LIF autograd function and its functional entry point.

Forward: one GEMM over all T·B rows (into a time-major (T·B, n) buffer), then one LIF scan over
T. Backward: one reverse-time scan giving dY = dL/d(X Wᵀ + b) and the bias gradient, then
dW = dYᵀ X and (only when X needs a gradient) dX = dY W as plain GEMMs (cuBLAS on CUDA, oneDNN
on the CPU: see :mod:`snnbench.fused.gemm`).

Memory: exactly one T·B·n buffer is saved for backward, v_pre in float32. For float32 it *is*
the GEMM output (the forward scan overwrites y with v_pre) and the backward scan overwrites it
with dY, so forward+backward allocate y, the spikes and dW (+ dX) and nothing else of that size.
For 16-bit dtypes v_pre is a separate float32 buffer (storing 16-bit v_pre could flip spikes when
the backward recomputes them) and the 16-bit y is freed when the forward returns.

Automatic mixed precision (``compute_dtype`` bfloat16 or float16 on float32 x, weight and bias,
or a float32 call inside ``torch.autocast``): the three GEMMs run in ``compute_dtype`` on
operands cast to it (the forward's y rounded once, as autocast's Linear), the scans in float32
(v_pre float32; the scan reads y and writes dY in ``compute_dtype``), and spikes, dX, dW and db
come back float32. The compute-dtype copies of x and W are what is saved for backward, as
autocast saves its casts.

Because the saved buffer is consumed in place, backward can run once per forward; a second
backward through the same graph (``retain_graph=True``) raises instead of returning garbage.
"""

from __future__ import annotations

import contextlib
import os
from types import ModuleType
from typing import Any

import torch

from snnbench.fused import gemm
from snnbench.fused.params import LIFParams

BACKENDS: tuple[str, ...] = ("auto", "triton", "cpu")
#: the scan kernel designs (``chunked``: Triton only; see docs/fused.md)
SCANS: tuple[str, ...] = ("default", "chunked")


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def resolve_backend(backend: str, device: torch.device) -> str:
    """The concrete scan backend for ``device``: ``triton`` on CUDA, ``cpu`` on the CPU.

    ``triton`` on CPU tensors runs the Triton kernels in Triton's interpreter and needs
    ``TRITON_INTERPRET=1`` set before Triton is first imported (slow: for testing).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "auto":
        return "triton" if device.type == "cuda" else "cpu"
    if backend == "triton" and device.type != "cuda" and not _interpreting():
        raise RuntimeError(
            "the triton backend needs CUDA tensors, or TRITON_INTERPRET=1 set before triton is "
            "imported to interpret the kernels on the CPU"
        )
    if backend == "cpu" and device.type != "cpu":
        raise RuntimeError(f"the cpu backend needs CPU tensors, got {device.type} tensors")
    return backend


def _scan_kwargs(scan: str) -> dict[str, str]:
    # the default design is called without the keyword: the CPU module has no designs
    return {} if scan == "default" else {"scan": scan}


def scan_module(backend: str) -> ModuleType:
    """The module implementing ``scan_forward``/``scan_backward`` (imported lazily)."""
    if backend == "triton":
        from snnbench.fused import triton_kernels

        return triton_kernels
    if backend == "cpu":
        from snnbench.fused import cpu

        return cpu
    raise ValueError(f"no scan backend {backend!r}")


def _autocast_off(device_type: str) -> contextlib.AbstractContextManager[Any]:
    """A context with autocast off for ``device_type``: ``torch.autocast(enabled=False)`` only
    when autocast is on (entering and leaving it costs ~5 µs a layer, per pass, for nothing)."""
    if torch.is_autocast_enabled(device_type):
        return torch.autocast(device_type=device_type, enabled=False)
    return contextlib.nullcontext()


class FusedLinearLIFFunction(torch.autograd.Function):
    """spikes (T, B, n_out) = LIF(X Wᵀ + b) for X (T, B, n_in); see the module docstring."""

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        params: LIFParams,
        backend: str,
        compute_dtype: torch.dtype | None = None,
        scan: str = "default",
    ) -> torch.Tensor:
        steps, batch, n_in = x.shape
        n_out = weight.shape[0]
        out_dtype = x.dtype
        if compute_dtype is not None and compute_dtype != x.dtype:
            # AMP: the GEMMs' operands in compute_dtype; the caller's tensors stay float32
            x = x.to(compute_dtype)
            weight = weight.to(compute_dtype)
            bias = bias.to(compute_dtype) if bias is not None else None
        x2 = x.reshape(steps * batch, n_in)
        # y = X Wᵀ + b over all T·B rows: one GEMM, time-major (T·B, n_out), contiguous.
        # Autocast off: the layer computes in the dtype chosen above (y has the scan's dtype)
        with _autocast_off(x.device.type):
            y = gemm.linear(x2, weight, bias)
        if y.dtype == torch.float32:
            vpre = y  # v_pre overwrites y in place
        else:
            vpre = torch.empty(y.shape, dtype=torch.float32, device=y.device)
        spikes = torch.empty((steps, batch, n_out), dtype=x.dtype, device=x.device)
        # the scans see (T, B·n): every row is one time step of all B·n neurons
        scan_module(backend).scan_forward(
            y.view(steps, -1), vpre.view(steps, -1), spikes.view(steps, -1), params,
            **_scan_kwargs(scan),
        )
        del y
        ctx.save_for_backward(x, weight, vpre.view(steps, batch, n_out))
        ctx.out_dtype = out_dtype
        ctx.params = params
        ctx.backend = backend
        ctx.scan = scan
        ctx.has_bias = bias is not None
        ctx.consumed = False
        ctx.set_materialize_grads(False)  # an unused output gets None, not a zero-filled tensor
        # spikes are 0 or 1: exact in any dtype; AMP returns them in the caller's float32
        return spikes if spikes.dtype == out_dtype else spikes.to(out_dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(
        ctx: Any, grad_s: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None, None, None, None,
               None]:
        if grad_s is None:
            return None, None, None, None, None, None, None
        if ctx.consumed:
            raise RuntimeError(
                "FusedLinearLIF: backward ran twice through the same forward; its saved buffer "
                "is reused in place, so run the forward again instead of retain_graph=True"
            )
        ctx.consumed = True
        x, weight, vpre = ctx.saved_tensors
        steps, batch, n_out = vpre.shape
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        if not (need_x or need_w or need_b):
            return None, None, None, None, None, None, None
        if x.dtype == torch.float32:
            dy = vpre  # dY overwrites v_pre in place
        else:
            dy = torch.empty(vpre.shape, dtype=x.dtype, device=x.device)
        db = scan_module(ctx.backend).scan_backward(
            vpre, grad_s, dy, ctx.params, bool(need_b and ctx.has_bias),
            **_scan_kwargs(ctx.scan),
        )
        dy2 = dy.view(steps * batch, n_out)
        grad_x = grad_w = grad_b = None
        with _autocast_off(x.device.type):
            if need_x:
                grad_x = gemm.grad_input(dy2, weight).view(x.shape)
            if need_w:
                grad_w = gemm.grad_weight(dy2, x.reshape(steps * batch, x.shape[2]))
        # AMP: the gradients of the caller's float32 tensors (autocast's casts do the same)
        out = ctx.out_dtype
        if grad_x is not None:
            grad_x = grad_x.to(out)
        if grad_w is not None:
            grad_w = grad_w.to(out)
        if need_b and ctx.has_bias and db is not None:
            grad_b = db.to(out)
        return grad_x, grad_w, grad_b, None, None, None, None


def fused_linear_lif(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    params: LIFParams | None = None,
    backend: str = "auto",
    compute_dtype: torch.dtype | None = None,
    scan: str = "default",
) -> torch.Tensor:
    """Linear + LIF over a time-major sequence: X (T, B, n_in) → spikes (T, B, n_out).

    ``weight`` is (n_out, n_in) like ``nn.Linear.weight``; ``bias`` (n_out,) or None. All three
    must share a dtype (float32, bfloat16 or float16) and device. The membrane state is float32
    whatever the dtype. ``backend``: ``auto`` (Triton on CUDA, compiled C++ on CPU), ``triton``
    or ``cpu``. Differentiable in x, weight and bias.

    ``compute_dtype`` (bfloat16 or float16, on float32 tensors): automatic mixed precision, the
    GEMMs in that dtype and the scans in float32 (module docstring); spikes and gradients are
    float32. When it is None and the call is inside ``torch.autocast`` for the tensors' device,
    float32 tensors take autocast's dtype, as ``nn.Linear`` would.

    ``scan``: the Triton scan kernels' design, ``default`` or ``chunked`` (time steps in chunks
    from one tile load each: fewer steps of memory latency; the same bits). ``chunked`` needs
    the Triton backend.
    """
    p = params if params is not None else LIFParams()
    if x.dim() != 3:
        raise ValueError(f"x must be time-major (T, B, n_in), got shape {tuple(x.shape)}")
    if weight.dim() != 2 or weight.shape[1] != x.shape[2]:
        raise ValueError(
            f"weight must be (n_out, {x.shape[2]}), got shape {tuple(weight.shape)}"
        )
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias must be ({weight.shape[0]},), got shape {tuple(bias.shape)}")
    tensors = [x, weight] + ([bias] if bias is not None else [])
    if len({t.dtype for t in tensors}) != 1 or x.dtype not in (
        torch.float32,
        torch.bfloat16,
        torch.float16,
    ):
        raise TypeError(
            "x, weight and bias must share one dtype among float32, bfloat16, float16; got "
            + ", ".join(str(t.dtype) for t in tensors)
        )
    if len({t.device for t in tensors}) != 1:
        raise ValueError("x, weight and bias must be on the same device")
    if compute_dtype is None and x.dtype == torch.float32 and torch.is_autocast_enabled(
            x.device.type):
        compute_dtype = torch.get_autocast_dtype(x.device.type)
    if compute_dtype is not None and (
        compute_dtype not in (torch.bfloat16, torch.float16) or x.dtype != torch.float32
    ):
        raise TypeError(f"compute_dtype (mixed precision) must be bfloat16 or float16 on float32 "
                        f"tensors; got {compute_dtype} on {x.dtype}")
    chosen = resolve_backend(backend, x.device)
    if scan not in SCANS:
        raise ValueError(f"scan must be one of {', '.join(SCANS)}, got {scan!r}")
    if scan != "default" and chosen != "triton":
        raise ValueError(f"scan={scan!r} needs the triton backend, not {chosen!r}")
    out: torch.Tensor = FusedLinearLIFFunction.apply(  # type: ignore[no-untyped-call,unused-ignore]
        x, weight, bias, p, chosen, compute_dtype, scan
    )
    return out

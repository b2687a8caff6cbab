"""Triton LIF scans for CUDA tensors (and for CPU tensors under ``TRITON_INTERPRET=1``).

Importing this module imports Triton; :mod:`snnbench.fused.autograd` imports it only when the
Triton backend is used, so ``import snnbench.fused`` works without Triton.

Forward kernel: a 1-D grid over the B·n neurons of a time-major (T, B·n) buffer. Each program
keeps its block's membrane in float32 registers and loops over T (``tl.range`` with
``num_stages`` lets the compiler prefetch later time steps' inputs while the current step
computes). It writes the spikes and v_pre; v_pre is the single T·B·n buffer kept for backward
(for float32 it overwrites the GEMM output in place).

Backward kernel: a 2-D grid (neuron blocks × batch blocks) over the same buffer, walking T in
reverse. Each program owns BLOCK_B × BLOCK_N neurons for all T, so the bias gradient of its
columns is a register accumulator summed over its rows at the end: one partial row per batch
block, no atomics, deterministic. dY is written over v_pre for float32.

Op order and FMA: ``v = v * beta`` then ``v = v + x`` are two float32 roundings in the NumPy
reference. The launches pass ``enable_fp_fusion=False`` so that the compiler does not contract
them into one FMA (Triton also passes ``--fmad=false`` to ptxas then); the threshold test thus
sees the same float32 value as the reference, and the forward spikes are bit-identical given the
same GEMM output. The interpreter evaluates each operation separately in NumPy float32.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from snnbench.fused.params import LIFParams

#: loop stages for ``tl.range``: how many time steps' loads are in flight ahead of the math
_STAGES = 4


@triton.jit(do_not_specialize=["T"])  # type: ignore[untyped-decorator,misc,unused-ignore]
def _lif_forward_kernel(  # type: ignore[no-untyped-def]
    y_ptr,
    vpre_ptr,
    s_ptr,
    T,
    N,
    beta,
    theta,
    SUBTRACT: tl.constexpr,
    BLOCK: tl.constexpr,
    STAGES: tl.constexpr,
):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    v = tl.zeros([BLOCK], dtype=tl.float32)
    # pointers advance by one row per step: 64-bit pointer arithmetic, no int32 t*N overflow
    y_p = y_ptr + offs
    v_p = vpre_ptr + offs
    s_p = s_ptr + offs
    for _t in tl.range(0, T, num_stages=STAGES):
        x = tl.load(y_p, mask=mask, other=0.0).to(tl.float32)
        v = v * beta  # rounding 1
        v = v + x  # rounding 2 (not an FMA: launched with enable_fp_fusion=False)
        spike = v >= theta
        s = tl.where(spike, 1.0, 0.0)
        tl.store(v_p, v, mask=mask)
        tl.store(s_p, s.to(s_p.dtype.element_ty), mask=mask)
        if SUBTRACT:  # noqa: SIM108 (a constexpr branch: one of the two is compiled)
            v = v - theta * s  # theta * s is exact (s is 0 or 1), so FMA or not is the same
        else:
            v = v * (1.0 - s)
        y_p += N
        v_p += N
        s_p += N


@triton.jit  # type: ignore[untyped-decorator,misc,unused-ignore]
def _surrogate(u, slope, SURROGATE: tl.constexpr):  # type: ignore[no-untyped-def]
    # same formulas and operation order as snnbench.reference.surrogate_grad
    if SURROGATE == 0:  # fast_sigmoid: 1 / (1 + k|u|)^2
        d = 1.0 + slope * tl.abs(u)
        out = 1.0 / (d * d)
    elif SURROGATE == 1:  # atan: (k/2) / (1 + (pi/2 k u)^2)
        a = (1.5707963267948966 * slope) * u
        out = (slope * 0.5) / (1.0 + a * a)
    else:  # sigmoid: k sig (1 - sig)
        sig = 1.0 / (1.0 + tl.exp(-(slope * u)))
        out = slope * sig * (1.0 - sig)
    return out


@triton.jit(do_not_specialize=["T"])  # type: ignore[untyped-decorator,misc,unused-ignore]
def _lif_backward_kernel(  # type: ignore[no-untyped-def]
    vpre_ptr,
    g_ptr,
    dy_ptr,
    dbp_ptr,
    T,
    B,
    n,
    g_st,
    g_sb,
    g_sj,
    beta,
    theta,
    slope,
    SUBTRACT: tl.constexpr,
    DETACH: tl.constexpr,
    SURROGATE: tl.constexpr,
    WANT_DB: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_N: tl.constexpr,
    STAGES: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_b = tl.program_id(1)
    rb = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
    rj = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rb[:, None] < B) & (rj[None, :] < n)
    N = B * n
    last = (T - 1).to(tl.int64)
    # start at the last time step and walk back one row per step
    v_p = vpre_ptr + last * N + (rb[:, None] * n + rj[None, :])
    d_p = dy_ptr + last * N + (rb[:, None] * n + rj[None, :])
    # grad_s through its own strides: a stride-0 gradient (of .sum()) is read, never expanded
    g_p = g_ptr + last * g_st + (rb[:, None] * g_sb + rj[None, :] * g_sj)
    gv = tl.zeros([BLOCK_B, BLOCK_N], dtype=tl.float32)  # dL/dv_post[t]
    acc = tl.zeros([BLOCK_B, BLOCK_N], dtype=tl.float32)  # sum over t of dL/dy[t]
    for _i in tl.range(0, T, num_stages=STAGES):
        vp = tl.load(v_p, mask=mask, other=0.0)
        gs = tl.load(g_p, mask=mask, other=0.0).to(tl.float32)
        spike = vp >= theta
        s = tl.where(spike, 1.0, 0.0)
        sg = _surrogate(vp - theta, slope, SURROGATE)
        if DETACH:
            total = gs
        elif SUBTRACT:
            total = gs + gv * (-theta)
        else:
            total = gs + gv * (-vp)
        if SUBTRACT:  # noqa: SIM108 (a constexpr branch)
            gvp = total * sg + gv
        else:
            gvp = total * sg + gv * (1.0 - s)
        gvp = tl.where(mask, gvp, 0.0)
        tl.store(d_p, gvp.to(d_p.dtype.element_ty), mask=mask)
        if WANT_DB:
            acc += gvp
        gv = beta * gvp
        v_p -= N
        d_p -= N
        g_p -= g_st
    if WANT_DB:
        tl.store(dbp_ptr + pid_b * n + rj, tl.sum(acc, axis=0), mask=rj < n)


@functools.lru_cache(maxsize=8)
def _sm_count(device_index: int) -> int:
    return int(torch.cuda.get_device_properties(device_index).multi_processor_count)


def _target_programs(t: torch.Tensor) -> int:
    """About two programs per SM: the scan is latency-bound, so occupancy matters more than
    work per program. On the interpreter (CPU tensors) a fixed small count keeps it quick."""
    if t.is_cuda:
        return 2 * _sm_count(t.device.index if t.device.index is not None else 0)
    return 4


def _pow2_clamp(x: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, int(triton.next_power_of_2(max(1, x)))))


def _warps(block: int) -> int:
    # at least 4 elements per thread once blocks are large (128-bit loads), 1..8 warps
    return max(1, min(8, block // 128))


def scan_forward(y: torch.Tensor, vpre: torch.Tensor, spikes: torch.Tensor, p: LIFParams) -> None:
    """Run the LIF recurrence over y (T, B·n) → v_pre (float32) and spikes, all contiguous.

    ``vpre`` may be ``y`` itself (float32: v_pre overwrites y in place).
    """
    steps = y.shape[0]
    width = y.numel() // max(1, steps)
    if width == 0 or steps == 0:
        return
    block = _pow2_clamp(triton.cdiv(width, _target_programs(y)), 32, 1024)
    grid = (triton.cdiv(width, block),)
    _lif_forward_kernel[grid](
        y,
        vpre,
        spikes,
        steps,
        width,
        p.beta,
        p.threshold,
        SUBTRACT=p.reset == "subtract",
        BLOCK=block,
        STAGES=_STAGES,
        num_warps=_warps(block),
        enable_fp_fusion=False,
    )


def scan_backward(
    vpre: torch.Tensor,
    grad_s: torch.Tensor,
    dy: torch.Tensor,
    p: LIFParams,
    want_db: bool,
    blocks: tuple[int, int] | None = None,
) -> torch.Tensor | None:
    """Reverse-time BPTT: v_pre (T, B, n) float32 and dL/ds (any strides) → dL/dy in ``dy``.

    ``dy`` (T, B, n) contiguous has the spikes' dtype; for float32 it may be ``vpre``
    (overwritten in place). Returns the bias gradient (n,) in float32 when ``want_db``.
    ``blocks`` = (BLOCK_B, BLOCK_N) overrides the tile (powers of two; for tests).
    """
    steps, batch, n = vpre.shape
    if steps == 0 or batch == 0 or n == 0:
        return torch.zeros(n, dtype=torch.float32, device=vpre.device) if want_db else None
    if blocks is not None:
        block_b, block_n = blocks
    else:
        target = _target_programs(vpre)
        block_n = _pow2_clamp(triton.cdiv(batch * n, target), 32, 256)
        block_n = min(block_n, _pow2_clamp(n, 32, 256))
        block_b = _pow2_clamp(triton.cdiv(batch * n, target * block_n), 1, 16)
        block_b = min(block_b, int(triton.next_power_of_2(batch)))
    grid = (triton.cdiv(n, block_n), triton.cdiv(batch, block_b))
    partial = (
        torch.empty((grid[1], n), dtype=torch.float32, device=vpre.device) if want_db else vpre
    )
    g_st, g_sb, g_sj = grad_s.stride()
    _lif_backward_kernel[grid](
        vpre,
        grad_s,
        dy,
        partial,
        steps,
        batch,
        n,
        g_st if steps > 1 else 0,
        g_sb if batch > 1 else 0,
        g_sj if n > 1 else 0,
        p.beta,
        p.threshold,
        p.slope,
        SUBTRACT=p.reset == "subtract",
        DETACH=p.detach_reset,
        SURROGATE=p.surrogate_code,
        WANT_DB=want_db,
        BLOCK_B=block_b,
        BLOCK_N=block_n,
        STAGES=_STAGES,
        num_warps=_warps(block_b * block_n),
        enable_fp_fusion=False,
    )
    if not want_db:
        return None
    return partial[0] if grid[1] == 1 else partial.sum(dim=0)

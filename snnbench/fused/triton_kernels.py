"""Triton LIF scans for CUDA tensors (and for CPU tensors under ``TRITON_INTERPRET=1``).

Importing this module imports Triton; :mod:`snnbench.fused.autograd` imports it only when the
Triton backend is used, so ``import snnbench.fused`` works without Triton.

Forward kernel: a 1-D grid over the B·n neurons of a time-major (T, B·n) buffer. Each program
keeps its block's membrane in float32 registers and loops over T (``tl.range`` with
``num_stages`` lets the compiler prefetch later time steps' inputs, with cp.async into shared
memory, while the current step computes; :func:`loop_stages` picks the depth). It writes the
spikes and v_pre; v_pre is the single T·B·n buffer kept for backward
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
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from snnbench.fused.params import LIFParams

#: the fewest and most loop stages (``tl.range(num_stages=...)``): time steps whose loads are
#: in flight ahead of the math
MIN_STAGES, MAX_STAGES = 4, 16
#: shared memory a program's prefetch pipeline may take, in bytes
PREFETCH_BYTES = 16 * 1024


# -- the forward's LIF step, shared by the step-by-step and the time-chunked scans: Triton
# inlines a jit function into its caller, and both forward kernels compile to the same sm_90
# code as with the step written out in each. The backward step stays written out in both
# backward kernels: as a shared jit function it changed the chunked kernel's sm_90 code (its
# constants hoisted in another order: other registers and integer instructions, same math).


@triton.jit  # type: ignore[untyped-decorator,misc,unused-ignore]
def _integrate(v, x, beta, theta):  # type: ignore[no-untyped-def]
    # (v_pre, spike) of a step from the previous v_post and this step's input
    v = v * beta  # rounding 1
    v = v + x  # rounding 2 (not an FMA: launched with enable_fp_fusion=False)
    spike = v >= theta
    s = tl.where(spike, 1.0, 0.0)
    return v, s


@triton.jit  # type: ignore[untyped-decorator,misc,unused-ignore]
def _reset(v, s, theta, SUBTRACT: tl.constexpr):  # type: ignore[no-untyped-def]
    # v_post from v_pre and the spike
    if SUBTRACT:  # noqa: SIM108 (a constexpr branch: one of the two is compiled)
        v = v - theta * s  # theta * s is exact (s is 0 or 1), so FMA or not is the same
    else:
        v = v * (1.0 - s)
    return v


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
        v, s = _integrate(v, x, beta, theta)
        tl.store(v_p, v, mask=mask)
        tl.store(s_p, s.to(s_p.dtype.element_ty), mask=mask)
        v = _reset(v, s, theta, SUBTRACT)
        y_p += N
        v_p += N
        s_p += N


@triton.jit  # type: ignore[untyped-decorator,misc,unused-ignore]
def _surrogate(u, slope, SURROGATE: tl.constexpr):  # type: ignore[no-untyped-def]
    # same formulas and operation order as snnbench.workload.linear_lif.reference.surrogate_grad
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
    GRAD_SCALAR: tl.constexpr,
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
    if GRAD_SCALAR:
        # every stride 0 (the gradient of a sum): one value for all t, read once, so the loop
        # streams v_pre alone instead of waiting on a broadcast load per step
        g_all = tl.load(g_ptr).to(tl.float32)
    gv = tl.zeros([BLOCK_B, BLOCK_N], dtype=tl.float32)  # dL/dv_post[t]
    acc = tl.zeros([BLOCK_B, BLOCK_N], dtype=tl.float32)  # sum over t of dL/dy[t]
    for _i in tl.range(0, T, num_stages=STAGES):
        vp = tl.load(v_p, mask=mask, other=0.0)
        if GRAD_SCALAR:  # noqa: SIM108 (a constexpr branch: g_all exists only in this one)
            gs = g_all
        else:
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


# -- the time-chunked scans (``scan="chunked"``) ---------------------------------------------
#
# The same recurrence, operation for operation, but the loop walks T in chunks of CHUNK steps:
# one [CHUNK, ...] tile load per chunk, independent of the recurrence (so the compiler pipelines
# whole chunks: CHUNK·(STAGES-1) time steps in flight instead of STAGES-1), then CHUNK unrolled
# steps that touch only registers (and fire-and-forget stores). Row k of a tile is taken by a
# reduction over the chunk axis whose combine is a select (:func:`_pick`), not a sum: a sum
# padded with zeros would turn a -0.0 input into +0.0 (Triton's interpreter, like NumPy, starts
# its sums at +0.0), so the value fed to the recurrence is exactly the loaded one and spikes,
# v_pre and gradients are bit-identical to the step-by-step kernels.


@triton.jit  # type: ignore[untyped-decorator,misc,unused-ignore]
def _pick(a, fa, b, fb):  # type: ignore[no-untyped-def]
    # the combine of a (value, selected) reduction: a select, never arithmetic
    return tl.where(fa != 0, a, b), fa | fb


@triton.jit  # type: ignore[untyped-decorator,misc,unused-ignore]
def _tile_row(tile, rows, k):  # type: ignore[no-untyped-def]
    sel = tl.broadcast_to((rows[:, None] == k).to(tl.int32), tile.shape)
    x, _ = tl.reduce((tile, sel), 0, _pick)
    return x


@triton.jit  # type: ignore[untyped-decorator,misc,unused-ignore]
def _tile_row3(tile, rows, k):  # type: ignore[no-untyped-def]
    sel = tl.broadcast_to((rows[:, None, None] == k).to(tl.int32), tile.shape)
    x, _ = tl.reduce((tile, sel), 0, _pick)
    return x


@triton.jit(do_not_specialize=["T"])  # type: ignore[untyped-decorator,misc,unused-ignore]
def _lif_forward_chunked_kernel(  # type: ignore[no-untyped-def]
    y_ptr,
    vpre_ptr,
    s_ptr,
    T,
    N,
    beta,
    theta,
    SUBTRACT: tl.constexpr,
    BLOCK: tl.constexpr,
    CHUNK: tl.constexpr,
    STAGES: tl.constexpr,
):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    rows = tl.arange(0, CHUNK)
    v = tl.zeros([BLOCK], dtype=tl.float32)
    y_p = y_ptr + (rows.to(tl.int64)[:, None] * N + offs[None, :])
    v_p = vpre_ptr + offs
    s_p = s_ptr + offs
    for t0 in tl.range(0, T, CHUNK, num_stages=STAGES):
        # the whole chunk's inputs in one load, before any of its steps
        tile = tl.load(y_p, mask=(rows[:, None] < T - t0) & mask[None, :], other=0.0)
        tile = tile.to(tl.float32)
        for k in tl.static_range(CHUNK):
            x = _tile_row(tile, rows, k)
            live = mask & (t0 + k < T)
            v, s = _integrate(v, x, beta, theta)
            tl.store(v_p, v, mask=live)
            tl.store(s_p, s.to(s_p.dtype.element_ty), mask=live)
            v = _reset(v, s, theta, SUBTRACT)
            v_p += N
            s_p += N
        y_p += CHUNK * N


@triton.jit(do_not_specialize=["T"])  # type: ignore[untyped-decorator,misc,unused-ignore]
def _lif_backward_chunked_kernel(  # type: ignore[no-untyped-def]
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
    GRAD_SCALAR: tl.constexpr,
    WANT_DB: tl.constexpr,
    BLOCK_B: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNK: tl.constexpr,
    STAGES: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_b = tl.program_id(1)
    rb = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
    rj = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rb[:, None] < B) & (rj[None, :] < n)
    N = B * n
    rows = tl.arange(0, CHUNK)
    # chunks end at T, T - CHUNK, ...: the earliest chunk is the partial one (rows < 0 masked),
    # and its dead rows come last in the reverse walk, after every live step
    first = (T - CHUNK).to(tl.int64)
    cell = rb[:, None] * n + rj[None, :]
    v_tp = vpre_ptr + first * N + (rows.to(tl.int64)[:, None, None] * N + cell[None, :, :])
    g_cell = rb[:, None] * g_sb + rj[None, :] * g_sj
    g_tp = g_ptr + first * g_st + (rows.to(tl.int64)[:, None, None] * g_st + g_cell[None, :, :])
    d_p = dy_ptr + (T - 1).to(tl.int64) * N + cell
    if GRAD_SCALAR:
        g_all = tl.load(g_ptr).to(tl.float32)
    gv = tl.zeros([BLOCK_B, BLOCK_N], dtype=tl.float32)  # dL/dv_post[t]
    acc = tl.zeros([BLOCK_B, BLOCK_N], dtype=tl.float32)  # sum over t of dL/dy[t]
    for c in tl.range(0, T, CHUNK, num_stages=STAGES):
        live_rows = rows[:, None, None] >= c + CHUNK - T  # row index first - c + r >= 0
        tmask = live_rows & mask[None, :, :]
        vtile = tl.load(v_tp, mask=tmask, other=0.0)
        if not GRAD_SCALAR:
            gtile = tl.load(g_tp, mask=tmask, other=0.0).to(tl.float32)
        for i in tl.static_range(CHUNK):
            k = CHUNK - 1 - i
            vp = _tile_row3(vtile, rows, k)
            if GRAD_SCALAR:  # noqa: SIM108 (a constexpr branch)
                gs = g_all
            else:
                gs = _tile_row3(gtile, rows, k)
            live = mask & (k >= c + CHUNK - T)
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
            gvp = tl.where(live, gvp, 0.0)
            tl.store(d_p, gvp.to(d_p.dtype.element_ty), mask=live)
            if WANT_DB:
                acc += gvp
            gv = beta * gvp
            d_p -= N
        v_tp -= CHUNK * N
        g_tp -= CHUNK * g_st
    if WANT_DB:
        tl.store(dbp_ptr + pid_b * n + rj, tl.sum(acc, axis=0), mask=rj < n)


@functools.lru_cache(maxsize=8)
def _sm_count(device_index: int) -> int:
    return int(torch.cuda.get_device_properties(device_index).multi_processor_count)


#: programs per SM the launchers aim at: the scans are latency-bound, so occupancy matters
#: more than work per program
PROGRAMS_PER_SM = 2


def _target_programs(t: torch.Tensor) -> int:
    """How many programs a launch aims at on ``t``'s device. On the interpreter (CPU tensors) a
    fixed small count keeps it quick."""
    if t.is_cuda:
        return PROGRAMS_PER_SM * _sm_count(t.device.index if t.device.index is not None else 0)
    return 4


def _pow2_clamp(x: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, int(triton.next_power_of_2(max(1, x)))))


def _warps(block: int) -> int:
    # at least 4 elements per thread once blocks are large (128-bit loads), 1..8 warps
    return max(1, min(8, block // 128))


def loop_stages(bytes_per_step: int) -> int:
    """Loop stages for a program that loads ``bytes_per_step`` per time step.

    Each step depends on the previous one only through registers; its loads do not, so the
    scan runs at about (memory latency) / (steps in flight) per step until bandwidth binds. By
    Little's law a small tile (small n: a few hundred bytes a step) needs many steps in flight
    to hide the latency; a large tile has enough bytes in flight with a few. Stages are chosen
    so the pipeline's buffers stay within :data:`PREFETCH_BYTES` (a power of two in
    [MIN_STAGES, MAX_STAGES]). A design choice from latency arithmetic, not yet tuned on a GPU.
    """
    fits = max(1, PREFETCH_BYTES // max(1, bytes_per_step))
    return max(MIN_STAGES, min(MAX_STAGES, 1 << (fits.bit_length() - 1)))


def _min_block(elem_bytes: int) -> int:
    """The smallest block (one element per thread) whose per-thread load of ``elem_bytes``
    elements is at least 4 bytes (``elem_bytes`` 0: no such load). A warp of 16-bit loads, 2
    bytes per thread, cannot use cp.async (4, 8 or 16 bytes), so the compiler does not prefetch
    it and every time step waits a full memory latency: seen in the sm_90 SASS as plain LDG and
    no LDGSTS (``python -m snnbench.fused.aot``)."""
    return 32 * max(1, 4 // elem_bytes) if elem_bytes else 32


def forward_tile(width: int, programs: int, elem_bytes: int) -> tuple[int, int, int]:
    """(BLOCK, num_warps, stages) of the forward scan over ``width`` = B·n neurons for about
    ``programs`` programs, loading ``elem_bytes``-byte inputs. Pure, so the tiles a given GPU
    gets can be compiled ahead of time (:mod:`snnbench.fused.aot`)."""
    block = _pow2_clamp(triton.cdiv(width, programs), _min_block(elem_bytes), 1024)
    return block, _warps(block), loop_stages(block * elem_bytes)


def backward_tile(
    batch: int, n: int, programs: int, grad_bytes: int
) -> tuple[int, int, int, int]:
    """(BLOCK_B, BLOCK_N, num_warps, stages) of the backward scan over a (B, n) layer for
    about ``programs`` programs; each step loads float32 v_pre and a ``grad_bytes`` gradient
    (0: a scalar gradient, read once)."""
    least = _min_block(grad_bytes)
    block_n = _pow2_clamp(triton.cdiv(batch * n, programs), least, 256)
    block_n = min(block_n, _pow2_clamp(n, least, 256))
    block_b = _pow2_clamp(triton.cdiv(batch * n, programs * block_n), 1, 16)
    block_b = min(block_b, int(triton.next_power_of_2(batch)))
    tile = block_b * block_n
    return block_b, block_n, _warps(tile), loop_stages(tile * (4 + grad_bytes))


#: the scan designs: ``default`` (one time step per loop iteration, STAGES steps prefetched) and
#: ``chunked`` (CHUNK steps per iteration from one tile load; see the chunked kernels)
SCANS: tuple[str, ...] = ("default", "chunked")
#: float32 registers per thread a chunked program may give its input tiles (the loaded chunk;
#: the compiler's pipeline keeps the next ones in shared memory)
CHUNK_REGISTERS = 32
#: the most time steps in one chunk (the unrolled loop body grows with it)
MAX_CHUNK = 32


def chunk_steps(elems_per_thread: int, streams: int, steps: int) -> int:
    """Time steps per chunk of a chunked scan: a power of two such that the chunk's tiles
    (``streams`` loaded tensors of ``elems_per_thread`` elements per step) fit in
    :data:`CHUNK_REGISTERS` registers per thread, at most :data:`MAX_CHUNK` and no more than
    ``steps`` needs."""
    fits = max(1, CHUNK_REGISTERS // max(1, elems_per_thread * streams))
    chunk = min(MAX_CHUNK, 1 << (fits.bit_length() - 1))
    return max(1, min(chunk, int(triton.next_power_of_2(max(1, steps)))))


def chunk_stages(bytes_per_chunk: int) -> int:
    """Loop stages of a chunked scan (chunks whose loads are issued ahead: ``stages - 1``),
    2..8, within twice :data:`PREFETCH_BYTES` of shared memory (two programs per SM: 64 KiB of
    an H100's 228)."""
    return max(2, min(8, 2 * PREFETCH_BYTES // max(1, bytes_per_chunk)))


def _check_scan(scan: str) -> None:
    if scan not in SCANS:
        raise ValueError(f"scan must be one of {', '.join(SCANS)}, got {scan!r}")


#: compile options of every launch (no FMA contraction: see the module docstring)
LAUNCH_OPTIONS: dict[str, Any] = {"enable_fp_fusion": False}


@dataclass(frozen=True)
class Launch:
    """One kernel launch: grid, runtime arguments, constexprs and warps.

    Built by :func:`forward_launch` / :func:`backward_launch` from the tensors alone, so the
    launch that runs and the one :mod:`snnbench.fused.aot` compiles ahead of time (from meta
    tensors of the same shapes, dtypes and strides) are the same by construction.
    """

    kernel: Any  # a triton JITFunction
    grid: tuple[int, ...]
    args: tuple[Any, ...]
    constexprs: dict[str, Any]
    num_warps: int

    def run(self) -> None:
        """Launch it (compiling on first use)."""
        self.kernel[self.grid](
            *self.args, **self.constexprs, num_warps=self.num_warps, **LAUNCH_OPTIONS
        )


def forward_launch(
    y: torch.Tensor,
    vpre: torch.Tensor,
    spikes: torch.Tensor,
    p: LIFParams,
    programs: int,
    scan: str = "default",
) -> Launch | None:
    """The forward scan's launch over y (T, B·n) for about ``programs`` programs with the
    ``scan`` design (:data:`SCANS`); None when there is nothing to do."""
    _check_scan(scan)
    steps = y.shape[0]
    width = y.numel() // max(1, steps)
    if width == 0 or steps == 0:
        return None
    block, warps, stages = forward_tile(width, programs, y.element_size())
    if scan == "chunked":
        chunk = chunk_steps(max(1, block // (32 * warps)), 1, steps)
        return Launch(
            kernel=_lif_forward_chunked_kernel,
            grid=(triton.cdiv(width, block),),
            args=(y, vpre, spikes, steps, width, p.beta, p.threshold),
            constexprs={"SUBTRACT": p.reset == "subtract", "BLOCK": block, "CHUNK": chunk,
                        "STAGES": chunk_stages(chunk * block * y.element_size())},
            num_warps=warps,
        )
    return Launch(
        kernel=_lif_forward_kernel,
        grid=(triton.cdiv(width, block),),
        args=(y, vpre, spikes, steps, width, p.beta, p.threshold),
        constexprs={"SUBTRACT": p.reset == "subtract", "BLOCK": block, "STAGES": stages},
        num_warps=warps,
    )


def backward_launch(
    vpre: torch.Tensor,
    grad_s: torch.Tensor,
    dy: torch.Tensor,
    p: LIFParams,
    want_db: bool,
    programs: int,
    blocks: tuple[int, int] | None = None,
    scan: str = "default",
) -> Launch:
    """The backward scan's launch (see :func:`scan_backward`). When ``want_db`` it allocates,
    on ``vpre``'s device, the (batch blocks, n) float32 buffer that receives one bias-gradient
    row per batch block: ``args[3]``."""
    _check_scan(scan)
    steps, batch, n = vpre.shape
    # a size-1 dimension's stride is never used: 0 lets the all-broadcast case be detected
    g_st, g_sb, g_sj = (
        st if size > 1 else 0 for st, size in zip(grad_s.stride(), vpre.shape, strict=True)
    )
    scalar = g_st == g_sb == g_sj == 0
    if blocks is not None:
        block_b, block_n = blocks
        warps, stages = _warps(block_b * block_n), MIN_STAGES
    else:
        # a scalar gradient is read once, so the loop streams v_pre alone
        grad_bytes = 0 if scalar else grad_s.element_size()
        block_b, block_n, warps, stages = backward_tile(batch, n, programs, grad_bytes)
    grid = (triton.cdiv(n, block_n), triton.cdiv(batch, block_b))
    partial = (
        torch.empty((grid[1], n), dtype=torch.float32, device=vpre.device) if want_db else vpre
    )
    constexprs: dict[str, Any] = {
        "SUBTRACT": p.reset == "subtract",
        "DETACH": p.detach_reset,
        "SURROGATE": p.surrogate_code,
        "GRAD_SCALAR": scalar,
        "WANT_DB": want_db,
        "BLOCK_B": block_b,
        "BLOCK_N": block_n,
        "STAGES": stages,
    }
    kernel = _lif_backward_kernel
    if scan == "chunked":
        streams = 1 if scalar else 2
        tile = block_b * block_n
        chunk = chunk_steps(max(1, tile // (32 * warps)), streams, steps)
        grad_bytes = 0 if scalar else grad_s.element_size()
        kernel = _lif_backward_chunked_kernel
        constexprs["CHUNK"] = chunk
        constexprs["STAGES"] = chunk_stages(chunk * tile * (4 + grad_bytes))
    return Launch(
        kernel=kernel,
        grid=grid,
        args=(
            vpre,
            grad_s,
            dy,
            partial,
            steps,
            batch,
            n,
            g_st,
            g_sb,
            g_sj,
            p.beta,
            p.threshold,
            p.slope,
        ),
        constexprs=constexprs,
        num_warps=warps,
    )


def scan_forward(
    y: torch.Tensor, vpre: torch.Tensor, spikes: torch.Tensor, p: LIFParams,
    scan: str = "default",
) -> None:
    """Run the LIF recurrence over y (T, B·n) → v_pre (float32) and spikes, all contiguous.

    ``vpre`` may be ``y`` itself (float32: v_pre overwrites y in place). ``scan``: the kernel
    design (:data:`SCANS`); every design gives the same bits.
    """
    launch = forward_launch(y, vpre, spikes, p, _target_programs(y), scan)
    if launch is not None:
        launch.run()


def scan_backward(
    vpre: torch.Tensor,
    grad_s: torch.Tensor,
    dy: torch.Tensor,
    p: LIFParams,
    want_db: bool,
    blocks: tuple[int, int] | None = None,
    scan: str = "default",
) -> torch.Tensor | None:
    """Reverse-time BPTT: v_pre (T, B, n) float32 and dL/ds (any strides) → dL/dy in ``dy``.

    ``dy`` (T, B, n) contiguous has the spikes' dtype; for float32 it may be ``vpre``
    (overwritten in place). Returns the bias gradient (n,) in float32 when ``want_db``.
    ``blocks`` = (BLOCK_B, BLOCK_N) overrides the tile (powers of two; for tests). ``scan``:
    the kernel design (:data:`SCANS`), the same bits from each.
    """
    steps, batch, n = vpre.shape
    if steps == 0 or batch == 0 or n == 0:
        return torch.zeros(n, dtype=torch.float32, device=vpre.device) if want_db else None
    _check_scan(scan)
    launch = backward_launch(vpre, grad_s, dy, p, want_db, _target_programs(vpre), blocks, scan)
    launch.run()
    if not want_db:
        return None
    partial: torch.Tensor = launch.args[3]
    return partial[0] if launch.grid[1] == 1 else partial.sum(dim=0)

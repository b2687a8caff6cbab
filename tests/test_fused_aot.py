"""The Triton scans compiled ahead of time for an H200 (sm_90), on this GPU-less machine.

The interpreter tests (tests/test_fused.py) check what the kernels compute; these check what
they compile to, for exactly the launches the fused layer makes on an H200 at the benchmark's
shapes: that they compile, do not spill, prefetch every streamed load (cp.async, ``LDGSTS``)
and, in the forward, contain no fused multiply-add. Each check has a negative control showing
it can fail.
"""

from __future__ import annotations

import itertools

import pytest

pytest.importorskip("triton", reason="the fused extra (triton) is not installed")

from snnbench.fused import aot, triton_kernels as tk
from snnbench.fused.params import RESETS, SURROGATES, LIFParams

NEURONS = (512, 1024, 2048, 4096, 8192, 16384)
DTYPES = ("float32", "bfloat16", "float16")
# the settings of the shipped GPU sweeps (configs/opennm-2024.toml, configs/fused-gpu.toml)
SWEEP = LIFParams(surrogate="sigmoid", slope=4.0, detach_reset=False)


@pytest.fixture(scope="module")
def h200_builds() -> dict[tuple[int, str, bool], tuple[aot.KernelBuild, aot.KernelBuild]]:
    """(n, dtype, broadcast grad) → (forward, backward) compiled for sm_90 at B=16, T=500."""
    out = {}
    for n, dtype in itertools.product(NEURONS, DTYPES):
        fwd = None  # the forward does not depend on the upstream gradient: compiled once
        for broadcast in (True, False):
            launches = aot.layer_launches(16, n, 500, dtype, SWEEP, broadcast_grad=broadcast)
            fwd = fwd or aot.compile_launch(launches[0], 90)
            out[(n, dtype, broadcast)] = (fwd, aot.compile_launch(launches[1], 90))
    return out


def test_no_kernel_spills_registers(h200_builds: dict) -> None:
    for key, builds in h200_builds.items():
        for build in builds:
            assert build.spill_bytes == 0, (key, build.kernel, build.registers)
            assert 0 < build.registers <= 64, (key, build.kernel, build.registers)


def test_forward_has_no_fused_multiply_add(h200_builds: dict) -> None:
    for key, (fwd, _bwd) in h200_builds.items():
        assert fwd.sass_ops.get("FMUL", 0) > 0 and fwd.sass_ops.get("FADD", 0) > 0, key
        assert fwd.ffma == 0, (key, fwd.sass_ops)


def test_every_streamed_load_is_prefetched(h200_builds: dict) -> None:
    """No plain global load (LDG) in a scan, except the backward's one read of a scalar
    (all-stride-0) gradient; the pipeline's depth is the launcher's ``STAGES``."""
    for (n, dtype, broadcast), (fwd, bwd) in h200_builds.items():
        key = (n, dtype, broadcast)
        assert fwd.sass_ops.get("LDG", 0) == 0, (key, fwd.sass_ops)
        assert fwd.pipelined_loads >= fwd.constexprs["STAGES"], (key, fwd.sass_ops)
        assert bwd.constexprs["GRAD_SCALAR"] is broadcast, key
        assert bwd.sass_ops.get("LDG", 0) == (1 if broadcast else 0), (key, bwd.sass_ops)
        streams = 1 if broadcast else 2  # v_pre, and the gradient unless it is a scalar
        assert bwd.pipelined_loads >= streams * bwd.constexprs["STAGES"], (key, bwd.sass_ops)
        for build in (fwd, bwd):
            assert 0 < build.shared_bytes <= 2 * tk.PREFETCH_BYTES, (key, build.shared_bytes)


def test_launches_fill_an_h200(h200_builds: dict) -> None:
    """At least one program per SM at every benchmark size (the scans are latency-bound)."""
    for key, (fwd, bwd) in h200_builds.items():
        for build in (fwd, bwd):
            programs = 1
            for g in build.grid:
                programs *= g
            assert aot.H200_SMS * 0.9 <= programs <= 4 * aot.H200_SMS, (key, build.grid)


@pytest.mark.parametrize(
    ("reset", "detach", "surrogate", "want_db"),
    list(itertools.product(RESETS, (True, False), SURROGATES, (True, False))),
)
def test_every_kernel_variant_compiles_for_sm90(
    reset: str, detach: bool, surrogate: str, want_db: bool
) -> None:
    params = LIFParams(reset=reset, surrogate=surrogate, slope=2.5, detach_reset=detach)
    fwd, bwd = aot.layer_launches(16, 1000, 50, "float32", params, broadcast_grad=False,
                                  want_db=want_db)
    f, b = aot.compile_launch(fwd, 90), aot.compile_launch(bwd, 90)
    assert f.ffma == 0 and f.spill_bytes == 0 and b.spill_bytes == 0
    assert b.constexprs["SUBTRACT"] is (reset == "subtract")
    assert b.constexprs["DETACH"] is detach and b.constexprs["WANT_DB"] is want_db


def test_control_fp_fusion_would_contract_the_membrane_update() -> None:
    """With contraction allowed the forward gets FFMAs: the FFMA check can fail."""
    fwd, _ = aot.layer_launches(16, 4096, 500, "float32", SWEEP)
    fused = aot.compile_launch(fwd, 90, options={"enable_fp_fusion": True})
    assert fused.ffma > 0, fused.sass_ops


def test_control_two_byte_loads_are_not_prefetched() -> None:
    """A 16-bit forward with one element per thread (a block of 32) is not pipelined: the
    reason the launcher's smallest 16-bit block is 64, and proof the LDG check can fail."""
    fwd, _ = aot.layer_launches(16, 512, 500, "bfloat16", SWEEP)
    narrow = tk.Launch(kernel=fwd.kernel, grid=(256,), args=fwd.args,
                       constexprs={**fwd.constexprs, "BLOCK": 32}, num_warps=1)
    build = aot.compile_launch(narrow, 90)
    assert build.pipelined_loads == 0 and build.sass_ops.get("LDG", 0) > 0, build.sass_ops


def test_loop_stages_follow_the_prefetch_budget() -> None:
    assert tk.loop_stages(128) == tk.MAX_STAGES
    assert tk.loop_stages(tk.PREFETCH_BYTES // 8) == 8
    assert tk.loop_stages(tk.PREFETCH_BYTES) == tk.MIN_STAGES
    assert tk.forward_tile(16 * 512, 264, 2)[0] == 64  # 16-bit: at least 4 bytes per thread
    assert tk.forward_tile(16 * 512, 264, 4)[0] == 32


def test_command_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert aot.main(["--neurons", "512", "--dtypes", "bfloat16"]) == 0
    out = capsys.readouterr().out
    assert "sm_90, 132 SMs" in out and "lif_forward" in out and "lif_backward" in out
    assert aot.main(["--neurons", "0"]) == 2
    assert aot.main(["--dtypes", "float64"]) == 2


# -- the time-chunked scans (scan="chunked", the fused::chunked variant) ---------------------


@pytest.fixture(scope="module")
def chunked_builds() -> dict[tuple[int, str, bool], tuple[aot.KernelBuild, aot.KernelBuild]]:
    """(n, dtype, broadcast grad) → chunked (forward, backward) for sm_90 at B=16, T=500."""
    out = {}
    for n, dtype in itertools.product(NEURONS, ("float32", "bfloat16")):
        fwd = None
        for broadcast in (True, False):
            launches = aot.layer_launches(16, n, 500, dtype, SWEEP, broadcast_grad=broadcast,
                                          scan="chunked")
            fwd = fwd or aot.compile_launch(launches[0], 90)
            out[(n, dtype, broadcast)] = (fwd, aot.compile_launch(launches[1], 90))
    return out


def test_chunked_kernels_compile_without_spills(chunked_builds: dict) -> None:
    """No spill, no FFMA in the forward; registers may pass 64 (a chunk is unrolled), but the
    launch's programs per SM (:data:`PROGRAMS_PER_SM`, the scans' occupancy by design) still
    fit one SM's 64 Ki registers, so registers never cut the programs in flight."""
    for key, (fwd, bwd) in chunked_builds.items():
        assert fwd.kernel == "_lif_forward_chunked_kernel", key
        assert bwd.kernel == "_lif_backward_chunked_kernel", key
        assert fwd.ffma == 0, (key, fwd.sass_ops)
        for build in (fwd, bwd):
            assert build.spill_bytes == 0, (key, build.kernel, build.registers)
            threads = 32 * build.num_warps
            assert build.registers * threads * tk.PROGRAMS_PER_SM <= 65536, (
                key, build.kernel, build.registers, build.num_warps)


def test_chunked_loads_are_one_pipelined_tile_per_chunk(chunked_builds: dict) -> None:
    """The loops' loads are cp.async (LDGSTS) of whole chunks, no plain LDG in the loop; the
    pipeline keeps CHUNK·(STAGES-1) time steps in flight, more than the default scan's
    STAGES-1 at every benchmark size below 16384."""
    for (n, dtype, broadcast), (fwd, bwd) in chunked_builds.items():
        key = (n, dtype, broadcast)
        assert fwd.sass_ops.get("LDG", 0) == 0, (key, fwd.sass_ops)
        assert bwd.sass_ops.get("LDG", 0) == (1 if broadcast else 0), (key, bwd.sass_ops)
        streams = 1 if broadcast else 2
        assert fwd.pipelined_loads >= fwd.constexprs["STAGES"], (key, fwd.sass_ops)
        assert bwd.pipelined_loads >= streams * bwd.constexprs["STAGES"], (key, bwd.sass_ops)
        for build in (fwd, bwd):
            assert build.constexprs["CHUNK"] >= 4, (key, build.kernel, build.constexprs)
            assert 0 < build.shared_bytes <= 3 * tk.PREFETCH_BYTES, (key, build.shared_bytes)
        default = aot.layer_launches(16, n, 500, dtype, SWEEP, broadcast_grad=broadcast)
        for chunked, plain in zip((fwd, bwd), default, strict=True):
            ahead = chunked.constexprs["CHUNK"] * (chunked.constexprs["STAGES"] - 1)
            assert ahead >= plain.constexprs["STAGES"] - 1, (key, chunked.constexprs)
            if n < 16384:
                assert ahead > plain.constexprs["STAGES"] - 1, (key, chunked.constexprs)


def test_aot_command_compiles_the_chunked_scans(capsys: pytest.CaptureFixture[str]) -> None:
    assert aot.main(["--neurons", "512", "--dtypes", "bfloat16", "--scan", "chunked"]) == 0
    out = capsys.readouterr().out
    assert "lif_forward_chunked" in out and "lif_backward_chunked" in out and "chunk" in out

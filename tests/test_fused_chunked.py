"""The time-chunked Triton scans (``scan="chunked"``) against the default ones, bit for bit.

Both designs run in Triton's interpreter (``TRITON_INTERPRET=1``, in one subprocess so the
setting never leaks into this process) on the same inputs: float32, bfloat16 and float16, both
resets, detached or not, the three surrogates, a broadcast (stride-0) and a contiguous upstream
gradient, T not a multiple of the chunk and n not a multiple of the block, several chunk sizes
(one partial chunk, many). Spikes, v_pre, dY and the bias gradient must be equal bit for bit:
the chunked kernels do the same float32 operations in the same order. A membrane of -0.0 is
among the cases, so the exact row pick (padding with -0.0, the identity of addition) is tested.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("triton", reason="the fused extra (triton) is not installed")

HERE = Path(__file__).resolve().parent
DTYPES = ("float32", "bfloat16", "float16")
RESETS = ("subtract", "zero")
SURROGATES = ("fast_sigmoid", "atan", "sigmoid")


def _bits(t: Any) -> list[int]:
    import torch

    if t.dtype == torch.float32:
        return t.contiguous().view(torch.int32).flatten().tolist()  # type: ignore[no-any-return]
    return t.contiguous().view(torch.int16).flatten().tolist()  # type: ignore[no-any-return]


def _run(scan: str, y: Any, p: Any, grad: Any, chunk: int | None) -> dict[str, list[int]]:
    """Forward then backward scan of ``scan`` on a copy of y (T, B, n); ``chunk`` overrides
    the chunked kernels' CHUNK."""
    import dataclasses

    import torch

    from snnbench.fused import triton_kernels as tk

    steps, batch, n = y.shape
    y2 = y.clone().view(steps, -1)
    vpre = y2 if y.dtype == torch.float32 else torch.empty(y2.shape, dtype=torch.float32)
    spikes = torch.empty(y2.shape, dtype=y.dtype)
    fwd = tk.forward_launch(y2, vpre, spikes, p, 4, scan)
    assert fwd is not None
    if chunk is not None:
        fwd = dataclasses.replace(fwd, constexprs={**fwd.constexprs, "CHUNK": chunk})
    fwd.run()
    v3 = vpre.view(steps, batch, n)
    kept = v3.clone()
    dy = v3 if y.dtype == torch.float32 else torch.empty((steps, batch, n), dtype=y.dtype)
    bwd = tk.backward_launch(v3, grad, dy, p, True, 4, None, scan)
    if chunk is not None:
        bwd = dataclasses.replace(bwd, constexprs={**bwd.constexprs, "CHUNK": chunk})
    bwd.run()
    db = bwd.args[3].sum(dim=0)
    return {"spikes": _bits(spikes), "vpre": _bits(kept), "dy": _bits(dy), "db": _bits(db),
            "meta": [fwd.constexprs.get("CHUNK", 0), bwd.constexprs.get("CHUNK", 0)]}


def interpreter_main() -> None:
    """Subprocess entry: every case on both designs in the interpreter; print JSON."""
    import itertools
    import warnings

    import torch

    from snnbench.fused.params import LIFParams

    assert os.environ.get("TRITON_INTERPRET") == "1"
    warnings.filterwarnings("ignore", category=RuntimeWarning)  # exp overflow in sigmoid
    torch.manual_seed(0)
    out: dict[str, Any] = {}
    for dtype, reset, detach, surrogate in itertools.product(DTYPES, RESETS, (False, True),
                                                             SURROGATES):
        dt = getattr(torch, dtype)
        # small: the interpreter runs a chunk's row picks as Python reductions
        steps, batch, n = (11, 3, 40) if dtype == "float32" else (7, 2, 33)
        y = (torch.randn(steps, batch, n) * 1.5).to(dt)
        y[0, 0, :3] = torch.tensor([-0.0, 1.0, -0.0])  # signed zeros and a tie at threshold
        # a membrane of -0.0: the smallest negative subnormal halved (beta 0.5) rounds to -0.0,
        # plus an input of -0.0 stays -0.0 (picking the row with +0.0 padding would give +0.0)
        y[0, 0, 3], y[1, 0, 3] = -(2.0**-149), -0.0
        p = LIFParams(beta=0.5, reset=reset, detach_reset=detach, surrogate=surrogate, slope=3.0)
        grads = {"broadcast": torch.randn((), dtype=dt).expand(steps, batch, n),
                 "contiguous": torch.randn(steps, batch, n).to(dt)}
        for kind, grad in grads.items():
            # chunk None: the launcher's own (one partial chunk); 4: several chunks, the
            # earliest/last one partial
            for chunk in (None, 4) if kind == "contiguous" else (None,):
                key = f"{dtype}/{reset}/{'detach' if detach else 'attached'}/{surrogate}/{kind}"
                key += f"/chunk{chunk or 'auto'}"
                out[key] = {"default": _run("default", y, p, grad, None),
                            "chunked": _run("chunked", y, p, grad, chunk)}
    print(json.dumps({"cases": out, "layer": _layer_case()}))


def _layer_case() -> dict[str, Any]:
    """``fused_linear_lif(..., scan=...)`` end to end, both designs: spikes and gradients."""
    import torch

    from snnbench.fused import FusedLinearLIF

    res: dict[str, Any] = {}
    for scan in ("default", "chunked"):
        torch.manual_seed(1)
        layer = FusedLinearLIF(7, 9, backend="triton", scan=scan, reset="zero")
        x = torch.randn(11, 2, 7, requires_grad=True)
        s = layer(x)
        (s * torch.arange(9.0)).sum().backward()
        assert x.grad is not None and layer.weight.grad is not None and layer.bias is not None
        assert layer.bias.grad is not None
        res[scan] = {"spikes": _bits(s.detach()), "gx": _bits(x.grad),
                     "gw": _bits(layer.weight.grad), "gb": _bits(layer.bias.grad),
                     "repr": repr(layer)}
    return res


@pytest.fixture(scope="module")
def interpreted() -> dict[str, Any]:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONWARNINGS="ignore")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import test_fused_chunked; "
        "test_fused_chunked.interpreter_main()"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(HERE)], capture_output=True,
                          text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    payload: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return payload


@pytest.fixture(scope="module")
def both_designs(interpreted: dict[str, Any]) -> dict[str, Any]:
    cases: dict[str, Any] = interpreted["cases"]
    return cases


def test_the_layer_option_selects_the_design(interpreted: dict[str, Any]) -> None:
    """FusedLinearLIF(scan="chunked") through autograd: the same spikes and gradients."""
    layer = interpreted["layer"]
    assert "scan='chunked'" in layer["chunked"]["repr"]
    assert "scan=" not in layer["default"]["repr"]
    assert sum(layer["default"]["spikes"]) != 0  # some spikes, so the gradients mean something
    for part in ("spikes", "gx", "gw", "gb"):
        assert layer["chunked"][part] == layer["default"][part], part


def test_every_case_ran(both_designs: dict[str, Any]) -> None:
    assert len(both_designs) == len(DTYPES) * len(RESETS) * 2 * len(SURROGATES) * 3


def test_chunked_scans_are_bit_identical(both_designs: dict[str, Any]) -> None:
    for key, r in both_designs.items():
        for part in ("spikes", "vpre", "dy", "db"):
            assert r["chunked"][part] == r["default"][part], (key, part)


def test_cases_cover_partial_and_many_chunks(both_designs: dict[str, Any]) -> None:
    """T is not a multiple of any chunk used; CHUNK 4 gives several chunks per scan."""
    for key, r in both_designs.items():
        steps = 11 if key.startswith("float32") else 7
        for chunk in r["chunked"]["meta"]:
            assert chunk > 1 and steps % chunk != 0, (key, chunk)
        assert r["default"]["meta"] == [0, 0], key


def test_chunk_sizes_follow_the_register_budget() -> None:
    from snnbench.fused import triton_kernels as tk


    assert tk.chunk_steps(1, 1, 500) == tk.MAX_CHUNK
    assert tk.chunk_steps(4, 1, 500) == tk.CHUNK_REGISTERS // 4
    assert tk.chunk_steps(4, 2, 500) == tk.CHUNK_REGISTERS // 8
    assert tk.chunk_steps(1, 1, 5) == 8  # no more than T needs
    assert tk.chunk_steps(64, 2, 500) == 1
    assert tk.chunk_stages(256) == 8 and tk.chunk_stages(tk.PREFETCH_BYTES // 2) == 4
    assert tk.chunk_stages(4 * tk.PREFETCH_BYTES) == 2


def test_unknown_scan_is_refused() -> None:
    import torch

    from snnbench.fused import FusedLinearLIF, fused_linear_lif, triton_kernels as tk

    x, w = torch.zeros(2, 1, 3), torch.zeros(4, 3)
    with pytest.raises(ValueError, match="scan must be one of default, chunked"):
        FusedLinearLIF(3, 4, scan="nosuch")
    with pytest.raises(ValueError, match="scan must be one of"):
        fused_linear_lif(x, w, scan="nosuch")
    with pytest.raises(ValueError, match="needs the triton backend"):
        fused_linear_lif(x, w, backend="cpu", scan="chunked")
    with pytest.raises(ValueError, match="scan must be one of"):
        tk.forward_launch(x.view(2, -1), x.view(2, -1), x.view(2, -1), None, 4, "nosuch")  # type: ignore[arg-type]

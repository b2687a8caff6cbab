"""snnbench.fused (the fused Linear + LIF layer), its ``fused`` adapter and the ``floor`` adapter.

Both scan backends are checked on the CPU against the NumPy reference and the plain PyTorch
reference network:

* the compiled C++ scan (the CPU path) directly, in this process;
* the Triton kernels — the same ``@triton.jit`` functions the GPU runs — under Triton's
  interpreter (``TRITON_INTERPRET=1``), in one subprocess so that the interpreter setting never
  leaks into other tests. The interpreter is slow, so those shapes are tiny.

Checks: forward spikes identical (100 %) to the reference in float32 (the scan itself is
bit-exact given the same GEMM output), weight/bias gradients with cosine >= 0.99999 and max
relative error <= 1e-4, for both resets, three surrogates, detached and attached reset, and the
edge cases T=1, B=1, n not a multiple of the block, non-contiguous input, stride-0 and
arbitrary-stride upstream gradients, zero input, exact threshold ties, 16-bit dtypes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from snnbench.adapter import AdapterUnavailable
from snnbench.adapters.floor import FloorAdapter
from snnbench.adapters.fused import FusedAdapter
from snnbench.adapters.torch_ref import build_reference_network
from snnbench.fused import FusedLinearLIF, LIFParams, fused_linear_lif
from snnbench.measure.verify import check_adapter
from snnbench.workload import LinearLif
from snnbench.workload.linear_lif.equivalence import GRAD_COSINE_MIN, MIN_SPIKE_MATCH
from snnbench.workload.linear_lif.reference import _lif_backward, _lif_forward, run_reference
from snnbench.workload.linear_lif.spec import CaseData, NetworkSpec, make_case_data

GRAD_COSINE = 0.99999
GRAD_REL_ERR = 1e-4
HERE = Path(__file__).resolve().parent

# -- shared checking code (runs here for the CPU backend, in the subprocess for Triton) -------


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a64), np.linalg.norm(b64)
    if na == 0.0 and nb == 0.0:
        return 1.0
    return float(a64 @ b64 / (na * nb)) if na and nb else 0.0


def _rel_err(a: np.ndarray, ref: np.ndarray) -> float:
    scale = float(np.abs(ref).max()) or 1.0
    return float(np.abs(a.astype(np.float64) - ref).max() / scale)


#: the spec's AMP modes → the compute dtype passed to fused_linear_lif
AMP_TORCH: dict[str, torch.dtype] = {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}


def _params(spec: NetworkSpec) -> LIFParams:
    return LIFParams(
        beta=spec.beta,
        threshold=spec.threshold,
        reset=spec.reset,
        surrogate=spec.surrogate,
        slope=spec.surrogate_slope,
        detach_reset=spec.detach_reset,
    )


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def _run_fused(
    data: CaseData,
    backend: str,
    x: torch.Tensor | None = None,
    grad: torch.Tensor | None = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """Forward + backward of the fused network on ``data`` (float32 or the spec's dtype; the
    spec's AMP compute dtype through ``compute_dtype``)."""
    spec = data.spec
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
        spec.dtype
    ]
    ws = [torch.from_numpy(w).to(device, dtype).requires_grad_() for w in data.weights]
    bs = [torch.from_numpy(b).to(device, dtype).requires_grad_() for b in data.biases]
    h = torch.from_numpy(data.inputs).to(device, dtype) if x is None else x.to(device)
    for w, b in zip(ws, bs, strict=True):
        h = fused_linear_lif(h, w, b if spec.bias else None, _params(spec), backend,
                             compute_dtype=AMP_TORCH.get(spec.matmul_precision))
    if grad is None:
        h.sum().backward()  # the stride-0 upstream gradient
    else:
        h.backward(grad.to(device))
    return {
        "spikes": _np(h),
        "out_dtypes": sorted({str(t.dtype) for t in [h, *(w.grad for w in ws)] if t is not None}),
        "gw": [_np(w.grad) for w in ws],  # type: ignore[arg-type]
        "gb": [_np(b.grad) if b.grad is not None else np.zeros(b.shape, np.float32) for b in bs],
    }


def _run_torch_reference(data: CaseData, grad: torch.Tensor | None = None) -> dict[str, Any]:
    network, linears = build_reference_network(data.spec, data, "cpu")
    out = network(torch.from_numpy(data.inputs))
    if grad is None:
        out.sum().backward()
    else:
        out.backward(grad)
    return {
        "spikes": out.detach().numpy(),
        "gw": [lin.weight.grad.numpy() for lin in linears],
        "gb": [
            lin.bias.grad.numpy() if lin.bias is not None else np.zeros(lin.out_features)
            for lin in linears
        ],
    }


def _compare(out: dict[str, Any], ref_spikes: np.ndarray, ref_gw: Any, ref_gb: Any) -> dict[str, float]:
    gw = np.concatenate([g.ravel() for g in out["gw"]])
    rw = np.concatenate([np.asarray(g).ravel() for g in ref_gw])
    gb = np.concatenate([g.ravel() for g in out["gb"]])
    rb = np.concatenate([np.asarray(g).ravel() for g in ref_gb])
    return {
        "spike_match": float((out["spikes"] == ref_spikes).mean()),
        "spike_rate": float(ref_spikes.mean()),
        "w_cos": _cosine(gw, rw),
        "w_rel": _rel_err(gw, rw),
        "b_cos": _cosine(gb, rb),
        "b_rel": _rel_err(gb, rb),
    }


def _vs_reference(data: CaseData, backend: str, **kw: Any) -> dict[str, float]:
    ref = run_reference(data)
    return _compare(_run_fused(data, backend, **kw), ref.output_spikes, ref.grad_weights,
                    ref.grad_biases)


def _vs_torch(
    data: CaseData, backend: str, grad: torch.Tensor | None = None, device: str = "cpu"
) -> dict[str, float]:
    ref = _run_torch_reference(data, grad)
    out = _run_fused(data, backend, grad=grad, device=device)
    return _compare(out, ref["spikes"], ref["gw"], ref["gb"])


def _scan_exactness(
    backend: str, spec: NetworkSpec, dtype: torch.dtype, device: str = "cpu"
) -> dict[str, float]:
    """The scans alone on a given y: forward against reference._lif_forward bit for bit,
    backward dY against reference._lif_backward (with the stride-0 gradient of a sum)."""
    from snnbench.fused.autograd import scan_module

    scans = scan_module(backend)
    t, b, n = spec.input_shape()
    rng = np.random.default_rng(7)
    y = torch.from_numpy((rng.standard_normal((t, b, n)) * 1.2).astype(np.float32))
    y = y.to(device, dtype)
    y_np = _np(y)
    vpre = y.clone() if dtype == torch.float32 else torch.empty(t, b, n, device=device)
    spikes = torch.empty(t, b, n, dtype=dtype, device=device)
    src = vpre if dtype == torch.float32 else y
    scans.scan_forward(src.view(t, -1), vpre.view(t, -1), spikes.view(t, -1), _params(spec))
    ref_s, ref_v = _lif_forward(y_np, spec)
    grad = torch.ones((), dtype=dtype, device=device).expand(t, b, n)
    dy = vpre if dtype == torch.float32 else torch.empty(t, b, n, dtype=dtype, device=device)
    keep_v = vpre.clone()
    db = scans.scan_backward(vpre, grad, dy, _params(spec), True)
    ref_dy = _lif_backward(np.ones_like(y_np), ref_s, ref_v, spec)
    assert db is not None
    return {
        "spikes_equal": float((_np(spikes) == ref_s).mean()),
        "vpre_equal": float((_np(keep_v) == ref_v).mean()),
        "dy_rel": _rel_err(_np(dy), ref_dy),
        "db_rel": _rel_err(_np(db), ref_dy.reshape(-1, n).sum(0)),
    }


def _tile_check(
    spec: NetworkSpec, blocks: tuple[int, int], device: str = "cpu"
) -> dict[str, float]:
    """The Triton backward with a forced (BLOCK_B, BLOCK_N) tile: several batch blocks (the
    partial bias sums), masked rows and columns, and an arbitrary-strided upstream gradient."""
    from snnbench.fused import triton_kernels

    t, b, n = spec.input_shape()
    rng = np.random.default_rng(11)
    y = torch.from_numpy((rng.standard_normal((t, b, n)) * 1.2).astype(np.float32))
    ref_s, ref_v = _lif_forward(y.numpy(), spec)
    grad_np = rng.standard_normal((b, n, t)).astype(np.float32)
    # (T, B, n) with strides (1, n*T, T)
    grad = torch.from_numpy(grad_np).to(device).permute(2, 0, 1)
    vpre = torch.from_numpy(ref_v.copy()).to(device)
    db = triton_kernels.scan_backward(vpre, grad, vpre, _params(spec), True, blocks=blocks)
    ref_dy = _lif_backward(np.ascontiguousarray(_np(grad)), ref_s, ref_v, spec)
    assert db is not None
    return {
        "dy_rel": _rel_err(_np(vpre), ref_dy),
        "db_rel": _rel_err(_np(db), ref_dy.reshape(-1, n).sum(0)),
    }


def _tie_data() -> CaseData:
    """Inputs that put v_pre exactly on the threshold: identity weights, zero bias, and
    sequences such as 1.0 | 0.5, 0.5625 (0.875·0.5 + 0.5625 = 1.0 exactly) next to values one
    ulp below."""
    spec = NetworkSpec(neurons=6, batch_size=2, time_steps=4, bias=True, seed=0)
    below = np.nextafter(np.float32(1.0), np.float32(0.0))
    x = np.zeros((4, 2, 6), dtype=np.float32)
    x[0, :, 0] = 1.0  # tie at t=0
    x[0, :, 1] = below  # one ulp under: no spike
    x[:3, :, 2] = [[0.5], [0.5625], [0.0]]  # tie reached at t=1 through the leak
    x[:3, :, 3] = [[0.5], [np.float32(0.5625) - np.float32(2.0**-24)], [0.0]]  # just under
    x[:, 0, 4] = 1.0  # a tie at every step (subtract: v_post = 0 each time)
    x[:, 1, 5] = 2.0  # above threshold: zero reset vs subtract differ here
    return CaseData(
        inputs=x,
        weights=(np.eye(6, dtype=np.float32),),
        biases=(np.zeros(6, dtype=np.float32),),
        spec=spec,
    )


def _cases(backend: str, small: bool, device: str = "cpu") -> dict[str, Any]:
    """Every comparison, keyed by name. ``small`` shrinks shapes for the interpreter."""
    dev = {"device": device}
    n, b, t = (37, 3, 12) if small else (67, 4, 40)
    base = NetworkSpec(neurons=n, batch_size=b, time_steps=t, seed=5)
    results: dict[str, Any] = {}
    for reset in ("subtract", "zero"):
        for surrogate in ("fast_sigmoid", "atan", "sigmoid"):
            for detach in (True, False):
                spec = base.replace(reset=reset, surrogate=surrogate, detach_reset=detach)
                key = f"ref/{reset}/{surrogate}/{'detach' if detach else 'attach'}"
                results[key] = _vs_reference(make_case_data(spec), backend, **dev)
    for reset in ("subtract", "zero"):
        data = make_case_data(base.replace(reset=reset, detach_reset=reset == "zero"))
        results[f"torch/{reset}"] = _vs_torch(data, backend, **dev)
        # an arbitrary-strided upstream gradient (a transposed view), against torch autograd
        g = torch.from_numpy(
            np.random.default_rng(1).standard_normal((b, t, n)).astype(np.float32)
        ).transpose(0, 1)
        results[f"torch-grad/{reset}"] = _vs_torch(data, backend, grad=g, **dev)
    edges = {
        "T=1": base.replace(time_steps=1),
        "B=1": base.replace(batch_size=1),
        "n=1": base.replace(neurons=1, input_std=3.0),
        "layers=2": base.replace(layers=2),
        "no-bias": base.replace(bias=False),
    }
    for name, spec in edges.items():
        results[f"edge/{name}"] = _vs_reference(make_case_data(spec), backend, **dev)
    data = make_case_data(base)
    x_nc = torch.from_numpy(np.ascontiguousarray(data.inputs.transpose(1, 0, 2))).transpose(0, 1)
    assert not x_nc.is_contiguous()
    results["edge/non-contiguous-x"] = _vs_reference(data, backend, x=x_nc, **dev)
    zero = make_case_data(base)
    zero = CaseData(inputs=np.zeros_like(zero.inputs), weights=zero.weights,
                    biases=zero.biases, spec=zero.spec)
    results["edge/zero-input"] = _vs_reference(zero, backend, **dev)
    for reset in ("subtract", "zero"):
        tie = _tie_data()
        tie = CaseData(inputs=tie.inputs, weights=tie.weights, biases=tie.biases,
                       spec=tie.spec.replace(reset=reset))
        out = _run_fused(tie, backend, **dev)
        ref = run_reference(tie)
        results[f"tie/{reset}"] = {
            "spikes": out["spikes"][:, :, :].tolist(),
            "ref_spikes": ref.output_spikes.tolist(),
            **_compare(out, ref.output_spikes, ref.grad_weights, ref.grad_biases),
        }
    for dtype_name in ("bfloat16", "float16"):
        spec16 = base.replace(dtype=dtype_name)
        data16 = make_case_data(spec16)
        ref16 = LinearLif(data16.spec).reference(data16)
        results[f"dtype/{dtype_name}"] = _compare(
            _run_fused(data16, backend, **dev), ref16.output_spikes, ref16.grad_weights,
            ref16.grad_biases
        )
    for amp in AMP_TORCH:
        for reset in ("subtract", "zero"):
            # AMP: 16-bit GEMMs, float32 scan, against the reference's autocast emulation
            spec_amp = base.replace(matmul_precision=amp, reset=reset, layers=2, input_std=2.0)
            data_amp = make_case_data(spec_amp)
            ref_amp = LinearLif(data_amp.spec).reference(data_amp)
            out = _run_fused(data_amp, backend, **dev)
            results[f"amp/{amp}/{reset}"] = {
                "out_dtypes": out["out_dtypes"],
                "fp32_spike_match": float(
                    (out["spikes"] == run_reference(make_case_data(
                        spec_amp.replace(matmul_precision="strict"))).output_spikes).mean()),
                **_compare(out, ref_amp.output_spikes, ref_amp.grad_weights,
                           ref_amp.grad_biases),
            }
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for reset in ("subtract", "zero"):
            spec = base.replace(reset=reset, detach_reset=False, surrogate="atan")
            results[f"scan/{reset}/{dtype}"] = _scan_exactness(backend, spec, dtype, device)
    if backend == "triton":
        spec = base.replace(reset="zero", detach_reset=False, surrogate="sigmoid")
        for blocks in ((2, 32), (4, 64), (1, 32)):
            results[f"tile/{blocks[0]}x{blocks[1]}"] = _tile_check(spec, blocks, device)
    return results


def interpreter_main() -> None:
    """Subprocess entry: run every case on the Triton kernels in the interpreter; print JSON."""
    import warnings

    assert os.environ.get("TRITON_INTERPRET") == "1"
    warnings.filterwarnings("ignore", category=RuntimeWarning)  # exp overflow in sigmoid
    from snnbench.fused import triton_kernels

    # the same @triton.jit objects the GPU launches, interpreted
    kernel = triton_kernels._lif_forward_kernel
    info = {"kernel_type": type(kernel).__name__}
    print(json.dumps({"info": info, "results": _cases("triton", small=True)}))


# -- the checks ------------------------------------------------------------------------------


def _assert_results(results: dict[str, Any]) -> None:
    for key, r in results.items():
        if key.startswith(("ref/", "torch", "edge/", "tie/")):
            assert r["spike_match"] == 1.0, (key, r)
            assert r["w_cos"] >= GRAD_COSINE, (key, r)
            assert r["w_rel"] <= GRAD_REL_ERR, (key, r)
            assert r["b_cos"] >= GRAD_COSINE, (key, r)
            assert r["b_rel"] <= GRAD_REL_ERR, (key, r)
        elif key.startswith("dtype/"):
            dtype = key.split("/")[1]
            assert r["spike_match"] >= MIN_SPIKE_MATCH[dtype], (key, r)
            assert r["w_cos"] >= 0.99, (key, r)
        elif key.startswith("amp/"):
            mode = key.split("/")[1]
            assert r["out_dtypes"] == ["torch.float32"], (key, r)  # spikes and dW float32
            assert r["spike_match"] >= MIN_SPIKE_MATCH[mode], (key, r)
            assert r["w_cos"] >= GRAD_COSINE_MIN[mode], (key, r)
            assert r["b_cos"] >= GRAD_COSINE_MIN[mode], (key, r)
        elif key.startswith("scan/"):
            # given the same y, the forward scan is the reference bit for bit
            assert r["spikes_equal"] == 1.0, (key, r)
            assert r["vpre_equal"] == 1.0, (key, r)
            tol = 1e-6 if key.endswith("float32") else 1e-2  # dY rounded to 16 bits
            assert r["dy_rel"] <= tol, (key, r)
            assert r["db_rel"] <= 1e-5, (key, r)
        elif key.startswith("tile/"):
            assert r["dy_rel"] <= 1e-6 and r["db_rel"] <= 1e-5, (key, r)
    # the tie cases spike exactly where v_pre == threshold
    for reset in ("subtract", "zero"):
        s = np.asarray(results[f"tie/{reset}"]["spikes"])
        assert s[0, :, 0].tolist() == [1.0, 1.0]
        assert s[:, :, 1].sum() == 0.0
        assert s[1, :, 2].tolist() == [1.0, 1.0]
        assert s[:, :, 3].sum() == 0.0
        assert s[:, 0, 4].tolist() == [1.0] * 4


@pytest.fixture(scope="module")
def interpreter_results() -> dict[str, Any]:
    """Run the Triton kernels under TRITON_INTERPRET=1 once, in a subprocess."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONWARNINGS="ignore")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import test_fused; "
        "test_fused.interpreter_main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(HERE)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    payload: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return payload


def test_triton_kernels_run_in_the_interpreter(interpreter_results: dict[str, Any]) -> None:
    assert interpreter_results["info"]["kernel_type"] == "InterpretedFunction"


def test_triton_kernels_match_the_references(interpreter_results: dict[str, Any]) -> None:
    _assert_results(interpreter_results["results"])


@pytest.fixture(scope="module")
def cpu_results() -> dict[str, Any]:
    return _cases("cpu", small=False)


def test_cpu_scan_matches_the_references(cpu_results: dict[str, Any]) -> None:
    _assert_results(cpu_results)


def test_cpu_and_triton_agree(
    cpu_results: dict[str, Any], interpreter_results: dict[str, Any]
) -> None:
    # different shapes, same verdicts: every case is present in both (tiles are Triton's)
    triton_keys = {k for k in interpreter_results["results"] if not k.startswith("tile/")}
    assert set(cpu_results) == triton_keys


def test_backward_twice_raises() -> None:
    layer = FusedLinearLIF(8, 8, backend="cpu")
    out = layer(torch.randn(5, 2, 8) * 3)
    out.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward ran twice"):
        out.sum().backward()


def test_layer_is_a_drop_in_module() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        FusedLinearLIF(16, 32, beta=0.9, reset="zero", surrogate="atan", slope=2.0),
        FusedLinearLIF(32, 8, bias=False, detach_reset=False),
    )
    x = torch.randn(20, 4, 16) * 2
    x.requires_grad_()
    out = model(x)
    assert out.shape == (20, 4, 8)
    assert out.dtype == torch.float32
    out.sum().backward()
    names = {name for name, _ in model.named_parameters()}
    assert names == {"0.weight", "0.bias", "1.weight"}
    assert all(p.grad is not None for p in model.parameters())
    assert x.grad is not None and x.grad.shape == x.shape
    assert "reset='zero'" in repr(model[0])
    bound = 1.0 / np.sqrt(16)
    assert float(model[0].bias.detach().abs().max()) <= bound  # nn.Linear's initialisation range


def test_invalid_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="reset"):
        FusedLinearLIF(4, 4, reset="sometimes")
    with pytest.raises(ValueError, match="time-major"):
        fused_linear_lif(torch.zeros(4, 4), torch.zeros(4, 4))
    with pytest.raises(TypeError, match="share one dtype"):
        fused_linear_lif(torch.zeros(2, 2, 4), torch.zeros(4, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="backend"):
        fused_linear_lif(torch.zeros(2, 2, 4), torch.zeros(4, 4), backend="cuda-please")
    if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
            fused_linear_lif(torch.zeros(2, 2, 4), torch.zeros(4, 4), backend="triton")


def test_importing_does_not_import_triton_or_compile() -> None:
    code = (
        "import sys, snnbench.fused, snnbench.adapters.fused, snnbench.adapters.floor; "
        "import snnbench.fused.cpu as c; "
        "print('triton' in sys.modules, c._lib is None)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.split() == ["False", "True"], proc.stderr


# -- the adapters ----------------------------------------------------------------------------

SMALL = NetworkSpec(neurons=48, batch_size=3, time_steps=30, seed=2)


@pytest.mark.parametrize(
    "spec",
    [
        SMALL,
        SMALL.replace(reset="zero", surrogate="sigmoid", detach_reset=False),
        SMALL.replace(layers=2, surrogate="atan", input_kind="bernoulli", input_rate=0.3),
    ],
    ids=["default", "zero-sigmoid-attached", "two-layers"],
)
def test_fused_adapter_is_exact_on_cpu(spec: NetworkSpec) -> None:
    adapter = FusedAdapter()
    adapter.version()
    adapter.check_variant("default", "cpu")
    assert adapter.reason_skipped(spec, "cpu", "default") is None
    eq, _ = check_adapter(adapter, "default", spec, "cpu")
    assert eq.spike_match == 1.0 and eq.first_diff_step is None
    assert eq.grad_cosine >= GRAD_COSINE and eq.bias_grad_cosine >= GRAD_COSINE
    assert eq.grad_max_rel_err <= GRAD_REL_ERR


def test_fused_adapter_bfloat16_on_cpu() -> None:
    spec = SMALL.replace(dtype="bfloat16")
    eq, _ = check_adapter(FusedAdapter(), "default", spec, "cpu")
    assert eq.passes("bfloat16")
    assert eq.grad_cosine >= 0.99


@pytest.mark.parametrize("amp", ["amp-bf16", "amp-fp16"])
def test_fused_adapter_amp_on_cpu(amp: str) -> None:
    spec = SMALL.replace(matmul_precision=amp)
    eq, _ = check_adapter(FusedAdapter(), "default", spec, "cpu")
    assert eq.passes(amp), eq
    assert eq.grad_cosine >= GRAD_COSINE_MIN[amp], eq
    # CUDA graph capture of AMP is not verified: that variant declares float32 matmuls only
    reason = FusedAdapter().reason_skipped(spec, "cuda", "cudagraph")
    assert reason is not None and "strict, tf32" in reason


def test_fused_adapter_cuda_unavailable_without_gpu() -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: nothing to refuse")
    with pytest.raises(AdapterUnavailable, match="CUDA"):
        FusedAdapter().check_variant("default", "cuda")


def test_cudagraph_variant_is_cuda_only() -> None:
    adapter = FusedAdapter()
    assert adapter.variants == ("default", "cudagraph", "chunked")
    spec = NetworkSpec(neurons=8, batch_size=2, time_steps=3)
    # decided from the capabilities, without importing anything: a skipped row on the CPU
    assert "supports: cuda" in (adapter.reason_skipped(spec, "cpu", "cudagraph") or "")
    assert adapter.reason_skipped(spec, "cpu", "default") is None
    with pytest.raises(AdapterUnavailable, match="CUDA graphs need a CUDA device"):
        adapter.check_variant("cudagraph", "cpu")
    with pytest.raises(AdapterUnavailable, match="unknown variant"):
        adapter.check_variant("nosuch", "cpu")
    # the chunked Triton scans: CUDA only too
    assert "supports: cuda" in (adapter.reason_skipped(spec, "cpu", "chunked") or "")
    with pytest.raises(AdapterUnavailable, match="CUDA"):
        adapter.check_variant("chunked", "cpu")


def test_failed_cpu_build_is_unavailable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from snnbench.fused import cpu

    monkeypatch.setattr(cpu, "_source", lambda: "this is not C++\n")
    monkeypatch.setattr(cpu, "_info", None)
    monkeypatch.setattr(cpu, "_lib", None)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    with pytest.raises(AdapterUnavailable, match="could not be built"):
        FusedAdapter().check_variant("default", "cpu")
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    monkeypatch.setattr(cpu.shutil, "which", lambda _name: None)
    with pytest.raises(AdapterUnavailable, match="no C\\+\\+ compiler"):
        FusedAdapter().check_variant("default", "cpu")


def test_cpu_build_is_cached() -> None:
    from snnbench.fused import cpu

    info = cpu.build()
    assert info.path.is_file()
    assert cpu.build() is info  # once per process
    code = "import snnbench.fused.cpu as c; i = c.build(); print(i.cached, i.compile_s)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.split() == ["True", "0.0"], proc.stderr


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("bias", [True, False])
def test_floor_adapter_runs_the_gemms(layers: int, bias: bool) -> None:
    spec = NetworkSpec(neurons=24, batch_size=2, time_steps=5, layers=layers, bias=bias)
    adapter = FloorAdapter()
    caps = adapter.capabilities("default")
    assert not caps.verifiable and not caps.exact_dynamics
    assert caps.approximation_note == "GEMM floor, not a network"
    assert adapter.reason_skipped(spec, "cpu", "default") is None
    data = make_case_data(spec)
    model = adapter.build(spec, data, "cpu", "default")
    model.zero_grad()
    handle = model.forward()
    model.backward(handle)
    model.step()
    model.synchronize()
    x = data.inputs.reshape(-1, 24)
    expected = x @ data.weights[0].T + (data.biases[0] if bias else 0.0)
    np.testing.assert_allclose(handle[0].numpy(), expected, rtol=1e-5, atol=1e-5)
    assert model.spikes(handle).shape == (5, 2, 24)
    grad_w, grad_b = model.gradients()
    assert [g.shape for g in grad_w] == [(24, 24)] * layers
    assert [g.shape for g in grad_b] == [(24,)] * layers
    model.close()


@pytest.mark.parametrize("choice", ["onednn", "blas"])
def test_both_cpu_gemm_paths_are_exact(monkeypatch: pytest.MonkeyPatch, choice: str) -> None:
    from snnbench.fused import gemm

    monkeypatch.setenv(gemm.CPU_GEMM_ENV, choice)
    gemm._onednn_linear.cache_clear()
    try:
        if choice == "onednn" and not torch.backends.mkldnn.is_available():
            pytest.skip("this torch was built without oneDNN")
        assert gemm.cpu_gemm_backend() == choice
        spec = NetworkSpec(neurons=40, batch_size=3, time_steps=20, layers=2, seed=9)
        r = _vs_reference(make_case_data(spec), "cpu")
        assert r["spike_match"] == 1.0
        assert r["w_cos"] >= GRAD_COSINE and r["w_rel"] <= GRAD_REL_ERR
    finally:
        gemm._onednn_linear.cache_clear()


def test_cpu_scan_with_two_threads() -> None:
    # T·B·n above the 2 M elements per extra thread: the OpenMP split (ranges cut at multiples
    # of 32 elements, here with a ragged end) is exercised, forward and backward
    spec = NetworkSpec(neurons=4100, batch_size=16, time_steps=64, reset="zero",
                       detach_reset=False)
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        r = _scan_exactness("cpu", spec, torch.float32)
    finally:
        torch.set_num_threads(old)
    assert r["spikes_equal"] == 1.0 and r["vpre_equal"] == 1.0
    assert r["dy_rel"] <= 1e-6 and r["db_rel"] <= 1e-5


def test_autocast_gives_mixed_precision() -> None:
    # under torch.autocast the layer computes as with compute_dtype=autocast's dtype, like an
    # nn.Linear would: its GEMMs in bfloat16, its parameters and outputs float32
    torch.manual_seed(1)
    layer = FusedLinearLIF(24, 24, backend="cpu")
    x = torch.randn(10, 2, 24) * 2
    explicit = fused_linear_lif(x, layer.weight, layer.bias, layer.params, "cpu",
                                compute_dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = layer(x)
    assert got.dtype == torch.float32
    assert torch.equal(got, explicit)
    got.sum().backward()
    assert layer.weight.grad is not None and layer.weight.grad.dtype == torch.float32
    # autocast disabled inside (enabled=False) is the float32 layer again
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        assert torch.equal(layer(x), fused_linear_lif(x, layer.weight, layer.bias,
                                                      layer.params, "cpu"))


def test_amp_runs_every_gemm_in_the_compute_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    # bf16 GEMMs (forward and both backward ones), a float32 v_pre, float32 results
    from snnbench.fused import gemm

    seen: list[tuple[str, torch.dtype, torch.dtype]] = []
    for name in ("linear", "grad_weight", "grad_input"):
        original = getattr(gemm, name)

        def spy(a: torch.Tensor, b: torch.Tensor, *rest: Any, _f: Any = original,
                _n: str = name) -> torch.Tensor:
            out: torch.Tensor = _f(a, b, *rest)
            seen.append((_n, a.dtype, out.dtype))
            return out

        monkeypatch.setattr(gemm, name, spy)
    spec = NetworkSpec(neurons=16, batch_size=2, time_steps=6, matmul_precision="amp-bf16")
    data = make_case_data(spec)
    x = torch.from_numpy(data.inputs).requires_grad_()
    out = _run_fused(data, "cpu", x=x)
    assert {name for name, _, _ in seen} == {"linear", "grad_weight", "grad_input"}
    assert all(a == torch.bfloat16 and o == torch.bfloat16 for _, a, o in seen), seen
    assert out["out_dtypes"] == ["torch.float32"]
    assert x.grad is not None and x.grad.dtype == torch.float32


def test_amp_compute_dtype_is_checked() -> None:
    w = torch.zeros(4, 4)
    with pytest.raises(TypeError, match="compute_dtype"):
        fused_linear_lif(torch.zeros(2, 1, 4), w, None, compute_dtype=torch.float64)
    with pytest.raises(TypeError, match="compute_dtype"):
        fused_linear_lif(torch.zeros(2, 1, 4, dtype=torch.bfloat16), w.bfloat16(), None,
                         compute_dtype=torch.float16)


@pytest.mark.parametrize("slope", [4.0, 25.0])
def test_cpu_sigmoid_surrogate_accuracy(slope: float) -> None:
    # the C++ scan's vectorised exp: as close to the exact (float64) surrogate as the NumPy
    # reference is, over the whole range including exp overflow
    from snnbench.fused import cpu
    from snnbench.workload.linear_lif.reference import surrogate_grad

    u = np.concatenate([np.linspace(-40, 40, 20001), [-1e-8, 0.0, 1e-8]]).astype(np.float32)
    spec = NetworkSpec(neurons=u.size, batch_size=1, time_steps=1, surrogate="sigmoid",
                       surrogate_slope=slope)
    vpre = torch.from_numpy(u + np.float32(spec.threshold)).reshape(1, 1, -1)
    u_f32 = vpre.numpy().ravel() - np.float32(spec.threshold)
    with np.errstate(over="ignore"):
        reference = surrogate_grad(u_f32, "sigmoid", slope).astype(np.float64)
    k = np.float64(np.float32(slope))
    with np.errstate(over="ignore"):
        sig = 1.0 / (1.0 + np.exp(-k * u_f32.astype(np.float64)))
    exact = k * sig * (1.0 - sig)
    grad = torch.ones((), dtype=torch.float32).expand(1, 1, u.size)
    cpu.scan_backward(vpre, grad, vpre, _params(spec), False)
    got = vpre.numpy().ravel().astype(np.float64)
    peak = float(exact.max())
    big = exact > 1e-3 * peak
    for metric in (
        lambda a: np.abs(a - exact).max() / peak,
        lambda a: (np.abs(a - exact)[big] / exact[big]).max(),
    ):
        assert metric(got) <= 2.0 * metric(reference) + 1e-7


# -- on a GPU (skipped on CPU-only machines) ---------------------------------------------------

needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device: the compiled Triton kernels need a GPU (their code runs under the "
    "interpreter in test_triton_kernels_match_the_references)",
)


@needs_cuda
def test_triton_kernels_on_cuda() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False  # the strict float32 reference
    results = _cases("triton", small=False, device="cuda")
    _assert_results(results)


@needs_cuda
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_fused_adapter_on_cuda(dtype: str) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    spec = NetworkSpec(neurons=256, batch_size=16, time_steps=50, layers=2, dtype=dtype)
    adapter = FusedAdapter()
    adapter.check_variant("default", "cuda")
    eq, _ = check_adapter(adapter, "default", spec, "cuda")
    assert eq.passes(dtype)
    if dtype == "float32":
        assert eq.grad_cosine >= GRAD_COSINE and eq.grad_max_rel_err <= GRAD_REL_ERR
    else:
        assert eq.grad_cosine >= 0.99


class _NewStorages(TorchDispatchMode):
    """Records (op, bytes) of every tensor storage an op creates: outputs whose storage is
    none of the op's arguments' (views, in-place and out= ops return one of those)."""

    def __init__(self) -> None:
        super().__init__()
        self.created: list[tuple[str, int]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        given = {g.untyped_storage().data_ptr()
                 for g in torch.utils._pytree.tree_leaves((args, kwargs))
                 if isinstance(g, torch.Tensor)}
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in given:
                self.created.append((str(func), t.untyped_storage().nbytes()))
        return out


@pytest.fixture
def blas_gemms(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The CPU GEMMs through torch.addmm/mm (they allocate like cuBLAS). The choice is cached
    per process, so the cache is cleared on entry and exit (otherwise an earlier test's
    oneDNN choice stays in force and the next tests would inherit this one)."""
    from snnbench.fused import gemm

    monkeypatch.setenv(gemm.CPU_GEMM_ENV, "blas")
    gemm._onednn_linear.cache_clear()
    yield
    gemm._onednn_linear.cache_clear()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_activation_buffer_per_step(dtype: torch.dtype, blas_gemms: None) -> None:
    """The memory design, allocation by allocation: forward creates Y and the spikes (plus a
    float32 v_pre for 16-bit, Y then being freed), backward only dW. No other T·B·n-sized
    tensor: the saved buffer is reused for v_pre and dY, the stride-0 gradient is not expanded."""
    from snnbench.fused import gemm

    assert gemm.cpu_gemm_backend() == "blas"
    t, b, n_in, n = 20, 4, 48, 64  # T·B·n = 5120 elements, n² = 4096, n·n_in = 3072
    x = torch.rand(t, b, n_in, dtype=dtype)
    lin = torch.nn.Linear(n_in, n, dtype=dtype)
    params = LIFParams(reset="zero", surrogate="sigmoid", slope=4.0, detach_reset=False)
    fwd = _NewStorages()
    with fwd:
        out = fused_linear_lif(x, lin.weight, lin.bias, params, "cpu")
    (saved_x, saved_w, vpre) = out.grad_fn.saved_tensors
    assert saved_x.data_ptr() == x.data_ptr() and saved_w.data_ptr() == lin.weight.data_ptr()
    assert vpre.shape == (t, b, n) and vpre.dtype == torch.float32
    bwd = _NewStorages()
    with bwd:
        out.sum().backward()
    act = t * b * n * dtype.itemsize
    big_fwd = sorted(nbytes for _, nbytes in fwd.created if nbytes >= act)
    if dtype == torch.float32:
        assert big_fwd == [act, act], fwd.created  # Y (= v_pre), spikes
    else:
        assert big_fwd == [act, act, 2 * act], fwd.created  # Y, spikes, float32 v_pre
    big_bwd = [(op, nbytes) for op, nbytes in bwd.created if nbytes >= n_in * n * dtype.itemsize]
    if dtype == torch.float32:
        assert [nbytes for _, nbytes in big_bwd] == [n * n_in * 4], bwd.created  # dW only
    else:  # 16-bit: dY in the spikes' dtype (v_pre is float32), then dW
        assert sorted(nbytes for _, nbytes in big_bwd) == [n * n_in * 2, act], bwd.created
    assert lin.weight.grad is not None and lin.bias.grad is not None


@pytest.mark.parametrize("shape", [(1600, 128), (17, 5), (33, 48), (1, 1), (16, 16), (40, 1)])
def test_cpu_transpose_is_exact(shape: tuple[int, int]) -> None:
    """The tiled transpose (whole 16 × 16 tiles and ragged edges) is a copy of ``.t()``."""
    from snnbench.fused import cpu

    cpu.build()
    src = torch.randn(*shape)
    out = cpu.transpose(src)
    assert out.is_contiguous() and torch.equal(out, src.t())


def test_cpu_transpose_with_two_threads() -> None:
    from snnbench.fused import cpu

    cpu.build()
    src = torch.randn(4099, 1030)  # above 2 M elements: split over two threads, ragged rows
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert torch.equal(cpu.transpose(src), src.t())
    finally:
        torch.set_num_threads(old)


def test_onednn_grad_weight_takes_a_contiguous_transpose(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the CPU library loaded, dW = dYᵀX hands oneDNN a contiguous dYᵀ from the tiled
    transpose (oneDNN would otherwise copy the strided view itself, twice as slowly); the
    result matches the strided path and torch.mm."""
    from snnbench.fused import cpu, gemm

    if gemm.cpu_gemm_backend() != "onednn":
        pytest.skip("the CPU GEMMs do not go through oneDNN here")
    cpu.build()
    dy, x = torch.randn(200, 24), torch.randn(200, 40)
    calls: list[tuple[int, ...]] = []
    real = cpu.transpose

    def spy(src: torch.Tensor) -> torch.Tensor:
        calls.append(tuple(src.shape))
        return real(src)

    monkeypatch.setattr(cpu, "transpose", spy)
    fast = gemm.grad_weight(dy, x)
    assert calls == [(200, 24)]
    monkeypatch.setattr(cpu, "is_loaded", lambda: False)
    strided = gemm.grad_weight(dy, x)
    assert calls == [(200, 24)]  # without the library: the strided view, no transpose call
    assert fast.shape == (24, 40)
    torch.testing.assert_close(fast, strided, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fast, dy.t() @ x, rtol=1e-5, atol=1e-5)


def test_floor_loads_the_cpu_library() -> None:
    """The floor's dW takes the same path as the fused adapter's: its check loads the library."""
    from snnbench.fused import cpu

    FloorAdapter().check_variant("default", "cpu")
    assert cpu.is_loaded()

"""Automatic mixed precision (``matmul_precision`` ``amp-bf16`` / ``amp-fp16``, issue 24).

The spec and its refusals, the plugin default (an adapter that says nothing about AMP does not
get it), the reference's emulation of ``torch.autocast`` checked against torch itself, the
GradScaler of float16, each adapter that declares AMP against the reference, and the command
line (bad input: one line, exit 2; an adapter that cannot: a ``skipped`` row).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from snnbench.adapter import Capabilities
from snnbench.adapter_shim import AnyAdapter, as_v2
from snnbench.adapters.torch_ref import TorchAdapter
from snnbench.measure.verify import check_adapter
from snnbench.workload.linear_lif.equivalence import GRAD_COSINE_MIN, MIN_SPIKE_MATCH, tolerance_key
from snnbench.workload.linear_lif.reference import (
    grad_scale,
    linear_currents,
    round_to_dtype,
    run_reference,
)
from snnbench.workload.linear_lif.spec import (
    AMP_COMPUTE_DTYPES,
    MATMUL_PRECISIONS,
    NetworkSpec,
    SpecError,
    make_case_data,
)
from tests.conftest import available_or_skip, run_cli

SMALL = NetworkSpec(neurons=48, batch_size=3, time_steps=25, seed=5, input_std=2.0)
AMP_MODES = tuple(AMP_COMPUTE_DTYPES)
TORCH_AMP = {"bfloat16": torch.bfloat16, "float16": torch.float16}


# -- the spec ---------------------------------------------------------------------------------
def test_amp_modes_are_spec_values() -> None:
    assert set(AMP_MODES) <= set(MATMUL_PRECISIONS)
    for mode, dtype in AMP_COMPUTE_DTYPES.items():
        spec = SMALL.replace(matmul_precision=mode)
        assert spec.amp_dtype == dtype and spec.dtype == "float32"
        assert spec.label.endswith(mode)
        assert tolerance_key(spec) == mode
    assert SMALL.amp_dtype is None and tolerance_key(SMALL) == "float32"
    assert SMALL.replace(matmul_precision="tf32").amp_dtype is None


def test_amp_needs_float32_weights() -> None:
    with pytest.raises(SpecError, match="amp-bf16 keeps weights and state float32"):
        SMALL.replace(dtype="bfloat16", matmul_precision="amp-bf16")


def test_unknown_precision_names_the_modes() -> None:
    with pytest.raises(SpecError, match="strict, tf32, amp-bf16, amp-fp16"):
        SMALL.replace(matmul_precision="amp")


# -- the plugin default -----------------------------------------------------------------------
def test_an_adapter_silent_about_amp_does_not_get_it() -> None:
    caps = Capabilities()
    assert caps.matmul_precisions == ("strict", "tf32")
    reason = caps.reason_unsupported(SMALL.replace(matmul_precision="amp-fp16"), "cpu")
    assert reason == "matmul precision 'amp-fp16' not supported (supports: strict, tf32)"
    assert caps.reason_unsupported(SMALL.replace(matmul_precision="tf32"), "cpu") is None


def test_cuda_only_variants_do_not_claim_unverified_amp() -> None:
    # CUDA graph capture of autocast/GradScaler was not verified (no GPU): float32 only there
    from snnbench.adapters.fused import FusedAdapter
    from snnbench.adapters.torch_variants import TorchCudaGraphAdapter

    spec = SMALL.replace(matmul_precision="amp-bf16")
    for adapter, variant in ((TorchCudaGraphAdapter(), "default"), (FusedAdapter(), "cudagraph")):
        reason = adapter.reason_skipped(spec, "cuda", variant)
        assert reason is not None and "supports: strict, tf32" in reason


# -- the reference's emulation of autocast ----------------------------------------------------
def test_round_to_dtype_rounds_to_nearest_even() -> None:
    a = np.array([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0 + 2.0**-9], dtype=np.float32)
    assert round_to_dtype(a, "bfloat16").tolist() == [1.0, 1.0 + 2.0**-6, 1.0]
    assert np.array_equal(round_to_dtype(a, "bfloat16"),
                          torch.from_numpy(a).bfloat16().float().numpy())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_reference_currents_are_autocasts_linear(dtype: str) -> None:
    # one rounding of the float32 sum (bias included), as torch's addmm under autocast: only
    # the summation order may differ, so nearly every current is bit-identical
    spec = NetworkSpec(neurons=256, batch_size=8, time_steps=40)
    data = make_case_data(spec)
    x2 = data.inputs.reshape(-1, spec.neurons)
    ours = linear_currents(x2, data.weights[0], data.biases[0], dtype)
    with torch.autocast("cpu", dtype=TORCH_AMP[dtype]):
        theirs = torch.nn.functional.linear(
            torch.from_numpy(x2), torch.from_numpy(data.weights[0]),
            torch.from_numpy(data.biases[0]))
    assert theirs.dtype == TORCH_AMP[dtype]
    differ = float((theirs.float().numpy() != ours).mean())
    assert differ < 2e-3, differ
    # and they are 16-bit values, but not the float32 currents
    assert np.array_equal(round_to_dtype(ours, dtype), ours)
    assert float((ours != (x2 @ data.weights[0].T + data.biases[0])).mean()) > 0.5


@pytest.mark.parametrize("mode", AMP_MODES)
def test_reference_keeps_the_state_float32(mode: str) -> None:
    # the AMP reference is the float32 LIF fed with 16-bit-rounded currents: membranes are
    # float32 sums (never rounded to 16 bits), so spikes follow the float32 recurrence exactly
    spec = SMALL.replace(matmul_precision=mode, neurons=128, batch_size=4, time_steps=100)
    data = make_case_data(spec)
    amp = spec.amp_dtype
    assert amp is not None
    x = linear_currents(data.inputs, data.weights[0], data.biases[0], amp)
    beta, theta = np.float32(spec.beta), np.float32(spec.threshold)
    v = np.zeros(x.shape[1:], np.float32)
    spikes = []
    for t in range(x.shape[0]):
        vp = (beta * v + x[t]).astype(np.float32)
        s = (vp >= theta).astype(np.float32)
        v = (vp - theta * s).astype(np.float32)
        spikes.append(s)
    assert np.array_equal(run_reference(data).output_spikes, np.stack(spikes))
    # a 16-bit membrane would have moved some of them
    v16 = np.zeros(x.shape[1:], np.float32)
    moved = 0
    for t in range(x.shape[0]):
        vp = round_to_dtype((beta * v16 + x[t]).astype(np.float32), amp)
        s = (vp >= theta).astype(np.float32)
        v16 = round_to_dtype((vp - theta * s).astype(np.float32), amp)
        moved += int((s != spikes[t]).sum())
    assert moved > 0


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_reference_gradients_match_torch_autocast(dtype: str) -> None:
    # the torch adapter under AMP (autocast + GradScaler for float16) against the emulation
    mode = {"bfloat16": "amp-bf16", "float16": "amp-fp16"}[dtype]
    spec = SMALL.replace(matmul_precision=mode, layers=2, detach_reset=False)
    eq, _ = check_adapter(TorchAdapter(), "default", spec, "cpu")
    assert eq.spike_match == 1.0
    assert eq.grad_cosine > 0.99999 and eq.bias_grad_cosine > 0.99999, eq


def test_grad_scale_is_the_scalers_power_of_two() -> None:
    assert grad_scale(0.5, "bfloat16") == 1.0
    assert grad_scale(0.5, "float16") == 2.0**16  # 32768 < 65504: the start scale holds
    assert grad_scale(3.0, "float16") == 2.0**14  # 3·2^15 overflows float16
    assert grad_scale(0.0, "float16") == 2.0**16


def test_amp_reference_differs_from_float32() -> None:
    # the emulation is not a no-op: at n=512 some spikes move
    spec = NetworkSpec(neurons=512, batch_size=4, time_steps=50)
    fp32 = run_reference(make_case_data(spec)).output_spikes
    bf16 = run_reference(make_case_data(spec.replace(matmul_precision="amp-bf16"))).output_spikes
    assert 0.9 < float((fp32 == bf16).mean()) < 1.0


# -- the torch side: AmpLinear and the GradScaler ---------------------------------------------
def test_amp_linear_is_autocast_with_a_float32_output() -> None:
    from snnbench.adapters._torch_common import AmpLinear, make_linears

    spec = SMALL.replace(matmul_precision="amp-bf16")
    data = make_case_data(spec)
    (lin,) = make_linears(spec, data, "cpu")
    assert isinstance(lin, AmpLinear) and lin.weight.dtype == torch.float32
    x = torch.from_numpy(data.inputs)
    out = lin(x)
    assert out.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = torch.nn.functional.linear(x, lin.weight, lin.bias).float()
    assert torch.equal(out, expected)
    out.sum().backward()
    assert lin.weight.grad is not None and lin.weight.grad.dtype == torch.float32
    (plain,) = make_linears(SMALL, data, "cpu")
    assert type(plain) is torch.nn.Linear


def test_float16_trains_with_a_settled_grad_scaler() -> None:
    spec = SMALL.replace(matmul_precision="amp-fp16", neurons=128, time_steps=50)
    model: Any = TorchAdapter().build(spec, make_case_data(spec), "cpu", "default")
    scaler = model._scaler
    assert isinstance(scaler, torch.amp.GradScaler)
    # 2^16 overflows float16 on this network: the build halved it until a pass was finite
    assert scaler.get_scale() < 2.0**16
    scale = scaler.get_scale()
    model.zero_grad()
    model.backward(model.forward())
    grad_w, grad_b = model.gradients()
    assert all(np.all(np.isfinite(g)) for g in grad_w + grad_b)
    assert scaler.get_scale() == scale  # a finite pass keeps the scale
    # the gradients are unscaled: they match the reference, not 2^k times it
    ref = run_reference(make_case_data(spec))
    ratio = np.linalg.norm(grad_w[0]) / np.linalg.norm(ref.grad_weights[0])
    assert 0.99 < ratio < 1.01
    bf16 = SMALL.replace(matmul_precision="amp-bf16")
    assert TorchAdapter().build(bf16, make_case_data(bf16), "cpu", "default")._scaler is None  # type: ignore[attr-defined]


# -- every adapter declaring AMP, against the reference ---------------------------------------
def _adapters() -> list[tuple[str, str]]:
    return [("torch", "default"), ("torch-compile", "default"), ("snntorch", "default"),
            ("norse", "default"), ("spikingjelly", "torch"), ("sinabs", "default"),
            ("haiku", "fp32"), ("spyx", "fp32"), ("fused", "default")]


def _adapter(name: str) -> AnyAdapter:
    from snnbench.registry import get_entry

    entry = get_entry(name)
    cls = entry.adapter_class  # the adapter itself, not the harness's view of it
    assert cls is not None, entry.error
    return available_or_skip(cls())


@pytest.mark.slow
@pytest.mark.parametrize("mode", AMP_MODES)
@pytest.mark.parametrize(("name", "variant"), _adapters())
def test_adapter_amp_matches_the_reference(name: str, variant: str, mode: str) -> None:
    adapter = _adapter(name)
    # the linear-lif knobs, whichever plugin API version the adapter is written against
    knobs = as_v2(adapter).capabilities(variant).knobs("linear-lif")
    assert knobs is not None and mode in knobs.matmul_precisions  # type: ignore[attr-defined]
    spec = SMALL.replace(matmul_precision=mode)
    if name == "snntorch":
        spec = spec.replace(reset="zero")
    if name == "norse":
        # norse is exact in gradient only with its fixed surrogate: fast_sigmoid slope 1
        spec = spec.replace(detach_reset=False, surrogate_slope=1.0)
    if name == "torch-compile":
        spec = spec.replace(time_steps=8)  # compile time
    eq, _ = check_adapter(adapter, variant, spec, "cpu")
    assert eq.passes(mode), eq
    assert eq.grad_cosine >= GRAD_COSINE_MIN[mode], eq
    assert MIN_SPIKE_MATCH[mode] == MIN_SPIKE_MATCH["float32"]  # float32 state, float32 bar


@pytest.mark.slow
def test_jax_amp_linear_rounds_once_unlike_jmp() -> None:
    # amp_linear is autocast's single rounding; a jmp/haiku mixed-precision policy rounds the
    # dot and then adds the bias in bfloat16 (the documented reason for the hand-cast)
    pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax import lax

    from snnbench.adapters._jax_common import amp_linear

    spec = NetworkSpec(neurons=256, batch_size=8, time_steps=40)
    data = make_case_data(spec)
    x2 = data.inputs.reshape(-1, spec.neurons)
    ours = linear_currents(x2, data.weights[0], data.biases[0], "bfloat16")
    hand = np.asarray(amp_linear(jnp.asarray(x2), jnp.asarray(data.weights[0].T),
                                 jnp.asarray(data.biases[0]), jnp.bfloat16,
                                 lax.Precision.DEFAULT))
    assert hand.dtype == np.float32
    assert float((hand != ours).mean()) < 2e-3
    policy = (jnp.dot(jnp.asarray(x2, jnp.bfloat16), jnp.asarray(data.weights[0].T, jnp.bfloat16))
              + jnp.asarray(data.biases[0], jnp.bfloat16))
    assert float((np.asarray(policy.astype(jnp.float32)) != ours).mean()) > 0.1


# -- the command line -------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["run", "verify"])
def test_unknown_precision_is_one_line_exit_2(command: str, tmp_path: Path) -> None:
    proc = run_cli(command, "--adapters", "torch", "--precision", "amp-bf8",
                   *(["--out", str(tmp_path / "r")] if command == "run" else []))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "strict, tf32, amp-bf16, amp-fp16" in lines[0], proc.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_sweep_runs_amp_and_skips_an_adapter_silent_about_it(
    tmp_path: Path, fake_plugins: Path
) -> None:
    out = tmp_path / "run"
    config = tmp_path / "amp.toml"  # what the fake adapter supports, but for the precision
    config.write_text('[run]\ndevice = "cpu"\n[network]\nneurons = 32\ntime_steps = 10\n'
                      'batch_size = 2\nmatmul_precision = "amp-bf16"\n')
    proc = run_cli("run", "--config", str(config), "--adapters", "torch,fake-ok",
                   "--repeats", "3", "--warmup", "1", "--threads", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    rows = pd.read_parquet(out / "summary.parquet").drop_duplicates("adapter")
    by = {r.adapter: r for r in rows.itertuples()}
    assert by["torch"].status == "ok" and by["torch"].spike_match == 1.0
    assert by["fake-ok"].status == "skipped"
    assert "matmul precision 'amp-bf16' not supported (supports: strict, tf32)" in (
        by["fake-ok"].message)

"""The NumPy reference and the torch reference adapter against an independent implementation."""

from __future__ import annotations

import numpy as np
import pytest

from snnbench.measure.verify import check_adapter
from snnbench.workload.linear_lif.reference import run_reference, surrogate_grad
from snnbench.workload.linear_lif.spec import NetworkSpec, make_case_data


def naive_lif(x: np.ndarray, spec: NetworkSpec) -> tuple[np.ndarray, np.ndarray]:
    """Element by element, straight from the definition: spikes and dLoss/dx (loss = Σ s)."""
    T, B, n = x.shape
    beta, theta, k = np.float32(spec.beta), np.float32(spec.threshold), spec.surrogate_slope
    s = np.zeros_like(x)
    v_pre = np.zeros_like(x)
    for b in range(B):
        for i in range(n):
            v = np.float32(0.0)
            for t in range(T):
                vp = np.float32(np.float32(beta * v) + x[t, b, i])
                v_pre[t, b, i] = vp
                spike = np.float32(1.0) if vp >= theta else np.float32(0.0)
                s[t, b, i] = spike
                v = np.float32(vp - theta * spike) if spec.reset == "subtract" else np.float32(vp * (1 - spike))
    # backward with the reset detached: dv_post/dv_pre = 1 (subtract) or 1 - s (zero)
    g = np.zeros_like(x)
    for b in range(B):
        for i in range(n):
            carry = 0.0
            for t in reversed(range(T)):
                u = float(v_pre[t, b, i] - theta)
                sg = 1.0 / (1.0 + k * abs(u)) ** 2
                direct = 1.0 if spec.reset == "subtract" else 1.0 - float(s[t, b, i])
                gv = sg + carry * direct
                g[t, b, i] = gv
                carry = float(beta) * gv
    return s, g


@pytest.mark.parametrize("reset", ["subtract", "zero"])
def test_reference_matches_naive_definition(reset: str) -> None:
    spec = NetworkSpec(neurons=8, batch_size=2, time_steps=12, reset=reset)
    data = make_case_data(spec)
    x = (data.inputs @ data.weights[0].T + data.biases[0]).astype(np.float32)
    s, g = naive_lif(x, spec)
    ref = run_reference(data)
    assert np.array_equal(ref.output_spikes, s)
    assert 0 < s.mean() < 0.5  # the default case actually spikes
    grad_w = g.reshape(-1, 8).T @ data.inputs.reshape(-1, 8)
    np.testing.assert_allclose(ref.grad_weights[0], grad_w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ref.grad_biases[0], g.reshape(-1, 8).sum(0), rtol=1e-4, atol=1e-5)


def test_threshold_tie_spikes() -> None:
    # one neuron, weight 1, no bias, beta 0.5: x = [1.0] hits the threshold exactly (>=)
    spec = NetworkSpec(neurons=1, batch_size=1, time_steps=3, beta=0.5, bias=False)
    data = make_case_data(spec)
    data = type(data)(inputs=np.array([[[1.0]], [[0.5]], [[0.75]]], np.float32),
                      weights=(np.ones((1, 1), np.float32),), biases=(np.zeros(1, np.float32),),
                      spec=spec)
    ref = run_reference(data)
    # t0: v=1.0 → spike, reset to 0; t1: 0.5 → none; t2: 0.25 + 0.75 = 1.0 → spike
    assert ref.output_spikes.ravel().tolist() == [1.0, 0.0, 1.0]


def test_surrogates_known_values() -> None:
    u = np.array([0.0, 0.1], np.float32)
    np.testing.assert_allclose(surrogate_grad(u, "fast_sigmoid", 10.0), [1.0, 0.25])
    np.testing.assert_allclose(surrogate_grad(u, "atan", 2.0), [1.0, 1 / (1 + (np.pi / 2 * 0.2) ** 2)], rtol=1e-6)
    np.testing.assert_allclose(surrogate_grad(np.zeros(1, np.float32), "sigmoid", 4.0), [1.0])


@pytest.mark.parametrize("reset", ["subtract", "zero"])
@pytest.mark.parametrize("detach", [True, False])
def test_torch_adapter_matches_reference(reset: str, detach: bool) -> None:
    pytest.importorskip("torch")
    from snnbench.adapters.torch_ref import TorchAdapter

    spec = NetworkSpec(neurons=32, batch_size=3, time_steps=25, reset=reset, detach_reset=detach,
                       layers=2)
    eq, arrays = check_adapter(TorchAdapter(), "default", spec, "cpu")
    assert eq.spike_match == 1.0 and eq.first_diff_step is None
    assert eq.grad_cosine > 0.99999 and eq.grad_max_rel_err < 1e-4
    assert arrays["spikes"].shape == (25, 3, 32)


def test_torch_adapter_matches_naive_weight_gradient() -> None:
    pytest.importorskip("torch")
    from snnbench.adapters.torch_ref import TorchAdapter

    for reset in ("subtract", "zero"):
        spec = NetworkSpec(neurons=6, batch_size=2, time_steps=15, reset=reset)
        data = make_case_data(spec)
        model = TorchAdapter().build(spec, data, "cpu", "default")
        handle = model.forward()
        model.backward(handle)
        x = (data.inputs @ data.weights[0].T + data.biases[0]).astype(np.float32)
        s, g = naive_lif(x, spec)
        assert np.array_equal(model.spikes(handle), s)
        grad_w, _ = model.gradients()
        np.testing.assert_allclose(grad_w[0], g.reshape(-1, 6).T @ data.inputs.reshape(-1, 6),
                                   rtol=1e-4, atol=1e-5)

"""A NumPy implementation of the canonical network: the ground truth adapters are checked against.

It needs no benchmarked library, so the equivalence check runs inside any adapter's worker.
Arithmetic is float32, one operation at a time in the canonical order
(``v = beta * v``, ``v = v + x``, ``s = v >= threshold``, reset), which is what a per-step
PyTorch loop computes on the CPU; only the matmul's summation order may differ from a library's.

Automatic mixed precision (``matmul_precision`` ``amp-bf16`` / ``amp-fp16``) is emulated the
way ``torch.autocast`` computes a Linear layer: its input, weight and bias are rounded to the
16-bit dtype, the products are summed in float32 (bias included) and the sum is rounded once to
the 16-bit dtype; the membrane state, the threshold test and the reset stay float32. The
backward mirrors autocast too: the gradient reaching a Linear output is rounded to the 16-bit
dtype, and dW = gᵀh, db = Σg and dh = gW are float32 sums rounded once. For float16 the
gradient is first multiplied by the power of two a ``GradScaler`` settles on (the largest that
keeps every gradient finite), so small gradients keep float16's relative precision instead of
flushing to zero, and divided by it after, as ``GradScaler.unscale_`` does (the scale is
chosen per layer: a real scaler's one scale for all layers differs only where a layer's
gradients would underflow).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from snnbench.workload.linear_lif.spec import CaseData, FloatArray, NetworkSpec

#: largest finite float16, the ceiling a GradScaler's scaled gradients must stay under
FLOAT16_MAX = 65504.0


def round_to_dtype(a: FloatArray, dtype: str) -> FloatArray:
    """Round float32 values to ``dtype`` and back (round to nearest even), as a cast would."""
    if dtype == "float32":
        return a
    if dtype == "float16":
        return np.asarray(a, dtype=np.float32).astype(np.float16).astype(np.float32)
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    return ((bits + rounding) & np.uint32(0xFFFF0000)).view(np.float32)


def grad_scale(peak: float, dtype: str) -> float:
    """The loss scale an fp16 ``GradScaler`` settles on when the largest gradient magnitude is
    ``peak``: the largest power of two ≤ 2¹⁶ (its default start) keeping ``peak`` finite in
    float16; 1 for bfloat16 (float32's exponent range: trained without a scaler)."""
    if dtype != "float16":
        return 1.0
    scale = 2.0**16
    while scale > 2.0**-24 and peak * scale > FLOAT16_MAX:
        scale /= 2.0
    return scale


def surrogate_grad(u: FloatArray, name: str, slope: float) -> FloatArray:
    """Derivative of the spike function at ``u = v_pre - threshold``.

    fast_sigmoid: 1 / (1 + slope·|u|)²  (snnTorch's ``fast_sigmoid``, Zenke's SuperSpike);
    atan: (slope/2) / (1 + (π/2 · slope · u)²)  (snnTorch's ``atan``);
    sigmoid: slope · σ(slope·u) · (1 − σ(slope·u)).
    """
    k = np.float32(slope)
    if name == "fast_sigmoid":
        out = np.float32(1.0) / (np.float32(1.0) + k * np.abs(u)) ** 2
    elif name == "atan":
        out = (k / np.float32(2.0)) / (
            np.float32(1.0) + (np.float32(np.pi / 2) * k * u) ** 2
        )
    elif name == "sigmoid":
        # the tanh form of the logistic function cannot overflow for large |k·u|
        sig = np.float32(0.5) * (np.float32(1.0) + np.tanh(np.float32(0.5) * k * u))
        out = k * sig * (np.float32(1.0) - sig)
    else:
        raise ValueError(f"unknown surrogate {name!r}")
    return out.astype(np.float32)


@dataclass(frozen=True)
class ReferenceResult:
    """Spikes of every layer (T, B, n) and gradients of loss = Σ last-layer spikes."""

    spikes: tuple[FloatArray, ...]
    grad_weights: tuple[FloatArray, ...]
    grad_biases: tuple[FloatArray, ...]

    @property
    def output_spikes(self) -> FloatArray:
        """The last layer's spikes, (T, B, n)."""
        return self.spikes[-1]


def _lif_forward(
    x: FloatArray, spec: NetworkSpec
) -> tuple[FloatArray, FloatArray]:
    """Scan one layer's currents x (T, B, n) → (spikes, v_pre), both (T, B, n)."""
    beta = np.float32(spec.beta)
    theta = np.float32(spec.threshold)
    v = np.zeros(x.shape[1:], dtype=np.float32)
    spikes = np.empty_like(x)
    v_pre_all = np.empty_like(x)
    for t in range(x.shape[0]):
        v_pre = beta * v + x[t]
        s = (v_pre >= theta).astype(np.float32)
        v = v_pre - theta * s if spec.reset == "subtract" else v_pre * (np.float32(1.0) - s)
        spikes[t] = s
        v_pre_all[t] = v_pre
    return spikes, v_pre_all


def _lif_backward(
    grad_s: FloatArray, spikes: FloatArray, v_pre: FloatArray, spec: NetworkSpec
) -> FloatArray:
    """Exact BPTT of :func:`_lif_forward`: dLoss/dx (T, B, n) from dLoss/ds."""
    beta = np.float32(spec.beta)
    theta = np.float32(spec.threshold)
    grad_x = np.empty_like(v_pre)
    grad_vpost = np.zeros(v_pre.shape[1:], dtype=np.float32)  # dL/dv_post[t]
    for t in range(v_pre.shape[0] - 1, -1, -1):
        s = spikes[t]
        sg = surrogate_grad(v_pre[t] - theta, spec.surrogate, spec.surrogate_slope)
        if spec.reset == "subtract":
            direct = np.ones_like(s)  # ∂v_post/∂v_pre with s held fixed
            via_spike = -theta * np.ones_like(s)  # ∂v_post/∂s
        else:
            direct = np.float32(1.0) - s
            via_spike = -v_pre[t]
        grad_s_total = grad_s[t]
        if not spec.detach_reset:
            grad_s_total = grad_s_total + grad_vpost * via_spike
        grad_vpre = grad_s_total * sg + grad_vpost * direct
        grad_x[t] = grad_vpre
        grad_vpost = beta * grad_vpre
    return grad_x


def linear_currents(h: FloatArray, w: FloatArray, b: FloatArray, amp: str | None) -> FloatArray:
    """``h @ w.T + b`` in float32; under AMP (``amp`` = the 16-bit dtype) with operands rounded
    to ``amp`` and the float32 result rounded once to ``amp``, as ``torch.autocast`` computes it.
    """
    if amp is None:
        return (h @ w.T + b).astype(np.float32)
    hc, wc, bc = (round_to_dtype(a, amp) for a in (h, w, b))
    return round_to_dtype((hc @ wc.T + bc).astype(np.float32), amp)


def _linear_backward(
    grad_x: FloatArray, inp: FloatArray, weight: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(dW, db, dh) of a Linear layer from dLoss/d(output) ``grad_x`` (T, B, n), float32."""
    n = weight.shape[0]
    flat_g = grad_x.reshape(-1, n)
    gw = (flat_g.T @ inp.reshape(-1, weight.shape[1])).astype(np.float32)
    gb = flat_g.sum(axis=0).astype(np.float32)
    gs = (grad_x @ weight).astype(np.float32)
    return gw, gb, gs


def run_reference(data: CaseData) -> ReferenceResult:
    """Forward and backward of the canonical network on ``data`` in float32 NumPy, with the
    spec's automatic mixed precision emulated when it asks for one (module docstring)."""
    spec = data.spec
    amp = spec.amp_dtype
    layer_inputs: list[FloatArray] = []
    spikes_per_layer: list[FloatArray] = []
    vpre_per_layer: list[FloatArray] = []
    h = data.inputs
    for w, b in zip(data.weights, data.biases, strict=True):
        layer_inputs.append(h)
        x = linear_currents(h, w, b, amp)
        s, v_pre = _lif_forward(x, spec)
        spikes_per_layer.append(s)
        vpre_per_layer.append(v_pre)
        h = s
    grad_s = np.ones_like(spikes_per_layer[-1])
    grad_ws: list[FloatArray] = []
    grad_bs: list[FloatArray] = []
    for layer in range(spec.layers - 1, -1, -1):
        grad_x = _lif_backward(grad_s, spikes_per_layer[layer], vpre_per_layer[layer], spec)
        inp = layer_inputs[layer]
        weight = data.weights[layer]
        gw, gb, gs = _linear_backward(grad_x, inp, weight)
        if amp is not None:
            # what the 16-bit matmuls of the backward see: for float16 scaled by the largest
            # power of two under which none of their inputs and outputs overflows
            peak = max(float(np.abs(a).max(initial=0.0)) for a in (grad_x, gw, gb, gs))
            scale = np.float32(grad_scale(peak, amp))
            gw, gb, gs = _linear_backward(round_to_dtype(grad_x * scale, amp),
                                          round_to_dtype(inp, amp), round_to_dtype(weight, amp))
            gw, gb, gs = (round_to_dtype(g, amp) / scale for g in (gw, gb, gs))
        grad_ws.append(gw.astype(np.float32))
        grad_bs.append(gb.astype(np.float32) if spec.bias
                       else np.zeros(spec.neurons, dtype=np.float32))
        grad_s = gs.astype(np.float32)
    return ReferenceResult(
        spikes=tuple(spikes_per_layer),
        grad_weights=tuple(reversed(grad_ws)),
        grad_biases=tuple(reversed(grad_bs)),
    )

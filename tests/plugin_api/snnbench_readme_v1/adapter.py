"""``numpy-loop``: the canonical Linear+LIF network written with NumPy, as a plugin.

Everything snnbench needs from a plugin is here: an Adapter subclass registered under the
``snnbench.adapters`` entry-point group, and a Model whose methods the harness times.
snnbench's docs/adapters.md, "Writing a third-party adapter", walks through it.

It honours every setting of the canonical network except more than one layer (declared with
``max_layers=1``, so a 2-layer case is a ``skipped`` row): both reset modes, the reset term
detached or not, the three surrogates at any slope, with or without bias. So the shipped
``default`` config (zero reset, not detached, sigmoid surrogate of slope 4) runs it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from snnbench.adapter import Adapter, Capabilities, Model
from snnbench.reference import surrogate_grad
from snnbench.spec import RESET_MODES, SURROGATES, CaseData, NetworkSpec


class NumpyLoopModel(Model):
    """Forward keeps what backward needs; backward is exact BPTT of loss = Σ spikes."""

    def __init__(self, spec: NetworkSpec, data: CaseData) -> None:
        self.spec = spec
        self.x = data.inputs          # (T, B, n) float32, time-major
        self.w = data.weights[0]      # (n_out, n_in) float32: y = x @ w.T + b
        self.b = data.biases[0]       # (n,) float32, zeros when spec.bias is False
        self.grads: tuple[list[Any], list[Any]] | None = None

    def forward(self) -> dict[str, np.ndarray]:
        s = self.spec
        beta, theta = np.float32(s.beta), np.float32(s.threshold)
        y = self.x @ self.w.T + self.b
        v = np.zeros(y.shape[1:], np.float32)
        spikes, v_pre = np.empty_like(y), np.empty_like(y)
        for t in range(y.shape[0]):
            v = beta * v + y[t]                       # v_pre[t]
            v_pre[t] = v
            spikes[t] = v >= theta
            if s.reset == "subtract":
                v = v - theta * spikes[t]
            else:                                     # "zero"
                v = v * (np.float32(1.0) - spikes[t])
        return {"spikes": spikes, "v_pre": v_pre}

    def backward(self, handle: dict[str, np.ndarray]) -> None:
        s = self.spec
        beta, theta = np.float32(s.beta), np.float32(s.threshold)
        spikes, v_pre = handle["spikes"], handle["v_pre"]
        grad_y = np.empty_like(v_pre)
        grad_v = np.zeros(v_pre.shape[1:], np.float32)  # dLoss/dv_post[t], from step t+1
        for t in range(v_pre.shape[0] - 1, -1, -1):
            # the surrogate replaces ds/dv_pre, evaluated at v_pre - threshold
            ds = surrogate_grad(v_pre[t] - theta, s.surrogate, s.surrogate_slope)
            if s.reset == "subtract":  # v_post = v_pre - θ·s
                direct, via_spike = np.float32(1.0), -theta
            else:                      # v_post = v_pre·(1 - s)
                direct, via_spike = np.float32(1.0) - spikes[t], -v_pre[t]
            grad_s = np.float32(1.0)   # loss = Σ spikes
            if not s.detach_reset:     # the reset term's dependence on s is differentiated
                grad_s = grad_s + grad_v * via_spike
            grad_y[t] = grad_s * ds + grad_v * direct
            grad_v = beta * grad_y[t]
        flat = grad_y.reshape(-1, self.w.shape[0])
        grad_w = flat.T @ self.x.reshape(-1, self.w.shape[1])
        grad_b = flat.sum(0) if s.bias else np.zeros_like(self.b)
        self.grads = ([grad_w], [grad_b])

    def zero_grad(self) -> None:
        self.grads = None

    def synchronize(self) -> None:
        pass  # NumPy is synchronous

    def spikes(self, handle: dict[str, np.ndarray]) -> np.ndarray:
        return handle["spikes"].astype(np.float32)

    def gradients(self) -> tuple[list[Any], list[Any]]:
        assert self.grads is not None, "call backward first"
        return self.grads


class NumpyLoopAdapter(Adapter):
    name = "numpy-loop"        # must equal the entry-point name
    library = "numpy"          # distribution whose version is reported
    module = "numpy"           # what version() imports (defaults to library with - → _)
    framework = "numpy"        # no GPU: memory is the worker's resident set
    description = "example plugin: canonical LIF in NumPy"

    def capabilities(self, variant: str) -> Capabilities:
        # anything outside these becomes a `skipped` row with the reason, never another network;
        # surrogates and dtypes have narrow defaults: declare what you support
        return Capabilities(devices=("cpu",), resets=RESET_MODES, surrogates=SURROGATES,
                            dtypes=("float32",), max_layers=1)

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        return NumpyLoopModel(spec, data)

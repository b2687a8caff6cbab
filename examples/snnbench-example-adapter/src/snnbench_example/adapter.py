"""``numpy-loop``: the canonical Linear+LIF network written with NumPy, as a plugin.

Everything snnbench needs from a plugin is here: an Adapter subclass registered under the
``snnbench.adapters`` entry-point group, and a Model whose methods the harness times.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from snnbench.adapter import Adapter, Capabilities, Model
from snnbench.spec import CaseData, NetworkSpec


class NumpyLoopModel(Model):
    """Forward keeps what backward needs; backward is exact BPTT with the fast-sigmoid surrogate."""

    def __init__(self, spec: NetworkSpec, data: CaseData) -> None:
        self.spec = spec
        self.x = data.inputs
        self.w = data.weights[0]
        self.b = data.biases[0]
        self.grads: tuple[list[Any], list[Any]] | None = None

    def forward(self) -> dict[str, np.ndarray]:
        s = self.spec
        y = self.x @ self.w.T + self.b
        v = np.zeros(y.shape[1:], np.float32)
        spikes, v_pre = np.empty_like(y), np.empty_like(y)
        for t in range(y.shape[0]):
            v = np.float32(s.beta) * v + y[t]
            v_pre[t] = v
            spikes[t] = v >= np.float32(s.threshold)
            v = v - np.float32(s.threshold) * spikes[t]
        return {"spikes": spikes, "v_pre": v_pre}

    def backward(self, handle: dict[str, np.ndarray]) -> None:
        s, v_pre = self.spec, handle["v_pre"]
        grad_y = np.empty_like(v_pre)
        carry = np.zeros(v_pre.shape[1:], np.float32)
        for t in range(v_pre.shape[0] - 1, -1, -1):
            u = v_pre[t] - np.float32(s.threshold)
            surrogate = 1.0 / (1.0 + s.surrogate_slope * np.abs(u)) ** 2
            grad_y[t] = surrogate + carry  # reset detached: ∂v_post/∂v_pre = 1
            carry = np.float32(s.beta) * grad_y[t]
        flat = grad_y.reshape(-1, self.w.shape[0])
        self.grads = ([flat.T @ self.x.reshape(-1, self.w.shape[1])], [flat.sum(0)])

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
    name = "numpy-loop"
    library = "numpy"
    framework = "numpy"
    description = "example plugin: canonical LIF in NumPy"

    def capabilities(self, variant: str) -> Capabilities:
        # anything outside these becomes a `skipped` row with the reason, never another network
        return Capabilities(devices=("cpu",), resets=("subtract",), detach_reset=(True,),
                            max_layers=1)

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        return NumpyLoopModel(spec, data)

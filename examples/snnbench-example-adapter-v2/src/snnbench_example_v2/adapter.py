"""``numpy-stack``: the canonical Linear+LIF network in NumPy, any depth, as a plugin written
against the plugin API v2 (``snnbench.api``, ``docs/adapters-api.md``).

What v2 asks beside v1: ``build`` receives the case's workload (``workload.spec`` is the
network), the capabilities name the workload kinds supported with the knobs of each, and
``gradients()`` returns every parameter's gradient by name (``workload.parameter_names()``:
``layers.0.weight``, ``layers.0.bias``, ...).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from snnbench.api import (
    RESET_MODES,
    SURROGATES,
    Adapter,
    Capabilities,
    CaseData,
    CaseSkipped,
    LinearLif,
    LinearLifKnobs,
    Model,
    Workload,
    surrogate_grad,
)


class NumpyStackModel(Model):
    """Forward keeps every layer's input, membrane and spikes; backward is exact BPTT of
    loss = Σ last-layer spikes, layer by layer from the top."""

    def __init__(self, workload: LinearLif, data: CaseData) -> None:
        self.spec = workload.spec
        self.names = workload.parameter_names()
        self.x = data.inputs                  # (T, B, n) float32, time-major
        self.weights = list(data.weights)     # (n_out, n_in) each: y = h @ w.T + b
        self.biases = list(data.biases)       # zeros when spec.bias is False
        self.grads: dict[str, np.ndarray] | None = None

    def _layer(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = self.spec
        beta, theta = np.float32(s.beta), np.float32(s.threshold)
        v = np.zeros(y.shape[1:], np.float32)
        spikes, v_pre = np.empty_like(y), np.empty_like(y)
        for t in range(y.shape[0]):
            v = beta * v + y[t]
            v_pre[t] = v
            spikes[t] = v >= theta
            v = v - theta * spikes[t] if s.reset == "subtract" else v * (1 - spikes[t])
        return spikes, v_pre

    def forward(self) -> list[dict[str, np.ndarray]]:
        layers, h = [], self.x
        for w, b in zip(self.weights, self.biases, strict=True):
            spikes, v_pre = self._layer(h @ w.T + b)
            layers.append({"input": h, "spikes": spikes, "v_pre": v_pre})
            h = spikes
        return layers

    def backward(self, handle: list[dict[str, np.ndarray]]) -> None:
        s = self.spec
        beta, theta = np.float32(s.beta), np.float32(s.threshold)
        grads: dict[str, np.ndarray] = {}
        outer = np.ones_like(handle[-1]["spikes"])      # dLoss/ds of the last layer
        for layer in range(len(handle) - 1, -1, -1):
            h, spikes, v_pre = (handle[layer][k] for k in ("input", "spikes", "v_pre"))
            grad_y = np.empty_like(v_pre)
            grad_v = np.zeros(v_pre.shape[1:], np.float32)
            for t in range(v_pre.shape[0] - 1, -1, -1):
                ds = surrogate_grad(v_pre[t] - theta, s.surrogate, s.surrogate_slope)
                if s.reset == "subtract":
                    direct, via_spike = np.float32(1.0), -theta
                else:
                    direct, via_spike = np.float32(1.0) - spikes[t], -v_pre[t]
                grad_s = outer[t] + (0 if s.detach_reset else grad_v * via_spike)
                grad_y[t] = grad_s * ds + grad_v * direct
                grad_v = beta * grad_y[t]
            w = self.weights[layer]
            flat = grad_y.reshape(-1, w.shape[0])
            grads[f"layers.{layer}.weight"] = flat.T @ h.reshape(-1, w.shape[1])
            grads[f"layers.{layer}.bias"] = (flat.sum(0) if s.bias
                                             else np.zeros_like(self.biases[layer]))
            outer = grad_y @ w                         # dLoss/ds of the layer below
        self.grads = grads

    def zero_grad(self) -> None:
        self.grads = None

    def synchronize(self) -> None:
        pass  # NumPy is synchronous

    def spikes(self, handle: list[dict[str, np.ndarray]]) -> np.ndarray:
        return handle[-1]["spikes"].astype(np.float32)

    def gradients(self) -> dict[str, Any]:
        assert self.grads is not None, "call backward first"
        return {name: self.grads[name] for name in self.names}


class NumpyStackAdapter(Adapter):
    name = "numpy-stack"       # must equal the entry-point name
    library = "numpy"          # distribution whose version is reported
    module = "numpy"
    framework = "numpy"        # no GPU: memory is the worker's resident set
    description = "example plugin (API v2): canonical LIF stack in NumPy"

    def capabilities(self, variant: str) -> Capabilities:
        # the workload kinds this adapter builds, each with what of it it honours
        knobs = LinearLifKnobs(resets=RESET_MODES, surrogates=SURROGATES, dtypes=("float32",))
        return Capabilities(workloads={"linear-lif": knobs}, devices=("cpu",))

    def build(self, workload: Workload, data: Any, device: str, variant: str) -> Model:
        if not isinstance(workload, LinearLif):    # capabilities already say so: a safeguard
            raise CaseSkipped(f"workload kind {workload.kind!r} not supported")
        return NumpyStackModel(workload, data)

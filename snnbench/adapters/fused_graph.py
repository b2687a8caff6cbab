"""A ``nir-graph`` workload built with snnbench's fused Linear+LIF layers, where it is one.

``FusedLinearLIF`` computes v ← β·v + (W x + b), a spike when v ≥ θ, with one β and one θ per
layer and no leak term. A graph is built with it when it is a chain Input → (Affine or Linear →
LIF) × k → Output whose every LIF has one τ, one r and one θ for all its neurons and
v_leak = 0, and whose step (docs/nir.md; forward Euler or the exact exponential, as the
workload says) maps onto that exactly:

* β is the step's decay a (1 − dt/τ with forward Euler), which must lie in [0, 1];
* the input gain g (r·dt/τ with forward Euler) is folded into the layer's weight and bias
  (W' = g·W, b' = g·b, computed in the forward, so the gradients are the graph's W and b), only
  where that is exact in float32: every g·w of the float32 gain and the float32 weights is a
  float32 number (a gain of 1 or a power of two always; another only by chance), so W'x + b'
  is g·(W x + b) but for the GEMM's own float32 rounding; otherwise skipped;
* the reset, the surrogate, its slope and the reset's detachment are the workload's.

Anything else (an LI read-out, a CubaLIF, a convolution, a branch, a per-neuron time constant,
a leak) is a :class:`~snnbench.adapter.CaseSkipped` with the reason: a ``skipped`` row.
:func:`plan_chain` decides without torch; :class:`FusedGraphModel` builds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from snnbench.adapter import CaseSkipped
from snnbench.workload.graph import GraphData, NirGraph
from snnbench.workload.graph.nodes import LIF, Affine, Graph, Linear
from snnbench.workload.graph.reference import Dynamics, membrane_coefficients

from ._graph_common import TorchLeavesModel, leaf_tensors
from ._layer_chain import chain_names, uniform_value

#: what the fused build honours of a graph case; the chain, the uniform parameters and an
#: exact gain are checked at build time (:func:`plan_chain`)


@dataclass(frozen=True)
class FusedLayer:
    """One fused layer of a chain: the graph's synaptic node and LIF node, and the LIF's
    step as ``FusedLinearLIF`` takes it."""

    synapse: str
    neuron: str
    #: the parameter names (``fc1.weight``; ``fc1.bias``, None for a Linear node)
    weight: str
    bias: str | None
    #: the float32 input gain folded into the weights (1.0: none)
    gain: float
    beta: float
    threshold: float


#: the graphs the fused build takes
_SHAPE = "Input → (Affine → LIF) × k → Output"


def _exact_in_float32(gain: np.float32, values: np.ndarray) -> bool:
    """True when every gain·value (float32 operands) is a float32 number: the product's
    float32 rounding loses nothing."""
    wide = np.float64(gain) * values.astype(np.float64)
    return bool(np.array_equal(wide.astype(np.float32).astype(np.float64), wide))


def plan_chain(graph: Graph, params: Mapping[str, np.ndarray], dyn: Dynamics
               ) -> list[FusedLayer]:
    """The fused layers of ``graph`` at ``dyn``; :class:`CaseSkipped` with the reason when
    it is not a chain of exactly mappable Affine/Linear → LIF layers (module docstring)."""
    names = chain_names(graph, "the fused build", _SHAPE)
    inner = names[1:-1]
    if not inner or len(inner) % 2:
        raise CaseSkipped("the graph is not (Affine → LIF) × k between its input and output")
    layers = []
    for syn_name, lif_name in zip(inner[::2], inner[1::2], strict=True):
        syn, lif = graph.node(syn_name), graph.node(lif_name)
        if not isinstance(syn, Affine | Linear) or not isinstance(lif, LIF):
            raise CaseSkipped(f"{syn_name} → {lif_name} is {syn.kind} → {lif.kind}: the "
                              "fused build takes Affine (or Linear) → LIF layers only")
        if len(syn.in_shape) != 1:
            raise CaseSkipped(f"{syn_name} takes a {syn.in_shape} input: a fused layer takes "
                              "a vector")
        tau, r, theta = (uniform_value(lif_name, f, getattr(lif, f), "a fused layer")
                         for f in ("tau", "r", "v_threshold"))
        if np.any(np.asarray(lif.v_leak) != 0.0):
            raise CaseSkipped(f"{lif_name}.v_leak is not 0: a fused layer has no leak term")
        if not theta > 0.0:
            raise CaseSkipped(f"{lif_name}.v_threshold = {theta:g}: a fused layer needs θ > 0")
        a, g, _ = (float(np.asarray(c).reshape(-1)[0]) for c in membrane_coefficients(
            np.array([tau]), np.array([r]), np.array([0.0]), dyn))
        if not 0.0 <= a <= 1.0:
            raise CaseSkipped(f"{lif_name}: the step's decay 1 − dt/τ = {a:g} is outside "
                              "[0, 1] (dt > τ): no fused β")
        gain = np.float32(g)
        weight, bias = f"{syn_name}.weight", (f"{syn_name}.bias" if isinstance(syn, Affine)
                                              else None)
        arrays = [params[weight]] + ([params[bias]] if bias is not None else [])
        if not all(_exact_in_float32(gain, arr) for arr in arrays):
            raise CaseSkipped(f"{lif_name}'s input gain r·dt/τ = {g:.9g} does not fold into "
                              f"{syn_name}'s float32 weights exactly (a fused layer has no "
                              "gain of its own)")
        layers.append(FusedLayer(syn_name, lif_name, weight, bias, float(gain), a, theta))
    return layers


class FusedGraphModel(TorchLeavesModel):
    """A chain of :func:`~snnbench.fused.fused_linear_lif` layers (:func:`plan_chain`) on
    the workload's input; the loss is the sum of the output spikes, the gradients those of
    the graph's ``node.field`` arrays."""

    def __init__(self, workload: NirGraph, data: GraphData, device: str) -> None:
        import torch

        from snnbench.fused import LIFParams

        dyn = workload.dynamics
        self.layers = plan_chain(data.graph, data.params, dyn)
        self.device = torch.device(device)
        self.backend = "triton" if self.device.type == "cuda" else "cpu"
        self.parameters = leaf_tensors(data.params, device)
        self.lif = [LIFParams(beta=layer.beta, threshold=layer.threshold, reset=dyn.reset,
                              surrogate=dyn.surrogate, slope=float(dyn.surrogate_slope),
                              detach_reset=dyn.detach_reset) for layer in self.layers]
        self.x = torch.as_tensor(np.array(data.inputs, dtype=np.float32), device=device)

    def forward(self) -> Any:
        from snnbench.fused import fused_linear_lif

        h = self.x
        for layer, lif in zip(self.layers, self.lif, strict=True):
            w = self.parameters[layer.weight]
            b = self.parameters[layer.bias] if layer.bias is not None else None
            if layer.gain != 1.0:  # exact (plan_chain): the graph's g·(W x + b) in float32
                w = w * layer.gain
                b = b * layer.gain if b is not None else None
            h = fused_linear_lif(h, w, b, lif, self.backend)
        return h

    def spikes(self, handle: Any) -> Any:
        return handle.detach().to(device="cpu", dtype=self.x.dtype).numpy()

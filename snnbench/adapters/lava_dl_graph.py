"""A ``nir-graph`` workload built with lava-dl's SLAYER CUBA neurons: a declared approximation.

SLAYER's CUBA neuron (``slayer.neuron.cuba.Neuron``, see :mod:`.lava_dl`) steps
u ← (1 − current_decay)·u + x, v ← (1 − voltage_decay)·v + u, a spike when v > θ, reset to
zero, in fixed point. A graph is built with it when it is a chain Input → (Affine or Linear →
LIF or CubaLIF) × k → Output with one τ (τ_syn, τ_mem), r, w_in and θ per neuron node and
v_leak = 0:

* a LIF node: current_decay = 1 (the current passes the input through), voltage_decay = 1 − a,
  the input gain g (r·dt/τ with forward Euler) applied to the affine's output;
* a CubaLIF node: current_decay = 1 − α (dt/τ_syn with forward Euler), voltage_decay = 1 − a,
  and γ·g (γ = w_in·dt/τ_syn) applied to the affine's output: u is then g·I, so v is the
  graph's;
* reset ``zero`` only; the workload's surrogate as the ``linear-lif`` adapter gives it (lava's
  exponential surrogate with the same peak and area).

It is not exact, as lava-dl's ``linear-lif`` rows are not (the adapter declares
``exact_dynamics=False``, ``exact_gradient=False``): the state is fixed point (a spike flips
where the membrane passes within ~1e-5 of θ) and the backward ignores the reset. Measured on
the ``linear-lif`` and ``cuba-mlp`` examples (benchmarks/nir_lava_dl.py, docs/nir.md): the
reference's spikes on 100 % of entries, gradient cosines 0.91 and 0.80.

:class:`LavaDl` is the registered ``lava-dl`` adapter (plugin API v2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from snnbench import plugin
from snnbench.adapter import CaseSkipped
from snnbench.workload.graph import GraphData, GraphKnobs, NirGraph
from snnbench.workload.graph.nodes import LIF, Affine, CubaLIF, Graph, Linear
from snnbench.workload.graph.reference import (
    Dynamics,
    membrane_coefficients,
    synapse_coefficients,
)

from ._declared import LAVA_DL_GRAPH_KNOBS
from ._graph_common import TorchLeavesModel, leaf_tensors
from ._layer_chain import chain_names, uniform_value
from ._workloads import WorkloadsAdapter
from .lava_dl import SCALE, LavaDlAdapter, grad_params, import_slayer

_SHAPE = "Input → (Affine → LIF or CubaLIF) × k → Output"
_LAYER = "a lava-dl CUBA layer"


@dataclass(frozen=True)
class CubaLayer:
    """One synapse → neuron pair as lava's CUBA neuron takes it."""

    weight: str
    bias: str | None
    #: multiplies the affine's output (g, or γ·g for a CubaLIF)
    gain: float
    current_decay: float
    voltage_decay: float
    threshold: float


def plan_chain(graph: Graph, dyn: Dynamics) -> list[CubaLayer]:
    """The CUBA layers of ``graph`` at ``dyn``; :class:`CaseSkipped` with the reason when it
    is not a chain of Affine/Linear → LIF/CubaLIF layers with one value per parameter and no
    leak (module docstring)."""
    names = chain_names(graph, "the lava-dl build", _SHAPE)
    inner = names[1:-1]
    if not inner or len(inner) % 2:
        raise CaseSkipped(f"the graph is not {_SHAPE}")
    layers = []
    for syn_name, cell_name in zip(inner[::2], inner[1::2], strict=True):
        syn, cell = graph.node(syn_name), graph.node(cell_name)
        if not isinstance(syn, Affine | Linear) or not isinstance(cell, LIF | CubaLIF):
            raise CaseSkipped(f"{syn_name} → {cell_name} is {syn.kind} → {cell.kind}: the "
                              "lava-dl build takes Affine (or Linear) → LIF or CubaLIF "
                              "layers only")
        if len(syn.in_shape) != 1:
            raise CaseSkipped(f"{syn_name} takes a {syn.in_shape} input: a lava-dl CUBA "
                              "layer takes a vector")
        if np.any(np.asarray(cell.v_leak) != 0.0):
            raise CaseSkipped(f"{cell_name}.v_leak is not 0: lava's CUBA neuron has no leak "
                              "term")
        tau_field = "tau" if isinstance(cell, LIF) else "tau_mem"
        tau, r, theta = (uniform_value(cell_name, f, getattr(cell, f), _LAYER)
                         for f in (tau_field, "r", "v_threshold"))
        a, g, _ = (float(np.asarray(c).reshape(-1)[0]) for c in membrane_coefficients(
            np.array([tau]), np.array([r]), np.array([0.0]), dyn))
        current_decay, gain = 1.0, g
        if isinstance(cell, CubaLIF):
            tau_syn, w_in = (uniform_value(cell_name, f, getattr(cell, f), _LAYER)
                             for f in ("tau_syn", "w_in"))
            alpha, gamma = (float(np.asarray(c).reshape(-1)[0]) for c in synapse_coefficients(
                np.array([tau_syn]), np.array([w_in]), dyn))
            current_decay, gain = 1.0 - alpha, gamma * g
        for what, decay in (("voltage", 1.0 - a), ("current", current_decay)):
            if not 0.0 <= decay <= 1.0:
                raise CaseSkipped(f"{cell_name}: the {what} decay {decay:g} per step is "
                                  "outside [0, 1] (dt > τ)")
        if not theta > 0.0:
            raise CaseSkipped(f"{cell_name}.v_threshold = {theta:g}: lava's CUBA neuron "
                              "needs θ > 0")
        layers.append(CubaLayer(f"{syn_name}.weight",
                                f"{syn_name}.bias" if isinstance(syn, Affine) else None,
                                gain, current_decay, 1.0 - a, theta))
    return layers


class LavaDlGraphModel(TorchLeavesModel):
    """A chain of ``F.linear`` → gain → lava CUBA layers (:func:`plan_chain`) on the
    workload's input; the loss is the sum of the output spikes, the gradients those of the
    graph's ``node.field`` arrays."""

    def __init__(self, workload: NirGraph, data: GraphData, device: str) -> None:
        import torch

        dyn = workload.dynamics
        self.layers = plan_chain(data.graph, dyn)
        slayer = import_slayer()
        self.device = torch.device(device)
        self.parameters = leaf_tensors(data.params, device)
        self.neurons = []
        for layer in self.layers:
            # the surrogate's peak and area, as the linear-lif adapter computes them
            tau_grad, scale_grad = grad_params(dyn.surrogate, dyn.surrogate_slope,
                                               int(layer.threshold * SCALE) / SCALE)
            self.neurons.append(slayer.neuron.cuba.Neuron(
                threshold=layer.threshold, current_decay=layer.current_decay,
                voltage_decay=layer.voltage_decay, tau_grad=tau_grad, scale_grad=scale_grad,
                scale=SCALE, persistent_state=False, requires_grad=False).to(device))
        self.x = torch.as_tensor(np.array(data.inputs, dtype=np.float32), device=device)

    def forward(self) -> Any:
        import torch.nn.functional as F

        h = self.x
        for layer, neuron in zip(self.layers, self.neurons, strict=True):
            b = self.parameters[layer.bias] if layer.bias is not None else None
            z = F.linear(h, self.parameters[layer.weight], b)
            if layer.gain != 1.0:
                z = z * layer.gain
            # (T, B, n) → lava's (B, n, T) and back
            h = neuron(z.permute(1, 2, 0)).permute(2, 0, 1)
        return h

    def spikes(self, handle: Any) -> Any:
        return handle.detach().to(device="cpu").float().numpy()


class LavaDl(WorkloadsAdapter):
    """The registered ``lava-dl`` adapter (plugin API v2): ``linear-lif`` through
    :class:`~snnbench.adapters.lava_dl.LavaDlAdapter`; ``nir-graph`` through
    :class:`LavaDlGraphModel`, with the same declared approximation (fixed-point state, a
    backward ignoring the reset)."""

    linear_lif = LavaDlAdapter

    def graph_knobs(self, variant: str) -> GraphKnobs | None:
        return LAVA_DL_GRAPH_KNOBS

    def build_graph(self, workload: NirGraph, data: GraphData, device: str,
                    variant: str) -> plugin.Model:
        return LavaDlGraphModel(workload, data, device)

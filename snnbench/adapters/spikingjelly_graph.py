"""A ``nir-graph`` workload built natively with SpikingJelly's neurons (not its NIR importer).

The synaptic nodes are PyTorch's ops (:mod:`.torch_graph`, as SpikingJelly uses them); each
stateful node is a SpikingJelly node in multi-step mode (``step_mode="m"``, its fast path), given
the workload's spike function and the coefficients of ``docs/nir.md``:

* LIF: ``LIFNode(tau=1/(1 − a), decay_input=False, v_reset=None | 0.0)`` fed g·x + l
  (``v − v/τ + x'`` is a·v + x');
* IF: ``IFNode`` fed dt·r·x;
* LI: ``NonSpikingLIFNode(tau=1/(1 − a))`` fed (g·x + l)/(1 − a) (it charges v + (x' − v)/τ);
* CubaLIF: ``CUBALIFNode(c_decay=α, v_decay=a)`` fed g·γ·x, when v_leak = 0 (it has no leak
  term).

SpikingJelly's nodes take one time constant and one threshold per layer: a graph whose neurons
of one node differ in them is refused (a ``skipped`` reason), as is a CubaLIF with a leak.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from snnbench.adapter import CaseSkipped
from snnbench.workload.graph.nodes import IF, LI, LIF, CubaLIF, Node
from snnbench.workload.graph.reference import Dynamics

from ._graph_common import step_coefficients
from .torch_graph import Op, coefficient, input_term, spike_fn


def _uniform(value: np.ndarray, what: str, node: Node) -> float:
    flat = np.asarray(value, dtype=np.float64).reshape(-1)
    if flat.size and not np.all(flat == flat[0]):
        raise CaseSkipped(f"{node.kind} with per-neuron {what} not built: SpikingJelly's "
                          "nodes take one value per layer")
    return float(flat[0]) if flat.size else 0.0


def spikingjelly_neuron_op(node: Node, dyn: Dynamics, device: str) -> Op:
    """The node as a SpikingJelly node over T (module docstring); what SpikingJelly cannot
    build exactly raises :class:`CaseSkipped`."""
    from spikingjelly.activation_based import neuron

    c = step_coefficients(node, dyn)
    spike = spike_fn(dyn)
    v_reset = None if dyn.reset == "subtract" else 0.0
    gain: float | torch.Tensor = coefficient(c["g"], device)
    leak: float | torch.Tensor = coefficient(c["l"], device)
    node_: Any
    membrane_out = False
    if isinstance(node, LIF):
        a = _uniform(c["a"], "time constants", node)
        node_ = neuron.LIFNode(tau=1.0 / (1.0 - a), decay_input=False,
                               v_threshold=_uniform(c["theta"], "thresholds", node),
                               v_reset=v_reset, surrogate_function=spike,
                               detach_reset=dyn.detach_reset, step_mode="m")
    elif isinstance(node, IF):
        node_ = neuron.IFNode(v_threshold=_uniform(c["theta"], "thresholds", node),
                              v_reset=v_reset, surrogate_function=spike,
                              detach_reset=dyn.detach_reset, step_mode="m")
    elif isinstance(node, LI):
        a = _uniform(c["a"], "time constants", node)
        node_ = neuron.NonSpikingLIFNode(tau=1.0 / (1.0 - a))
        gain = coefficient(c["g"] / (1.0 - a), device)
        leak = coefficient(c["l"] / (1.0 - a), device)
        membrane_out = True
    else:
        assert isinstance(node, CubaLIF)
        if np.any(c["l"] != 0):
            raise CaseSkipped("CubaLIF with v_leak ≠ 0 not built: SpikingJelly's CUBALIFNode "
                              "has no leak term")
        node_ = neuron.CUBALIFNode(c_decay=_uniform(c["alpha"], "synaptic time constants",
                                                    node),
                                   v_decay=_uniform(c["a"], "time constants", node),
                                   v_threshold=_uniform(c["theta"], "thresholds", node),
                                   v_reset=v_reset, surrogate_function=spike)
        node_.detach_reset = dyn.detach_reset
        node_.step_mode = "m"
        gain = coefficient(c["g"] * c["gamma"], device)
        leak = 0.0
    node_ = node_.to(device)

    def run(x: torch.Tensor) -> torch.Tensor:
        if hasattr(node_, "reset"):
            node_.reset()  # the state persists between calls: every sequence starts at 0
        out = node_(input_term(x, gain, leak))
        return torch.stack(out) if membrane_out else out

    return run

"""A ``nir-graph`` workload built natively with snnTorch's neurons (not its NIR importer).

The synaptic nodes are PyTorch's ops (:mod:`.torch_graph`, as snnTorch uses them); each
stateful node is an snnTorch neuron stepped over T with its membrane passed explicitly, given
the workload's spike function and, per neuron, the coefficients of ``docs/nir.md``:

* LIF: ``snn.Leaky(beta=a, threshold=θ)`` fed g·x + l; IF: the same with beta = 1, g = dt·r;
* LI: ``snn.Leaky(reset_mechanism="none")``, its membrane the output;
* CubaLIF: ``snn.Synaptic(alpha=α, beta=a)`` fed g·γ·x (its current is g·I), when v_leak = 0
  (``Synaptic`` has no leak term to add after the current) and the reset is not detached
  (``Synaptic``'s delayed, detached reset also zeroes its current: another neuron).

Reset "subtract" is refused as for Linear+LIF (:data:`._declared.SNNTORCH_SUBTRACT_REASON`:
snnTorch's subtract reset is one step late or applied twice); "zero" is exact in both detach
modes through ``reset_delay``. What snnTorch's own importer does differently (dt = 1e-4
hard-coded, r folded into the threshold, Flatten over the batch axis) does not arise: nothing is
imported from NIR.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from snnbench.adapter import CaseSkipped
from snnbench.workload.graph import GraphData, NirGraph
from snnbench.workload.graph.nodes import IF, LI, LIF, CubaLIF, Node
from snnbench.workload.graph.reference import Dynamics

from ._declared import SNNTORCH_SUBTRACT_REASON as SUBTRACT_REASON
from ._graph_common import step_coefficients
from .torch_graph import Op, TorchGraphModel, coefficient, const, input_term, spike_fn


def snntorch_neuron_op(node: Node, dyn: Dynamics, device: str) -> Op:
    """The node as snnTorch neurons over T (module docstring); what snnTorch cannot build
    exactly raises :class:`CaseSkipped`."""
    import snntorch as snn

    if dyn.reset != "zero" and not isinstance(node, LI):
        raise CaseSkipped(SUBTRACT_REASON)
    c = step_coefficients(node, dyn)
    spike = spike_fn(dyn)
    gain: float | torch.Tensor = coefficient(c["g"], device)
    leak: float | torch.Tensor = coefficient(c["l"], device)
    neuron: Any
    if isinstance(node, LIF | IF):
        neuron = snn.Leaky(beta=const(c["a"], device), threshold=const(c["theta"], device),
                           spike_grad=spike, reset_mechanism="zero",
                           reset_delay=dyn.detach_reset)
    elif isinstance(node, LI):
        neuron = snn.Leaky(beta=const(c["a"], device), threshold=1.0, spike_grad=spike,
                           reset_mechanism="none")
    else:
        assert isinstance(node, CubaLIF)
        if np.any(c["l"] != 0):
            raise CaseSkipped("CubaLIF with v_leak ≠ 0 not built: snnTorch's Synaptic has no "
                              "leak term after its current")
        if dyn.detach_reset:
            raise CaseSkipped("CubaLIF with detach_reset not built: snnTorch's Synaptic resets "
                              "with a detached spike only one step late (reset_delay), and "
                              "then zeroes its synaptic current too")
        neuron = snn.Synaptic(alpha=const(c["alpha"], device), beta=const(c["a"], device),
                              threshold=const(c["theta"], device), spike_grad=spike,
                              reset_mechanism="zero", reset_delay=dyn.detach_reset)
        gain = coefficient(c["g"] * c["gamma"], device)
        leak = 0.0
    neuron = neuron.to(device)
    membrane_out = isinstance(node, LI)
    synaptic = isinstance(node, CubaLIF)

    def run(x: torch.Tensor) -> torch.Tensor:
        drive = input_term(x, gain, leak)
        mem = torch.zeros_like(drive[0])
        syn = torch.zeros_like(mem)
        out = []
        for x_t in drive.unbind(0):
            if synaptic:
                spk, syn, mem = neuron(x_t, syn, mem)
            else:
                spk, mem = neuron(x_t, mem)
            out.append(mem if membrane_out else spk)
        return torch.stack(out)

    _KEEP.append(neuron)
    return run


#: the neurons built in this process and not yet released (:func:`release`)
_KEEP: list[Any] = []


def release(neurons: Sequence[Any]) -> None:
    """Drop snnTorch's global references to ``neurons`` (its class-level ``instances`` list)
    and their last membranes; the neurons of other models stay as they are."""
    import snntorch as snn

    ids = {id(n) for n in neurons}
    snn.SpikingNeuron.instances[:] = [n for n in snn.SpikingNeuron.instances
                                      if id(n) not in ids]
    for neuron in neurons:
        neuron.mem = torch.zeros(0)
    _KEEP[:] = [n for n in _KEEP if id(n) not in ids]


def snntorch_graph_model(workload: NirGraph, data: GraphData, device: str) -> TorchGraphModel:
    """The graph built with snnTorch's neurons; closing it releases the neurons it built (and
    only those: a process may hold a verification build and the timed build at once)."""
    first = len(_KEEP)
    mine: list[Any] = []
    model = TorchGraphModel(workload, data, device, snntorch_neuron_op,
                            on_close=lambda: release(mine))
    mine.extend(_KEEP[first:])
    return model

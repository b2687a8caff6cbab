"""A ``nir-graph`` workload built natively with sinabs' layers (not its NIR importer).

The synaptic nodes are PyTorch's ops (:mod:`.torch_graph`); each stateful node is a sinabs
layer, batch-major (the time-major values are transposed in and out), its state reset before
every sequence, configured as the Linear+LIF adapter configures it (:mod:`.sinabs`):
``SingleSpike`` (one spike per step, ``v − θ ≥ 0``; sinabs' default emits several),
``norm_input=False``, the decay set exactly (``train_alphas`` and the alpha written, then
frozen), the workload's reset and detach rule (:func:`._torch_common.make_reset_fn`) and surrogate
(``VoltageSurrogate``). Per ``docs/nir.md``:

* LIF: ``LIF(alpha_mem = a)`` fed g·x + l; IF: ``IAF`` fed dt·r·x;
* LI: ``ExpLeak(alpha_mem = a)`` fed g·x + l (no spike function: its membrane is the output);
* CubaLIF: ``LIF(alpha_mem = a, alpha_syn = α)``, whose current is α·(i + x'), fed
  x' = (g·γ·x + (1 − α)·l)/α, so that its current is g·I + l.

What sinabs' own importer does instead (τ read as a number of steps, r ignored, CubaLIF nodes
dropped, spike counts) does not arise: nothing is imported from NIR.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from snnbench.adapter import CaseSkipped
from snnbench.workload.graph.nodes import IF, LI, LIF, CubaLIF, Node
from snnbench.workload.graph.reference import Dynamics

from ._graph_common import step_coefficients
from ._torch_common import VoltageSurrogate, make_reset_fn
from .torch_graph import Op, coefficient, const, input_term


def _frozen(layer: Any, values: dict[str, np.ndarray], device: str) -> Any:
    """``layer`` with its parameters ``values`` written and every parameter frozen."""
    with torch.no_grad():
        for name, value in values.items():
            param = getattr(layer, name)
            # a per-neuron value keeps its shape (it broadcasts over the batch); a uniform one
            # takes the parameter's
            shaped = value if value.ndim else np.full(tuple(param.shape), float(value))
            param.data = const(shaped, device).clone()
    for p in layer.parameters():
        p.requires_grad_(False)
    return layer.to(device)


def _uniform_or_shaped(value: np.ndarray) -> np.ndarray:
    flat = np.asarray(value, dtype=np.float64).reshape(-1)
    return np.asarray(flat[0]) if flat.size and np.all(flat == flat[0]) else np.asarray(value)


def sinabs_neuron_op(node: Node, dyn: Dynamics, device: str, layers: Any = None) -> Op:
    """The node as a sinabs layer over T (module docstring); what sinabs cannot build exactly
    raises :class:`CaseSkipped`. ``layers``: the module whose ``LIF``, ``IAF`` and ``ExpLeak``
    are built (sinabs' own by default; :func:`exodus_neuron_op` gives EXODUS')."""
    import sinabs.layers
    from sinabs.activation import SingleSpike

    sl: Any = sinabs.layers if layers is None else layers

    c = step_coefficients(node, dyn)
    surrogate = VoltageSurrogate(dyn.surrogate, dyn.surrogate_slope)
    reset_fn = make_reset_fn(dyn.reset, dyn.detach_reset)
    spike_kwargs = {"spike_fn": SingleSpike, "reset_fn": reset_fn,
                    "surrogate_grad_fn": surrogate}
    a = _uniform_or_shaped(c["a"])
    theta = _uniform_or_shaped(c["theta"])
    tau_init = torch.ones(tuple(a.shape)) if a.ndim else 1.0  # overwritten by alpha below
    gain: float | torch.Tensor = coefficient(c["g"], device)
    leak: float | torch.Tensor = coefficient(c["l"], device)
    layer: Any
    if isinstance(node, LIF):
        layer = sl.LIF(tau_mem=tau_init, spike_threshold=torch.tensor(1.0), train_alphas=True,
                       norm_input=False, **spike_kwargs)
        layer = _frozen(layer, {"alpha_mem": a, "spike_threshold": theta}, device)
    elif isinstance(node, IF):
        layer = sl.IAF(spike_threshold=torch.tensor(1.0), **spike_kwargs)
        layer = _frozen(layer, {"spike_threshold": theta}, device)
    elif isinstance(node, LI):
        layer = sl.ExpLeak(tau_mem=tau_init, train_alphas=True, norm_input=False)
        layer = _frozen(layer, {"alpha_mem": a}, device)
    else:
        assert isinstance(node, CubaLIF)
        alpha = c["alpha"]
        if np.any(alpha <= 0):
            raise CaseSkipped("CubaLIF with α = 0 not built: sinabs scales the input by α")
        layer = sl.LIF(tau_mem=tau_init, tau_syn=tau_init, spike_threshold=torch.tensor(1.0),
                       train_alphas=True, norm_input=False, **spike_kwargs)
        layer = _frozen(layer, {"alpha_mem": a, "alpha_syn": _uniform_or_shaped(alpha),
                                "spike_threshold": theta}, device)
        gain = coefficient(c["g"] * c["gamma"] / alpha, device)
        leak = coefficient((1.0 - alpha) * c["l"] / alpha, device)

    def run(x: torch.Tensor) -> torch.Tensor:
        layer.reset_states()  # sinabs keeps its state between calls: start every sequence at 0
        out: torch.Tensor = layer(input_term(x, gain, leak).transpose(0, 1))
        return out.transpose(0, 1)

    return run


def exodus_neuron_op(node: Node, dyn: Dynamics, device: str) -> Op:
    """The node as a sinabs-exodus layer (CUDA only): EXODUS' ``LIF``, ``IAF`` and ``ExpLeak``
    subclass sinabs' and take the same arguments, so the build is :func:`sinabs_neuron_op`'s;
    they compute the same step with one CUDA kernel over all T (a CubaLIF's synapse decays
    its input in the same step, ``decay_early``, as sinabs does). Their spike accepts only a
    subtract reset with the gradient through it: the knobs
    (:data:`~._declared.SINABS_EXODUS_GRAPH_KNOBS`) allow nothing else."""
    import sinabs.exodus.layers as exodus_layers

    return sinabs_neuron_op(node, dyn, device, exodus_layers)

"""A ``nir-graph`` workload built natively with Rockpool's ``LIFNeuronTorch`` (not its NIR
importer, whose LIF import crashes on nir 1.0.x: it reads a field a NIR LIF does not have).

The synaptic nodes are PyTorch's ops (:mod:`.torch_graph`); each LIF or IF node is one
``LIFNeuronTorch`` configured as the Linear+LIF adapter configures it (:mod:`.rockpool`):
``dt = 1``, per neuron a float32 ``tau_mem`` whose float32 ``exp(-1/tau)`` is exactly the
step's a (``inf`` for an IF: a = 1), ``threshold = θ``, ``bias = 0``, ``noise_std = 0``, one
spike per step with the workload's surrogate (:func:`spike_function`), fed g·x + l. Its
neurons are one flat axis, batch-major: a node's (T, B, *shape) values are flattened and
transposed in and out, and its state is reset before every sequence.

``LIFNeuronTorch`` is membrane-only and resets by subtraction through the spike, so what it
cannot build is refused (the knobs say it, :data:`._declared.ROCKPOOL_GRAPH_KNOBS`): LI and
CubaLIF nodes (``LIFTorch``, its current-based neuron, integrates its synaptic current in
another order), reset ``zero``, a detached reset; and, at build, a decay a no float32
``tau_mem`` reaches exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from snnbench.adapter import CaseSkipped
from snnbench.workload.graph.nodes import IF, LIF, Node
from snnbench.workload.graph.reference import Dynamics

from ._declared import hide_samna
from ._graph_common import step_coefficients
from ._torch_common import decay_time_constant, surrogate_derivative
from .torch_graph import Op, coefficient, const, input_term


def spike_function(name: str, slope: float) -> Any:
    """A rockpool ``spike_generation_fn``: ``[v >= threshold]`` with surrogate ``name`` of
    ``slope`` (the derivative at v − threshold)."""
    slope = float(slope)

    class SpecSurrogateSpike(torch.autograd.Function):
        """Single spike at ``v >= threshold``; backward: the surrogate at v - threshold."""

        @staticmethod
        def forward(
            ctx: Any,
            v: torch.Tensor,
            threshold: torch.Tensor,
            window: Any = None,
            max_spikes_per_dt: Any = None,
        ) -> torch.Tensor:
            ctx.save_for_backward(v, threshold)
            return (v >= threshold).to(v.dtype)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
            v, threshold = ctx.saved_tensors
            return grad * surrogate_derivative(v - threshold, name, slope), None, None, None

    return SpecSurrogateSpike


def _time_constants(a: np.ndarray, device: str) -> float | torch.Tensor:
    """Per neuron, the float32 tau whose float32 exp(-1/tau) is a (one float when uniform)."""
    flat = np.asarray(a, dtype=np.float64).reshape(-1)
    taus: dict[float, float] = {}
    for value in np.unique(flat):
        try:
            taus[float(value)] = decay_time_constant(float(value), device)
        except ValueError as exc:
            raise CaseSkipped(f"decay a={value!r} is not exp(-1/tau) of any float32 tau on "
                              f"{device}: LIFNeuronTorch takes only tau_mem") from exc
    if len(taus) == 1:
        return next(iter(taus.values()))
    return const(np.array([taus[float(v)] for v in flat]), device)


def rockpool_neuron_op(node: Node, dyn: Dynamics, device: str) -> Op:
    """The node as one ``LIFNeuronTorch`` over T (module docstring); what it cannot build
    exactly raises :class:`CaseSkipped`."""
    if not isinstance(node, LIF | IF):
        raise CaseSkipped(f"{node.kind} not built: Rockpool's LIFNeuronTorch is a membrane-only "
                          "spiking neuron")
    if dyn.reset != "subtract" or dyn.detach_reset:
        raise CaseSkipped("only reset 'subtract' through the spike is built: LIFNeuronTorch "
                          "resets v − s·θ and differentiates it")
    hide_samna()
    from rockpool.nn.modules.torch.lif_neuron_torch import LIFNeuronTorch

    c = step_coefficients(node, dyn)
    n = int(np.prod(node.in_shape))
    theta = np.asarray(c["theta"], dtype=np.float64).reshape(-1)
    threshold: float | torch.Tensor = coefficient(theta, device)
    layer = LIFNeuronTorch(
        (n,), tau_mem=_time_constants(c["a"], device), threshold=threshold, bias=0.0, dt=1.0,
        noise_std=0.0, spike_generation_fn=spike_function(dyn.surrogate, dyn.surrogate_slope),
        max_spikes_per_dt=1).to_torch()
    for p in layer.parameters():
        p.requires_grad_(False)
    layer.to(device)
    layer.train()
    gain = coefficient(c["g"], device)
    leak = coefficient(c["l"], device)

    def run(x: torch.Tensor) -> torch.Tensor:
        layer.reset_state()  # the module keeps its state between calls: every sequence at 0
        drive = input_term(x, gain, leak)
        steps, batch = drive.shape[:2]
        out: torch.Tensor = layer(drive.reshape(steps, batch, n).transpose(0, 1))
        return out.transpose(0, 1).reshape(drive.shape)

    return run

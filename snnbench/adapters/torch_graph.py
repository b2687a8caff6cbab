"""A ``nir-graph`` workload built natively in plain PyTorch (plugin API v2 model).

Every node is the PyTorch op of its semantics in ``docs/nir.md`` (an Affine is ``F.linear`` over
all time steps at once, a Conv1d or Conv2d ``F.conv1d`` or ``F.conv2d`` over T·B samples, a
neuron a Python loop over T with eager element-wise ops in the reference's order), computed in
float32 with the workload's dt, reset, discretisation and surrogate. The neuron coefficients
(a, g, l of v ← a·v + g·x + l; α, γ of a CubaLIF's synapse) are computed once in float64, as
the reference computes them, and rounded to float32.

It is the ``torch`` adapter's graph build (:class:`~snnbench.adapters.torch_ref.Torch`), and
the synaptic half of every other PyTorch library's (their neurons replace
:func:`torch_neuron_op`). torch is imported at module level: import this module lazily, in a
worker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from snnbench.workload.graph import GraphData, NirGraph, nodes
from snnbench.workload.graph.reference import Dynamics

# stated where the adapter reads them without importing torch
from ._declared import TORCH_GRAPH_KNOBS as TORCH_GRAPH_KNOBS
from ._graph_common import TorchLeavesModel, leaf_tensors, step_coefficients
from ._torch_common import OnTorchDevice, surrogate_derivative

Tensor = torch.Tensor
Op = Callable[[Tensor], Tensor]
#: builds a stateful node's loop over time: (node, dynamics, device) → op
NeuronBuilder = Callable[[nodes.Node, Dynamics, str], Op]


class _Spike(torch.autograd.Function):
    """Heaviside(u) forward, the workload's surrogate derivative backward."""

    @staticmethod
    def forward(ctx: Any, u: Tensor, name: str, slope: float) -> Tensor:
        ctx.save_for_backward(u)
        ctx.name, ctx.slope = name, slope
        return (u >= 0).to(u.dtype)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (u,) = ctx.saved_tensors
        return grad * surrogate_derivative(u, ctx.name, ctx.slope), None, None


def spike_fn(dyn: Dynamics) -> Op:
    """Heaviside(u) with the workload's surrogate: the spike function every builder gives its
    library (u = v − θ)."""
    name, slope = dyn.surrogate, float(dyn.surrogate_slope)

    def spike(u: Tensor) -> Tensor:
        return _Spike.apply(u, name, slope)  # type: ignore[no-any-return,no-untyped-call]

    return spike


def const(value: np.ndarray, device: str) -> Tensor:
    """A float32 constant tensor of ``value``."""
    return torch.as_tensor(np.asarray(value, dtype=np.float32), device=device)


def coefficient(value: np.ndarray, device: str) -> float | Tensor:
    """``value`` as a Python float when every neuron has the same (what a hand-written network
    passes, and the fastest operand), else a float32 tensor."""
    flat = np.asarray(value, dtype=np.float64).reshape(-1)
    if flat.size and np.all(flat == flat[0]):
        return float(flat[0])
    return const(value, device)


def _is(value: float | Tensor, number: float) -> bool:
    return isinstance(value, float) and value == number


def input_term(x: Tensor, gain: float | Tensor, offset: float | Tensor) -> Tensor:
    """gain·x + offset, with no op for a gain of 1 or an offset of 0."""
    if not _is(gain, 1.0):
        x = gain * x
    return x if _is(offset, 0.0) else x + offset


def torch_neuron_step(node: nodes.Node, dyn: Dynamics,
                      device: str) -> tuple[Op, Callable[[Tensor, Tensor, Tensor],
                                                         tuple[Tensor, Tensor, Tensor]]]:
    """(drive, step) of a stateful node in PyTorch: ``drive(x)`` its input term g·x + l (γ·x
    for a CubaLIF's synapse) over all T, ``step(d_t, v, cur) → (out, v, cur)`` one step of
    ``docs/nir.md`` in the reference's order."""
    c = {k: coefficient(v, device) for k, v in step_coefficients(node, dyn).items()}
    a, g, leak, theta, alpha, gamma = (c[k] for k in ("a", "g", "l", "theta", "alpha", "gamma"))
    spiking = not isinstance(node, nodes.LI)
    cuba = isinstance(node, nodes.CubaLIF)
    subtract = dyn.reset == "subtract"
    detach = dyn.detach_reset
    spike = spike_fn(dyn)

    def drive(x: Tensor) -> Tensor:
        return input_term(x, gamma, 0.0) if cuba else input_term(x, g, leak)

    def step(d_t: Tensor, v: Tensor, cur: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        if cuba:
            cur = alpha * cur + d_t
            v = a * v + input_term(cur, g, leak)
        else:
            v = a * v + d_t
        if not spiking:
            return v, v, cur
        s = spike(v - theta)
        r = s.detach() if detach else s
        return s, (v - theta * r if subtract else v * (1.0 - r)), cur

    return drive, step


def torch_neuron_op(node: nodes.Node, dyn: Dynamics, device: str) -> Op:
    """The node's loop over time in plain PyTorch: (T, B, *shape) → (T, B, *shape).

    The input term g·x + l (γ·x for a CubaLIF's synapse) is one op over all T before the loop,
    a uniform coefficient a Python float, a gain of 1 and a leak of 0 no op at all: the loop
    is then the hand-written Linear+LIF loop (v = β·v + x; spike; reset)."""
    drive, step = torch_neuron_step(node, dyn, device)

    def run(x: Tensor) -> Tensor:
        v = torch.zeros(x.shape[1:], dtype=x.dtype, device=x.device)
        cur = torch.zeros_like(v)
        out = []
        for d_t in drive(x).unbind(0):
            s, v, cur = step(d_t, v, cur)
            out.append(s)
        return torch.stack(out)

    return run


def _stateless_op(node: nodes.Node, params: Mapping[str, Tensor]) -> Op:
    if isinstance(node, nodes.Affine):
        return lambda x: F.linear(x, params["weight"], params["bias"])
    if isinstance(node, nodes.Linear):
        return lambda x: F.linear(x, params["weight"])
    if isinstance(node, nodes.Scale):
        return lambda x: x * params["scale"]
    if isinstance(node, nodes.Flatten):
        out_shape = node.out_shape
        return lambda x: x.reshape(*x.shape[:2], *out_shape)
    if isinstance(node, nodes.Conv1d | nodes.Conv2d):
        convolve = F.conv1d if isinstance(node, nodes.Conv1d) else F.conv2d
        stride, padding, in_shape = node.stride, node.padding, node.in_shape

        def conv(x: Tensor) -> Tensor:
            y = convolve(x.reshape(-1, *in_shape), params["weight"], params["bias"],
                         stride=stride, padding=padding)
            return y.reshape(*x.shape[:2], *y.shape[1:])
        return conv
    if isinstance(node, nodes.SumPool2d):
        kernel, in_shape = node.kernel, node.in_shape
        factor = 1.0 if isinstance(node, nodes.AvgPool2d) else float(kernel[0] * kernel[1])

        def pool(x: Tensor) -> Tensor:
            y = F.avg_pool2d(x.reshape(-1, *in_shape), kernel, stride=kernel) * factor
            return y.reshape(*x.shape[:2], *y.shape[1:])
        return pool
    raise AssertionError(f"no PyTorch op for {node.kind}")


def build_graph_network(workload: NirGraph, data: GraphData, device: str,
                        neuron_op: NeuronBuilder = torch_neuron_op
                        ) -> tuple[Op, dict[str, Tensor]]:
    """(network, parameters): a callable (T, B, *input shape) → the Output node's value, and
    its trainable tensors by ``node.field`` (leaf tensors requiring gradients).

    ``neuron_op`` builds each stateful node (a library's neurons); the synaptic nodes are
    PyTorch's own ops, which every PyTorch library uses for them."""
    graph, dyn = data.graph, workload.dynamics
    parameters = leaf_tensors(data.params, device)
    ops: dict[str, Op] = {}
    for name, node in graph.nodes:
        if name == graph.input or isinstance(node, nodes.Output):
            continue
        if node.stateful:
            ops[name] = neuron_op(node, dyn, device)
        else:
            own = {field: parameters[f"{name}.{field}"] for field in node.trainable}
            ops[name] = _stateless_op(node, own)

    def apply(name: str, x: Tensor) -> Tensor:
        return ops[name](x) if name in ops else x

    return graph.feed_forward(apply), parameters


class TorchGraphModel(OnTorchDevice, TorchLeavesModel):
    """A graph built by :func:`build_graph_network`, timed as any other model: the loss is the
    sum of the Output node's value."""

    def __init__(self, workload: NirGraph, data: GraphData, device: str,
                 neuron_op: NeuronBuilder = torch_neuron_op,
                 on_close: Callable[[], None] | None = None) -> None:
        """``on_close``: what releases the library's own references to the neurons."""
        self.network, self.parameters = build_graph_network(workload, data, device,
                                                            neuron_op)
        self._on_close = on_close
        self.x = torch.as_tensor(np.array(data.inputs, dtype=np.float32), device=device)
        self.device = torch.device(device)

    def forward(self) -> Tensor:
        return self.network(self.x)

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()

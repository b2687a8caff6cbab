"""What the module-state JAX graph builders (brainstate, spyx/flax.nnx) share: a neuron node's
step of ``docs/nir.md``, the walk over the graph's modules, and the model that splits the
parameters off, times them as :class:`~._jax_common.JaxModel` and reads gradients by
``node.field``. The frameworks differ only in the modules, the split/merge and the layouts,
which the callers pass in; the graph's arrays to and from the layouts the JAX libraries keep
serve haiku's builder too.

Nothing here imports JAX at module level (see :mod:`._jax_common`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from snnbench.plugin import V1Model
from snnbench.workload.graph import GraphData, NirGraph
from snnbench.workload.graph.nodes import (
    LI,
    Affine,
    Conv1d,
    Conv2d,
    CubaLIF,
    Graph,
    Linear,
    Node,
    Output,
)
from snnbench.workload.graph.reference import Dynamics
from snnbench.workload.linear_lif.spec import FloatArray, NetworkSpec

from ._graph_common import affine_term, reshape_op, step_constants
from ._jax_common import JaxModel, jax_device, split_on_device

#: one step of a neuron node: (input term, membrane, current) → (output, membrane, current)
Step = Callable[[Any, Any, Any], tuple[Any, Any, Any]]


def neuron_step(node: Node, dyn: Dynamics,
                spike: Callable[[Any], Any]) -> tuple[Callable[[Any], Any], Step]:
    """(drive, step) of a stateful node: ``drive(x)`` the input term of its (T, B, *shape)
    input, ``step`` one step of ``docs/nir.md`` in the reference's order with ``spike`` (the
    Heaviside with the workload's surrogate derivative)."""
    from jax import lax

    c = step_constants(node, dyn)
    spiking = not isinstance(node, LI)
    cuba = isinstance(node, CubaLIF)
    subtract = dyn.reset == "subtract"
    detach = dyn.detach_reset

    def drive(x: Any) -> Any:
        return affine_term(x, c["gamma"], 0.0) if cuba else affine_term(x, c["g"], c["l"])

    def step(d_t: Any, v: Any, cur: Any) -> tuple[Any, Any, Any]:
        if cuba:
            cur = c["alpha"] * cur + d_t
            v = c["a"] * v + affine_term(cur, c["g"], c["l"])
        else:
            v = c["a"] * v + d_t
        if not spiking:
            return v, v, cur
        s = spike(v - c["theta"])
        r = lax.stop_gradient(s) if detach else s
        return s, (v - c["theta"] * r if subtract else v * (1.0 - r)), cur

    return drive, step


def graph_modules(workload: NirGraph, data: GraphData,
                  neuron: Callable[[Node, Dynamics], Any],
                  synapse: Callable[[Node, Mapping[str, np.ndarray]], Any]) -> dict[str, Any]:
    """Attribute name → module of every node that has one: ``neuron(node, dynamics)`` for a
    stateful node, ``synapse(node, params)`` (``field`` → float32 array, the graph's layouts;
    None for a reshape) for the others. The attribute is ``node<i>``, ``i`` the node's place
    in :func:`node_attrs` (a node name need not be an identifier)."""
    graph = data.graph
    modules: dict[str, Any] = {}
    for name, attr in node_attrs(graph).items():
        node = graph.node(name)
        if node.stateful:
            module = neuron(node, workload.dynamics)
        else:
            own = {f: np.asarray(data.params[f"{name}.{f}"], dtype=np.float32)
                   for f in node.trainable}
            module = synapse(node, own)
        if module is not None:
            modules[attr] = module
    return modules


def node_attrs(graph: Graph) -> dict[str, str]:
    """Node name → the attribute holding its module, for every node but the input and
    Output."""
    names = [name for name, node in graph.nodes
             if name != graph.input and not isinstance(node, Output)]
    return {name: f"node{i}" for i, name in enumerate(names)}


def feed_forward(graph: Graph, module: Callable[[str], Any],
                 conv: Callable[[Any, Any], Any]) -> Callable[[Any], Any]:
    """The graph run feed-forward on (T, B, *shape) arrays: ``module(name)`` is a node's module
    (None for a reshape), a neuron's has ``run``; ``conv(module, x)`` applies a Conv1d or
    Conv2d module to (N, C, L) or (N, C, H, W) samples."""
    def apply(name: str, h: Any) -> Any:
        node = graph.node(name)
        if isinstance(node, Output):
            return h
        if node.stateful:
            return module(name).run(h)
        found = module(name)
        if found is None:
            return reshape_op(node)(h)
        if isinstance(node, Conv1d | Conv2d):
            y = conv(found, h.reshape(-1, *node.in_shape))
            return y.reshape(*h.shape[:2], *y.shape[1:])
        return found(h)

    return graph.feed_forward(apply)


def to_jax_layout(node: Node, field: str, value: np.ndarray) -> np.ndarray:
    """The graph's array ``node.field`` in the layout the JAX libraries keep: an Affine or
    Linear weight (in, out), a Conv2d weight HWIO and its bias (C, 1, 1) (an NCHW convolution's
    bias broadcasts over H, W), a Conv1d weight WIO and its bias (C, 1)."""
    if field == "weight" and isinstance(node, Affine | Linear):
        return np.ascontiguousarray(value.T)  # (out, in) → (in, out)
    if field == "weight" and isinstance(node, Conv1d):
        return np.ascontiguousarray(value.transpose(2, 1, 0))  # OIW → WIO
    if field == "weight" and isinstance(node, Conv2d):
        return np.ascontiguousarray(value.transpose(2, 3, 1, 0))  # OIHW → HWIO
    if field == "bias" and isinstance(node, Conv1d):
        return value.reshape(-1, 1)
    if field == "bias" and isinstance(node, Conv2d):
        return value.reshape(-1, 1, 1)
    return value


def from_jax_layout(node: Node, field: str, value: np.ndarray) -> np.ndarray:
    """The inverse of :func:`to_jax_layout`: an array (a parameter or its gradient) back in
    the graph's layout."""
    if field == "weight" and isinstance(node, Affine | Linear):
        return np.ascontiguousarray(value.T)
    if field == "weight" and isinstance(node, Conv1d):
        return np.ascontiguousarray(value.transpose(2, 1, 0))  # WIO → OIW
    if field == "weight" and isinstance(node, Conv2d):
        return np.ascontiguousarray(value.transpose(3, 2, 0, 1))  # HWIO → OIHW
    if field == "bias" and isinstance(node, Conv1d | Conv2d):
        return value.reshape(-1)
    return value


class ModuleGraphModel(V1Model):
    """A compiled graph of modules with their state inside, timed as :class:`JaxModel` times a
    Linear+LIF network; its gradients by ``node.field`` in the graph's layouts."""

    def __init__(self, data: GraphData, device: str, network: Callable[[], Any],
                 split: Callable[[Any], Sequence[Any]],
                 merge: Callable[[Any, Any, Any], Any],
                 run: Callable[[Any, Any], Any],
                 read: Callable[[Node, str, Any], np.ndarray]) -> None:
        """``network()`` is built on ``device``; ``split`` parts it into (graph, parameters,
        other state) and ``merge`` puts a parameter tree back, so the parameters alone are
        differentiated; ``run(module, x)`` applies a merged module; ``read(node, field,
        module)`` reads an array of a node's module in the graph's layout."""
        import jax

        graph = data.graph
        dev = jax_device(device)
        attrs = node_attrs(graph)
        tree, params, rest = split_on_device(network, split, dev)
        self._fields = [(name, graph.node(name), field) for name in attrs
                        for field in graph.node(name).trainable]
        self._attrs = attrs
        self._read = read

        def put_back(p: Any) -> Any:
            return merge(tree, p, rest)

        self._merge: Callable[[Any], Any] = put_back  # the module with ``p`` put back
        self._caught: list[Any] = [None]

        def apply(p: Any, inputs: Any) -> Any:
            return run(self._merge(p), inputs)

        def catch(grads: Any) -> list[tuple[Any, Any]]:
            self._caught[0] = grads  # the whole gradient tree, read by name below
            return []

        x = jax.device_put(np.asarray(data.inputs, dtype=np.float32), dev)
        # the Linear+LIF model's timing machinery; strict float32 matmuls (the default spec)
        super().__init__(JaxModel(apply, params, x, dev, NetworkSpec(), catch))

    def gradients(self) -> Mapping[str, Any]:
        self.legacy.gradients()  # hands the gradient tree to catch()
        merged = self._merge(self._caught[0])
        out: dict[str, FloatArray] = {}
        for name, node, field in self._fields:
            out[f"{name}.{field}"] = self._read(node, field, getattr(merged, self._attrs[name]))
        return out

"""A ``nir-graph`` workload built natively in JAX with dm-haiku (no NIR importer exists for it).

The synaptic nodes are haiku modules holding the graph's arrays in haiku's layouts:
``hk.Linear`` (``w`` is (in, out)) for Affine and Linear, ``hk.Conv1D`` (``w`` is WIO, the input
NCW) for Conv1d, ``hk.Conv2D`` (``w`` is HWIO, the input NCHW) for Conv2d, a parameter ``scale``
for Scale; pooling and flatten are reshapes. Each stateful node is a hand-written ``lax.scan``
over T of the step in ``docs/nir.md`` with a ``jax.custom_vjp`` Heaviside whose derivative is
the workload's surrogate (the haiku adapter's Linear+LIF design). The model is compiled ahead of
time and timed as the JAX adapters' models are
(:class:`~snnbench.adapters._jax_common.JaxModel`); gradients come back by ``node.field`` in the
graph's layouts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from snnbench.plugin import V1Model
from snnbench.workload.graph import GraphData, NirGraph
from snnbench.workload.graph.nodes import (
    Affine,
    Conv1d,
    Conv2d,
    CubaLIF,
    Flatten,
    Linear,
    Node,
    Output,
    Scale,
    SumPool2d,
)
from snnbench.workload.graph.reference import Dynamics
from snnbench.workload.linear_lif.spec import FloatArray, NetworkSpec

from ._graph_common import reshape_op
from ._jax_common import JaxModel, jax_device, surrogate_derivative
from ._jax_graph import from_jax_layout, neuron_step, to_jax_layout


def _spike_fn(dyn: Dynamics) -> Callable[[Any], Any]:
    import jax

    name, slope = dyn.surrogate, float(dyn.surrogate_slope)

    @jax.custom_vjp
    def spike(u: Any) -> Any:
        return (u >= 0).astype(u.dtype)

    def fwd(u: Any) -> tuple[Any, Any]:
        return (u >= 0).astype(u.dtype), u

    def bwd(u: Any, g: Any) -> tuple[Any]:
        return (g * surrogate_derivative(u, name, slope),)

    spike.defvjp(fwd, bwd)
    return spike


def _neuron(node: Node, dyn: Dynamics) -> Callable[[Any], Any]:
    """The node's ``lax.scan`` over T: (T, B, *shape) → (T, B, *shape); only a CubaLIF
    carries a current."""
    import jax.numpy as jnp
    from jax import lax

    drive, step = neuron_step(node, dyn, _spike_fn(dyn))
    cuba = isinstance(node, CubaLIF)

    def run(x: Any) -> Any:
        zero = jnp.zeros(x.shape[1:], x.dtype)
        if cuba:
            def cuba_step(state: tuple[Any, Any], d_t: Any) -> tuple[tuple[Any, Any], Any]:
                out, v, cur = step(d_t, *state)
                return (v, cur), out

            _, out = lax.scan(cuba_step, (zero, zero), drive(x))
        else:
            def lif_step(v: Any, d_t: Any) -> tuple[Any, Any]:
                out, v, _ = step(d_t, v, zero)
                return v, out

            _, out = lax.scan(lif_step, zero, drive(x))
        return out

    return run


def _stateless(name: str, node: Node) -> Callable[[Any], Any]:
    """The node as haiku modules (created inside the transformed function)."""
    import haiku as hk
    import jax.numpy as jnp

    if isinstance(node, Affine | Linear):
        out = node.out_shape[0]
        bias = isinstance(node, Affine)
        return lambda x: hk.Linear(out, with_bias=bias, name=name)(x)
    if isinstance(node, Scale):
        shape = node.in_shape
        return lambda x: x * hk.get_parameter(f"{name}_scale", shape, init=jnp.ones)
    if isinstance(node, Conv1d):
        c_out, k = int(node.weight.shape[0]), int(node.weight.shape[2])
        stride1, pad, in_shape = node.stride, node.padding, node.in_shape

        def conv1d(x: Any) -> Any:
            module = hk.Conv1D(c_out, k, stride=stride1, padding=[(pad, pad)],
                               data_format="NCW", name=name)
            y = module(x.reshape(-1, *in_shape))
            return y.reshape(*x.shape[:2], *y.shape[1:])
        return conv1d
    if isinstance(node, Conv2d):
        c_out, kh, kw = int(node.weight.shape[0]), int(node.weight.shape[2]), \
            int(node.weight.shape[3])
        stride, padding, in_shape = node.stride, node.padding, node.in_shape

        def conv(x: Any) -> Any:
            module = hk.Conv2D(c_out, (kh, kw), stride=stride,
                               padding=[(padding[0], padding[0]), (padding[1], padding[1])],
                               data_format="NCHW", name=name)
            y = module(x.reshape(-1, *in_shape))
            return y.reshape(*x.shape[:2], *y.shape[1:])
        return conv
    if isinstance(node, Flatten | SumPool2d):
        return reshape_op(node)
    raise AssertionError(f"no haiku module for {node.kind}")


def _haiku_path(name: str, node: Node, field: str) -> tuple[str, str]:
    """Where haiku keeps the graph's array ``name.field``: (module, parameter)."""
    if isinstance(node, Scale):
        return "~", f"{name}_scale"
    return name, {"weight": "w", "bias": "b"}[field]


class HaikuGraphModel(V1Model):
    """The compiled haiku graph, timed as :class:`JaxModel` times a Linear+LIF network; its
    gradients by ``node.field`` in the graph's layouts."""

    def __init__(self, workload: NirGraph, data: GraphData, device: str) -> None:
        import haiku as hk
        import jax

        graph, dyn = data.graph, workload.dynamics
        ops: dict[str, Callable[[Any], Any]] = {}

        def apply(name: str, h: Any) -> Any:
            node = graph.node(name)
            if isinstance(node, Output):
                return h
            if node.stateful:
                return ops.setdefault(name, _neuron(node, dyn))(h)
            return _stateless(name, node)(h)

        transformed: Any = hk.without_apply_rng(hk.transform(graph.feed_forward(apply)))
        dev = jax_device(device)
        self._fields = [(name, node, field) for name, node in graph.nodes
                        for field in node.trainable]
        params: dict[str, dict[str, Any]] = {}
        for name, node, field in self._fields:
            module, key = _haiku_path(name, node, field)
            value = to_jax_layout(node, field, np.asarray(data.params[f"{name}.{field}"]))
            params.setdefault(module, {})[key] = jax.device_put(
                np.asarray(value, dtype=np.float32), dev)
        x = jax.device_put(np.asarray(data.inputs, dtype=np.float32), dev)
        # the parameter tree must be exactly the one haiku creates (names, shapes)
        expected = jax.eval_shape(transformed.init, jax.random.PRNGKey(0), x)
        shapes = jax.tree_util.tree_map(lambda a: tuple(a.shape), params)
        wanted = jax.tree_util.tree_map(lambda a: tuple(a.shape), expected)
        if shapes != wanted:
            raise RuntimeError(f"parameters {shapes} differ from haiku's {wanted}")
        self._caught: list[Any] = [None]

        def catch(grads: Any) -> list[tuple[Any, Any]]:
            self._caught[0] = grads  # the whole gradient tree, read by name below
            return []

        # the Linear+LIF model's timing machinery; strict float32 matmuls (the default spec)
        super().__init__(JaxModel(transformed.apply, params, x, dev, NetworkSpec(), catch))

    def gradients(self) -> Mapping[str, Any]:
        self.legacy.gradients()  # hands the gradient tree to catch()
        tree = self._caught[0]
        out: dict[str, FloatArray] = {}
        for name, node, field in self._fields:
            module, key = _haiku_path(name, node, field)
            value = np.asarray(tree[module][key], dtype=np.float32)
            out[f"{name}.{field}"] = from_jax_layout(node, field, value)
        return out

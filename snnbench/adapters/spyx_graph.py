"""A ``nir-graph`` workload built natively the spyx 1.x way (flax.nnx modules), as the ``spyx``
adapter builds Linear+LIF (:mod:`.spyx`), not with spyx's NIR importer (which fires one step
late and, on a conv graph, reads the flattened features in another order than the next affine
layer's weights assume).

The synaptic nodes are ``flax.nnx`` modules holding the graph's arrays as ``nnx.Param`` in
flax's layouts: ``nnx.Linear`` (kernel (in, out)) for Affine and Linear, ``nnx.Conv`` (kernel
HWIO, channels last: the NCHW values are transposed in and out, as a spyx user's NCHW frames
would be) for Conv2d, a module with an ``nnx.Param`` for Scale; pooling and flatten are
reshapes. Each stateful node is an ``nnx.Module`` with spyx's stateful-layer contract
(``initial_state``, ``__call__(x, state) -> (out, state)``) taking the step of ``docs/nir.md``
in the reference's order, scanned over T with ``lax.scan`` (what ``spyx.nn.run`` does for a
chain), its spike made with ``spyx.axn.custom`` (a ``>=`` Heaviside, the workload's surrogate
derivative). spyx's own ``LIF`` is not used, for the reasons the Linear+LIF adapter gives. The
parameters are split off with ``nnx.split``, the model is compiled ahead of time and timed as
the JAX adapters' models are; gradients come back by ``node.field`` in the graph's layouts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from snnbench.plugin import V1Model
from snnbench.workload.graph import GraphData, NirGraph
from snnbench.workload.graph.nodes import (
    LI,
    Affine,
    Conv2d,
    CubaLIF,
    Linear,
    Node,
    Output,
    Scale,
)
from snnbench.workload.graph.reference import Dynamics
from snnbench.workload.linear_lif.spec import FloatArray, NetworkSpec

from ._graph_common import affine_term, reshape_op, step_constants
from ._jax_common import JaxModel, jax_device


def _neuron(node: Node, dyn: Dynamics) -> Any:
    """The node as an ``nnx.Module`` with spyx's stateful-layer contract."""
    import jax.numpy as jnp
    import spyx
    from flax import nnx
    from jax import lax

    from ._jax_common import heaviside_ge, surrogate_derivative
    c = step_constants(node, dyn)
    name, slope = dyn.surrogate, float(dyn.surrogate_slope)
    spike = spyx.axn.custom(bwd=lambda u: surrogate_derivative(u, name, slope),
                            fwd=heaviside_ge)
    spiking = not isinstance(node, LI)
    cuba = isinstance(node, CubaLIF)
    subtract = dyn.reset == "subtract"
    detach = dyn.detach_reset

    class GraphNeuron(nnx.Module):
        """One neuron node: state (membrane, current), one step per call."""

        def initial_state(self, shape: tuple[int, ...]) -> tuple[Any, Any]:
            return jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32)

        def __call__(self, d_t: Any, state: tuple[Any, Any]) -> tuple[Any, tuple[Any, Any]]:
            v, cur = state
            if cuba:
                cur = c["alpha"] * cur + d_t
                v = c["a"] * v + affine_term(cur, c["g"], c["l"])
            else:
                v = c["a"] * v + d_t
            if not spiking:
                return v, (v, cur)
            s = spike(v - c["theta"])
            r = lax.stop_gradient(s) if detach else s
            v = v - c["theta"] * r if subtract else v * (1.0 - r)
            return s, (v, cur)

        def run(self, x: Any) -> Any:
            drive = affine_term(x, c["gamma"], 0.0) if cuba else affine_term(x, c["g"], c["l"])

            def step(state: tuple[Any, Any], d_t: Any) -> tuple[tuple[Any, Any], Any]:
                out, state = self(d_t, state)
                return state, out

            _, out = lax.scan(step, self.initial_state(tuple(x.shape[1:])), drive)
            return out

    return GraphNeuron()


def _constant(value: np.ndarray) -> Callable[..., Any]:
    import jax.numpy as jnp

    array = jnp.asarray(value)
    return lambda _key, _shape, _dtype: array


def _synapse(node: Node, params: Mapping[str, np.ndarray], rngs: Any) -> Any:
    """The node as an nnx module holding ``params`` (the graph's layouts), or None."""
    import jax.numpy as jnp
    from flax import nnx
    from jax import lax

    strict = lax.Precision.HIGHEST  # float32 products, as the reference's
    if isinstance(node, Affine | Linear):
        out_n, in_n = params["weight"].shape
        affine = isinstance(node, Affine)
        return nnx.Linear(int(in_n), int(out_n), use_bias=affine, precision=strict,
                          kernel_init=_constant(params["weight"].T),
                          bias_init=_constant(params["bias"] if affine else np.zeros(out_n)),
                          rngs=rngs)
    if isinstance(node, Conv2d):
        weight = params["weight"]
        pad = node.padding
        return nnx.Conv(int(weight.shape[1]), int(weight.shape[0]),
                        (int(weight.shape[2]), int(weight.shape[3])), strides=node.stride,
                        padding=[(pad[0], pad[0]), (pad[1], pad[1])], precision=strict,
                        kernel_init=_constant(weight.transpose(2, 3, 1, 0)),  # OIHW → HWIO
                        bias_init=_constant(params["bias"]), rngs=rngs)
    if isinstance(node, Scale):
        class ScaleModule(nnx.Module):
            def __init__(self) -> None:
                self.weight = nnx.Param(jnp.asarray(params["scale"]))

            def __call__(self, x: Any) -> Any:
                return x * self.weight[...]

        return ScaleModule()
    return None


def _read(node: Node, field: str, module: Any) -> np.ndarray:
    """The array ``field`` of a synaptic module (parameters or gradients), graph layout."""
    if isinstance(node, Scale):
        return np.asarray(module.weight[...], dtype=np.float32)
    if field == "bias":
        return np.asarray(module.bias[...], dtype=np.float32).reshape(-1)
    value = np.asarray(module.kernel[...], dtype=np.float32)
    if isinstance(node, Conv2d):
        return np.ascontiguousarray(value.transpose(3, 2, 0, 1))  # HWIO → OIHW
    return np.ascontiguousarray(value.T)  # (in, out) → (out, in)


class SpyxGraphModel(V1Model):
    """The compiled spyx/nnx graph, timed as :class:`JaxModel` times a Linear+LIF network;
    its gradients by ``node.field`` in the graph's layouts."""

    def __init__(self, workload: NirGraph, data: GraphData, device: str) -> None:
        import jax
        from flax import nnx

        graph, dyn = data.graph, workload.dynamics
        dev = jax_device(device)
        names = [name for name, node in graph.nodes
                 if name != graph.input and not isinstance(node, Output)]
        #: node name → the attribute holding its module (a node name need not be an identifier)
        attrs = {name: f"node{i}" for i, name in enumerate(names)}

        class Network(nnx.Module):
            """The graph's modules as attributes; ``__call__`` runs it feed-forward."""

            def __init__(self) -> None:
                rngs = nnx.Rngs(0)  # required by nnx.Linear/Conv; initialisers replaced
                for name in names:
                    node = graph.node(name)
                    if node.stateful:
                        module = _neuron(node, dyn)
                    else:
                        own = {f: np.asarray(data.params[f"{name}.{f}"], dtype=np.float32)
                               for f in node.trainable}
                        module = _synapse(node, own, rngs)
                    if module is not None:
                        setattr(self, attrs[name], module)

            def __call__(self, x: Any) -> Any:
                def apply(name: str, h: Any) -> Any:
                    node = graph.node(name)
                    if isinstance(node, Output):
                        return h
                    if node.stateful:
                        return getattr(self, attrs[name]).run(h)
                    module = getattr(self, attrs[name], None)
                    if module is None:
                        return reshape_op(node)(h)
                    if isinstance(node, Conv2d):
                        nhwc = h.reshape(-1, *node.in_shape).transpose(0, 2, 3, 1)
                        y = module(nhwc).transpose(0, 3, 1, 2)
                        return y.reshape(*h.shape[:2], *y.shape[1:])
                    return module(h)

                return graph.feed_forward(apply)(x)

        with jax.default_device(dev):
            built = Network()
        graphdef, params, rest = nnx.split(built, nnx.Param, ...)  # type: ignore[misc]
        params = jax.device_put(params, dev)
        rest = jax.device_put(rest, dev)
        self._fields = [(name, graph.node(name), field) for name in names
                        for field in graph.node(name).trainable]
        self._attrs = attrs
        self._graphdef, self._rest = graphdef, rest
        self._caught: list[Any] = [None]

        def apply(p: Any, inputs: Any) -> Any:
            return self._merge(p)(inputs)

        def catch(grads: Any) -> list[tuple[Any, Any]]:
            self._caught[0] = grads  # the whole gradient tree, read by name below
            return []

        x = jax.device_put(np.asarray(data.inputs, dtype=np.float32), dev)
        # the Linear+LIF model's timing machinery; strict float32 matmuls (the default spec)
        super().__init__(JaxModel(apply, params, x, dev, NetworkSpec(), catch))

    def _merge(self, params: Any) -> Any:
        """The module with ``params`` (values or gradients) put back."""
        from flax import nnx

        return nnx.merge(self._graphdef, params, self._rest)

    def gradients(self) -> Mapping[str, Any]:
        self.legacy.gradients()  # hands the gradient tree to catch()
        merged = self._merge(self._caught[0])
        out: dict[str, FloatArray] = {}
        for name, node, field in self._fields:
            out[f"{name}.{field}"] = _read(node, field, getattr(merged, self._attrs[name]))
        return out

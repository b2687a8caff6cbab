"""A ``nir-graph`` workload built natively the spyx 1.x way (flax.nnx modules), as the ``spyx``
adapter builds Linear+LIF (:mod:`.spyx`), not with spyx's NIR importer (which fires one step
late and, on a conv graph, reads the flattened features in another order than the next affine
layer's weights assume).

The synaptic nodes are ``flax.nnx`` modules holding the graph's arrays as ``nnx.Param`` in
flax's layouts: ``nnx.Linear`` (kernel (in, out)) for Affine and Linear, ``nnx.Conv`` (kernel
WIO or HWIO, channels last: the NCW or NCHW values are transposed in and out, as a spyx user's
channels-first samples would be) for Conv1d and Conv2d, a module with an ``nnx.Param`` for
Scale; pooling and flatten are reshapes. Each stateful node is an ``nnx.Module`` with spyx's
stateful-layer contract (``initial_state``, ``__call__(x, state) -> (out, state)``) taking the
step of ``docs/nir.md`` in the reference's order, scanned over T with ``lax.scan`` (what
``spyx.nn.run`` does for a chain), its spike made with ``spyx.axn.custom`` (a ``>=`` Heaviside,
the workload's surrogate derivative). spyx's own ``LIF`` is not used, for the reasons the
Linear+LIF adapter gives. The parameters are split off with ``nnx.split``, the model is compiled
ahead of time and timed as the JAX adapters' models are; gradients come back by ``node.field``
in the graph's layouts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from snnbench.workload.graph import GraphData, NirGraph
from snnbench.workload.graph.nodes import Affine, Conv1d, Conv2d, Linear, Node, Scale
from snnbench.workload.graph.reference import Dynamics

from ._jax_graph import ModuleGraphModel, feed_forward, graph_modules, neuron_step, node_attrs


def _neuron(node: Node, dyn: Dynamics) -> Any:
    """The node as an ``nnx.Module`` with spyx's stateful-layer contract."""
    import jax.numpy as jnp
    import spyx
    from flax import nnx
    from jax import lax

    from ._jax_common import heaviside_ge, surrogate_derivative
    name, slope = dyn.surrogate, float(dyn.surrogate_slope)
    spike = spyx.axn.custom(bwd=lambda u: surrogate_derivative(u, name, slope),
                            fwd=heaviside_ge)
    drive, step = neuron_step(node, dyn, spike)

    class GraphNeuron(nnx.Module):
        """One neuron node: state (membrane, current), one step per call."""

        def initial_state(self, shape: tuple[int, ...]) -> tuple[Any, Any]:
            return jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32)

        def __call__(self, d_t: Any, state: tuple[Any, Any]) -> tuple[Any, tuple[Any, Any]]:
            out, v, cur = step(d_t, *state)
            return out, (v, cur)

        def run(self, x: Any) -> Any:
            def scan_step(state: tuple[Any, Any], d_t: Any) -> tuple[tuple[Any, Any], Any]:
                out, state = self(d_t, state)
                return state, out

            _, out = lax.scan(scan_step, self.initial_state(tuple(x.shape[1:])), drive(x))
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
    if isinstance(node, Conv1d):
        weight = params["weight"]
        return nnx.Conv(int(weight.shape[1]), int(weight.shape[0]), (int(weight.shape[2]),),
                        strides=node.stride, padding=[(node.padding, node.padding)],
                        precision=strict,
                        kernel_init=_constant(weight.transpose(2, 1, 0)),  # OIW → WIO
                        bias_init=_constant(params["bias"]), rngs=rngs)
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
    if isinstance(node, Conv1d):
        return np.ascontiguousarray(value.transpose(2, 1, 0))  # WIO → OIW
    if isinstance(node, Conv2d):
        return np.ascontiguousarray(value.transpose(3, 2, 0, 1))  # HWIO → OIHW
    return np.ascontiguousarray(value.T)  # (in, out) → (out, in)


class SpyxGraphModel(ModuleGraphModel):
    """The compiled spyx/nnx graph, timed as :class:`JaxModel` times a Linear+LIF network;
    its gradients by ``node.field`` in the graph's layouts."""

    def __init__(self, workload: NirGraph, data: GraphData, device: str) -> None:
        import jax.numpy as jnp
        from flax import nnx

        attrs = node_attrs(data.graph)

        class Network(nnx.Module):
            """The graph's modules as attributes; ``__call__`` runs it feed-forward."""

            def __init__(self) -> None:
                rngs = nnx.Rngs(0)  # required by nnx.Linear/Conv; initialisers replaced

                def synapse(node: Node, params: Mapping[str, np.ndarray]) -> Any:
                    return _synapse(node, params, rngs)

                for attr, module in graph_modules(workload, data, _neuron, synapse).items():
                    setattr(self, attr, module)

            def __call__(self, x: Any) -> Any:
                def module(name: str) -> Any:
                    return getattr(self, attrs[name], None)

                def conv(m: Any, first: Any) -> Any:  # nnx.Conv is channels last
                    return jnp.moveaxis(m(jnp.moveaxis(first, 1, -1)), -1, 1)

                return feed_forward(data.graph, module, conv)(x)

        super().__init__(
            data, device, Network,
            lambda built: nnx.split(built, nnx.Param, ...),  # type: ignore[misc]
            nnx.merge, lambda module, x: module(x), _read)

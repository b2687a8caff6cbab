"""A ``nir-graph`` workload built natively with brainstate (BrainPy's state system; no NIR
importer exists for it), as the ``brainstate`` adapter builds Linear+LIF (:mod:`.brainstate`).

The synaptic nodes are brainstate modules holding the graph's arrays as ``ParamState`` in
brainstate's layouts: ``brainstate.nn.Linear`` (weight (in, out)) for Affine and Linear,
``brainstate.nn.Conv1d(channel_first=True)`` (weight WIO, the input NCW, the bias (C, 1)) for
Conv1d, ``brainstate.nn.Conv2d(channel_first=True)`` (weight HWIO, the input NCHW, the bias (C,
1, 1)) for Conv2d, a module with a ``ParamState`` for Scale; pooling and flatten are reshapes.
Each stateful node is a ``brainstate.nn.Module`` whose membrane (and a CubaLIF's synaptic
current) is a ``HiddenState``, stepped by ``brainstate.transform.for_loop`` with the step of
``docs/nir.md`` in the reference's order and a braintools surrogate (the ones the Linear+LIF
adapter uses, exact for every spec surrogate). ``brainstate.graph.treefy_split`` separates the
parameters, which alone are differentiated; the model is compiled ahead of time and timed as the
JAX adapters' models are; gradients come back by ``node.field`` in the graph's layouts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from snnbench.workload.graph import GraphData, NirGraph
from snnbench.workload.graph.nodes import Affine, Conv1d, Conv2d, Linear, Node, Scale
from snnbench.workload.graph.reference import Dynamics

from ._declared import BRAINSTATE_SURROGATE_CLASSES as SURROGATE_CLASSES
from ._jax_graph import (
    ModuleGraphModel,
    feed_forward,
    from_jax_layout,
    graph_modules,
    neuron_step,
    node_attrs,
)


def _neuron(node: Node, dyn: Dynamics) -> Any:
    """The node as a brainstate module: ``run(x)`` maps (T, B, *shape) → (T, B, *shape)."""
    import brainstate
    import braintools
    import jax.numpy as jnp

    spike = getattr(braintools.surrogate, SURROGATE_CLASSES[dyn.surrogate])(
        alpha=float(dyn.surrogate_slope))
    drive, step = neuron_step(node, dyn, spike)

    class GraphNeuron(brainstate.nn.Module):
        """One neuron node: ``HiddenState`` membrane (and current), one step per call."""

        def init_state(self, shape: tuple[int, ...]) -> None:
            self.V = brainstate.HiddenState(jnp.zeros(shape, jnp.float32))
            self.I = brainstate.HiddenState(jnp.zeros(shape, jnp.float32))

        def update(self, d_t: Any) -> Any:
            out, self.V.value, self.I.value = step(d_t, self.V.value, self.I.value)
            return out

        def run(self, x: Any) -> Any:
            self.init_state(tuple(x.shape[1:]))
            return brainstate.transform.for_loop(self.update, drive(x))

    return GraphNeuron()


def _synapse(node: Node, params: Mapping[str, np.ndarray]) -> Any:
    """The node as a brainstate module holding ``params`` (``field`` → float32 array, the
    graph's layouts), or None for a reshape."""
    import brainstate
    import jax.numpy as jnp

    if isinstance(node, Affine | Linear):
        out_n, in_n = params["weight"].shape
        bias = jnp.asarray(params["bias"]) if isinstance(node, Affine) else None
        return brainstate.nn.Linear(int(in_n), int(out_n),
                                    w_init=jnp.asarray(params["weight"].T), b_init=bias)
    if isinstance(node, Conv1d):
        weight = params["weight"]
        return brainstate.nn.Conv1d(
            in_size=tuple(node.in_shape), out_channels=int(weight.shape[0]),
            kernel_size=int(weight.shape[2]), stride=node.stride,
            padding=[(node.padding, node.padding)], channel_first=True,
            w_init=jnp.asarray(weight.transpose(2, 1, 0)),  # OIW → WIO
            b_init=jnp.asarray(params["bias"].reshape(-1, 1)))
    if isinstance(node, Conv2d):
        weight = params["weight"]
        pad = node.padding
        return brainstate.nn.Conv2d(
            in_size=tuple(node.in_shape), out_channels=int(weight.shape[0]),
            kernel_size=(int(weight.shape[2]), int(weight.shape[3])), stride=node.stride,
            padding=[(pad[0], pad[0]), (pad[1], pad[1])], channel_first=True,
            w_init=jnp.asarray(weight.transpose(2, 3, 1, 0)),  # OIHW → HWIO
            b_init=jnp.asarray(params["bias"].reshape(-1, 1, 1)))
    if isinstance(node, Scale):
        class ScaleModule(brainstate.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.weight = brainstate.ParamState(jnp.asarray(params["scale"]))

            def __call__(self, x: Any) -> Any:
                return x * self.weight.value

        return ScaleModule()
    return None


def _read(node: Node, field: str, module: Any) -> np.ndarray:
    """The array ``field`` of a synaptic module (parameters or their gradients), in the
    graph's layout."""
    if isinstance(node, Scale):
        return np.asarray(module.weight.value, dtype=np.float32)
    return from_jax_layout(node, field, np.asarray(module.weight.value[field], dtype=np.float32))


class BrainstateGraphModel(ModuleGraphModel):
    """The compiled brainstate graph, timed as :class:`JaxModel` times a Linear+LIF network;
    its gradients by ``node.field`` in the graph's layouts."""

    def __init__(self, workload: NirGraph, data: GraphData, device: str) -> None:
        import brainstate

        attrs = node_attrs(data.graph)

        class Network(brainstate.nn.Module):
            """The graph's modules as attributes; ``update`` runs it feed-forward."""

            def __init__(self) -> None:
                super().__init__()
                for attr, module in graph_modules(workload, data, _neuron, _synapse).items():
                    setattr(self, attr, module)

            def update(self, x: Any) -> Any:
                def module(name: str) -> Any:
                    return getattr(self, attrs[name], None)

                return feed_forward(data.graph, module, lambda m, h: m(h))(x)

        super().__init__(
            data, device, Network,
            lambda built: brainstate.graph.treefy_split(built, brainstate.ParamState, ...),
            brainstate.graph.treefy_merge, lambda module, x: module.update(x), _read)

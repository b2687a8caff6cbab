"""A ``nir-graph`` workload built natively with brainstate (BrainPy's state system; no NIR
importer exists for it), as the ``brainstate`` adapter builds Linear+LIF (:mod:`.brainstate`).

The synaptic nodes are brainstate modules holding the graph's arrays as ``ParamState`` in
brainstate's layouts: ``brainstate.nn.Linear`` (weight (in, out)) for Affine and Linear,
``brainstate.nn.Conv2d(channel_first=True)`` (weight HWIO, the input NCHW, the bias (C, 1, 1))
for Conv2d, a module with a ``ParamState`` for Scale; pooling and flatten are reshapes. Each
stateful node is a ``brainstate.nn.Module`` whose membrane (and a CubaLIF's synaptic current)
is a ``HiddenState``, stepped by ``brainstate.transform.for_loop`` with the step of
``docs/nir.md`` in the reference's order and a braintools surrogate (the ones the Linear+LIF
adapter uses, exact for every spec surrogate). ``brainstate.graph.treefy_split`` separates the
parameters, which alone are differentiated; the model is compiled ahead of time and timed as
the JAX adapters' models are; gradients come back by ``node.field`` in the graph's layouts.
"""

from __future__ import annotations

from collections.abc import Mapping
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

from ._declared import BRAINSTATE_SURROGATE_CLASSES as SURROGATE_CLASSES
from ._graph_common import affine_term, reshape_op, step_constants
from ._jax_common import JaxModel, jax_device


def _neuron(node: Node, dyn: Dynamics) -> Any:
    """The node as a brainstate module: ``run(x)`` maps (T, B, *shape) → (T, B, *shape)."""
    import brainstate
    import braintools
    import jax.numpy as jnp
    from jax import lax

    c = step_constants(node, dyn)
    spike = getattr(braintools.surrogate, SURROGATE_CLASSES[dyn.surrogate])(
        alpha=float(dyn.surrogate_slope))
    spiking = not isinstance(node, LI)
    cuba = isinstance(node, CubaLIF)
    subtract = dyn.reset == "subtract"
    detach = dyn.detach_reset

    class GraphNeuron(brainstate.nn.Module):
        """One neuron node: ``HiddenState`` membrane (and current), one step per call."""

        def init_state(self, shape: tuple[int, ...]) -> None:
            self.V = brainstate.HiddenState(jnp.zeros(shape, jnp.float32))
            self.I = brainstate.HiddenState(jnp.zeros(shape, jnp.float32))

        def update(self, d_t: Any) -> Any:
            if cuba:
                self.I.value = c["alpha"] * self.I.value + d_t
                v = c["a"] * self.V.value + affine_term(self.I.value, c["g"], c["l"])
            else:
                v = c["a"] * self.V.value + d_t
            if not spiking:
                self.V.value = v
                return v
            s = spike(v - c["theta"])
            r = lax.stop_gradient(s) if detach else s
            self.V.value = v - c["theta"] * r if subtract else v * (1.0 - r)
            return s

        def run(self, x: Any) -> Any:
            self.init_state(tuple(x.shape[1:]))
            drive = affine_term(x, c["gamma"], 0.0) if cuba else affine_term(x, c["g"], c["l"])
            return brainstate.transform.for_loop(self.update, drive)

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
    value = np.asarray(module.weight.value[field], dtype=np.float32)
    if field == "weight" and isinstance(node, Affine | Linear):
        return np.ascontiguousarray(value.T)
    if field == "weight" and isinstance(node, Conv2d):
        return np.ascontiguousarray(value.transpose(3, 2, 0, 1))  # HWIO → OIHW
    if field == "bias" and isinstance(node, Conv2d):
        return value.reshape(-1)
    return value


class BrainstateGraphModel(V1Model):
    """The compiled brainstate graph, timed as :class:`JaxModel` times a Linear+LIF network;
    its gradients by ``node.field`` in the graph's layouts."""

    def __init__(self, workload: NirGraph, data: GraphData, device: str) -> None:
        import brainstate
        import jax

        graph, dyn = data.graph, workload.dynamics
        dev = jax_device(device)
        names = [name for name, node in graph.nodes
                 if name != graph.input and not isinstance(node, Output)]
        #: node name → the attribute holding its module (a node name need not be an identifier)
        attrs = {name: f"node{i}" for i, name in enumerate(names)}

        class Network(brainstate.nn.Module):
            """The graph's modules as attributes; ``update`` runs it feed-forward."""

            def __init__(self) -> None:
                super().__init__()
                for name in names:
                    node = graph.node(name)
                    if node.stateful:
                        module = _neuron(node, dyn)
                    else:
                        own = {f: np.asarray(data.params[f"{name}.{f}"], dtype=np.float32)
                               for f in node.trainable}
                        module = _synapse(node, own)
                    if module is not None:
                        setattr(self, attrs[name], module)

            def update(self, x: Any) -> Any:
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
                        y = module(h.reshape(-1, *node.in_shape))
                        return y.reshape(*h.shape[:2], *y.shape[1:])
                    return module(h)

                return graph.feed_forward(apply)(x)

        with jax.default_device(dev):
            built = Network()
        tree, params, rest = brainstate.graph.treefy_split(built, brainstate.ParamState, ...)
        params = jax.device_put(params, dev)
        rest = jax.device_put(rest, dev)
        self._fields = [(name, graph.node(name), field) for name in names
                        for field in graph.node(name).trainable]
        self._attrs = attrs
        self._tree, self._rest = tree, rest
        self._caught: list[Any] = [None]

        def apply(p: Any, inputs: Any) -> Any:
            return self._merge(p).update(inputs)

        def catch(grads: Any) -> list[tuple[Any, Any]]:
            self._caught[0] = grads  # the whole gradient tree, read by name below
            return []

        x = jax.device_put(np.asarray(data.inputs, dtype=np.float32), dev)
        # the Linear+LIF model's timing machinery; strict float32 matmuls (the default spec)
        super().__init__(JaxModel(apply, params, x, dev, NetworkSpec(), catch))

    def _merge(self, params: Any) -> Any:
        """The module with ``params`` (values or gradients) put back."""
        import brainstate

        return brainstate.graph.treefy_merge(self._tree, params, self._rest)

    def gradients(self) -> Mapping[str, Any]:
        self.legacy.gradients()  # hands the gradient tree to catch()
        merged = self._merge(self._caught[0])
        out: dict[str, FloatArray] = {}
        for name, node, field in self._fields:
            out[f"{name}.{field}"] = _read(node, field, getattr(merged, self._attrs[name]))
        return out

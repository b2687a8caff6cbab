"""The float64 NumPy reference of a graph workload: every node's output and membrane, and the
gradient of every trainable array by BPTT with the chosen surrogate.

It reads only snnbench's own graph (:mod:`snnbench.workload.graph.nodes`) and the choices a
graph does not state (:class:`Dynamics`); it shares no code with any adapter. The loss is the
sum of the Output node's value over time, batch and units (spikes for a spiking read-out, the
membrane for an LI read-out). The discrete semantics of each node are in ``docs/nir.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from snnbench.workload.graph import nodes
from snnbench.workload.graph.nodes import Array

#: how a continuous neuron becomes a step: forward Euler (what the libraries' importers do) or
#: the exact exponential decay with the input held over the step
DISCRETISATIONS: tuple[str, ...] = ("euler", "exponential")


@dataclass(frozen=True)
class Dynamics:
    """What a graph does not say and the workload does."""

    dt: float
    reset: str = "subtract"
    discretisation: str = "euler"
    surrogate: str = "fast_sigmoid"
    surrogate_slope: float = 25.0
    detach_reset: bool = True


@dataclass(frozen=True)
class GraphResult:
    """Every node's output (T, B, *shape) by name, each stateful node's membrane before its
    reset, and the gradient of the loss for every trainable array by ``node.field``."""

    values: Mapping[str, Array]
    membranes: Mapping[str, Array]
    grads: Mapping[str, Array]
    output_name: str

    @property
    def output(self) -> Array:
        """The Output node's value, (T, B, *shape)."""
        return self.values[self.output_name]


def surrogate_grad64(u: Array, name: str, slope: float) -> Array:
    """The surrogate derivative at ``u = v − θ`` in float64 (the same three functions as the
    Linear+LIF reference: ``fast_sigmoid``, ``atan``, ``sigmoid``)."""
    k = float(slope)
    if name == "fast_sigmoid":
        return 1.0 / (1.0 + k * np.abs(u)) ** 2
    if name == "atan":
        return (k / 2.0) / (1.0 + (np.pi / 2.0 * k * u) ** 2)
    if name == "sigmoid":
        sig = 0.5 * (1.0 + np.tanh(0.5 * k * u))
        return k * sig * (1.0 - sig)
    raise ValueError(f"unknown surrogate {name!r}")


def membrane_coefficients(tau: Array, r: Array, v_leak: Array, dyn: Dynamics
                          ) -> tuple[Array, Array, Array]:
    """(a, g, l) of the step v ← a·v + g·x + l of τ dv/dt = (v_leak − v) + r·x."""
    if dyn.discretisation == "euler":
        k = dyn.dt / tau
        return 1.0 - k, k * r, k * v_leak
    a = np.exp(-dyn.dt / tau)
    return a, (1.0 - a) * r, (1.0 - a) * v_leak


def synapse_coefficients(tau_syn: Array, w_in: Array, dyn: Dynamics) -> tuple[Array, Array]:
    """(α, γ) of the step I ← α·I + γ·x of τ_syn dI/dt = −I + w_in·x."""
    if dyn.discretisation == "euler":
        k = dyn.dt / tau_syn
        return 1.0 - k, k * w_in
    alpha = np.exp(-dyn.dt / tau_syn)
    return alpha, (1.0 - alpha) * w_in


@dataclass
class _NeuronTrace:
    """What one stateful node's backward needs from its forward."""

    v_pre: Array
    spikes: Array | None


def _neuron_forward(node: nodes.Node, x: Array, dyn: Dynamics) -> tuple[Array, _NeuronTrace]:
    state_shape = x.shape[1:]
    v = np.zeros(state_shape)
    cur = np.zeros(state_shape)
    v_pre_all = np.empty_like(x)
    spikes = None if isinstance(node, nodes.LI) else np.empty_like(x)
    a, g, leak, theta, alpha, gamma = _coefficients(node, dyn)
    for t in range(x.shape[0]):
        drive = x[t]
        if isinstance(node, nodes.CubaLIF):
            cur = alpha * cur + gamma * x[t]
            drive = cur
        # the input term first, then the decayed state: the order the builds compute in
        v_pre = a * v + (g * drive + leak)
        v_pre_all[t] = v_pre
        if spikes is None:
            v = v_pre
            continue
        s = (v_pre >= theta).astype(np.float64)
        spikes[t] = s
        v = v_pre - theta * s if dyn.reset == "subtract" else v_pre * (1.0 - s)
    out = v_pre_all if spikes is None else spikes
    return out, _NeuronTrace(v_pre=v_pre_all, spikes=spikes)


def _coefficients(node: nodes.Node, dyn: Dynamics
                  ) -> tuple[Array, Array, Array, Array, Array, Array]:
    """(a, g, l, θ, α, γ) of a stateful node (α, γ: its synapse; 0 for none)."""
    zero = np.zeros(node.in_shape)
    if isinstance(node, nodes.LIF):
        a, g, leak = membrane_coefficients(node.tau, node.r, node.v_leak, dyn)
        return a, g, leak, node.v_threshold, zero, zero
    if isinstance(node, nodes.IF):
        return np.ones(node.in_shape), dyn.dt * node.r, zero, node.v_threshold, zero, zero
    if isinstance(node, nodes.LI):
        a, g, leak = membrane_coefficients(node.tau, node.r, node.v_leak, dyn)
        return a, g, leak, zero, zero, zero
    assert isinstance(node, nodes.CubaLIF)
    a, g, leak = membrane_coefficients(node.tau_mem, node.r, node.v_leak, dyn)
    alpha, gamma = synapse_coefficients(node.tau_syn, node.w_in, dyn)
    return a, g, leak, node.v_threshold, alpha, gamma


def _neuron_backward(node: nodes.Node, grad_out: Array, trace: _NeuronTrace, dyn: Dynamics
                     ) -> Array:
    """dLoss/dx of a stateful node from dLoss/d(its output), by BPTT."""
    a, g, _, theta, alpha, gamma = _coefficients(node, dyn)
    grad_x = np.empty_like(grad_out)
    gv = np.zeros(grad_out.shape[1:])  # dL/dv after step t's reset
    gi = np.zeros(grad_out.shape[1:])  # dL/dI after step t's update (CubaLIF)
    for t in range(grad_out.shape[0] - 1, -1, -1):
        v_pre = trace.v_pre[t]
        if trace.spikes is None:  # LI: the output is the membrane itself
            g_vpre = grad_out[t] + gv
        else:
            s = trace.spikes[t]
            sg = surrogate_grad64(v_pre - theta, dyn.surrogate, dyn.surrogate_slope)
            if dyn.reset == "subtract":
                direct, via_spike = np.ones_like(s), -theta * np.ones_like(s)
            else:
                direct, via_spike = 1.0 - s, -v_pre
            g_s = grad_out[t] if dyn.detach_reset else grad_out[t] + gv * via_spike
            g_vpre = g_s * sg + gv * direct
        if isinstance(node, nodes.CubaLIF):
            gi = g * g_vpre + alpha * gi
            grad_x[t] = gamma * gi
        else:
            grad_x[t] = g * g_vpre
        gv = a * g_vpre
    return grad_x


# -- stateless nodes ----------------------------------------------------------------------------

def _samples(x: Array, node: nodes.Node) -> Array:
    """(T, B, *shape) → (T·B, *shape)."""
    return x.reshape(-1, *node.in_shape)


def _conv_windows(x: Array, node: nodes.Conv2d) -> Array:
    ph, pw = node.padding
    xp = np.pad(_samples(x, node), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    kh, kw = node.weight.shape[2:]
    sh, sw = node.stride
    windows: Array = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    _, ho, wo = node.out_shape
    return windows[:, :, :ho, :wo]


def _as_conv2d(node: nodes.Conv1d, params: Mapping[str, Array]
               ) -> tuple[nodes.Conv2d, dict[str, Array]]:
    """A Conv1d as the Conv2d of height 1 it equals: a (C, L) sample is (C, 1, L), the kernel
    (C_out, C_in, 1, k), no padding or stride along the height."""
    weight = params["weight"][:, :, None, :]
    lifted = nodes.Conv2d(shape=(node.shape[0], 1, node.shape[1]), weight=weight,
                    bias=params["bias"], stride=(1, node.stride), padding=(0, node.padding))
    return lifted, {"weight": weight, "bias": params["bias"]}


def _forward(node: nodes.Node, x: Array, params: Mapping[str, Array]) -> Array:
    lead = x.shape[:2]
    if isinstance(node, nodes.Conv1d):
        lifted, lifted_params = _as_conv2d(node, params)
        y = _forward(lifted, x.reshape(*lead, *lifted.in_shape), lifted_params)
        return y.reshape(*lead, *node.out_shape)
    if isinstance(node, nodes.Affine):
        out: Array = x @ params["weight"].T + params["bias"]
        return out
    if isinstance(node, nodes.Linear):
        out = x @ params["weight"].T
        return out
    if isinstance(node, nodes.Scale):
        out = x * params["scale"]
        return out
    if isinstance(node, nodes.Flatten):
        out = x.reshape(*lead, *node.out_shape)
        return out
    if isinstance(node, nodes.Conv2d):
        windows = _conv_windows(x, node)
        y = np.einsum("nchwij,ocij->nohw", windows, params["weight"], optimize=True)
        y = y + params["bias"][:, None, None]
        out = y.reshape(*lead, *node.out_shape)
        return out
    if isinstance(node, nodes.SumPool2d):
        c, h, w = node.in_shape
        kh, kw = node.kernel
        pooled: Array = x.reshape(*lead, c, h // kh, kh, w // kw, kw).sum(axis=(-3, -1))
        return pooled / (kh * kw) if isinstance(node, nodes.AvgPool2d) else pooled
    raise AssertionError(f"no forward for {node.kind}")


def node_forward(node: nodes.Node, x: Array, params: Mapping[str, Array]) -> Array:
    """A stateless node's output (T, B, *out shape) for its input ``x`` and its trainable
    arrays ``params`` by field (the probes of ``nir-check`` step the graph with it)."""
    return _forward(node, x, params)


def _backward(node: nodes.Node, grad: Array, x: Array, params: Mapping[str, Array]
              ) -> tuple[Array, dict[str, Array]]:
    """(dLoss/dx, dLoss/d each trainable field) of a stateless node."""
    lead = x.shape[:2]
    if isinstance(node, nodes.Conv1d):
        lifted, lifted_params = _as_conv2d(node, params)
        dx, grads = _backward(lifted, grad.reshape(*lead, *lifted.out_shape),
                              x.reshape(*lead, *lifted.in_shape), lifted_params)
        grads["weight"] = grads["weight"][:, :, 0, :]
        return dx.reshape(*lead, *node.in_shape), grads
    if isinstance(node, nodes.Affine | nodes.Linear):
        w = params["weight"]
        flat_g = grad.reshape(-1, w.shape[0])
        grads = {"weight": flat_g.T @ x.reshape(-1, w.shape[1])}
        if isinstance(node, nodes.Affine):
            grads["bias"] = flat_g.sum(axis=0)
        return grad @ w, grads
    if isinstance(node, nodes.Scale):
        return grad * params["scale"], {"scale": (grad * x).sum(axis=(0, 1))}
    if isinstance(node, nodes.Flatten):
        return grad.reshape(*lead, *node.in_shape), {}
    if isinstance(node, nodes.Conv2d):
        g = grad.reshape(-1, *node.out_shape)
        windows = _conv_windows(x, node)
        grads = {"weight": np.einsum("nohw,nchwij->ocij", g, windows, optimize=True),
                 "bias": g.sum(axis=(0, 2, 3))}
        c, h, w_ = node.in_shape
        ph, pw = node.padding
        sh, sw = node.stride
        _, ho, wo = node.out_shape
        weight = params["weight"]
        dxp = np.zeros((g.shape[0], c, h + 2 * ph, w_ + 2 * pw))
        for i in range(weight.shape[2]):
            for j in range(weight.shape[3]):
                dxp[:, :, i:i + sh * ho:sh, j:j + sw * wo:sw] += np.einsum(
                    "nohw,oc->nchw", g, weight[:, :, i, j], optimize=True)
        dx = dxp[:, :, ph:ph + h, pw:pw + w_]
        return dx.reshape(*lead, *node.in_shape), grads
    if isinstance(node, nodes.SumPool2d):
        kh, kw = node.kernel
        g = grad
        if isinstance(node, nodes.AvgPool2d):
            g = g / (kh * kw)
        dx = np.repeat(np.repeat(g, kh, axis=-2), kw, axis=-1)
        return dx, {}
    raise AssertionError(f"no backward for {node.kind}")


def run_graph_reference(graph: nodes.Graph, inputs: npt.NDArray[Any], dyn: Dynamics,
                        params: Mapping[str, npt.NDArray[Any]] | None = None) -> GraphResult:
    """Forward and backward of ``graph`` on ``inputs`` (T, B, *input shape) in float64.

    ``params`` (by ``node.field``, :meth:`Graph.parameters`) replaces the graph's own
    trainable arrays (e.g. rounded to the dtype the adapters compute in)."""
    own = graph.parameters()
    values_of = {k: np.asarray(v, dtype=np.float64) for k, v in (params or own).items()}
    if set(values_of) != set(own):
        raise ValueError("parameters do not match the graph's: "
                         f"{sorted(set(values_of) ^ set(own))}")
    x0 = np.asarray(inputs, dtype=np.float64)
    node_params = {name: {f: values_of[f"{name}.{f}"] for f in node.trainable}
                   for name, node in graph.nodes}
    values: dict[str, Array] = {}
    node_in: dict[str, Array] = {}
    traces: dict[str, _NeuronTrace] = {}
    for name, node in graph.nodes:
        if name == graph.input:
            x = x0
        else:
            preds = graph.predecessors(name)
            x = values[preds[0]]
            for src in preds[1:]:
                x = x + values[src]
        node_in[name] = x
        if isinstance(node, nodes.Output) or name == graph.input:
            values[name] = x
        elif node.stateful:
            values[name], traces[name] = _neuron_forward(node, x, dyn)
        else:
            values[name] = _forward(node, x, node_params[name])
    grad_of: dict[str, Array] = {graph.output: np.ones_like(values[graph.output])}
    grads: dict[str, Array] = {}
    for name, node in reversed(graph.nodes):
        if name == graph.input:
            continue
        g = grad_of.get(name)
        if g is None:  # nothing downstream reaches the output: no gradient flows
            g = np.zeros_like(values[name])
        if isinstance(node, nodes.Output):
            grad_x = g
        elif node.stateful:
            grad_x = _neuron_backward(node, g, traces[name], dyn)
        else:
            grad_x, own_grads = _backward(node, g, node_in[name], node_params[name])
            for field, value in own_grads.items():
                grads[f"{name}.{field}"] = value
        for src in graph.predecessors(name):
            grad_of[src] = grad_of[src] + grad_x if src in grad_of else grad_x
    return GraphResult(
        values=values,
        membranes={name: trace.v_pre for name, trace in traces.items()},
        grads={k: grads[k] for k in graph.parameter_names()},
        output_name=graph.output,
    )

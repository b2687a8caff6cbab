"""What every native graph builder shares, importing no framework: the float64 coefficients
of a neuron node's step (``docs/nir.md``), and for the JAX builders (haiku, brainstate, spyx)
those coefficients as float32 constants, the input term and the reshaping nodes (Flatten,
SumPool2d, AvgPool2d) as array methods any JAX array has; for the torch builders (torch,
fused, lava-dl) the graph's arrays as leaf tensors and the model methods that read them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from snnbench.plugin import Model
from snnbench.workload.graph.nodes import IF, LI, LIF, AvgPool2d, CubaLIF, Flatten, Node, SumPool2d
from snnbench.workload.graph.reference import (
    Dynamics,
    membrane_coefficients,
    synapse_coefficients,
)


def step_coefficients(node: Node, dyn: Dynamics) -> dict[str, np.ndarray]:
    """The float64 coefficients of a stateful node's step (docs/nir.md): ``a``, ``g``, ``l``
    of v ← a·v + g·x + l, ``theta`` (zeros for LI), ``alpha``, ``gamma`` of a CubaLIF's
    synapse I ← α·I + γ·x (zeros otherwise)."""
    shape = node.in_shape
    zero = np.zeros(shape)
    alpha = gamma = theta = zero
    if isinstance(node, LIF | LI):
        a, g, leak = membrane_coefficients(node.tau, node.r, node.v_leak, dyn)
    elif isinstance(node, IF):
        a, g, leak = np.ones(shape), dyn.dt * node.r, zero
    else:
        assert isinstance(node, CubaLIF)
        a, g, leak = membrane_coefficients(node.tau_mem, node.r, node.v_leak, dyn)
        alpha, gamma = synapse_coefficients(node.tau_syn, node.w_in, dyn)
    if not isinstance(node, LI):
        theta = node.v_threshold
    return {"a": a, "g": g, "l": leak, "theta": theta, "alpha": alpha, "gamma": gamma}


def scalar_or_array(value: np.ndarray) -> Any:
    """``value`` as a float32 Python number when every neuron has the same (what a
    hand-written network uses), else a float32 array."""
    flat = np.asarray(value, dtype=np.float64).reshape(-1)
    if flat.size and np.all(flat == flat[0]):
        return float(np.float32(flat[0]))
    return np.asarray(value, dtype=np.float32)


def step_constants(node: Node, dyn: Dynamics) -> dict[str, Any]:
    """:func:`step_coefficients` as float32 constants (:func:`scalar_or_array`)."""
    return {k: scalar_or_array(v) for k, v in step_coefficients(node, dyn).items()}


def affine_term(x: Any, gain: Any, offset: Any) -> Any:
    """gain·x + offset, with no op for a gain of 1 or an offset of 0 (a hand-written loop has
    none)."""
    if not (isinstance(gain, float) and gain == 1.0):
        x = gain * x
    return x if isinstance(offset, float) and offset == 0.0 else x + offset


def reshape_op(node: Node) -> Callable[[Any], Any]:
    """A Flatten, SumPool2d or AvgPool2d node on (T, B, *shape) arrays, as reshapes and a sum
    (pooling with its stride equal to its kernel, no padding: what snnbench reads)."""
    if isinstance(node, Flatten):
        out_shape = node.out_shape
        return lambda x: x.reshape(*x.shape[:2], *out_shape)
    assert isinstance(node, SumPool2d)
    c, h, w = node.in_shape
    kh, kw = node.kernel
    divide = isinstance(node, AvgPool2d)

    def pool(x: Any) -> Any:
        y = x.reshape(*x.shape[:2], c, h // kh, kh, w // kw, kw).sum(axis=(-3, -1))
        return y / (kh * kw) if divide else y
    return pool



def leaf_tensors(params: Mapping[str, np.ndarray], device: str) -> dict[str, Any]:
    """The graph's ``node.field`` arrays as float32 torch tensors on ``device`` that require
    grad (torch is imported here, never at module level)."""
    import torch

    return {name: torch.tensor(np.array(value, dtype=np.float32), device=device,
                               requires_grad=True)
            for name, value in params.items()}


class TorchLeavesModel(Model):
    """A torch model of a graph whose trainable arrays are ``parameters`` (``node.field`` →
    a tensor of :func:`leaf_tensors`): the loss is the sum of what ``forward`` returns, the
    gradients those of the leaves (zeros for one the loss does not reach)."""

    device: Any
    parameters: dict[str, Any]

    def backward(self, handle: Any) -> None:
        handle.sum().backward()

    def zero_grad(self) -> None:
        for p in self.parameters.values():
            p.grad = None

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)

    def gradients(self) -> Mapping[str, Any]:
        import torch

        return {name: p.grad.detach().to(device="cpu", dtype=torch.float32).numpy()
                if p.grad is not None else np.zeros(tuple(p.shape), dtype=np.float32)
                for name, p in self.parameters.items()}

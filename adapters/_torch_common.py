"""Shared pieces for PyTorch-based adapters: tensors from CaseData, the timed model wrapper,
and a surrogate spike function usable with any library that accepts a custom one.

Imported only inside workers (it imports torch at module level, so adapters import it lazily).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from snnbench.adapter import Model
from snnbench.spec import CaseData, FloatArray, NetworkSpec

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


def torch_dtype(spec: NetworkSpec) -> torch.dtype:
    """The torch dtype named by the spec."""
    return TORCH_DTYPES[spec.dtype]


def surrogate_derivative(u: torch.Tensor, name: str, slope: float) -> torch.Tensor:
    """d spike / d u at u = v_pre - threshold; the same formulas as ``snnbench.reference``."""
    if name == "fast_sigmoid":
        return 1.0 / (1.0 + slope * u.abs()) ** 2
    if name == "atan":
        return (slope / 2.0) / (1.0 + (math.pi / 2.0 * slope * u) ** 2)
    if name == "sigmoid":
        sig = torch.sigmoid(slope * u)
        return slope * sig * (1.0 - sig)
    raise ValueError(f"unknown surrogate {name!r}")


class _Heaviside(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, u: torch.Tensor, name: str, slope: float) -> torch.Tensor:
        ctx.save_for_backward(u)
        ctx.name = name
        ctx.slope = slope
        return (u >= 0).to(u.dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (u,) = ctx.saved_tensors
        return grad * surrogate_derivative(u, ctx.name, ctx.slope), None, None


def make_spike_fn(spec: NetworkSpec) -> Callable[[torch.Tensor], torch.Tensor]:
    """Heaviside(u) with the spec's surrogate gradient: spike = [u >= 0], u = v - threshold."""
    name, slope = spec.surrogate, float(spec.surrogate_slope)

    def spike(u: torch.Tensor) -> torch.Tensor:
        return _Heaviside.apply(u, name, slope)  # type: ignore[no-any-return]

    return spike


def make_linears(spec: NetworkSpec, data: CaseData, device: str) -> nn.ModuleList:
    """``spec.layers`` nn.Linear(n, n) holding exactly ``data``'s weights (no re-initialisation)."""
    dtype = torch_dtype(spec)
    layers = nn.ModuleList()
    for w, b in zip(data.weights, data.biases, strict=True):
        lin = nn.Linear(spec.neurons, spec.neurons, bias=spec.bias, device=device, dtype=dtype)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
            if spec.bias:
                assert lin.bias is not None
                lin.bias.copy_(torch.from_numpy(b))
        layers.append(lin)
    return layers


def input_tensor(spec: NetworkSpec, data: CaseData, device: str) -> torch.Tensor:
    """The case input (T, B, n) on ``device`` in the spec's dtype; no gradient required."""
    return torch.from_numpy(data.inputs).to(device=device, dtype=torch_dtype(spec))


def to_numpy(t: torch.Tensor) -> FloatArray:
    """Detached float32 NumPy copy of a tensor."""
    return t.detach().to(device="cpu", dtype=torch.float32).numpy().astype(np.float32)


class TorchModel(Model):
    """Times ``network(x)`` where ``network`` maps time-major (T, B, n) input to (T, B, n) spikes.

    ``linears`` are the network's Linear layers (for gradients). Adapters whose library wants
    another layout transpose inside ``network`` (that cost is part of using the library).
    """

    def __init__(
        self,
        network: nn.Module | Callable[[torch.Tensor], torch.Tensor],
        linears: nn.ModuleList,
        x: torch.Tensor,
        device: str,
        keep_alive: Any = None,
    ) -> None:
        self.network = network
        self.linears = linears
        self.x = x
        self.device = torch.device(device)
        self._keep_alive = keep_alive
        if isinstance(network, nn.Module):
            network.train()

    def forward(self) -> torch.Tensor:
        return self.network(self.x)

    def backward(self, handle: torch.Tensor) -> None:
        handle.sum().backward()

    def zero_grad(self) -> None:
        for p in self.linears.parameters():
            p.grad = None

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def spikes(self, handle: torch.Tensor) -> FloatArray:
        return to_numpy(handle)

    def gradients(self) -> tuple[list[FloatArray], list[FloatArray]]:
        grad_w: list[FloatArray] = []
        grad_b: list[FloatArray] = []
        for lin in self.linears:
            assert isinstance(lin, nn.Linear)
            gw = lin.weight.grad
            grad_w.append(to_numpy(gw) if gw is not None else np.zeros_like(to_numpy(lin.weight)))
            gb = lin.bias.grad if lin.bias is not None else None
            grad_b.append(
                to_numpy(gb) if gb is not None else np.zeros(lin.out_features, dtype=np.float32)
            )
        return grad_w, grad_b

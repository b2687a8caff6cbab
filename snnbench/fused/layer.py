"""``FusedLinearLIF``: a drop-in ``nn.Module`` for Linear + LIF over time-major sequences."""

from __future__ import annotations

import math

import torch
from torch import nn

from snnbench.fused.autograd import BACKENDS, SCANS, fused_linear_lif
from snnbench.fused.params import LIFParams
from snnbench.workload.linear_lif import neuron


class FusedLinearLIF(nn.Module):
    """Linear(in_features, out_features) followed by a LIF layer, fused over all time steps.

    Input (T, B, in_features), output spikes (T, B, out_features) in the input's dtype, state
    always float32. Parameters are ``weight`` (out, in) and ``bias`` (out,) initialised like
    ``nn.Linear``. The dynamics, surrogate gradient and reset handling are described in
    :class:`~snnbench.fused.params.LIFParams`. Example::

        layer = FusedLinearLIF(128, 256, beta=0.9, reset="zero", surrogate="atan", slope=2.0)
        spikes = layer(torch.randn(100, 32, 128))     # (T=100, B=32, 256)
        spikes.sum().backward()
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        beta: float = neuron.BETA,
        threshold: float = neuron.THRESHOLD,
        reset: str = neuron.RESET,
        surrogate: str = neuron.SURROGATE,
        slope: float = neuron.SURROGATE_SLOPE,
        detach_reset: bool = neuron.DETACH_RESET,
        backend: str = "auto",
        scan: str = "default",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if scan not in SCANS:
            raise ValueError(f"scan must be one of {', '.join(SCANS)}, got {scan!r}")
        self.in_features = in_features
        self.out_features = out_features
        self.params = LIFParams(
            beta=beta,
            threshold=threshold,
            reset=reset,
            surrogate=surrogate,
            slope=slope,
            detach_reset=detach_reset,
        )
        self.backend = backend
        self.scan = scan
        self.weight = nn.Parameter(
            torch.empty(out_features, in_features, device=device, dtype=dtype)
        )
        self.bias: nn.Parameter | None
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``nn.Linear``'s default initialisation (Kaiming-uniform weight, uniform bias)."""
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Spikes (T, B, out_features) for input x (T, B, in_features)."""
        return fused_linear_lif(x, self.weight, self.bias, self.params, self.backend,
                                scan=self.scan)

    def extra_repr(self) -> str:
        p = self.params
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, beta={p.beta}, threshold={p.threshold}, "
            f"reset={p.reset!r}, surrogate={p.surrogate!r}, slope={p.slope}, "
            f"detach_reset={p.detach_reset}, backend={self.backend!r}"
            + (f", scan={self.scan!r}" if self.scan != "default" else "")
        )

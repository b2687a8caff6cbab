"""``torch``: the plain PyTorch BPTT loop with the exact canonical semantics.

This is the reference the equivalence check trusts next to the NumPy ground truth, and the
baseline of every speed-up ratio. It is deliberately plain: one GEMM for all time steps, then a
Python loop over T with eager element-wise ops in the canonical order.
"""

from __future__ import annotations

from typing import Any

from snnbench.adapter import Adapter, Capabilities, Model
from snnbench.spec import DTYPES, SURROGATES, CaseData, NetworkSpec


def build_reference_network(spec: NetworkSpec, data: CaseData, device: str) -> tuple[Any, Any]:
    """(network, linears): a callable (T, B, n) input → (T, B, n) last-layer spikes."""
    import torch

    from snnbench.adapters._torch_common import make_linears, make_spike_fn

    linears = make_linears(spec, data, device)
    spike_fn = make_spike_fn(spec)
    beta, theta = float(spec.beta), float(spec.threshold)
    subtract = spec.reset == "subtract"
    detach = spec.detach_reset

    def lif(x: torch.Tensor) -> torch.Tensor:
        v = torch.zeros_like(x[0])
        out = []
        # unbind: indexing x[t] in the loop would make autograd keep T full-size select grads
        for x_t in x.unbind(0):
            v = beta * v + x_t
            s = spike_fn(v - theta)
            r = s.detach() if detach else s
            v = v - theta * r if subtract else v * (1.0 - r)
            out.append(s)
        return torch.stack(out)

    def network(inp: torch.Tensor) -> torch.Tensor:
        h = inp
        for lin in linears:
            h = lif(lin(h))
        return h

    return network, linears


class TorchAdapter(Adapter):
    """Plain PyTorch reference implementation."""

    name = "torch"
    library = "torch"
    framework = "torch"
    description = "plain PyTorch BPTT loop (the reference)"

    def capabilities(self, variant: str) -> Capabilities:
        return Capabilities(dtypes=DTYPES, surrogates=SURROGATES)

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        from snnbench.adapters._torch_common import TorchModel, input_tensor

        network, linears = build_reference_network(spec, data, device)
        return TorchModel(network, linears, input_tensor(spec, data, device), device)

"""``torch``: the plain PyTorch BPTT loop with the exact canonical semantics.

This is the reference the equivalence check trusts next to the NumPy ground truth, and the
baseline of every speed-up ratio. It is deliberately plain: one GEMM for all time steps, then a
Python loop over T with eager element-wise ops in the canonical order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from snnbench.adapter import Adapter, Capabilities, Model
from snnbench.workload.linear_lif.spec import (
    DTYPES,
    MATMUL_PRECISIONS,
    SURROGATES,
    CaseData,
    NetworkSpec,
)

from ._declared import TORCH_GRAPH_KNOBS
from ._workloads import TorchNeuronsAdapter

if TYPE_CHECKING:  # torch is imported lazily, inside the worker
    import torch

    from ._torch_common import LifStep, TimeLoop
    from .torch_graph import NeuronBuilder

#: what the reference runs: every dtype, surrogate and matmul precision, and the defaults for the
#: rest (every reset mode, detach rule, bias and input kind, exactly); also what an adapter that
#: runs the same network every way declares (``torch-compile``, SpikingJelly's ``torch`` backend)
REFERENCE_CAPABILITIES = Capabilities(
    dtypes=DTYPES, surrogates=SURROGATES, matmul_precisions=MATMUL_PRECISIONS
)


def make_lif_step(spec: NetworkSpec) -> LifStep:
    """The canonical LIF time step ``(v, x_t) -> (v, s)`` in the canonical op order."""
    from ._torch_common import make_spike_fn

    spike_fn = make_spike_fn(spec)
    beta, theta = float(spec.beta), float(spec.threshold)
    subtract = spec.reset == "subtract"
    detach = spec.detach_reset

    def step(v: torch.Tensor, x_t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        v = beta * v + x_t
        s = spike_fn(v - theta)
        r = s.detach() if detach else s
        v = v - theta * r if subtract else v * (1.0 - r)
        return v, s

    return step


def build_reference_network(
    spec: NetworkSpec,
    data: CaseData,
    device: str,
    time_loop: Callable[[LifStep], TimeLoop] | None = None,
) -> tuple[Any, Any]:
    """(network, linears): a callable (T, B, n) input → (T, B, n) last-layer spikes.

    ``time_loop(step)`` runs :func:`make_lif_step`'s step over the T steps of a layer; the
    default is the eager Python loop (:func:`~snnbench.adapters._torch_common.eager_time_loop`).
    Every layer shares one loop (the step is the same), so a compiled loop compiles once.
    """
    from ._torch_common import eager_time_loop, make_linears

    linears = make_linears(spec, data, device)
    lif = (time_loop or eager_time_loop)(make_lif_step(spec))

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
    description = "plain PyTorch BPTT loop (the reference)"

    def capabilities(self, variant: str) -> Capabilities:
        return REFERENCE_CAPABILITIES

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        from ._torch_common import TorchModel, input_tensor

        network, linears = build_reference_network(spec, data, device)
        return TorchModel(network, linears, input_tensor(spec, data, device), device)


class Torch(TorchNeuronsAdapter):
    """The registered ``torch`` adapter (plugin API v2): ``linear-lif`` through
    :class:`TorchAdapter`, ``nir-graph`` through :mod:`.torch_graph`, every node kind."""

    linear_lif = TorchAdapter

    torch_graph_knobs = TORCH_GRAPH_KNOBS

    def neuron_op(self) -> NeuronBuilder:
        from .torch_graph import torch_neuron_op

        return torch_neuron_op

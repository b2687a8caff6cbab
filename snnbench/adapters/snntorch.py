"""``snntorch``: snnTorch's ``snn.Leaky`` neurons, stepped over T by a Python loop.

How the canonical network maps onto snnTorch 1.0 (``snntorch/_neurons/leaky.py``):

* Linear layers are plain ``nn.Linear`` holding the case's weights; each layer's currents for
  all T steps come from one GEMM, then ``snn.Leaky`` is called once per step with the membrane
  passed explicitly (``spk, mem = lif(x_t, mem)``), as snnTorch's tutorials do.
* The spike function is snnTorch's ``spike_grad`` hook, given our own Heaviside with the spec's
  surrogate (``make_spike_fn``). snnTorch's built-in surrogates spike on ``u > 0`` (the canonical
  rule is ``u >= 0``), always return float32 whatever the input dtype, and its ``sigmoid``
  computes ``exp(-k u)`` unguarded, which overflows to ``inf / inf = NaN`` for ``k·u < -88``.
* Reset "zero" is exact in both detach modes, through snnTorch's ``reset_delay`` switch:
  ``reset_delay=True`` (snnTorch's default) zeroes the membrane at the start of the next step
  with a detached reset signal, which is ``v_post = v_pre·(1 - s)`` with the reset detached;
  ``reset_delay=False`` resets in the same step through ``mem - (spk - reset)·mem`` where ``spk``
  carries its surrogate gradient, which is the non-detached canonical reset.
* Reset "subtract" cannot be built faithfully, so it is refused (a ``skipped`` row):
  ``reset_delay=True`` subtracts θ one step late, after the decay (``β·v + x - θ``, where the
  canonical network subtracts ``β·θ``): 1.5-2 % of spikes differ. ``reset_delay=False`` subtracts
  in the same step but then re-applies the reset at the next step whenever the membrane is still
  ``>= θ`` after the subtraction (``v_pre >= 2θ``), which changes the next spike decision: about
  0.15 % of spikes differ with Gaussian input, below the verification bar.
"""

from __future__ import annotations

from typing import Any

from snnbench import plugin
from snnbench.adapter import Adapter, Capabilities, CaseSkipped, Model
from snnbench.workload import GraphKnobs, NirGraph, Workload
from snnbench.workload.graph import GraphData
from snnbench.workload.linear_lif.spec import (
    DTYPES,
    MATMUL_PRECISIONS,
    SURROGATES,
    CaseData,
    NetworkSpec,
)

from ._declared import SNNTORCH_GRAPH_KNOBS, SNNTORCH_SUBTRACT_REASON
from ._workloads import WorkloadsAdapter

#: why reset "subtract" is refused (shown in the skipped row), in both workload kinds
SUBTRACT_REASON = SNNTORCH_SUBTRACT_REASON


class SnnTorchAdapter(Adapter):
    """snnTorch ``snn.Leaky`` with our spike function, reset "zero" only (see module docstring)."""

    name = "snntorch"
    library = "snntorch"
    description = "snnTorch snn.Leaky, Python loop over T (reset 'zero' only)"

    def capabilities(self, variant: str) -> Capabilities:
        return Capabilities(
            dtypes=DTYPES,
            resets=("zero",),
            surrogates=SURROGATES,
            matmul_precisions=MATMUL_PRECISIONS,
        )

    def reason_skipped(self, spec: NetworkSpec, device: str, variant: str) -> str | None:
        # The reset mode comes first and with the library's reason, not a bare "not supported".
        if spec.reset == "subtract":
            return SUBTRACT_REASON
        return super().reason_skipped(spec, device, variant)

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        import snntorch as snn
        import torch
        from torch import nn

        from ._torch_common import (
            TorchModel,
            input_tensor,
            make_linears,
            make_spike_fn,
        )

        if spec.reset != "zero":
            raise CaseSkipped(SUBTRACT_REASON)
        linears = make_linears(spec, data, device)
        spike_fn = make_spike_fn(spec)
        lifs = nn.ModuleList(
            snn.Leaky(
                beta=float(spec.beta),
                threshold=float(spec.threshold),
                spike_grad=spike_fn,
                reset_mechanism="zero",
                # True: reset applied (detached) at the next step; False: same step, with grad
                reset_delay=spec.detach_reset,
            )
            for _ in range(spec.layers)
        ).to(device)

        def network(inp: torch.Tensor) -> torch.Tensor:
            h = inp
            for lin, lif in zip(linears, lifs, strict=True):
                cur = lin(h)
                mem = torch.zeros_like(cur[0])
                out = []
                for x_t in cur.unbind(0):
                    spk, mem = lif(x_t, mem)
                    out.append(spk)
                h = torch.stack(out)
            return h

        class SnnTorchModel(TorchModel):
            """Releases snnTorch's global references to the neurons on close."""

            def close(self) -> None:
                _release(lifs)

        return SnnTorchModel(network, linears, input_tensor(spec, data, device), device, lifs)


def _release(lifs: Any) -> None:
    """Drop snnTorch's global references to our neurons and the graph their state holds."""
    import snntorch as snn
    import torch

    # SpikingNeuron.instances is a class-level list of every neuron ever built; each Leaky also
    # keeps its last membrane (and through it the last autograd graph) as ``self.mem``.
    ids = {id(lif) for lif in lifs}
    snn.SpikingNeuron.instances[:] = [
        n for n in snn.SpikingNeuron.instances if id(n) not in ids
    ]
    for lif in lifs:
        lif.mem = torch.zeros(0)
        lif.reset = None


class SnnTorch(WorkloadsAdapter):
    """The registered ``snntorch`` adapter (plugin API v2): ``linear-lif`` through
    :class:`SnnTorchAdapter`, ``nir-graph`` through :mod:`.snntorch_graph` (snnTorch's own
    neurons, reset "zero")."""

    linear_lif = SnnTorchAdapter

    def graph_knobs(self, variant: str) -> GraphKnobs | None:
        return SNNTORCH_GRAPH_KNOBS

    def reason_skipped(self, workload: Workload, device: str,
                       variant: str) -> str | None:
        # the reset mode first and with the library's reason, as for Linear+LIF
        if isinstance(workload, NirGraph) and workload.reset == "subtract":
            return SUBTRACT_REASON
        return super().reason_skipped(workload, device, variant)

    def build_graph(self, workload: NirGraph, data: GraphData, device: str,
                    variant: str) -> plugin.Model:
        from .snntorch_graph import snntorch_graph_model

        return snntorch_graph_model(workload, data, device)

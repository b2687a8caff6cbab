"""A ``nir-graph`` workload built by ``fused``, snnbench's own fused Linear + LIF
(:mod:`snnbench.fused`), for the graphs it is made for: a chain Input → (Affine → LIF) × L →
Output whose every LIF takes the canonical step v ← β·v + (W x + b), one β and one θ per layer
(float32 g = 1 and l = 0: forward Euler with r = τ/dt, as the ``linear-lif`` example is written).
Each Affine and the LIF after it are one ``fused_linear_lif`` call, as in the Linear+LIF build.

Anything else is refused with the reason (a ``skipped`` row): another node kind or a branch
(the knobs, :data:`._declared.FUSED_GRAPH_KNOBS`, say the kinds), a gain or leak the kernel has
no term for (folding a gain into the weights would round differently and scale their gradient),
per-neuron β or θ. torch is imported at module level: import this module lazily, in a worker.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from snnbench.adapter import CaseSkipped
from snnbench.workload.graph import GraphData, NirGraph
from snnbench.workload.graph.nodes import LIF, Affine, Graph, Output

from ._graph_common import step_coefficients
from .torch_graph import TorchGraphModel

Tensor = torch.Tensor


def affine_lif_chain(graph: Graph) -> list[tuple[str, str]]:
    """The (Affine, LIF) node pairs of a chain Input → (Affine → LIF)+ → Output, in order;
    :class:`CaseSkipped` naming what else the graph has."""
    order = [name for name, _ in graph.nodes if name != graph.input]
    previous = graph.input
    pairs: list[tuple[str, str]] = []
    for position, name in enumerate(order):
        if graph.predecessors(name) != (previous,):
            raise CaseSkipped(f"node {name!r} is not in a chain: fused builds a chain of "
                              "Affine → LIF layers only")
        node = graph.node(name)
        last = position == len(order) - 1
        wanted = Output if last else (Affine if position % 2 == 0 else LIF)
        if not isinstance(node, wanted):
            raise CaseSkipped(f"node {name!r} ({node.kind}) not built: fused builds a chain of "
                              "Affine → LIF layers only")
        if isinstance(node, LIF):
            pairs.append((previous, name))
        previous = name
    if not pairs or len(order) != 2 * len(pairs) + 1:
        raise CaseSkipped("fused builds a chain of Affine → LIF layers only")
    return pairs


def _uniform(value: np.ndarray, what: str, name: str) -> float:
    flat = np.asarray(value, dtype=np.float32).reshape(-1)
    if not np.all(flat == flat[0]):
        raise CaseSkipped(f"{name}: per-neuron {what} not built: a fused layer takes one")
    return float(flat[0])


class FusedGraphModel(TorchGraphModel):
    """The chain as fused layers, timed and read out as any PyTorch graph build."""

    def __init__(self, workload: NirGraph, data: GraphData, device: str) -> None:
        from snnbench.fused import LIFParams, fused_linear_lif

        graph, dyn = data.graph, workload.dynamics
        layers: list[tuple[str, LIFParams]] = []
        for affine, lif in affine_lif_chain(graph):
            c = step_coefficients(graph.node(lif), dyn)
            if _uniform(c["g"], "input gain", lif) != 1.0 or _uniform(c["l"], "leak", lif) != 0:
                raise CaseSkipped(f"{lif}: an input gain ≠ 1 or a leak ≠ 0 not built (the fused "
                                  "kernel integrates v ← β·v + (W x + b); needs forward Euler "
                                  "with r = τ/dt and v_leak = 0)")
            layers.append((affine, LIFParams(
                beta=_uniform(c["a"], "decay", lif),
                threshold=_uniform(c["theta"], "threshold", lif), reset=dyn.reset,
                surrogate=dyn.surrogate, slope=float(dyn.surrogate_slope),
                detach_reset=dyn.detach_reset)))
        self.parameters = {name: torch.tensor(np.array(value, dtype=np.float32), device=device,
                                              requires_grad=True)
                           for name, value in data.params.items()}
        backend = "triton" if device == "cuda" else "cpu"
        weights = [(self.parameters[f"{a}.weight"], self.parameters[f"{a}.bias"], p)
                   for a, p in layers]

        def network(x: Tensor) -> Tensor:
            h = x
            for weight, bias, params in weights:
                h = fused_linear_lif(h, weight, bias, params, backend)
            return h

        self.network: Callable[[Tensor], Tensor] = network
        self._on_close = None
        self.x = torch.as_tensor(np.array(data.inputs, dtype=np.float32), device=device)
        self.device = torch.device(device)

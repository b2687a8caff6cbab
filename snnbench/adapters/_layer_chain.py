"""What a build of one layer kind per step needs of a graph: that it is a chain from its
input to its output, and one value per neuron node where the library takes one per layer
(``fused``, ``lava-dl``). Each refusal is a :class:`~snnbench.adapter.CaseSkipped` with the
reason, naming the library's build."""

from __future__ import annotations

import numpy as np

from snnbench.adapter import CaseSkipped
from snnbench.workload.graph.nodes import Graph


def chain_names(graph: Graph, build: str, shape: str) -> list[str]:
    """The node names from the input to the output when ``graph`` is a chain; else a skip
    saying that ``build`` (``the fused build``) takes ``shape`` only."""
    succ: dict[str, list[str]] = {}
    preds: dict[str, int] = {}
    for src, dst in graph.edges:
        succ.setdefault(src, []).append(dst)
        preds[dst] = preds.get(dst, 0) + 1
    names = [graph.input]
    while names[-1] != graph.output:
        nxt = succ.get(names[-1], [])
        if len(nxt) != 1 or preds.get(nxt[0], 0) != 1:
            raise CaseSkipped(f"the graph is not a chain at node {names[-1]!r}: {build} takes "
                              f"{shape} only")
        names.append(nxt[0])
    if len(names) != len(graph.nodes):
        raise CaseSkipped(f"the graph has nodes off its input-output chain: {build} takes "
                          f"{shape} only")
    return names


def uniform_value(node: str, field: str, value: np.ndarray, layer: str) -> float:
    """The one value of ``node.field`` over its neurons; a skip when they differ (``layer``:
    what takes one value, e.g. ``a fused layer``)."""
    flat = np.asarray(value, dtype=np.float64).reshape(-1)
    if not flat.size or not np.all(flat == flat[0]):
        raise CaseSkipped(f"{node}.{field} differs between neurons: {layer} has one value "
                          "per layer")
    return float(flat[0])

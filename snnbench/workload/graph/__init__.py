"""The ``nir-graph`` workload kind: a network read from a NIR file into snnbench's own typed
graph (:mod:`.nodes`, :mod:`.load`), with the choices a graph leaves open (:mod:`.workload`),
its float64 reference (:mod:`.reference`) and example graphs made by code (:mod:`.examples`).
``nir`` itself is imported only when a file is read or written."""

from snnbench.workload.graph.load import GraphError, read_graph
from snnbench.workload.graph.nodes import Graph
from snnbench.workload.graph.reference import Dynamics, GraphResult, run_graph_reference
from snnbench.workload.graph.workload import GraphData, GraphKnobs, NirGraph

__all__ = [
    "Dynamics",
    "Graph",
    "GraphData",
    "GraphError",
    "GraphKnobs",
    "GraphResult",
    "NirGraph",
    "read_graph",
    "run_graph_reference",
]

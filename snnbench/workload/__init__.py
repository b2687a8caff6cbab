"""What a case computes: the :class:`Workload` protocol, its registry of kinds, and the first
kind, ``linear-lif`` (:class:`LinearLif`), and ``nir-graph`` (:class:`NirGraph`, a network read
from a NIR file) beside it."""

from snnbench.workload.base import (
    DEFAULT_KIND,
    Agreement,
    FrameworkSettings,
    Knobs,
    Workload,
    WorkloadError,
    as_workload,
    kinds,
    register,
    row_workload_class,
    workload_class,
    workload_from_dict,
)
from snnbench.workload.linear_lif import LinearLif, LinearLifKnobs

# isort: split
# registered second: linear-lif stays the first kind listed (kinds(), 'known: ...' messages)
from snnbench.workload.graph import GraphKnobs, NirGraph

__all__ = [
    "DEFAULT_KIND",
    "Agreement",
    "FrameworkSettings",
    "GraphKnobs",
    "Knobs",
    "LinearLif",
    "LinearLifKnobs",
    "NirGraph",
    "Workload",
    "WorkloadError",
    "as_workload",
    "kinds",
    "register",
    "row_workload_class",
    "workload_class",
    "workload_from_dict",
]

"""What a case computes: the :class:`Workload` protocol, its registry of kinds, and the first
kind, ``linear-lif`` (:class:`LinearLif`). Later kinds (NIR graphs) register beside it."""

from snnbench.workload.base import (
    DEFAULT_KIND,
    Knobs,
    Workload,
    WorkloadError,
    kinds,
    register,
    row_workload_class,
    workload_class,
    workload_from_dict,
)
from snnbench.workload.linear_lif import LinearLif, LinearLifKnobs

__all__ = [
    "DEFAULT_KIND",
    "Knobs",
    "LinearLif",
    "LinearLifKnobs",
    "Workload",
    "WorkloadError",
    "kinds",
    "register",
    "row_workload_class",
    "workload_class",
    "workload_from_dict",
]

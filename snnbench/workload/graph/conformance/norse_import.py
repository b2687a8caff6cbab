"""Norse's importer, given the user's dt, stepped over time."""

from __future__ import annotations

from typing import Any

import numpy as np

from snnbench.workload.graph.conformance._stepping import step_over_time


def run(graph: Any, inputs: np.ndarray, dt: float) -> np.ndarray:
    """Norse's module of ``graph`` (``dt`` given) run on ``inputs`` (T, B, *shape)."""
    from norse.torch import from_nir

    return step_over_time(from_nir(graph, dt=dt), inputs)

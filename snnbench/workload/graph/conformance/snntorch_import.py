"""snnTorch's importer (its time step is fixed at 1e-4 s inside it), stepped over time."""

from __future__ import annotations

from typing import Any

import numpy as np

from snnbench.workload.graph.conformance._stepping import step_over_time


def run(graph: Any, inputs: np.ndarray, dt: float) -> np.ndarray:
    """snnTorch's module of ``graph`` run on ``inputs`` (T, B, *shape); ``dt`` is not
    given to it (it takes none)."""
    from snntorch.import_nir import import_from_nir

    return step_over_time(import_from_nir(graph), inputs)

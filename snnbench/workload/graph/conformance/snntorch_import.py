"""snnTorch's importer (its time step is fixed at 1e-4 s inside it), stepped over time."""

from __future__ import annotations

from typing import Any

import numpy as np


def run(graph: Any, inputs: np.ndarray, dt: float) -> np.ndarray:
    """snnTorch's module of ``graph`` run on ``inputs`` (T, B, *shape); ``dt`` is not
    given to it (it takes none)."""
    import torch
    from snntorch.import_nir import import_from_nir

    module = import_from_nir(graph)
    state = None
    out = []
    with torch.no_grad():
        for x in torch.from_numpy(inputs):
            y, state = module(x, state)
            out.append(y)
    return torch.stack(out).numpy()

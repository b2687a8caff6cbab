"""Norse's importer, given the user's dt, stepped over time."""

from __future__ import annotations

from typing import Any

import numpy as np


def run(graph: Any, inputs: np.ndarray, dt: float) -> np.ndarray:
    """Norse's module of ``graph`` (``dt`` given) run on ``inputs`` (T, B, *shape)."""
    import torch
    from norse.torch import from_nir

    module = from_nir(graph, dt=dt)
    state = None
    out = []
    with torch.no_grad():
        for x in torch.from_numpy(inputs):
            y, state = module(x, state)
            out.append(y)
    return torch.stack(out).numpy()

"""Sinabs's importer: its layers take a batch-major (B·T, *shape) tensor."""

from __future__ import annotations

from typing import Any

import numpy as np


def run(graph: Any, inputs: np.ndarray, dt: float) -> np.ndarray:
    """Sinabs's module of ``graph`` run on ``inputs`` (T, B, *shape); it takes no dt."""
    import torch
    from sinabs import from_nir

    steps, batch = inputs.shape[:2]
    module = from_nir(graph, batch_size=batch)
    x = torch.from_numpy(inputs).transpose(0, 1).reshape(batch * steps, *inputs.shape[2:])
    with torch.no_grad():
        y = module(x)
    if isinstance(y, tuple):
        y = y[0]
    return np.asarray(y.reshape(batch, steps, *y.shape[1:]).transpose(0, 1).numpy())

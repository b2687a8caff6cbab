"""Rockpool's importer (run with ``samna`` blocked: :mod:`.guard`); batch-major modules."""

from __future__ import annotations

from typing import Any

import numpy as np


def run(graph: Any, inputs: np.ndarray, dt: float) -> np.ndarray:
    """Rockpool's module of ``graph`` run on ``inputs`` (T, B, *shape); it takes no dt."""
    import torch
    from rockpool.nn.modules.torch.nir import from_nir

    module = from_nir(graph)
    with torch.no_grad():
        y = module(torch.from_numpy(inputs).transpose(0, 1))
    if isinstance(y, tuple):
        y = y[0]
    return np.asarray(y.transpose(0, 1).numpy())

"""SpikingJelly's importer, multi-step (its fast path), given the user's dt."""

from __future__ import annotations

from typing import Any

import numpy as np


def run(graph: Any, inputs: np.ndarray, dt: float) -> np.ndarray:
    """SpikingJelly's module of ``graph`` run on ``inputs`` (T, B, *shape) at once."""
    import torch
    from spikingjelly.activation_based import functional
    from spikingjelly.activation_based.nir_exchange import import_from_nir

    module = import_from_nir(graph, dt=dt, step_mode="m")
    functional.reset_net(module)
    with torch.no_grad():
        y = module(torch.from_numpy(inputs))
    if isinstance(y, tuple):
        y = y[0]
    return np.asarray(y.detach().numpy())

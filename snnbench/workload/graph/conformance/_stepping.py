"""Running an imported nirtorch module over time, as snnTorch's and Norse's importers build
it: one call per step with the state it returned, from no state. Imports torch: only inside an
importer's own process (:mod:`.worker`)."""

from __future__ import annotations

from typing import Any

import numpy as np


def step_over_time(module: Any, inputs: np.ndarray) -> np.ndarray:
    """``module`` called on each step of ``inputs`` (T, B, *shape), its state carried from
    ``None``; the outputs stacked (T, B, *shape)."""
    import torch

    state = None
    out = []
    with torch.no_grad():
        for x in torch.from_numpy(inputs):
            y, state = module(x, state)
            out.append(y)
    return torch.stack(out).numpy()

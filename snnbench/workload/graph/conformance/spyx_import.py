"""Spyx's importer: ``from_nir`` builds the model and runs it on the input it is given.

Spyx's convolutions are channels-last (JAX's default): a (C, H, W) sample is given to it as
(H, W, C), its layout, and an output of that rank is turned back."""

from __future__ import annotations

from typing import Any

import numpy as np


def run(graph: Any, inputs: np.ndarray, dt: float) -> np.ndarray:
    """Spyx's output of ``graph`` on ``inputs`` (T, B, *shape), ``dt`` given."""
    import jax.numpy as jnp
    from spyx.nir import from_nir

    frames = inputs.ndim == 5
    x = np.moveaxis(inputs, 2, -1) if frames else inputs
    _, out = from_nir(graph, jnp.asarray(x), dt=dt)
    y = np.asarray(out)
    return np.moveaxis(y, -1, 2) if y.ndim == 5 else y

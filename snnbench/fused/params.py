"""The LIF parameters shared by every scan backend (no torch or Triton needed to import)."""

from __future__ import annotations

from dataclasses import dataclass

from snnbench.workload.linear_lif import neuron

# SURROGATES (re-exported) and RESET_MODES are in the integer order the kernels use
# (``surrogate_code``, ``reset_code``): the spec's, by design
from snnbench.workload.linear_lif.neuron import RESET_MODES, SURROGATES as SURROGATES

#: reset modes (``reset_code`` is the index)
RESETS: tuple[str, ...] = RESET_MODES


@dataclass(frozen=True)
class LIFParams:
    """Leaky integrate-and-fire dynamics and surrogate gradient of one fused layer.

    Forward, per neuron and time step (v starts at 0)::

        v_pre = beta * v + x          (two roundings: the product, then the sum)
        s     = 1 if v_pre >= threshold else 0
        v     = v_pre - threshold * s (reset "subtract")  or  v_pre * (1 - s) (reset "zero")

    Backward is exact BPTT of that recurrence, with ds/dv_pre replaced by the surrogate
    (``fast_sigmoid``: 1/(1+k|u|)²; ``atan``: (k/2)/(1+(π/2·k·u)²); ``sigmoid``: k·σ(ku)(1−σ(ku)),
    u = v_pre − threshold, k = ``slope``). With ``detach_reset`` the reset term carries no
    gradient through the spike.
    """

    # the canonical neuron's defaults (snnbench.workload.linear_lif.neuron), which the spec defaults
    # to as well
    beta: float = neuron.BETA
    threshold: float = neuron.THRESHOLD
    reset: str = neuron.RESET
    surrogate: str = neuron.SURROGATE
    slope: float = neuron.SURROGATE_SLOPE
    detach_reset: bool = neuron.DETACH_RESET

    def __post_init__(self) -> None:
        if self.reset not in RESETS:
            raise ValueError(f"reset must be one of {', '.join(RESETS)}, got {self.reset!r}")
        if self.surrogate not in SURROGATES:
            raise ValueError(
                f"surrogate must be one of {', '.join(SURROGATES)}, got {self.surrogate!r}"
            )
        if not 0.0 <= self.beta <= 1.0:
            raise ValueError(f"beta must be in [0, 1], got {self.beta!r}")
        if self.threshold <= 0.0:
            raise ValueError(f"threshold must be > 0, got {self.threshold!r}")
        if self.slope <= 0.0:
            raise ValueError(f"slope must be > 0, got {self.slope!r}")

    @property
    def reset_code(self) -> int:
        """0 = subtract, 1 = zero (the kernels' encoding)."""
        return RESETS.index(self.reset)

    @property
    def surrogate_code(self) -> int:
        """0 = fast_sigmoid, 1 = atan, 2 = sigmoid (the kernels' encoding)."""
        return SURROGATES.index(self.surrogate)

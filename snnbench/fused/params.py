"""The LIF parameters shared by every scan backend (no torch or Triton needed to import)."""

from __future__ import annotations

from dataclasses import dataclass

#: reset modes, in the integer order the kernels use (``reset_code``)
RESETS: tuple[str, ...] = ("subtract", "zero")
#: surrogate gradients, in the integer order the kernels use (``surrogate_code``)
SURROGATES: tuple[str, ...] = ("fast_sigmoid", "atan", "sigmoid")


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

    beta: float = 0.875
    threshold: float = 1.0
    reset: str = "subtract"
    surrogate: str = "fast_sigmoid"
    slope: float = 25.0
    detach_reset: bool = True

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

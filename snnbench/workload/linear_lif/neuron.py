"""The canonical LIF neuron's choices and default parameters, stated once.

The network spec (:class:`snnbench.workload.linear_lif.spec.NetworkSpec`), the fused kernel's
:class:`~snnbench.fused.params.LIFParams` and ``FusedLinearLIF``, and ``snnbench verify`` all
take their defaults from here, so a change of the canonical neuron is one edit. The module
imports nothing of snnbench (the fused kernels import it without torch being needed).

The order of :data:`RESET_MODES` and :data:`SURROGATES` is the integer encoding the fused
kernels use (``reset_code``, ``surrogate_code``): append, never reorder.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

ResetMode = Literal["subtract", "zero"]
SurrogateName = Literal["fast_sigmoid", "atan", "sigmoid"]

RESET_MODES: tuple[str, ...] = get_args(ResetMode)
SURROGATES: tuple[str, ...] = get_args(SurrogateName)

#: membrane decay per step (v_pre = beta·v + x)
BETA: Final = 0.875
#: firing threshold (spike when v_pre >= threshold)
THRESHOLD: Final = 1.0
RESET: Final[ResetMode] = "subtract"
SURROGATE: Final[SurrogateName] = "fast_sigmoid"
#: the surrogate's slope k
SURROGATE_SLOPE: Final = 25.0
#: the reset term carries no gradient through the spike
DETACH_RESET: Final = True

"""What ``snnbench verify`` checks, and its defaults, stated once.

The CLI's ``verify`` options take their defaults from :class:`VerifyRequest`, and the
network fields it does not choose itself default to the spec's (:class:`NetworkSpec`). The
module is light (no pandas, no torch), so the CLI can import it to build its ``--help``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snnbench.records.sampling import VERIFY_TIME_STEPS
from snnbench.sweep.config import RunConfig
from snnbench.workload.linear_lif.neuron import RESET_MODES
from snnbench.workload.linear_lif.spec import NetworkSpec

#: ``--detach-reset`` → the rules checked (``auto``: the spec default, narrowed per adapter to
#: the rule it supports)
DETACH_CHOICES: dict[str, tuple[bool, ...]] = {
    "true": (True,), "false": (False,), "both": (True, False), "auto": (NetworkSpec.detach_reset,),
}
DEVICES: tuple[str, ...] = ("cpu", "cuda")


@dataclass(frozen=True)
class VerifyRequest:
    """What to check: adapters, reset modes, sizes, dtype, device and an optional dump folder."""

    adapters: tuple[str, ...] = ("all",)
    resets: tuple[str, ...] = RESET_MODES
    neurons: tuple[int, ...] = (64, 256)
    time_steps: int = VERIFY_TIME_STEPS
    # small: a check compares every spike and gradient, it times nothing
    batch_size: int = 4
    dtype: str = NetworkSpec.dtype
    #: the spec's ``matmul_precision`` (``amp-bf16``/``amp-fp16``: automatic mixed precision)
    matmul_precision: str = NetworkSpec.matmul_precision
    device: str = "cpu"
    #: "true", "false", "both", or "auto": the spec default (True) where the adapter supports
    #: it, else the rule it does support (the table shows which was checked)
    detach_reset: str = "auto"
    surrogate: str = NetworkSpec.surrogate
    surrogate_slope: float = NetworkSpec.surrogate_slope
    dump_dir: Path | None = None
    timeout_s: float = 600.0
    #: a folder of wheels to build library environments from, offline ("": the index)
    wheelhouse: str = ""
    layers: int = NetworkSpec.layers
    bias: bool = NetworkSpec.bias
    input_kind: str = NetworkSpec.input_kind
    #: a sweep (``--config``): check the networks it runs instead of the fields above, with
    #: its adapters, environments and run settings, each case as ``run`` checks it before
    #: timing (T cut to its ``verify_time_steps``)
    config: RunConfig | None = None

    def network(self) -> dict[str, Any]:
        """The ``[network]`` table of the checks (the fields every check shares)."""
        return {"time_steps": self.time_steps, "batch_size": self.batch_size,
                "dtype": self.dtype, "matmul_precision": self.matmul_precision,
                "surrogate": self.surrogate, "surrogate_slope": self.surrogate_slope,
                "layers": self.layers, "bias": self.bias, "input_kind": self.input_kind}

"""What ``snnbench verify`` checks, and its defaults, stated once.

The CLI's ``verify`` options take their defaults from :class:`VerifyRequest`, and the
network fields it does not choose itself default to the default workload kind's
(``linear-lif``: its spec's), read through the workload registry. The module is light (no
pandas, no torch), so the CLI can import it to build its ``--help``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snnbench.records.sampling import VERIFY_TIME_STEPS
from snnbench.sweep.config import RunConfig
from snnbench.workload import DEFAULT_KIND, workload_class

#: the default kind's field defaults and menus (what a plain ``verify`` checks)
_DEFAULTS = workload_class(DEFAULT_KIND).config_defaults()
#: the reset modes ``--reset both`` checks
RESET_MODES: tuple[str, ...] = workload_class(DEFAULT_KIND).config_choices()["reset"]

#: ``--detach-reset`` → the rules checked (``auto``: the spec default, narrowed per adapter to
#: the rule it supports)
DETACH_CHOICES: dict[str, tuple[bool, ...]] = {
    "true": (True,), "false": (False,), "both": (True, False),
    "auto": (_DEFAULTS["detach_reset"],),
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
    dtype: str = _DEFAULTS["dtype"]
    #: the spec's ``matmul_precision`` (``amp-bf16``/``amp-fp16``: automatic mixed precision)
    matmul_precision: str = _DEFAULTS["matmul_precision"]
    device: str = "cpu"
    #: "true", "false", "both", or "auto": the spec default (True) where the adapter supports
    #: it, else the rule it does support (the table shows which was checked)
    detach_reset: str = "auto"
    surrogate: str = _DEFAULTS["surrogate"]
    surrogate_slope: float = _DEFAULTS["surrogate_slope"]
    dump_dir: Path | None = None
    timeout_s: float = 600.0
    #: a folder of wheels to build library environments from, offline ("": the index)
    wheelhouse: str = ""
    layers: int = _DEFAULTS["layers"]
    bias: bool = _DEFAULTS["bias"]
    input_kind: str = _DEFAULTS["input_kind"]
    #: a sweep (``--config``): check the networks it runs instead of the fields above, with
    #: its adapters, environments and run settings, each case as ``run`` checks it before
    #: timing (T cut to its ``verify_time_steps``)
    config: RunConfig | None = None
    #: a NIR graph to check (``--network``: a path or ``example:NAME``) instead of the
    #: Linear+LIF network; "" for none
    graph: str = ""
    #: the graph's time step in seconds (``--dt``), which a graph does not state
    dt: float | None = None

    def network(self) -> dict[str, Any]:
        """The ``[network]`` table of the checks (the fields every check shares): a graph's
        choices with ``graph`` (and ``dt`` when given), else the Linear+LIF network's."""
        shared = {"time_steps": self.time_steps, "batch_size": self.batch_size,
                  "dtype": self.dtype, "surrogate": self.surrogate,
                  "surrogate_slope": self.surrogate_slope, "input_kind": self.input_kind}
        if self.graph:
            dt = {} if self.dt is None else {"dt": self.dt}
            return {"graph": self.graph, **dt, **shared}
        return {**shared, "matmul_precision": self.matmul_precision, "layers": self.layers,
                "bias": self.bias}

"""The harness's own overhead, read off a summary table: the ``null`` probe's step time as a
share of the run's smallest case.

The ``null`` adapter (``snnbench/adapters/null.py``) does no work, so its median step time is
what every timed sample pays on top of its work (timer reads, calls, synchronizations). Divided
by the smallest median step time of the run on the same device — the case the overhead distorts
most — it says whether the harness can resolve that case: the goal is under
:data:`OVERHEAD_GOAL` (1 %).

Pure functions over the summary; :mod:`snnbench.report.pages` renders the result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from snnbench.records.contract import adapter_label
from snnbench.records.schema import FLOOR
from snnbench.workload import row_workload_class

if TYPE_CHECKING:  # imported where used: `list` imports this module (for PROBES) and
    # pandas alone takes a second to import
    import pandas as pd

#: the probe adapter's name: its rows are measurements of the harness, not of a library
NULL = "null"
#: adapters that are harness probes: never ranked, plotted, judged by targets or gated
PROBES: frozenset[str] = frozenset({NULL})
#: adapters that measure the harness or the hardware, not a library (the probes and the GEMM
#: floor): set apart in the terminal, never ranked
PROBE_ADAPTERS: frozenset[str] = frozenset({*PROBES, FLOOR})
#: the overhead share the harness aims to stay under
OVERHEAD_GOAL = 0.01


def is_probe(frame: pd.DataFrame) -> pd.Series:
    """A boolean mask of the summary rows that belong to a harness probe."""
    return frame["adapter"].isin(list(PROBES))


@dataclass(frozen=True)
class Overhead:
    """The harness overhead on one device."""

    device: str
    #: the null probe's median step time (seconds)
    null_s: float
    #: the smallest median step time of any other ok case on the device (seconds)
    smallest_s: float
    #: that case's adapter label and size in words (``n=64``)
    smallest_label: str
    smallest_size: str

    @property
    def share(self) -> float:
        """null_s / smallest_s."""
        return self.null_s / self.smallest_s if self.smallest_s > 0 else math.nan

    @property
    def within_goal(self) -> bool:
        """True when the share is under :data:`OVERHEAD_GOAL`."""
        return self.share < OVERHEAD_GOAL


def harness_overhead(summary: pd.DataFrame) -> list[Overhead]:
    """One :class:`Overhead` per device that has an ok ``null`` step and another ok step.

    The smallest case is the smallest median step time on the device among every other ok
    row (the ``floor`` included: its figures are measured by the same harness).
    """
    import pandas as pd

    steps = summary[(summary["status"] == "ok") & (summary["phase"] == "step")
                    & (summary["metric"] == "time_s")]
    median = pd.to_numeric(steps["median"], errors="coerce")
    steps = steps[median.notna() & (median > 0)]
    out: list[Overhead] = []
    for device, rows in steps.groupby("device", sort=True):
        probe = rows[is_probe(rows)]
        others = rows[~is_probe(rows)]
        if probe.empty or others.empty:
            continue
        smallest = others.sort_values("median", kind="stable").iloc[0]
        out.append(Overhead(
            device=str(device),
            # several null cases (--adapters null): the largest, so the share is never flattered
            null_s=float(probe["median"].max()),
            smallest_s=float(smallest["median"]),
            smallest_label=adapter_label(str(smallest["adapter"]), str(smallest["variant"]),
                                         str(smallest.get("environment", "") or "")),
            smallest_size=row_workload_class(smallest).size_text(
                smallest[row_workload_class(smallest).size_param]),
        ))
    return out

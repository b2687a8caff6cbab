"""The result of ``snnbench nir-check``: one :class:`LibraryCheck` per library and the
:class:`ConformanceReport` around them, typed and versioned as plain data (:meth:`to_dict`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: the output is the reference's at the user's dt, within float32's bars
EXACT = "exact"
#: the reference's at another dt or discretisation, or a read-out a constant factor off
SCALED = "exact up to a scale"
#: a model the probes found to differ (its differences in ``findings``)
DIFFERENT = "different model"
#: the importer (or running what it built) raised, crashed or hung
UNSUPPORTED = "unsupported"
#: the library is not installed here
UNAVAILABLE = "unavailable"
#: every verdict, from the best to the least informative
VERDICTS: tuple[str, ...] = (EXACT, SCALED, DIFFERENT, UNSUPPORTED, UNAVAILABLE)

#: the version of :meth:`ConformanceReport.to_dict`'s layout
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class LibraryCheck:
    """One library's importer against the reference."""

    library: str
    #: the installed version ("" when unavailable)
    version: str
    verdict: str
    #: the differences found, each by a probe, in words (exact: empty)
    findings: tuple[str, ...] = ()
    #: unsupported or unavailable: the one-line reason
    reason: str = ""
    #: how the importer was called, e.g. ``import_from_nir(graph)`` (dt fixed at 1e-4)
    called: str = ""
    #: the fraction of output entries equal to the best-matching probe's (None: not run)
    agreement: float | None = None
    #: the output's and the reference's mean (spike rate, or mean read-out)
    output_mean: float | None = None
    reference_mean: float | None = None
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"unknown verdict {self.verdict!r}")

    def summary(self) -> str:
        """What a table's last column says: the reason, or the findings, in one line."""
        if self.reason:
            return self.reason
        return "; ".join(self.findings)

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {"library": self.library, "version": self.version, "verdict": self.verdict,
                "findings": list(self.findings), "reason": self.reason,
                "called": self.called, "agreement": self.agreement,
                "output_mean": self.output_mean, "reference_mean": self.reference_mean,
                "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class ConformanceReport:
    """Every library's check of one graph, with what the reference was run at."""

    graph: str
    network: str
    graph_hash: str
    dt: float
    time_steps: int
    batch_size: int
    seed: int
    input_std: float
    reset: str
    discretisation: str
    #: ``{"nir": "1.0.4", "nirtorch": "2.0.2"}``: what the importers ran on
    versions: dict[str, str] = field(default_factory=dict)
    checks: tuple[LibraryCheck, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain data, with ``schema`` (:data:`SCHEMA_VERSION`)."""
        return {"schema": SCHEMA_VERSION, "kind": "nir-check", "graph": self.graph,
                "network": self.network, "graph_hash": self.graph_hash, "dt": self.dt,
                "time_steps": self.time_steps, "batch_size": self.batch_size,
                "seed": self.seed, "input_std": self.input_std, "reset": self.reset,
                "discretisation": self.discretisation, "versions": dict(self.versions),
                "checks": [c.to_dict() for c in self.checks]}

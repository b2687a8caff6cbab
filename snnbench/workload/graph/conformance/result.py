"""The result of ``snnbench nir-check``: one :class:`LibraryCheck` per library and the
:class:`ConformanceReport` around them, typed and versioned as plain data (:meth:`to_dict`)."""

from __future__ import annotations

import hashlib
import json
import math
import re
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

    @classmethod
    def from_dict(cls, data: Any) -> LibraryCheck:
        """The check :meth:`to_dict` wrote; anything else raises a one-line ``ValueError``."""
        if not isinstance(data, dict):
            raise ValueError("a check is not a JSON object")
        findings = data.get("findings", [])
        if not isinstance(findings, list) or not all(isinstance(f, str) for f in findings):
            raise ValueError("'findings' is not a list of texts")
        seconds = _number(data, "seconds", optional=True)
        # an unknown verdict raises ValueError in __post_init__
        return cls(library=_text(data, "library"), version=_text(data, "version"),
                   verdict=_text(data, "verdict"), findings=tuple(findings),
                   reason=_text(data, "reason"), called=_text(data, "called"),
                   agreement=_number(data, "agreement", optional=True),
                   output_mean=_number(data, "output_mean", optional=True),
                   reference_mean=_number(data, "reference_mean", optional=True),
                   seconds=seconds if seconds is not None else 0.0)


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

    @property
    def check_id(self) -> str:
        """sha1 of the graph's content and of every choice the check ran at, the libraries
        included (12 hex digits): two checks of one id checked the same thing."""
        body = {"graph_hash": self.graph_hash, "dt": self.dt, "time_steps": self.time_steps,
                "batch_size": self.batch_size, "seed": self.seed,
                "input_std": self.input_std, "reset": self.reset,
                "discretisation": self.discretisation,
                "libraries": sorted(c.library for c in self.checks)}
        return hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def file_name(self) -> str:
        """``<network>-<check_id>.json``: the file a run folder keeps this check in (the
        network's name reduced to letters, digits, ``.``, ``_`` and ``-``)."""
        network = re.sub(r"[^A-Za-z0-9._-]+", "-", self.network).strip(".-")[:60] or "graph"
        return f"{network}-{self.check_id}.json"

    @classmethod
    def from_dict(cls, data: Any) -> ConformanceReport:
        """The report :meth:`to_dict` wrote, checked whole (a file someone sent is untrusted);
        anything else, another schema version included, raises a one-line ``ValueError``."""
        if not isinstance(data, dict) or data.get("kind") != "nir-check":
            raise ValueError("not a nir-check result (no \"kind\": \"nir-check\")")
        if data.get("schema") != SCHEMA_VERSION:
            raise ValueError(f"schema {data.get('schema')!r}, not {SCHEMA_VERSION}: written "
                             "by another snnbench")
        dt, input_std = _number(data, "dt"), _number(data, "input_std")
        versions = data.get("versions", {})
        if not isinstance(versions, dict) or not all(
                isinstance(v, str) for v in versions.values()):
            raise ValueError("'versions' is not an object of texts")
        checks = data.get("checks")
        if not isinstance(checks, list):
            raise ValueError("'checks' is not a list")
        parsed = []
        for i, check in enumerate(checks):
            try:
                parsed.append(LibraryCheck.from_dict(check))
            except ValueError as exc:
                raise ValueError(f"check {i + 1}: {exc}") from None
        assert dt is not None and input_std is not None
        return cls(graph=_text(data, "graph"), network=_text(data, "network"),
                   graph_hash=_text(data, "graph_hash"), dt=dt,
                   time_steps=_integer(data, "time_steps"),
                   batch_size=_integer(data, "batch_size"), seed=_integer(data, "seed"),
                   input_std=input_std, reset=_text(data, "reset"),
                   discretisation=_text(data, "discretisation"),
                   versions={str(k): v for k, v in versions.items()}, checks=tuple(parsed))


#: the longest text a stored result may hold in one field (a reason is one line)
_MAX_TEXT = 2000


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str) or len(value) > _MAX_TEXT:
        raise ValueError(f"{key!r} is not a text of at most {_MAX_TEXT} characters")
    return value


def _integer(data: dict[str, Any], key: str) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key!r} is not an integer ≥ 0")
    return value


def _number(data: dict[str, Any], key: str, *, optional: bool = False) -> float | None:
    value = data.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value):
        raise ValueError(f"{key!r} is not a finite number")
    return float(value)

"""How closely a built graph reproduced the float64 reference: its output (spikes, or an LI
read-out's membrane) and the gradient of every trainable array, by name.

The bars are those of a float32 Linear+LIF case (:mod:`snnbench.measure.verify`): a float32 build
may flip a spike whose membrane lies within a float32 rounding of the threshold, nothing more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from snnbench.workload.base import Agreement, Declared
from snnbench.workload.graph.reference import GraphResult

#: the least fraction of equal output spikes of a build that declares exact dynamics
MIN_SPIKE_MATCH = 0.999
#: the least cosine of every parameter's gradient with the reference's
GRAD_COSINE_MIN = 0.999
#: the largest error of a non-spiking (LI) read-out, relative to its largest magnitude
MAX_OUTPUT_REL_ERR = 1e-4


@dataclass(frozen=True)
class GraphEquivalence(Agreement):
    """The agreement of one build with the reference (what a record keeps: ``spike_match`` is
    :attr:`output_match`, ``grad_cosine`` the worst parameter's)."""

    spiking_output: bool
    #: spiking output: the fraction of equal entries; LI output: 1 − (relative error > bar)
    output_match: float
    output_max_rel_err: float
    #: the least gradient cosine over the parameters, and which parameter has it
    grad_cosine: float
    worst_parameter: str
    output_rate: float
    reference_rate: float
    #: the arrays the build changed in place (``parameters``, ``input``): it was given copies
    changed: tuple[str, ...] = ()
    #: :attr:`output_match`, under the name a record keeps it by
    spike_match: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "spike_match", self.output_match)

    def problems(self, declared: Declared | None = None, detailed: bool = False) -> list[str]:
        """What fails the bars, in words (empty: exact); ``declared``: only what an adapter
        declares exact is held to its bar (None: everything is)."""
        if declared is not None:
            return super().problems(declared, detailed)
        out = [self.dynamics_problem(), self.gradient_problem()]
        if math.isnan(self.grad_cosine):
            out.append("zero gradients on both sides: gradient equivalence not shown")
        return [p for p in out if p]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON (a record's ``equivalence``)."""
        return {**asdict(self), "changed": list(self.changed)}  # as JSON reads it back

    def unproven(self, declared: Declared) -> str:
        """A build that changed what it was given, or zero gradients on both sides where
        exact gradients are declared, shows nothing."""
        if self.changed:
            return (f"the adapter changed the {' and '.join(self.changed)} it was given in "
                    "place: it computes another network than the case's")
        if math.isnan(self.grad_cosine) and declared.exact_gradient:
            return "zero gradients on both sides: gradient equivalence not shown"
        return ""

    def dynamics_problem(self, detailed: bool = False) -> str:
        """Output spikes below :data:`MIN_SPIKE_MATCH`, or an LI read-out off by more than
        :data:`MAX_OUTPUT_REL_ERR`."""
        tail = "; adapter declares exact dynamics" if detailed else ""
        if self.spiking_output and self.output_match < MIN_SPIKE_MATCH:
            return f"output spikes match only {self.output_match:.4%}{tail}"
        if not self.spiking_output and self.output_max_rel_err > MAX_OUTPUT_REL_ERR:
            return f"read-out relative error {self.output_max_rel_err:.2e}{tail}"
        return ""

    def gradient_problem(self, detailed: bool = False) -> str:
        """The worst parameter's gradient cosine below :data:`GRAD_COSINE_MIN`."""
        if not self.gradient_below_bar():
            return ""
        tail = f" is below {GRAD_COSINE_MIN}; adapter declares exact gradients" if detailed else ""
        return f"gradient cosine of {self.worst_parameter} {self.grad_cosine:.6f}{tail}"

    def gradient_below_bar(self) -> bool:
        """The worst gradient cosine is below the bar (NaN, none, is not)."""
        return self.grad_cosine < GRAD_COSINE_MIN


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a64), np.linalg.norm(b64)
    if na == 0.0 and nb == 0.0:
        return math.nan
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(a64 @ b64 / (na * nb))


def compare_graph(output: Any, grads: Mapping[str, Any], reference: GraphResult,
                  spiking_output: bool) -> GraphEquivalence:
    """Compare a build's output (T, B, *shape) and gradients by name with ``reference``; a
    shape, a name or a non-finite value that differs raises ``ValueError``."""
    out = np.asarray(output, dtype=np.float64)
    ref = reference.output
    if out.shape != ref.shape:
        raise ValueError(f"output has shape {out.shape}, expected {ref.shape}")
    if not np.all(np.isfinite(out)):
        raise ValueError("output contains NaN or inf")
    if set(grads) != set(reference.grads):
        raise ValueError(f"gradient names {sorted(grads)} differ from the graph's "
                         f"{sorted(reference.grads)}")
    scale = float(np.abs(ref).max()) or 1.0
    rel = float(np.abs(out - ref).max() / scale) if out.size else 0.0
    match = float((out == ref).mean()) if spiking_output else 1.0
    worst, worst_name = math.inf, ""
    for name, ref_grad in reference.grads.items():
        got = np.asarray(grads[name], dtype=np.float64)
        if got.shape != ref_grad.shape or not np.all(np.isfinite(got)):
            raise ValueError(f"gradient of {name} has shape {got.shape} or non-finite values")
        cos = _cosine(got, ref_grad)
        if math.isnan(cos):
            continue
        if cos < worst:
            worst, worst_name = cos, name
    return GraphEquivalence(
        spiking_output=spiking_output, output_match=match, output_max_rel_err=rel,
        grad_cosine=math.nan if math.isinf(worst) else worst, worst_parameter=worst_name,
        output_rate=float(out.mean()), reference_rate=float(ref.mean()),
    )

"""How closely a build reproduced the Linear+LIF reference, and the bars it is held to.

The ground truth is :func:`snnbench.workload.linear_lif.reference.run_reference` (NumPy, float32).
For 16-bit dtypes the reference runs on the same weights and input rounded to that dtype, with
float32 state, and the spike-agreement bar is lower because libraries legitimately keep 16-bit
state.

Under automatic mixed precision (``matmul_precision`` ``amp-bf16`` / ``amp-fp16``) the reference
emulates ``torch.autocast`` (:mod:`snnbench.workload.linear_lif.reference`): 16-bit operands,
float32 sums, one rounding of each Linear output, float32 state. What can still differ is the
summation order of a library's GEMM, which moves the float32 sum by a few float32 ulps; that changes
its 16-bit rounding only when the sum lies next to a rounding boundary, and changes a spike only
when the membrane then lies within one 16-bit ulp of the threshold. So spikes are held to a bar
(measured: docs/methodology.md, "What exact means under AMP") and gradients to a cosine, never to
equality.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from snnbench.workload.base import Agreement, Declared
from snnbench.workload.linear_lif.reference import ReferenceResult
from snnbench.workload.linear_lif.spec import CaseData, FloatArray, NetworkSpec

#: an adapter declaring exact dynamics must agree on at least this fraction of spikes, by
#: :func:`tolerance_key` (the dtype, or the AMP mode: its state is float32 and a GEMM's summation
#: order flipped 4e-7 of the spikes in scripts/amp_flips.py, as rare as in float32, so AMP has
#: the float32 bar)
MIN_SPIKE_MATCH: dict[str, float] = {"float32": 0.999, "bfloat16": 0.95, "float16": 0.98,
                                     "amp-bf16": 0.999, "amp-fp16": 0.999}
#: an adapter declaring exact gradients must reach this weight-gradient cosine (``verify``);
#: 16-bit dtypes round every state update, so their bar is lower; AMP rounds only the GEMM
#: operands and results (a bfloat16 rounding is 2^-9 relative: cosines stay above 0.999)
GRAD_COSINE_MIN: dict[str, float] = {"float32": 0.999, "bfloat16": 0.95, "float16": 0.99,
                                     "amp-bf16": 0.99, "amp-fp16": 0.99}


def tolerance_key(spec: NetworkSpec) -> str:
    """The key of :data:`MIN_SPIKE_MATCH` and :data:`GRAD_COSINE_MIN` for ``spec``: its AMP
    mode when it has one, else its dtype."""
    return spec.matmul_precision if spec.amp_dtype is not None else spec.dtype


@dataclass(frozen=True)
class Equivalence(Agreement):
    """How closely one adapter reproduced the reference on one spec."""

    spike_match: float
    first_diff_step: int | None
    grad_cosine: float
    grad_max_rel_err: float
    bias_grad_cosine: float
    spike_rate: float
    reference_spike_rate: float
    #: the arrays the adapter changed in place (``weights``, ``biases``, ``input``): it was given
    #: copies, so the reference is the case's own network, but its result is of another one
    changed: tuple[str, ...] = ()
    #: the bars it is held to (:func:`tolerance_key`); not part of :meth:`to_dict`
    tolerance: str = "float32"

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON (a record's ``equivalence``)."""
        out = asdict(self)
        del out["tolerance"]
        out["changed"] = list(self.changed)  # as JSON reads it back
        return out

    def passes(self, key: str | None = None) -> bool:
        """Spike agreement is at least :data:`MIN_SPIKE_MATCH` for ``key`` (a dtype or an AMP
        mode: :func:`tolerance_key`; None: this check's own)."""
        return self.spike_match >= MIN_SPIKE_MATCH[key or self.tolerance]

    @property
    def grad_bar(self) -> float:
        """The least weight-gradient cosine of an exact gradient at this check's precision."""
        return GRAD_COSINE_MIN[self.tolerance]

    def unproven(self, declared: Declared) -> str:
        """Why this comparison shows nothing of what the adapter declares ("" when it shows
        something): it changed the arrays it was given, or both sides are silent.

        A stack whose last layer never fires agrees with the reference on every (absent) spike,
        and zero gradients on both sides have no cosine: agreement on nothing is never a match
        (``verify --layers 100``). A silent last layer alone still shows something: the
        surrogate gradient depends on every membrane potential, so the gradients carry it.
        """
        if self.changed:
            return (f"the adapter changed the {' and '.join(self.changed)} it was given in "
                    "place: it computes another network than the case's")
        flat = math.isnan(self.grad_cosine)
        silent = self.spike_rate == 0 and self.reference_spike_rate == 0
        hint = ("equivalence not shown (fewer layers, more time steps or a stronger input "
                "make the last layer fire)")
        if flat and silent and (declared.exact_dynamics or declared.exact_gradient):
            return f"no output spike and zero weight gradients on both sides: {hint}"
        if flat and declared.exact_gradient:
            return "zero weight gradients on both sides: gradient equivalence not shown"
        return ""

    def dynamics_problem(self, detailed: bool = False) -> str:
        """Spikes below the bar: ``spikes match only 99.8000%`` (``run``: with the first
        differing step and what the adapter declares)."""
        if self.passes():
            return ""
        if detailed:
            return (f"spikes match the reference on {self.spike_match:.4%} "
                    f"(first differing step {self.first_diff_step}); adapter declares "
                    "exact dynamics")
        return f"spikes match only {self.spike_match:.4%}"

    def gradient_problem(self, detailed: bool = False) -> str:
        """The weight-gradient cosine below the bar (``run``: none at all is below it too)."""
        bar = self.grad_bar
        if detailed:
            if self.grad_cosine >= bar:
                return ""
            return (f"weight-gradient cosine {self.grad_cosine:.6f} is below {bar}; "
                    "adapter declares exact gradients")
        return (f"weight-gradient cosine {self.grad_cosine:.6f}"
                if self.grad_cosine < bar else "")

    def gradient_below_bar(self) -> bool:
        """The weight-gradient cosine is below the bar (NaN, none, is not)."""
        return self.grad_cosine < self.grad_bar


def _cosine(a: FloatArray, b: FloatArray, both_zero: float = math.nan) -> float:
    """The cosine of ``a`` and ``b``; two zero vectors have none (``both_zero``: NaN, shown as
    no value, never as a match)."""
    a64 = a.astype(np.float64).ravel()
    b64 = b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a64), np.linalg.norm(b64)
    if na == 0.0 and nb == 0.0:
        return both_zero
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(a64 @ b64 / (na * nb))


def compare_outputs(
    spikes: FloatArray,
    grad_weights: list[FloatArray],
    grad_biases: list[FloatArray],
    reference: ReferenceResult,
) -> Equivalence:
    """Compare an adapter's spikes (T, B, n) and gradients with the reference's."""
    ref = reference.output_spikes
    if spikes.shape != ref.shape:
        raise ValueError(f"spikes have shape {spikes.shape}, expected {ref.shape} (T, B, n)")
    if not np.all(np.isfinite(spikes)):
        raise ValueError("spikes contain NaN or inf")
    equal = spikes == ref
    per_step = equal.reshape(equal.shape[0], -1).all(axis=1)
    first_diff = None if per_step.all() else int(np.argmin(per_step))
    gw = np.concatenate([g.ravel() for g in grad_weights])
    rw = np.concatenate([g.ravel() for g in reference.grad_weights])
    gb = np.concatenate([g.ravel() for g in grad_biases])
    rb = np.concatenate([g.ravel() for g in reference.grad_biases])
    if gw.shape != rw.shape or gb.shape != rb.shape:
        raise ValueError("gradient shapes differ from the reference's")
    if not (np.all(np.isfinite(gw)) and np.all(np.isfinite(gb))):
        raise ValueError("gradients contain NaN or inf")
    scale = float(np.abs(rw).max()) or 1.0
    grad_cosine = _cosine(gw, rw)
    return Equivalence(
        spike_match=float(equal.mean()),
        first_diff_step=first_diff,
        grad_cosine=grad_cosine,
        grad_max_rel_err=float(np.abs(gw.astype(np.float64) - rw).max() / scale),
        # a bias-free network's bias gradients are zero on both sides by construction: 1.0
        # there, while the weight gradients carry a signal; none when nothing does
        bias_grad_cosine=_cosine(gb, rb, both_zero=grad_cosine if math.isnan(grad_cosine)
                                 else 1.0),
        spike_rate=float(spikes.mean()),
        reference_spike_rate=float(ref.mean()),
    )


def copies(data: CaseData) -> CaseData:
    """``data`` with every array copied: what an adapter is given, so that what it does to
    them in place cannot move the reference, and a change shows (:func:`changed`)."""
    return CaseData(inputs=data.inputs.copy(), weights=tuple(w.copy() for w in data.weights),
                    biases=tuple(b.copy() for b in data.biases), spec=data.spec)


def changed(data: CaseData, given: CaseData) -> tuple[str, ...]:
    """The names of the arrays of ``given`` (copies of ``data``) that differ from ``data``."""
    pairs = (("weights", data.weights, given.weights), ("biases", data.biases, given.biases),
             ("input", (data.inputs,), (given.inputs,)))
    return tuple(name for name, ours, theirs in pairs
                 if len(ours) != len(theirs)
                 or any(not np.array_equal(a, b, equal_nan=True)
                        for a, b in zip(ours, theirs, strict=False)))

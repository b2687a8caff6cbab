"""Equivalence of an adapter's network with the canonical one, checked before anything is timed.

The ground truth is :func:`snnbench.workload.linear_lif.reference.run_reference` (NumPy, float32).
For 16-bit dtypes the reference runs on the same weights and input rounded to that dtype, with
float32 state, and the spike-agreement bar is lower because libraries legitimately keep 16-bit
state.

Under automatic mixed precision (``matmul_precision`` ``amp-bf16`` / ``amp-fp16``) the reference
emulates ``torch.autocast`` (:mod:`snnbench.workload.linear_lif.reference`): 16-bit operands,
float32 sums, one rounding of each Linear output, float32 state. What can still differ is the
summation order of a library's GEMM, which moves the float32 sum by a few float32 ulps; that changes
its 16-bit rounding only when the sum lies next to a rounding boundary, and changes a spike only
when the
membrane then lies within one 16-bit ulp of the threshold. So spikes are held to a bar (measured:
docs/methodology.md, "What exact means under AMP") and gradients to a cosine, never to equality.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from snnbench import adapter as v1, plugin as v2
from snnbench.adapter_shim import AnyAdapter, as_v2
from snnbench.records.fileio import WriteError, atomic_path
from snnbench.records.sampling import VERIFY_TIME_STEPS
from snnbench.workload import LinearLif
from snnbench.workload.linear_lif.reference import ReferenceResult
from snnbench.workload.linear_lif.spec import CaseData, FloatArray, NetworkSpec, make_case_data

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


@dataclass(frozen=True)
class Equivalence:
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

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)

    def passes(self, key: str) -> bool:
        """Spike agreement is at least :data:`MIN_SPIKE_MATCH` for ``key`` (a dtype or an AMP
        mode: :func:`tolerance_key`)."""
        return self.spike_match >= MIN_SPIKE_MATCH[key]

    def unproven(self, capabilities: v1.Capabilities | v2.Capabilities) -> str:
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
        if flat and silent and (capabilities.exact_dynamics or capabilities.exact_gradient):
            return f"no output spike and zero weight gradients on both sides: {hint}"
        if flat and capabilities.exact_gradient:
            return "zero weight gradients on both sides: gradient equivalence not shown"
        return ""


def tolerance_key(spec: NetworkSpec) -> str:
    """The key of :data:`MIN_SPIKE_MATCH` and :data:`GRAD_COSINE_MIN` for ``spec``: its AMP
    mode when it has one, else its dtype."""
    return spec.matmul_precision if spec.amp_dtype is not None else spec.dtype


def reference_for(data: CaseData) -> ReferenceResult:
    """The reference result for ``data`` (the Linear+LIF workload's own,
    :meth:`~snnbench.workload.LinearLif.reference`)."""
    return LinearLif(data.spec).reference(data)


def cached_reference(spec: NetworkSpec, folder: Path | None) -> ReferenceResult:
    """:func:`reference_for` ``spec``'s case data, computed once per network and kept in
    ``folder`` (a sweep's, shared by its cases; None: computed here, kept nowhere).

    The file is data: arrays in an ``.npz`` read without pickle, holding the spec it belongs
    to; one that is damaged, of another spec or of other shapes is computed again and
    replaced. A worker calls this before it imports any library, so the reference every case
    of a network is checked against is the same, computed by NumPy alone.
    """
    path = None
    if folder is not None:
        path = folder / f"{hashlib.sha256(spec.to_json().encode()).hexdigest()[:32]}.npz"
        stored = _read_reference(path, spec)
        if stored is not None:
            return stored
    result = reference_for(make_case_data(spec))
    if path is not None:
        arrays: dict[str, Any] = {"spec_json": np.array(spec.to_json()),
                                  **LinearLif(spec).reference_arrays(result)}
        # a reference that cannot be kept (a full disk) is no failure: the next case computes
        with contextlib.suppress(OSError, WriteError):
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp, open(tmp, "wb") as handle:
                np.savez(handle, **arrays)
    return result


def _read_reference(path: Path, spec: NetworkSpec) -> ReferenceResult | None:
    """The reference kept at ``path`` for ``spec``, or None (none, damaged or foreign)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["spec_json"]) != spec.to_json():
                return None
            return LinearLif(spec).reference_from_arrays(data)
    except Exception:  # missing, damaged, not an npz, a pickled object: computed again
        return None


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


def _changed(data: CaseData, given: CaseData) -> tuple[str, ...]:
    """The names of the arrays of ``given`` (copies of ``data``) that differ from ``data``."""
    pairs = (("weights", data.weights, given.weights), ("biases", data.biases, given.biases),
             ("input", (data.inputs,), (given.inputs,)))
    return tuple(name for name, ours, theirs in pairs
                 if len(ours) != len(theirs)
                 or any(not np.array_equal(a, b, equal_nan=True)
                        for a, b in zip(ours, theirs, strict=False)))


def verification_spec(spec: NetworkSpec, time_steps: int = VERIFY_TIME_STEPS) -> NetworkSpec:
    """The case's spec with T shortened for the pre-timing check."""
    return spec.replace(time_steps=min(spec.time_steps, time_steps))


def check_adapter(
    adapter: AnyAdapter, variant: str, spec: NetworkSpec, device: str,
    reference: ReferenceResult | None = None,
) -> tuple[Equivalence, dict[str, FloatArray]]:
    """Run ``adapter`` once on ``spec`` and compare with the reference (``reference``: that
    of ``spec``, computed already; None: computed here).

    Returns the equivalence and the arrays of a dump (time-major, reference layouts).
    """
    data = make_case_data(spec)
    # the adapter gets its own copies: what it does to them in place cannot move the reference,
    # and a change shows that it computed another network (:meth:`Equivalence.unproven`)
    given = CaseData(inputs=data.inputs.copy(), weights=tuple(w.copy() for w in data.weights),
                     biases=tuple(b.copy() for b in data.biases), spec=spec)
    workload = LinearLif(spec)
    # the plugin API v2 (a v1 adapter through the shim): gradients by parameter name
    model = as_v2(adapter).build(workload, given, device, variant)
    try:
        model.zero_grad()
        handle = model.forward()
        model.backward(handle)
        model.synchronize()
        spikes = np.asarray(model.spikes(handle), dtype=np.float32)
        grad_w, grad_b = workload.gradients_in_order(model.gradients())
    finally:
        model.close()
    if reference is None:
        reference = workload.reference(data)
    equivalence = replace(compare_outputs(spikes, grad_w, grad_b, reference),
                          changed=_changed(data, given))
    return equivalence, workload.dump_arrays(data, spikes, grad_w, grad_b)

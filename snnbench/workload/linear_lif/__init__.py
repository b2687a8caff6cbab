"""The first workload kind, ``linear-lif``: ``layers`` × (Linear(n, n) + LIF), batch B, T steps.

It wraps :class:`~snnbench.workload.linear_lif.spec.NetworkSpec` (the fields, their checks and the
hash stay there, so every stored ``case_id`` is unchanged) and adds what the harness asks of any
workload: its data (:func:`~snnbench.workload.linear_lif.spec.make_case_data`), its reference
(:mod:`snnbench.workload.linear_lif.reference`), its operation count (n²·B·T·L), its label, its
columns and the names of its trainable parameters (``layers.0.weight``, ``layers.0.bias``, ...), by
which an adapter of the plugin API v2 returns its gradients.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

import numpy as np

from snnbench.workload.base import (
    Agreement,
    FrameworkSettings,
    Knobs,
    RunOnce,
    Work,
    Workload,
    WorkloadError,
    first_unsupported,
    json_flag,
    json_int,
    register,
    typed_network,
)
from snnbench.workload.linear_lif.equivalence import (
    changed,
    compare_outputs,
    copies,
    tolerance_key,
)
from snnbench.workload.linear_lif.reference import ReferenceResult, round_to_dtype, run_reference
from snnbench.workload.linear_lif.spec import (
    CHOICES,
    FP32_MATMUL_PRECISIONS,
    INPUT_KINDS,
    RESET_MODES,
    CaseData,
    FloatArray,
    NetworkSpec,
    make_case_data,
)
from snnbench.workload.linear_lif.synops import firing_rate, phase_work, synops_per_step

KIND = "linear-lif"

#: the size block of a case's columns, in the order the run folder's tables list them
SIZE_COLUMNS: tuple[str, ...] = ("dtype", "neurons", "batch_size", "time_steps", "layers",
                                 "reset")
#: the network's fields beyond the size block: with it, every field of the spec
NETWORK_COLUMNS: tuple[str, ...] = (
    "surrogate", "surrogate_slope", "detach_reset", "bias", "input_kind", "matmul_precision",
    "beta", "threshold", "input_std", "input_rate", "seed",
)


def parameter_names(layers: int) -> tuple[str, ...]:
    """The trainable parameters of a ``layers``-deep network, in layer order, each layer's
    weight then bias: ``layers.0.weight``, ``layers.0.bias``, ``layers.1.weight``..."""
    return tuple(f"layers.{layer}.{what}" for layer in range(layers)
                 for what in ("weight", "bias"))


@register
@dataclass(frozen=True)
class LinearLif(Workload):
    """The canonical Linear+LIF network of :class:`NetworkSpec` as a workload."""

    spec: NetworkSpec = field(default_factory=NetworkSpec)

    kind: ClassVar[str] = KIND
    version: ClassVar[int] = 1
    size_param: ClassVar[str] = "neurons"
    size_axis: ClassVar[str] = "neurons (n)"
    depth_param: ClassVar[str] = "layers"
    size_symbol: ClassVar[str] = "n"
    columns: ClassVar[tuple[str, ...]] = (*SIZE_COLUMNS, *NETWORK_COLUMNS)
    key_columns: ClassVar[tuple[str, ...]] = SIZE_COLUMNS
    int_columns: ClassVar[tuple[str, ...]] = ("neurons", "batch_size", "time_steps", "layers")
    float_columns: ClassVar[tuple[str, ...]] = (
        "surrogate_slope", "beta", "threshold", "input_std", "input_rate")
    #: the matmul precision reads by its value alone (``amp-bf16``)
    network_formats: ClassVar[tuple[tuple[str, str], ...]] = (
        ("surrogate", "surrogate={}"), ("surrogate_slope", "slope={}"),
        ("detach_reset", "detach_reset={}"), ("bias", "bias={}"), ("input_kind", "input={}"),
        ("matmul_precision", "{}"), ("beta", "beta={}"), ("threshold", "threshold={}"),
        ("input_std", "input_std={}"), ("input_rate", "input_rate={}"), ("seed", "seed={}"),
    )
    shown_columns: ClassVar[tuple[tuple[str, str], ...]] = (
        ("neurons", "n"), ("batch_size", "B"), ("time_steps", "T"), ("reset", "reset"),
        ("surrogate", "surrogate"), ("surrogate_slope", "slope"),
        ("detach_reset", "detach reset"), ("bias", "bias"), ("input_kind", "input"),
    )
    verify_columns: ClassVar[tuple[tuple[str, str], ...]] = (
        ("reset", "reset"), ("detach_reset", "detach"), ("neurons", "n"), ("time_steps", "T"),
        ("batch_size", "B"), ("layers", "L"), ("dtype", "dtype"), ("surrogate", "surrogate"),
        ("surrogate_slope", "slope"), ("bias", "bias"), ("input_kind", "input"),
    )
    label_parts: ClassVar[tuple[tuple[str, str], ...]] = (
        ("device", "{}"), ("dtype", "{}"), ("neurons", "n={}"), ("batch_size", "B={}"),
        ("time_steps", "T={}"), ("layers", "L={}"), ("reset", "{}"),
    )
    group_parts: ClassVar[tuple[tuple[str, str], ...]] = (
        ("device", "{}"), ("dtype", "{}"), ("batch_size", "B={}"), ("time_steps", "T={}"),
        ("layers", "layers={}"), ("reset", "reset={}"),
    )

    def __post_init__(self) -> None:
        if not isinstance(self.spec, NetworkSpec):
            raise WorkloadError(f"a {KIND} workload wraps a NetworkSpec, "
                                f"got {type(self.spec).__name__}")

    # -- identity and words ----------------------------------------------------------------
    @property
    def case_id(self) -> str:
        """The spec's hash, as it always was (the kind is not hashed: old ids stay valid)."""
        return self.spec.case_id

    @property
    def label(self) -> str:
        """``float32 n=512 B=16 T=500 L=1 subtract``: a table row's words less the device,
        with the matmul precision as a network column says it (``... subtract · amp-bf16``)
        when it is not ``strict``."""
        text = super().label
        precision = self.spec.matmul_precision
        return text if precision == "strict" else f"{text} · {precision}"

    def params(self) -> dict[str, Any]:
        """Every field of the spec (the ``spec`` of a job and a record)."""
        return self.spec.to_dict()

    @classmethod
    def row_work(cls, row: Mapping[str, object]) -> Work:
        """The dense matrix products and weight traffic of the row's phase
        (:func:`snnbench.workload.linear_lif.synops.phase_work`: 2·n² per sample, step and layer
        forward)."""
        def whole(column: str) -> int:
            return int(float(row[column]))  # type: ignore[arg-type]

        return phase_work(str(row["phase"]), whole("neurons"), whole("batch_size"),
                          whole("time_steps"), whole("layers"), str(row.get("dtype", "float32")))

    @classmethod
    def typed_params(cls, row: Any) -> dict[str, Any]:
        """The network of a summary row as ``show --format json`` writes it (its schema,
        ``snnbench/schemas/show.schema.json``, a public contract): the neuron count as
        ``n``, the numbers as numbers, the flags as booleans, None where the run did not say
        (the dtype and matmul precision are written beside, as every kind has them)."""
        return typed_network(row, layers=json_int(row["layers"]), bias=json_flag(row["bias"]))

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> LinearLif:
        """The workload of a spec's fields (:meth:`NetworkSpec.from_dict`'s checks)."""
        return cls(NetworkSpec.from_dict(params))

    # -- made from a config -----------------------------------------------------------------
    @classmethod
    def config_fields(cls) -> tuple[str, ...]:
        """Every field of the spec, in its order."""
        return tuple(f.name for f in fields(NetworkSpec))

    @classmethod
    def config_defaults(cls) -> dict[str, Any]:
        """The spec's defaults."""
        return {f.name: f.default for f in fields(NetworkSpec)}

    @classmethod
    def config_choices(cls) -> dict[str, tuple[Any, ...]]:
        """The menus of the spec's text fields."""
        return dict(CHOICES)

    @classmethod
    def from_config(cls, fields: Mapping[str, Any]) -> LinearLif:
        """The spec of a case's fields (:meth:`NetworkSpec.from_dict`: a ``SpecError`` for a
        bad value, ``TypeError`` for a field of no spec)."""
        return cls(NetworkSpec.from_dict(fields))

    @classmethod
    def check_config_value(cls, key: str, value: Any) -> None:
        """The spec's own check of one field."""
        NetworkSpec.from_dict({key: value})

    def verify_tag(self, varied: Iterable[str]) -> str:
        """The reset, and ``-nodetach`` for a check without the detached reset when verify
        checks both rules (``subtract``, ``zero-nodetach``)."""
        detach = "-nodetach" if "detach_reset" in set(varied) and not self.spec.detach_reset \
            else ""
        return f"{self.spec.reset}{detach}"

    @classmethod
    def from_stored(cls, stored: Any) -> LinearLif:
        """A job's or a record's spec, wrapped as it is (it was checked when it was built)."""
        return cls(stored) if isinstance(stored, NetworkSpec) else cls.from_params(stored)

    # -- what it computes ------------------------------------------------------------------
    def make_data(self) -> CaseData:
        """Weights, biases and input from the seed (:func:`make_case_data`)."""
        return make_case_data(self.spec)

    def reference(self, data: Any) -> ReferenceResult:
        """The reference for ``data``, its inputs and parameters rounded to the spec's dtype
        (AMP, whose dtype is float32, is emulated inside :func:`run_reference`)."""
        assert isinstance(data, CaseData)
        dtype = self.spec.dtype
        if dtype == "float32":
            return run_reference(data)
        return run_reference(CaseData(
            inputs=round_to_dtype(data.inputs, dtype),
            weights=tuple(round_to_dtype(w, dtype) for w in data.weights),
            biases=tuple(round_to_dtype(b, dtype) for b in data.biases),
            spec=data.spec,
        ))

    def operations(self) -> float:
        """Dense multiply-accumulates of one forward pass: n²·B·T·L."""
        s = self.spec
        return float(s.neurons) ** 2 * s.batch_size * s.time_steps * s.layers

    def shortened(self, time_steps: int) -> LinearLif:
        """This case with T cut to at most ``time_steps`` (the pre-timing check's size)."""
        return LinearLif(self.spec.replace(time_steps=min(self.spec.time_steps, time_steps)))

    # -- what a worker asks of it ------------------------------------------------------------
    @property
    def batch_size(self) -> int:
        """B."""
        return self.spec.batch_size

    def framework_settings(self) -> FrameworkSettings:
        """The spec's matmul precision (TF32, an AMP mode) and seed."""
        return FrameworkSettings(matmul_precision=self.spec.matmul_precision,
                                 autocast_dtype=self.spec.amp_dtype, seed=self.spec.seed)

    def output_shape(self) -> tuple[int, ...]:
        """(T, B, n): the last layer's spikes."""
        return self.spec.input_shape()

    def check(self, run: RunOnce, reference: Any | None = None
              ) -> tuple[Agreement, dict[str, FloatArray]]:
        """Run a build on copies of the case data and compare its spikes and gradients with
        the reference (:func:`~snnbench.workload.linear_lif.equivalence.compare_outputs`), at
        the bars of the spec's dtype or AMP mode; the arrays are those of :meth:`dump_arrays`."""
        data = self.make_data()
        given = copies(data)
        output, grads = run(given)
        spikes = np.asarray(output, dtype=np.float32)
        grad_w, grad_b = self.gradients_in_order(grads)
        if reference is None:
            reference = self.reference(data)
        equivalence = replace(compare_outputs(spikes, grad_w, grad_b, reference),
                              changed=changed(data, given), tolerance=tolerance_key(self.spec))
        return equivalence, self.dump_arrays(data, spikes, grad_w, grad_b)

    def reference_key(self) -> str:
        """The spec as JSON (what a kept reference has always been filed under)."""
        return self.spec.to_json()

    def case_metrics(self, result: Any = None) -> dict[str, list[float]]:
        """Firing rate and synaptic operations per step, from the reference at this size
        (``result``: that reference, when the caller computed it already)."""
        data = self.make_data()
        if result is None:
            result = self.reference(data)
        return {
            "firing_rate": [firing_rate(list(result.spikes))],
            "synops_per_step": [synops_per_step(data.inputs, list(result.spikes), self.spec)],
        }

    # -- the reference and a check's arrays, as files keep them ------------------------------
    def reference_arrays(self, result: Any) -> dict[str, FloatArray]:
        """The reference as named arrays, layer by layer (``spikes_0``, ``grad_w_0``,
        ``grad_b_0``...): what a kept reference file holds beside its spec."""
        arrays: dict[str, FloatArray] = {}
        for name, group in (("spikes", result.spikes), ("grad_w", result.grad_weights),
                            ("grad_b", result.grad_biases)):
            arrays.update({f"{name}_{i}": a for i, a in enumerate(group)})
        return arrays

    def reference_from_arrays(self, arrays: Mapping[str, Any]) -> ReferenceResult | None:
        """Inverse of :meth:`reference_arrays`; None when an array is missing or not of this
        case's shape (a damaged or foreign file). Reading ``arrays`` may raise: the caller
        takes that as no file."""
        layers = range(self.spec.layers)
        spikes = tuple(np.asarray(arrays[f"spikes_{i}"], dtype=np.float32) for i in layers)
        grad_w = tuple(np.asarray(arrays[f"grad_w_{i}"], dtype=np.float32) for i in layers)
        grad_b = tuple(np.asarray(arrays[f"grad_b_{i}"], dtype=np.float32) for i in layers)
        n, shape = self.spec.neurons, self.spec.input_shape()
        if (any(s.shape != shape for s in spikes) or any(g.shape != (n, n) for g in grad_w)
                or any(g.shape != (n,) for g in grad_b)):
            return None
        return ReferenceResult(spikes=spikes, grad_weights=grad_w, grad_biases=grad_b)

    def dump_arrays(self, data: CaseData, spikes: Any, grad_weights: Sequence[Any],
                    grad_biases: Sequence[Any]) -> dict[str, FloatArray]:
        """What ``verify --dump`` writes of one check (a public file format): the first
        layer's input, weight and bias, the adapter's spikes, and its first layer's
        gradients."""
        return {
            "input": data.inputs,
            "weight": data.weights[0],
            "bias": data.biases[0],
            "spikes": np.asarray(spikes, dtype=np.float32),
            "grad_weight": np.asarray(grad_weights[0], dtype=np.float32),
            "grad_bias": np.asarray(grad_biases[0], dtype=np.float32),
        }

    # -- gradients by name -----------------------------------------------------------------
    def parameter_names(self) -> tuple[str, ...]:
        """The names :meth:`~snnbench.plugin.Model.gradients` keys its arrays by."""
        return parameter_names(self.spec.layers)

    def gradients_by_name(self, grad_weights: Sequence[Any],
                          grad_biases: Sequence[Any]) -> dict[str, FloatArray]:
        """Per-layer weight and bias gradients as a dict by :meth:`parameter_names`."""
        out: dict[str, FloatArray] = {}
        for layer, (dw, db) in enumerate(zip(grad_weights, grad_biases, strict=True)):
            out[f"layers.{layer}.weight"] = np.asarray(dw, dtype=np.float32)
            out[f"layers.{layer}.bias"] = np.asarray(db, dtype=np.float32)
        return out

    def gradients_in_order(self, grads: Mapping[str, Any]
                           ) -> tuple[list[FloatArray], list[FloatArray]]:
        """([dW per layer], [db per layer]) from gradients by name; a missing or unknown name
        raises ``ValueError`` naming it (an adapter's fault, reported as its error)."""
        names = self.parameter_names()
        missing = [n for n in names if n not in grads]
        unknown = sorted(str(n) for n in grads if n not in names)
        if missing or unknown:
            raise ValueError("gradients by name do not match the network's parameters: "
                             + "; ".join(part for part in (
                                 f"missing {', '.join(missing)}" if missing else "",
                                 f"unknown {', '.join(unknown)}" if unknown else "") if part))
        layers = range(self.spec.layers)
        return ([np.asarray(grads[f"layers.{i}.weight"], dtype=np.float32) for i in layers],
                [np.asarray(grads[f"layers.{i}.bias"], dtype=np.float32) for i in layers])


@dataclass(frozen=True)
class LinearLifKnobs(Knobs):
    """What an adapter honours of a ``linear-lif`` case. Two defaults are narrow on purpose
    (one surrogate, float32): an adapter says what more it supports."""

    dtypes: tuple[str, ...] = ("float32",)
    resets: tuple[str, ...] = RESET_MODES
    surrogates: tuple[str, ...] = ("fast_sigmoid",)
    detach_reset: tuple[bool, ...] = (True, False)
    bias: tuple[bool, ...] = (True, False)
    input_kinds: tuple[str, ...] = INPUT_KINDS
    #: float32 matmuls only by default: automatic mixed precision is never assumed
    matmul_precisions: tuple[str, ...] = FP32_MATMUL_PRECISIONS
    max_layers: int | None = None

    def reason_unsupported(self, workload: Workload) -> str | None:
        """The first field of the spec these knobs cannot honour, or None."""
        if not isinstance(workload, LinearLif):
            return f"workload kind {workload.kind!r} not supported (supports: {KIND})"
        spec = workload.spec
        refused = first_unsupported((
            ("dtype", spec.dtype, self.dtypes),
            ("reset mode", spec.reset, self.resets),
            ("surrogate", spec.surrogate, self.surrogates),
            ("detach_reset", spec.detach_reset, self.detach_reset),
            ("bias", spec.bias, self.bias),
            ("input kind", spec.input_kind, self.input_kinds),
            ("matmul precision", spec.matmul_precision, self.matmul_precisions),
        ))
        if refused is not None:
            return refused
        if self.max_layers is not None and spec.layers > self.max_layers:
            return f"layers={spec.layers} not supported (at most {self.max_layers})"
        return None


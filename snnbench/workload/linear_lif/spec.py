"""The canonical network every adapter must build, and the data it runs on.

A case is fully described by one frozen :class:`NetworkSpec`. Weights, biases and the input
tensor are generated from the spec's seed with NumPy only (see :func:`make_case_data`), so every
adapter receives bit-identical values whatever its framework, and no adapter re-initialises them.

Canonical dynamics (``shared/design/lif-equivalence.md``), per layer and time step t::

    x[t]      = input[t] @ W.T + b
    v_pre[t]  = beta * v_post[t-1] + x[t]          (v_post[-1] = 0)
    s[t]      = 1 if v_pre[t] >= threshold else 0
    v_post[t] = v_pre[t] - threshold * s[t]        (reset "subtract")
             or v_pre[t] * (1 - s[t])              (reset "zero")

The loss used for gradients is the sum of the last layer's spikes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

# re-exported: shown had its home here, and the plugin API has always offered the neuron's
# choices (ResetMode, SurrogateName, RESET_MODES, SURROGATES) here
from snnbench.errors import UserError, shown as shown
from snnbench.workload.linear_lif import neuron
from snnbench.workload.linear_lif.neuron import (
    RESET_MODES as RESET_MODES,
    SURROGATES as SURROGATES,
    ResetMode as ResetMode,
    SurrogateName as SurrogateName,
)

DType = Literal["float32", "bfloat16", "float16"]
InputKind = Literal["gaussian", "bernoulli"]
#: ``strict``: float32 matmuls; ``tf32``: TF32 allowed (GPU); ``amp-bf16`` / ``amp-fp16``:
#: automatic mixed precision (float32 weights, state and gradients, 16-bit matmuls)
MatmulPrecision = Literal["strict", "tf32", "amp-bf16", "amp-fp16"]

DTYPES: tuple[str, ...] = get_args(DType)
INPUT_KINDS: tuple[str, ...] = get_args(InputKind)
MATMUL_PRECISIONS: tuple[str, ...] = get_args(MatmulPrecision)
#: the matmul precisions that keep every operand float32 (what an adapter supports by default)
FP32_MATMUL_PRECISIONS: tuple[str, ...] = ("strict", "tf32")
#: automatic mixed precision modes → the dtype their matmuls compute in (see :attr:`amp_dtype`)
AMP_COMPUTE_DTYPES: dict[str, str] = {"amp-bf16": "bfloat16", "amp-fp16": "float16"}
#: the menus of the spec's text fields, by field name (what ``__post_init__`` accepts)
CHOICES: dict[str, tuple[str, ...]] = {
    "dtype": DTYPES,
    "reset": RESET_MODES,
    "surrogate": SURROGATES,
    "input_kind": INPUT_KINDS,
    "matmul_precision": MATMUL_PRECISIONS,
}

FloatArray = npt.NDArray[np.float32]
#: the spec's real-valued fields: finite numbers, stored as float
FLOAT_FIELDS: tuple[str, ...] = ("beta", "threshold", "surrogate_slope", "input_std", "input_rate")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class SpecError(UserError, ValueError):
    """A spec field has an impossible value; the message names the field."""


@dataclass(frozen=True)
class NetworkSpec:
    """One benchmark case: ``layers`` × (Linear(n, n) + LIF), batch B, T time steps.

    Field names are the ones used in config files and in result tables.
    """

    neurons: int = 512
    batch_size: int = 16
    time_steps: int = 500
    layers: int = 1
    dtype: DType = "float32"
    # the neuron's defaults are stated in snnbench.workload.linear_lif.neuron (the fused kernel
    # shares them)
    beta: float = neuron.BETA
    threshold: float = neuron.THRESHOLD
    reset: ResetMode = neuron.RESET
    surrogate: SurrogateName = neuron.SURROGATE
    surrogate_slope: float = neuron.SURROGATE_SLOPE
    detach_reset: bool = neuron.DETACH_RESET
    bias: bool = True
    input_kind: InputKind = "gaussian"
    input_std: float = 1.0
    input_rate: float = 0.1
    seed: int = 0
    matmul_precision: MatmulPrecision = "strict"

    def __post_init__(self) -> None:
        # every field is type-checked here, not where it is used: a config value of the wrong
        # type or a NaN must stop the sweep before it starts, not turn every case into an error
        for name in ("neurons", "batch_size", "time_steps", "layers"):
            value = getattr(self, name)
            if not _is_int(value) or value <= 0:
                raise SpecError(f"{name} must be a positive integer, got {shown(value)}")
        if not _is_int(self.seed) or self.seed < 0:
            raise SpecError(f"seed must be an integer ≥ 0, got {shown(self.seed)}")
        for name, allowed in CHOICES.items():
            value = getattr(self, name)
            if not isinstance(value, str) or value not in allowed:
                raise SpecError(f"{name} must be one of {', '.join(allowed)}, got {shown(value)}")
        for name in ("detach_reset", "bias"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise SpecError(f"{name} must be true or false, got {shown(value)}")
        for name in FLOAT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SpecError(f"{name} must be a number, got {shown(value)}")
            if not math.isfinite(value):
                raise SpecError(f"{name} must be a finite number, got {shown(value)}")
            # 1 and 1.0 are the same network: one type, so that equal specs hash equally
            object.__setattr__(self, name, float(value))
        if not 0.0 <= self.beta <= 1.0:
            raise SpecError(f"beta must be in [0, 1], got {self.beta!r}")
        if self.threshold <= 0:
            raise SpecError(f"threshold must be > 0, got {self.threshold!r}")
        if self.surrogate_slope <= 0:
            raise SpecError(f"surrogate_slope must be > 0, got {self.surrogate_slope!r}")
        if self.input_std <= 0:
            raise SpecError(f"input_std must be > 0, got {self.input_std!r}")
        if not 0.0 <= self.input_rate <= 1.0:
            raise SpecError(f"input_rate must be in [0, 1], got {self.input_rate!r}")
        if self.amp_dtype is not None and self.dtype != "float32":
            # AMP *is* float32 weights and state with 16-bit matmuls: on 16-bit weights it
            # would mean nothing (a plain bfloat16 case is dtype=bfloat16, matmul "strict")
            raise SpecError(f"matmul_precision {self.matmul_precision} keeps weights and state "
                            f"float32: it needs dtype float32, got {self.dtype}")

    @property
    def amp_dtype(self) -> str | None:
        """The dtype the matmuls compute in under automatic mixed precision, else None.

        Under ``amp-bf16`` / ``amp-fp16`` weights, membrane state and gradients are float32;
        only the Linear layers run in 16 bits (inputs, weights and bias rounded, float32
        accumulation, the output rounded once), as under ``torch.autocast``.
        """
        return AMP_COMPUTE_DTYPES.get(self.matmul_precision)

    # -- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict of every field."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        """Canonical JSON (sorted keys): equal specs give equal strings."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NetworkSpec:
        """Build a spec; unknown keys raise :class:`SpecError` (a typo is never ignored)."""
        if not isinstance(data, Mapping):
            raise SpecError(f"a network spec must be a table of fields, got {shown(data)}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(str(k) for k in set(data) - known)
        if unknown:
            raise SpecError(f"unknown network field(s): {', '.join(unknown)}")
        return cls(**data)

    def replace(self, **changes: Any) -> NetworkSpec:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @property
    def case_id(self) -> str:
        """Short stable hash of the whole spec: two rows with equal case_id ran the same case."""
        return hashlib.sha1(self.to_json().encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        """Human-readable case label, e.g. ``n=512 B=16 T=500 L=1 float32 subtract``
        (the matmul precision is appended when it is not ``strict``)."""
        precision = "" if self.matmul_precision == "strict" else f" {self.matmul_precision}"
        return (
            f"n={self.neurons} B={self.batch_size} T={self.time_steps} L={self.layers} "
            f"{self.dtype} {self.reset}{precision}"
        )

    def input_shape(self) -> tuple[int, int, int]:
        """(T, B, n): time-major, the layout of :attr:`CaseData.inputs`."""
        return (self.time_steps, self.batch_size, self.neurons)


@dataclass(frozen=True)
class CaseData:
    """Framework-neutral arrays for one case, all float32 and time-major.

    ``weights[l]`` is (out, in) = (n, n) like ``torch.nn.Linear.weight``; ``biases[l]`` is (n,)
    (zeros when the spec has no bias, and then adapters must build bias-free layers).
    Lower-precision dtypes are produced by each adapter casting these float32 values.
    """

    inputs: FloatArray
    weights: tuple[FloatArray, ...]
    biases: tuple[FloatArray, ...]
    spec: NetworkSpec = field(repr=False)


def make_case_data(spec: NetworkSpec) -> CaseData:
    """Generate the case's weights, biases and input from ``spec.seed`` (NumPy PCG64 only).

    Weights and biases follow PyTorch's ``nn.Linear`` default range U(-1/√n, 1/√n); the
    input is Gaussian current N(0, input_std²) or Bernoulli spikes with ``input_rate``.
    """
    rng = np.random.Generator(np.random.PCG64(spec.seed))
    bound = 1.0 / np.sqrt(spec.neurons)
    weights: list[FloatArray] = []
    biases: list[FloatArray] = []
    for _ in range(spec.layers):
        w = rng.uniform(-bound, bound, size=(spec.neurons, spec.neurons)).astype(np.float32)
        b = rng.uniform(-bound, bound, size=(spec.neurons,)).astype(np.float32)
        weights.append(w)
        biases.append(b if spec.bias else np.zeros(spec.neurons, dtype=np.float32))
    shape = spec.input_shape()
    if spec.input_kind == "gaussian":
        inputs = (rng.standard_normal(size=shape) * spec.input_std).astype(np.float32)
    else:
        inputs = (rng.random(size=shape) < spec.input_rate).astype(np.float32)
    return CaseData(inputs=inputs, weights=tuple(weights), biases=tuple(biases), spec=spec)

"""Firing rate and synaptic operations (SynOps) of one forward pass, NeuroBench style.

Definitions (NeuroBench, ``neurobench.metrics.workload.SynapticOperations`` and
``neurobench/metrics/utils/layers``), for a Linear layer with weight ``W`` (out × in) fed by an
input ``x`` of shape (T, B, in), one time step at a time:

* **Dense** = T · B · in · out: every input × fan-out pair, zero or not — the work of hardware
  that exploits no sparsity.
* **Effective** ops count only pairs whose input *and* weight are non-zero:
  Σ_t Σ_b Σ_j [x[t,b,j] ≠ 0] · nnz(W[:, j]). Each input spike costs its fan-out.
* An input whose values all lie in {-1, 0, 1} is a *spike* input and its effective ops are
  **Effective_ACs** (accumulates: adding a weight); any other input (the Gaussian current fed to
  layer 1) makes them **Effective_MACs** (multiply-accumulates).
* Biases are not synaptic operations. The LIF update is not one either (NeuroBench counts it
  separately as membrane updates); the output spikes of the last layer drive no synapse.
* NeuroBench divides totals by the number of samples (the batch). snnbench goes one step further
  and reports **per sample and per time step** (÷ B·T), the ``synops_per_step`` metric, so cases
  with different T or B compare directly. ``synops_per_step`` = (Effective_MACs +
  Effective_ACs) / (B·T); the split is kept in :class:`SynOps`.

Firing rate = spikes per neuron per time step: total spikes / (T · B · neurons), over all layers.

For the canonical network (``layers`` × Linear(n, n) + LIF), layer 1 reads the input tensor and
layer l > 1 reads the spikes of layer l-1. With the default Gaussian input a one-layer network
has only MACs; with Bernoulli input, or from layer 2 on, the ops are spike-driven ACs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from snnbench.workload.base import Work

if TYPE_CHECKING:
    from snnbench.workload.linear_lif.spec import NetworkSpec

Array = npt.NDArray[np.floating] | npt.NDArray[np.integer] | npt.NDArray[np.bool_]


@dataclass(frozen=True)
class LayerOps:
    """Synaptic operations of one layer over a whole (T, B) forward pass."""

    dense: int
    effective: int
    #: True: the input was spikes, the effective ops are ACs; False: MACs
    spiking_input: bool


@dataclass(frozen=True)
class SynOps:
    """Synaptic operations of a forward pass over T time steps and B samples."""

    layers: tuple[LayerOps, ...]
    time_steps: int
    batch_size: int

    @property
    def effective_macs(self) -> int:
        """Effective multiply-accumulates (layers fed by non-spike input), whole pass."""
        return sum(layer.effective for layer in self.layers if not layer.spiking_input)

    @property
    def effective_acs(self) -> int:
        """Effective accumulates (layers fed by spikes), whole pass."""
        return sum(layer.effective for layer in self.layers if layer.spiking_input)

    @property
    def dense(self) -> int:
        """All synaptic operations, zeros included, whole pass."""
        return sum(layer.dense for layer in self.layers)

    @property
    def per_sample(self) -> dict[str, float]:
        """NeuroBench's figures: Effective_MACs, Effective_ACs and Dense per sample (÷ B)."""
        b = float(self.batch_size)
        return {
            "Effective_MACs": self.effective_macs / b,
            "Effective_ACs": self.effective_acs / b,
            "Dense": self.dense / b,
        }

    @property
    def per_step(self) -> float:
        """``synops_per_step``: effective ops (MACs + ACs) per sample per time step."""
        return (self.effective_macs + self.effective_acs) / float(self.batch_size * self.time_steps)

    @property
    def acs_per_step(self) -> float:
        """Effective ACs per sample per time step."""
        return self.effective_acs / float(self.batch_size * self.time_steps)

    @property
    def macs_per_step(self) -> float:
        """Effective MACs per sample per time step."""
        return self.effective_macs / float(self.batch_size * self.time_steps)

    @property
    def dense_per_step(self) -> float:
        """Dense ops per sample per time step."""
        return self.dense / float(self.batch_size * self.time_steps)


def _check_tbn(name: str, x: Array) -> None:
    if x.ndim != 3:
        raise ValueError(f"{name} must be (T, B, n), got shape {x.shape}")


def is_spike_input(x: Array) -> bool:
    """NeuroBench's test: every value is -1, 0 or 1 (an empty array counts as spikes)."""
    values = np.asarray(x)
    return bool(np.all((values == 0) | (values == 1) | (values == -1)))


def layer_synops(inputs: Array, fan_out: int | Array) -> LayerOps:
    """Synaptic operations of one Linear layer over a (T, B, in) input.

    ``fan_out`` is the layer's output size (a dense weight matrix: every weight non-zero) or the
    weight matrix itself (out, in), whose zero entries then cost nothing.
    """
    _check_tbn("inputs", inputs)
    t, b, n_in = inputs.shape
    if isinstance(fan_out, (int, np.integer)):
        n_out = int(fan_out)
        if n_out <= 0:
            raise ValueError(f"fan_out must be positive, got {n_out}")
        per_input = np.full(n_in, n_out, dtype=np.int64)
    else:
        weight = np.asarray(fan_out)
        if weight.ndim != 2 or weight.shape[1] != n_in:
            raise ValueError(f"weight must be (out, {n_in}), got shape {weight.shape}")
        n_out = weight.shape[0]
        per_input = np.count_nonzero(weight, axis=0).astype(np.int64)
    active = np.count_nonzero(np.asarray(inputs), axis=(0, 1)).astype(np.int64)
    return LayerOps(
        dense=int(t * b * n_in * n_out),
        effective=int(active @ per_input),
        spiking_input=is_spike_input(inputs),
    )


def synops(
    inputs: Array,
    layer_spikes: Sequence[Array],
    layer_sizes: Sequence[int],
    weights: Sequence[Array] | None = None,
) -> SynOps:
    """Synaptic operations of a stack of Linear+LIF layers over one forward pass.

    ``inputs``: the (T, B, n_in) input of layer 1; ``layer_spikes``: each layer's output spikes
    (T, B, n_l) — the last layer's may be given or left out, it feeds no synapse;
    ``layer_sizes``: each layer's output size; ``weights``: optional (out, in) matrices, so that
    zero weights are not counted (the canonical network has none).
    """
    n_layers = len(layer_sizes)
    if n_layers == 0:
        raise ValueError("layer_sizes is empty")
    if len(layer_spikes) not in (n_layers - 1, n_layers):
        raise ValueError(
            f"need spikes of {n_layers - 1} or {n_layers} layers, got {len(layer_spikes)}"
        )
    if weights is not None and len(weights) != n_layers:
        raise ValueError(f"need {n_layers} weight matrices, got {len(weights)}")
    _check_tbn("inputs", inputs)
    feeds = [inputs, *layer_spikes[: n_layers - 1]]
    ops = []
    for index, (x, size) in enumerate(zip(feeds, layer_sizes, strict=True)):
        _check_tbn(f"layer {index} input", x)
        ops.append(layer_synops(x, weights[index] if weights is not None else size))
    t, b, _ = inputs.shape
    return SynOps(layers=tuple(ops), time_steps=int(t), batch_size=int(b))


def layer_firing_rates(layer_spikes: Sequence[Array]) -> list[float]:
    """Spikes per neuron per time step, for each layer's (T, B, n) spike tensor."""
    rates = []
    for index, s in enumerate(layer_spikes):
        _check_tbn(f"layer {index} spikes", s)
        rates.append(float(np.asarray(s, dtype=np.float64).mean()) if s.size else 0.0)
    return rates


def firing_rate(layer_spikes: Sequence[Array]) -> float:
    """Spikes per neuron per time step over all layers: total spikes / (T · B · Σ n_l)."""
    if not layer_spikes:
        raise ValueError("no spike tensors given")
    total = 0.0
    slots = 0
    for index, s in enumerate(layer_spikes):
        _check_tbn(f"layer {index} spikes", s)
        total += float(np.asarray(s, dtype=np.float64).sum())
        slots += s.size
    return total / slots if slots else 0.0


def synops_per_step(inputs: Array, layer_spikes: Sequence[Array], spec: NetworkSpec) -> float:
    """The ``synops_per_step`` metric of a canonical case: effective ops per sample per step.

    ``inputs`` and ``layer_spikes`` as for :func:`synops`; the layer sizes come from ``spec``
    (``spec.layers`` layers of ``spec.neurons``). The canonical weights are drawn from a uniform
    distribution and have no zeros, so every active input costs the full fan-out.
    """
    return synops(inputs, layer_spikes, [spec.neurons] * spec.layers).per_step


#: bytes per element of the weights, by dtype (the weight traffic of a phase)
DTYPE_BYTES: dict[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2}


def phase_work(phase: str, neurons: int, batch_size: int, time_steps: int, layers: int,
               dtype: str) -> Work:
    """The dense matrix-product FLOPs and the weight traffic of one iteration of ``phase``
    (``forward``, ``backward`` or ``step`` = both) of the canonical network."""
    gemm = 2.0 * neurons * neurons * batch_size * time_steps
    weights = float(neurons * neurons * DTYPE_BYTES.get(dtype, 4))
    # the weight gradient is kept in the weights' dtype at least
    forward = Work(layers * gemm, layers * weights)
    # every layer's weight gradient; the input gradient of every layer but the first
    backward = Work((2 * layers - 1) * gemm, 2 * layers * weights)
    if phase == "forward":
        return forward
    if phase == "backward":
        return backward
    if phase == "step":
        return Work(forward.flops + backward.flops, forward.bytes + backward.bytes)
    raise ValueError(f"no work model for phase {phase!r}")

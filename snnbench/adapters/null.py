"""``null``: a harness probe that does no work, so its step time is the harness's own overhead.

Its model's forward, backward and step do nothing; :meth:`NullModel.synchronize` waits for the
device (``torch.cuda.synchronize`` on CUDA, nothing on the CPU). A timed ``null`` sample is
therefore what every other sample pays on top of its work: the timer reads, the method calls,
the gradient reset and the two synchronizations of a timed region. It is the smallest time the
harness can resolve; the report gives it as a share of the run's smallest case
(:func:`snnbench.store.overhead.harness_overhead`).

It computes no network, so it is never verified against the reference (``verifiable=False``:
its rows say so in their message, never silently) and it is left out of every ranking, plot,
target and regression gate. A run adds one ``null`` case by itself, at its smallest case per
device, when ``[run] overhead_probe`` is true (the shipped configs set it); ``--adapters null``
runs it at every case like any adapter.

It is written against the plugin API v2 (:mod:`snnbench.api`): the harness runs it without the
v1 shim, as it runs a third-party plugin of v2.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from snnbench import adapter as v1, api
from snnbench.workload.graph.nodes import NODE_TYPES
from snnbench.workload.linear_lif.spec import (
    DTYPES,
    MATMUL_PRECISIONS,
    SURROGATES,
    FloatArray,
)

#: the message of every null row: why it was not verified and what its figure means
PROBE_NOTE = "harness probe: does no work, not verified; its time is the harness overhead"


def no_network_capabilities(note: str) -> v1.Capabilities:
    """Every spec, on CPU or CUDA, neither exact nor verified: an adapter that runs no network
    (the GEMM floor, of the plugin API v1); ``note`` says what it is instead."""
    return v1.Capabilities(
        dtypes=DTYPES,
        surrogates=SURROGATES,
        matmul_precisions=MATMUL_PRECISIONS,
        exact_dynamics=False,
        exact_gradient=False,
        approximation_note=note,
        verifiable=False,
    )


def zero_gradients(n: int, layers: int) -> tuple[list[FloatArray], list[FloatArray]]:
    """Float32 zeros of the weight and bias gradients of ``layers`` Linear(n, n) layers: what a
    model that computes no network gradients (this probe, the GEMM floor) reports."""
    return ([np.zeros((n, n), dtype=np.float32) for _ in range(layers)],
            [np.zeros(n, dtype=np.float32) for _ in range(layers)])


class NullModel(api.Model):
    """A model whose every call returns at once; only :meth:`synchronize` waits (on CUDA)."""

    def __init__(self, workload: api.Workload, data: Any, device: str) -> None:
        self.workload = workload
        self.data = data
        self.shape = workload.output_shape()
        self._sync: Any = None
        if device == "cuda":
            import torch

            self._sync = torch.cuda.synchronize

    def forward(self) -> Any:
        return None

    def backward(self, handle: Any) -> None:
        return None

    def step(self) -> Any:
        # not forward() + backward(): a probe of the harness alone, one call like a fused step
        return None

    def zero_grad(self) -> None:
        return None

    def synchronize(self) -> None:
        if self._sync is not None:
            self._sync()

    def spikes(self, handle: Any) -> FloatArray:
        """Zeros of the output shape: the probe computes no spikes."""
        return np.zeros(self.shape, dtype=np.float32)

    def gradients(self) -> dict[str, FloatArray]:
        """Zeros of the gradient shapes, by parameter name: the probe computes no gradients."""
        if isinstance(self.workload, api.LinearLif):
            spec = self.workload.spec
            return self.workload.gradients_by_name(*zero_gradients(spec.neurons, spec.layers))
        # a graph's arrays by ``node.field`` (GraphData.params)
        params = getattr(self.data, "params", {})
        return {name: np.zeros_like(value, dtype=np.float32) for name, value in params.items()}


class NullAdapter(api.Adapter):
    """The harness-overhead probe (see the module docstring)."""

    name = "null"
    library = "snnbench"
    module = "snnbench"
    # no library to set up: the harness applies nothing, and the CPU probe imports nothing
    framework = "numpy"
    description = "does nothing but synchronize: the harness's own overhead per sample"

    def capabilities(self, variant: str) -> api.Capabilities:
        # every Linear+LIF case and every graph, on CPU or CUDA; neither exact nor verified
        knobs = api.LinearLifKnobs(dtypes=DTYPES, surrogates=SURROGATES,
                                   matmul_precisions=MATMUL_PRECISIONS)
        graphs = api.GraphKnobs(node_kinds=tuple(NODE_TYPES), surrogates=SURROGATES)
        return api.Capabilities(workloads={"linear-lif": knobs, "nir-graph": graphs},
                                exact_dynamics=False,
                                exact_gradient=False, approximation_note=PROBE_NOTE,
                                verifiable=False)

    def check_variant(self, variant: str, device: str) -> None:
        if device != "cuda":
            return
        try:
            import torch
        except Exception as exc:  # no torch: nothing here can synchronize a CUDA device
            raise api.AdapterUnavailable(
                f"the CUDA probe synchronizes through torch: {exc}") from exc
        if not torch.cuda.is_available():
            raise api.AdapterUnavailable("no CUDA device visible to torch")

    def build(self, workload: api.Workload, data: Any, device: str, variant: str) -> api.Model:
        return NullModel(workload, data, device)

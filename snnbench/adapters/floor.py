"""``floor``: the workload's GEMMs alone, a lower bound for every adapter in the same run.

Not a network: it computes no LIF (``verifiable=False``), only the matrix products that any
implementation of the canonical network must perform, at the case's shape, dtype and matmul
precision, through the fastest GEMM path torch offers (the one the ``fused`` adapter uses,
:mod:`snnbench.fused.gemm`: cuBLAS on CUDA, oneDNN for float32 on the CPU, where torch's default
MKL path runs at half the speed on AMD CPUs):

* forward phase: Y = X Wᵀ (+ b) over all T·B rows, per layer;
* backward phase: dW = dYᵀ X per layer, and dX = dY W for every layer whose input needs a
  gradient, i.e. layers 2..L (the network input needs none, so no adapter computes dX for
  layer 1 and neither does the floor; otherwise a fused adapter could run below its "floor").
  dY is a fixed Gaussian tensor (dense values: no zeros or denormals that could speed a GEMM);
* step: both.

Under automatic mixed precision (``amp-bf16`` / ``amp-fp16``) the GEMMs run in the 16-bit
compute dtype on operands already in it: the casts of the float32 weights and activations that
an AMP network also pays are left out, as the LIF scans are.

The harness divides each adapter's step time by this one (``floor_ratio``). The element-wise
LIF scans are not part of the floor: it is the GEMM ceiling of the hardware, not of a design.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from snnbench.adapter import Adapter, Capabilities, Model
from snnbench.workload.linear_lif.spec import (
    CaseData,
    FloatArray,
    NetworkSpec,
)

from .null import no_network_capabilities, zero_gradients


class FloorModel(Model):
    """Runs the case's GEMMs with :mod:`snnbench.fused.gemm`."""

    def __init__(self, spec: NetworkSpec, data: CaseData, device: str) -> None:
        import torch

        from snnbench.fused import gemm

        from ._torch_common import TORCH_DTYPES, torch_dtype

        self.torch = torch
        self.gemm = gemm
        self.device = torch.device(device)
        self.shape = spec.input_shape()
        dtype = torch_dtype(spec) if spec.amp_dtype is None else TORCH_DTYPES[spec.amp_dtype]
        rows = spec.time_steps * spec.batch_size
        n = spec.neurons

        def tensor(a: FloatArray) -> Any:
            return torch.from_numpy(np.ascontiguousarray(a)).to(device=self.device, dtype=dtype)

        self.x = tensor(data.inputs.reshape(rows, n))
        self.weights = [tensor(w) for w in data.weights]
        self.biases = [tensor(b) for b in data.biases] if spec.bias else None
        rng = np.random.Generator(np.random.PCG64(spec.seed + 1))
        self.dy = tensor(rng.standard_normal((rows, n)).astype(np.float32))
        self.grads: list[Any] = []

    def forward(self) -> Any:
        # every layer's input has the case's shape; its values do not change a GEMM's cost
        return [
            self.gemm.linear(self.x, w, self.biases[layer] if self.biases is not None else None)
            for layer, w in enumerate(self.weights)
        ]

    def backward(self, handle: Any) -> None:
        grads = []
        for layer, w in enumerate(self.weights):
            grads.append(self.gemm.grad_weight(self.dy, self.x))
            if layer > 0:  # layer 1's input is the network input: no gradient needed
                grads.append(self.gemm.grad_input(self.dy, w))
        self.grads = grads

    def zero_grad(self) -> None:
        """Drop the previous backward's results (as the networks drop their gradients)."""
        self.grads = []

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def spikes(self, handle: Any) -> FloatArray:
        """Zeros of the output shape: the floor computes no spikes."""
        return np.zeros(self.shape, dtype=np.float32)

    def gradients(self) -> tuple[list[FloatArray], list[FloatArray]]:
        """Zeros of the gradient shapes: the floor computes no network gradients."""
        return zero_gradients(self.shape[2], len(self.weights))


class FloorAdapter(Adapter):
    """The GEMM floor of each case (see the module docstring)."""

    name = "floor"
    library = "torch"
    description = "GEMMs of the workload alone (fwd Y=XWᵀ+b; bwd dW, dX): the speed floor"

    def capabilities(self, variant: str) -> Capabilities:
        return no_network_capabilities("GEMM floor, not a network")

    def check_variant(self, variant: str, device: str) -> None:
        """CPU: load the fused adapter's compiled library, whose transpose the float32 dW
        GEMM uses (:func:`snnbench.fused.gemm.grad_weight`), so the floor takes the same GEMM
        path as ``fused``; without it (no compiler) the floor keeps oneDNN's own copy."""
        if device != "cpu":
            return
        import contextlib

        from snnbench.fused.cpu import BuildError, build

        with contextlib.suppress(BuildError):
            build()

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        self.check_variant(variant, device)
        return FloorModel(spec, data, device)

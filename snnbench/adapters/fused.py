"""``fused``: snnbench's own fused Linear + LIF (one GEMM + one compiled scan per layer).

The reference fast backend (``snnbench.fused``): on CUDA, cuBLAS GEMMs and Triton scan kernels;
on the CPU, MKL/oneDNN GEMMs and a small C++ scan compiled at first use (in
:meth:`FusedAdapter.check_variant`, so a failed build is an ``unavailable`` row with the
compiler's message, and the one-off compilation is never inside a timed phase). Its forward is
bit-identical to the NumPy reference given the same GEMM output; see docs/fused.md.

Variant ``cudagraph`` (CUDA only) replays the same layers' forward and backward as two CUDA
graphs. At small n the GPU work of a whole step is tens of microseconds, about what the CPU
spends launching its handful of kernels and building the autograd graph; a replay removes that
CPU cost and nothing else. Variant ``chunked`` (CUDA only) runs the time-chunked Triton scans
(the same bits, fewer steps of memory latency: docs/fused.md), to be timed beside ``default``.

The registered adapter is :class:`Fused` (plugin API v2): ``linear-lif`` cases through
:class:`FusedAdapter` (plugin API v1) unchanged, and, in the ``default`` variant,
``nir-graph`` cases that are a chain of Affine → LIF layers mapping exactly onto fused layers
(:mod:`.fused_graph`; anything else a ``skipped`` row with the reason).
"""

from __future__ import annotations

from typing import Any

from snnbench import plugin
from snnbench.adapter import (
    Adapter,
    AdapterUnavailable,
    Capabilities,
    Model,
    distribution_version,
    import_or_unavailable,
)
from snnbench.workload import GraphKnobs, NirGraph
from snnbench.workload.graph import GraphData
from snnbench.workload.linear_lif.spec import (
    DTYPES,
    MATMUL_PRECISIONS,
    SURROGATES,
    CaseData,
    NetworkSpec,
)

from ._declared import FUSED_GRAPH_KNOBS
from ._workloads import WorkloadsAdapter


class FusedAdapter(Adapter):
    """snnbench.fused.FusedLinearLIF layers (functional form) stacked ``spec.layers`` times."""

    name = "fused"
    library = "snnbench"
    module = "snnbench.fused"
    #: not a requirement of snnbench or of a CPU torch: its presence decides the CUDA variants
    depends_on = ("triton",)
    description = "snnbench's fused Linear+LIF: one GEMM + Triton (CUDA) / C++ (CPU) scan"
    #: chunked: the time-chunked Triton scans (docs/fused.md), CUDA only, to time beside default
    variants = ("default", "cudagraph", "chunked")

    def version(self) -> str:
        """snnbench's version with the torch (and triton) it runs on."""
        torch = import_or_unavailable("torch")  # a broken torch is "unavailable", not a crash
        own = distribution_version(self.library)
        triton = distribution_version("triton")
        extra = f", triton {triton}" if triton != "unknown" else ""
        return f"{own} (torch {torch.__version__}{extra})"

    def capabilities(self, variant: str) -> Capabilities:
        return Capabilities(
            devices=("cuda",) if variant in ("cudagraph", "chunked") else ("cpu", "cuda"),
            dtypes=DTYPES,
            surrogates=SURROGATES,
            # AMP (bf16/fp16 GEMMs, float32 scans) is checked on the CPU and in the Triton
            # interpreter; CUDA graph capture of it is not, so cudagraph keeps float32 matmuls
            matmul_precisions=(MATMUL_PRECISIONS if variant != "cudagraph"
                               else ("strict", "tf32")),
        )

    def check_variant(self, variant: str, device: str) -> None:
        """CUDA: Triton must import and a GPU be visible. CPU: compile (or load) the scan."""
        if variant not in self.variants:
            raise AdapterUnavailable(f"unknown variant {variant!r} (one of {self.variants})")
        if device == "cuda" or variant in ("cudagraph", "chunked"):
            from ._torch_common import cuda_unavailable_reason

            reason = cuda_unavailable_reason(device, "CUDA graphs" if variant == "cudagraph"
                                             else "the Triton kernels")
            if reason:
                raise AdapterUnavailable(reason)
            try:
                import triton  # noqa: F401
            except Exception as exc:
                raise AdapterUnavailable(
                    f"the CUDA path needs triton: {type(exc).__name__}: {exc}"
                ) from exc
            return
        from snnbench.fused.cpu import BuildError, build

        try:
            build()
        except BuildError as exc:
            raise AdapterUnavailable(f"the CPU scan could not be built: {exc}") from exc

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        import torch

        from snnbench.fused import LIFParams, fused_linear_lif

        from ._torch_common import (
            TORCH_DTYPES,
            TorchModel,
            cuda_graphed_model,
            input_tensor,
            make_linears,
        )

        self.check_variant(variant, device)  # no-op once built; makes build() usable alone
        # plain nn.Linear parameters (float32 under AMP): the fused layer does its own casts
        linears = make_linears(spec.replace(matmul_precision="strict"), data, device)
        compute = TORCH_DTYPES[spec.amp_dtype] if spec.amp_dtype is not None else None
        params = LIFParams(
            beta=float(spec.beta),
            threshold=float(spec.threshold),
            reset=spec.reset,
            surrogate=spec.surrogate,
            slope=float(spec.surrogate_slope),
            detach_reset=spec.detach_reset,
        )
        backend = "triton" if device == "cuda" else "cpu"
        scan = "chunked" if variant == "chunked" else "default"

        def network(inp: Any) -> Any:
            h = inp
            for lin in linears:
                h = fused_linear_lif(h, lin.weight, lin.bias, params, backend,  # type: ignore[arg-type]
                                     compute_dtype=compute, scan=scan)
            return h

        x = input_tensor(spec, data, device)
        if variant == "cudagraph":
            return cuda_graphed_model(network, linears, x, device)
        model: Model = TorchModel(network, linears, x, device,
                                  grad_scaler=compute == torch.float16)
        return model


class Fused(WorkloadsAdapter):
    """The registered ``fused`` adapter (plugin API v2): ``linear-lif`` through
    :class:`FusedAdapter`, both variants; ``nir-graph`` through :mod:`.fused_graph` in the
    ``default`` variant: a chain of Affine → LIF layers taking the canonical step."""

    linear_lif = FusedAdapter

    def graph_knobs(self, variant: str) -> GraphKnobs | None:
        return FUSED_GRAPH_KNOBS if variant == "default" else None

    def build_graph(self, workload: NirGraph, data: GraphData, device: str,
                    variant: str) -> plugin.Model:
        from .fused_graph import FusedGraphModel

        self.check_variant(variant, device)  # the CPU scan built (or loaded) first
        return FusedGraphModel(workload, data, device)

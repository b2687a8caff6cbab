"""``torch-compile`` and ``torch-cudagraph``: the plain PyTorch reference network, sped up by
PyTorch's own tools, so their gain over ``torch`` is measured on the identical computation.

* ``torch-compile``: ``torch.compile`` (Inductor, default mode) of the whole reference network.
  Dynamo unrolls the Python loop over T, so compilation grows with T (on a 2-core CPU about 4 s
  at T=10 and 20 s at T=50); it happens lazily, on the first call, and is reported as the
  harness's first-call time, not as a timed sample. The worker runs with Inductor's on-disk
  caches off (``COLD_COMPILE_ENV``), so that time is a cold compile on every run.
* ``torch-cudagraph``: the reference's forward and backward captured as two CUDA graphs with
  ``torch.cuda.make_graphed_callables`` (warm-up on a side stream, static input, outputs and
  gradient buffers; the input of a case never changes, so replays copy nothing). Every timed
  forward replays the forward graph and every backward the backward graph, which removes the
  per-op launch overhead of the Python loop. CUDA only.
"""

from __future__ import annotations

from snnbench.adapter import Adapter, AdapterUnavailable, Capabilities, CaseSkipped, Model
from snnbench.spec import DTYPES, SURROGATES, CaseData, NetworkSpec

#: worker environment for compiled adapters: no on-disk Inductor / AOT-autograd cache, so the
#: first call is a cold compile on every run, not a cache hit that depends on earlier runs
COLD_COMPILE_ENV: dict[str, str] = {
    "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
    "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
}


class TorchCompileAdapter(Adapter):
    """``torch.compile`` of :func:`~snnbench.adapters.torch_ref.build_reference_network`."""

    name = "torch-compile"
    library = "torch"
    framework = "torch"
    description = "torch.compile of the plain PyTorch loop (compile time in first call)"

    def capabilities(self, variant: str) -> Capabilities:
        return Capabilities(dtypes=DTYPES, surrogates=SURROGATES)

    def worker_env(self, variant: str) -> dict[str, str]:
        return dict(COLD_COMPILE_ENV)

    def check_variant(self, variant: str, device: str) -> None:
        from snnbench.adapters._torch_common import compile_unavailable_reason

        reason = compile_unavailable_reason(device)
        if reason:
            raise AdapterUnavailable(reason)

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        import torch

        from snnbench.adapters._torch_common import TorchModel, input_tensor
        from snnbench.adapters.torch_ref import build_reference_network

        network, linears = build_reference_network(spec, data, device)
        # A fresh dynamo cache: every build compiles (its cost is the first call's), and no
        # earlier build's guards count towards the recompile limit (past it dynamo runs eager).
        torch._dynamo.reset()
        compiled = torch.compile(network)
        return TorchModel(compiled, linears, input_tensor(spec, data, device), device)


class TorchCudaGraphAdapter(Adapter):
    """The reference network's forward and backward replayed as CUDA graphs."""

    name = "torch-cudagraph"
    library = "torch"
    framework = "torch"
    description = "plain PyTorch loop captured as CUDA graphs (forward + backward), CUDA only"

    def capabilities(self, variant: str) -> Capabilities:
        return Capabilities(devices=("cuda",), dtypes=DTYPES, surrogates=SURROGATES)

    def check_variant(self, variant: str, device: str) -> None:
        import torch

        from snnbench.adapters._torch_common import cuda_unavailable_reason

        reason = cuda_unavailable_reason(device, "CUDA graphs")
        if reason and device == "cuda" and torch.version.cuda is None:
            # say why, not only that no GPU is visible
            reason = f"CUDA graphs need a CUDA build of torch ({torch.__version__} is CPU-only)"
        if reason:
            raise AdapterUnavailable(reason)

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        from snnbench.adapters._torch_common import cuda_graphed_model, input_tensor
        from snnbench.adapters.torch_ref import build_reference_network

        if not device.startswith("cuda"):
            raise CaseSkipped("torch-cudagraph runs on CUDA only")
        network, linears = build_reference_network(spec, data, device)
        return cuda_graphed_model(network, linears, input_tensor(spec, data, device), device)

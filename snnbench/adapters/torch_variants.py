"""``torch-compile`` and ``torch-cudagraph``: the plain PyTorch reference network, sped up by
PyTorch's own tools, so their gain over ``torch`` is measured on the identical computation.

* ``torch-compile``: ``torch.compile`` (Inductor, default mode) of the reference's LIF time step,
  in chunks of :data:`COMPILE_CHUNK_STEPS` steps (``_torch_common.compiled_time_loop``): one
  compiled graph runs 25 consecutive steps, and a Python loop calls it ``ceil(T/25)`` times
  with the membrane carried. The Linear layers' GEMMs run eagerly, one per layer for all T
  steps as in ``torch``; inside a compiled graph Inductor would call the same BLAS routine.

  Why chunks (measured on the 2-core CPU at n=512, T=500, B=16, one thread; the table is in
  docs/adapters-torchlibs.md): compiling the whole network, as this adapter first did, makes
  Dynamo unroll the loop over T, and compilation grows with T (21 s at T=50, 39 s at T=100,
  over 15 min at T=500 on the loaded CPU; on an H100 box it had not finished after 200 s).
  Compiling the step function alone takes 3–5 s whatever T is, but each of the 2·T calls of a
  training step (forward, and backward through one compiled autograd node per step) pays
  dynamo's guards, the AOT-autograd wrappers and a kernel launch: it gains ~8 % over eager on
  the CPU, and on a GPU, where the eager loop is already bound by per-op launch overhead, it
  would stay launch-bound. A chunk of K steps compiles in time proportional to K, not T, and
  Inductor fuses its K steps into one forward and one backward kernel, so the per-call costs
  are paid 2·T/K times: from K=10 on, the CPU step time is the whole-network compile's (the
  GEMMs dominate, ~110 ms against ~160 ms eager), and K=25 compiles in 11–15 s on the CPU while
  leaving a GPU 40 compiled calls per training step at T=500.
  ``torch._higher_order_ops.scan`` (compile one step, loop inside the compiled code) would be
  the natural tool, but in torch 2.13 Inductor fails on it (``DataDependentOutputException:
  aten._local_scalar_dense``, pytorch/pytorch#153437), even without autograd. CUDA graphs
  (``mode="reduce-overhead"``) of the chunk are not used: with 20 chunk calls alive until the
  backward, CUDA-graph trees would record one graph per call position, a path never run here.

  Compilation happens lazily, on the first call, and is reported as the harness's first-call
  time, not as a timed sample. The worker runs with Inductor's on-disk caches off
  (``COLD_COMPILE_ENV``), so that time is a cold compile on every run.
* ``torch-cudagraph``: the reference's forward and backward captured as two CUDA graphs with
  ``torch.cuda.make_graphed_callables`` (warm-up on a side stream, static input, outputs and
  gradient buffers; the input of a case never changes, so replays copy nothing). Every timed
  forward replays the forward graph and every backward the backward graph, which removes the
  per-op launch overhead of the Python loop. CUDA only.
"""

from __future__ import annotations

from snnbench import plugin
from snnbench.adapter import Adapter, AdapterUnavailable, Capabilities, CaseSkipped, Model
from snnbench.workload import GraphKnobs, NirGraph
from snnbench.workload.graph import GraphData
from snnbench.workload.linear_lif.spec import DTYPES, SURROGATES, CaseData, NetworkSpec

from ._declared import TORCH_GRAPH_KNOBS
from ._workloads import WorkloadsAdapter
from .torch_ref import REFERENCE_CAPABILITIES, build_reference_network

#: worker environment for compiled adapters: no on-disk Inductor / AOT-autograd cache, so the
#: first call is a cold compile on every run, not a cache hit that depends on earlier runs
COLD_COMPILE_ENV: dict[str, str] = {
    "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
    "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
}

#: time steps per compiled chunk in ``torch-compile`` and ``norse-compile`` (see above)
COMPILE_CHUNK_STEPS = 25


class CompiledChunks(Adapter):
    """What ``torch-compile`` and ``norse-compile`` share: a cold compile cache in the worker,
    the availability check, and the chunk length."""

    #: time steps per compiled chunk (tests set a smaller one to cross chunk boundaries cheaply)
    chunk_steps: int = COMPILE_CHUNK_STEPS

    def worker_env(self, variant: str) -> dict[str, str]:
        return dict(COLD_COMPILE_ENV)

    def check_variant(self, variant: str, device: str) -> None:
        from ._torch_common import compile_unavailable_reason

        reason = compile_unavailable_reason(device)
        if reason:
            raise AdapterUnavailable(reason)


class TorchCompileAdapter(CompiledChunks):
    """``torch.compile`` of :func:`~snnbench.adapters.torch_ref.build_reference_network`."""

    name = "torch-compile"
    library = "torch"
    description = (
        f"torch.compile of the plain PyTorch loop, {COMPILE_CHUNK_STEPS}-step compiled chunks "
        "(compile time in first call)"
    )
    def capabilities(self, variant: str) -> Capabilities:
        return REFERENCE_CAPABILITIES

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        import torch

        from ._torch_common import TorchModel, compiled_time_loop, input_tensor

        # A fresh dynamo cache: every build compiles (its cost is the first call's), and no
        # earlier build's guards count towards the recompile limit (past it dynamo runs eager).
        torch._dynamo.reset()
        chunk = self.chunk_steps
        network, linears = build_reference_network(
            spec, data, device, lambda step: compiled_time_loop(step, chunk)
        )
        return TorchModel(network, linears, input_tensor(spec, data, device), device)


class TorchCompile(WorkloadsAdapter):
    """The registered ``torch-compile`` adapter (plugin API v2): ``linear-lif`` through
    :class:`TorchCompileAdapter`, ``nir-graph`` through :mod:`.torch_compile_graph` (the plain
    PyTorch graph build, each neuron node's loop compiled in chunks of the same length), every
    node kind, on the CPU: the CPU build is verified spike for spike on every example; a CUDA
    one (Triton) is not, so it is not declared."""

    linear_lif = TorchCompileAdapter

    def graph_knobs(self, variant: str) -> GraphKnobs | None:
        return TORCH_GRAPH_KNOBS

    def graph_reason_skipped(self, workload: NirGraph, device: str,
                             variant: str) -> str | None:
        if device != "cpu":
            return (f"graph on {device} not built: torch.compile's graph build is verified "
                    "on the CPU only")
        return None

    def build_graph(self, workload: NirGraph, data: GraphData, device: str,
                    variant: str) -> plugin.Model:
        import torch

        from .torch_compile_graph import allow_recompiles, compiled_neuron_builder
        from .torch_graph import TorchGraphModel

        # a fresh dynamo cache, as for Linear+LIF: every build compiles (in its first call)
        torch._dynamo.reset()
        allow_recompiles(workload)
        assert isinstance(self.spec_adapter, CompiledChunks)
        chunk = self.spec_adapter.chunk_steps
        return TorchGraphModel(workload, data, device, compiled_neuron_builder(chunk))


class TorchCudaGraphAdapter(Adapter):
    """The reference network's forward and backward replayed as CUDA graphs."""

    name = "torch-cudagraph"
    library = "torch"
    description = "plain PyTorch loop captured as CUDA graphs (forward + backward), CUDA only"

    def capabilities(self, variant: str) -> Capabilities:
        return Capabilities(devices=("cuda",), dtypes=DTYPES, surrogates=SURROGATES)

    def check_variant(self, variant: str, device: str) -> None:
        import torch

        from ._torch_common import cuda_unavailable_reason

        reason = cuda_unavailable_reason(device, "CUDA graphs")
        if reason and device == "cuda" and torch.version.cuda is None:
            # say why, not only that no GPU is visible
            reason = f"CUDA graphs need a CUDA build of torch ({torch.__version__} is CPU-only)"
        if reason:
            raise AdapterUnavailable(reason)

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        from ._torch_common import cuda_graphed_model, input_tensor

        if not device.startswith("cuda"):
            raise CaseSkipped("torch-cudagraph runs on CUDA only")
        network, linears = build_reference_network(spec, data, device)
        return cuda_graphed_model(network, linears, input_tensor(spec, data, device), device)

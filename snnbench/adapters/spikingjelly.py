"""``spikingjelly``: SpikingJelly's multi-step ``neuron.LIFNode``, one row per LIF backend.

Mapping (SpikingJelly 2.0, ``activation_based/neuron/lif.py``)::

    LIFNode(tau=1/(1-β), decay_input=False, v_threshold=θ, v_reset=None (subtract) | 0.0 (zero),
            surrogate_function=..., detach_reset=spec.detach_reset, step_mode="m")

``decay_input=False`` charges ``h = v - v/tau + x``; with tau = 8 (β = 0.875) ``v - v/8`` rounds
exactly like ``0.875·v``, so the forward pass is bit-identical to the canonical network. The spike
test is ``h - θ >= 0`` (canonical ties). The node keeps its membrane between calls, so the network
resets it before every sequence (``node.reset()``), as SpikingJelly's ``functional.reset_net``.

Variants are the values of ``SJ_LIF_CUDA_IMPLEMENTATION``, which SpikingJelly 2.0 reads once, when
``spikingjelly._ops.lif`` is imported (``_ops/selection.py``), so :meth:`worker_env` sets it for
the worker before any import:

* ``torch``: the pure-PyTorch implementation. On CPU this is the only one: SpikingJelly always runs
  its Torch reference there and ignores the variable.
* ``triton``: the Triton kernels (CUDA only).
* ``cuda``: the native CUDA extension (CUDA only; only in source builds with
  ``SJ_BUILD_NATIVE_CUDA=1``: a wheel has no ``_C`` module, and SpikingJelly raises
  "No available sj_lif CUDA implementation", reported here as unavailable).
* ``cupy``: the CuPy backend of the old 0.0.0.0.x releases (``backend="cupy"``), removed in 2.0.

Surrogates: SpikingJelly's built-in ``ATan(alpha)`` and ``Sigmoid(alpha)`` have exactly the spec's
formulas and run inside every backend. Its fast-sigmoid-like built-ins do not (``SoftSign`` is
``slope/2`` times the spec's, ``SuperSpike`` fixes the slope at 1), so ``fast_sigmoid`` is passed
as a Python callable, which SpikingJelly only runs through its Torch reference loop; on CUDA it
refuses that path when ``SJ_LIF_CUDA_IMPLEMENTATION`` names a backend, as it does for 16-bit
membranes (kernels keep float32 state unless its separate precision API is used). Hence on CUDA
every variant takes ``atan``/``sigmoid`` and float32 only.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from snnbench.adapter import (
    Adapter,
    AdapterUnavailable,
    Capabilities,
    CaseSkipped,
    Model,
    distribution_version,
)
from snnbench.workload import GraphKnobs, NirGraph
from snnbench.workload.linear_lif.spec import CaseData, NetworkSpec

from ._declared import SPIKINGJELLY_GRAPH_KNOBS
from ._workloads import TorchNeuronsAdapter
from .torch_ref import REFERENCE_CAPABILITIES

if TYPE_CHECKING:  # torch is imported lazily, inside the worker
    from .torch_graph import NeuronBuilder

ENV_VAR = "SJ_LIF_CUDA_IMPLEMENTATION"
#: variants selected through ENV_VAR (SpikingJelly >= 2.0)
ENV_VARIANTS = ("torch", "triton", "cuda")
#: surrogates SpikingJelly implements with the spec's exact formula (usable by every backend)
BUILTIN_SURROGATES = ("atan", "sigmoid")


def is_legacy(version: str) -> bool:
    """True for the 0.0.0.0.x releases (``backend=`` argument, CuPy backend, no Triton)."""
    return version.startswith("0.")


def _installed_is_legacy() -> bool:
    """:func:`is_legacy` for the installed distribution, from its metadata (no import); False
    when it has none."""
    return is_legacy(distribution_version("spikingjelly"))


class SpikingJellyAdapter(Adapter):
    """SpikingJelly ``LIFNode`` (multi-step), backend chosen per variant."""

    name = "spikingjelly"
    library = "spikingjelly"
    module = "spikingjelly.activation_based.neuron"
    variants = ("torch", "triton", "cuda", "cupy")
    description = "SpikingJelly multi-step LIFNode (torch / triton / cuda / legacy cupy backend)"

    def capabilities(self, variant: str) -> Capabilities:
        if variant == "torch":
            return REFERENCE_CAPABILITIES
        return Capabilities(devices=("cuda",), surrogates=BUILTIN_SURROGATES)

    def worker_env(self, variant: str) -> dict[str, str]:
        return {ENV_VAR: variant} if variant in ENV_VARIANTS else {}

    def reason_skipped(self, spec: NetworkSpec, device: str, variant: str) -> str | None:
        reason = super().reason_skipped(spec, device, variant)
        if reason:
            return reason
        if not 0.0 < spec.beta < 1.0:
            return f"beta={spec.beta} not supported (LIFNode needs tau = 1/(1-beta) > 1)"
        if device == "cuda" and not (variant == "torch" and _installed_is_legacy()):
            # With SJ_LIF_CUDA_IMPLEMENTATION set, SpikingJelly refuses its Torch reference path,
            # which is the only one for Python surrogates and 16-bit membranes.
            if spec.surrogate not in BUILTIN_SURROGATES:
                return (
                    f"surrogate {spec.surrogate!r} not supported on CUDA (SpikingJelly runs a "
                    f"Python surrogate only in its reference loop, which it refuses when {ENV_VAR} "
                    f"selects a backend; supports: {', '.join(BUILTIN_SURROGATES)})"
                )
            if spec.dtype != "float32":
                return (
                    f"dtype {spec.dtype!r} not supported on CUDA (SpikingJelly's backends keep "
                    "float32 membranes; supports: float32)"
                )
        return None

    def check_variant(self, variant: str, device: str) -> None:
        version = self.version()
        if variant not in self.variants:
            raise AdapterUnavailable(f"unknown variant {variant!r} (one of {self.variants})")
        if is_legacy(version):
            self._check_legacy(variant, device, version)
            return
        if variant == "cupy":
            raise AdapterUnavailable(
                f"the CuPy backend was removed in SpikingJelly 2.0 (installed: {version})"
            )
        if device != "cuda":
            if variant != "torch":
                raise AdapterUnavailable(
                    f"the {variant} backend is CUDA-only (on CPU SpikingJelly always runs its "
                    "Torch reference)"
                )
            return
        import torch

        if not torch.cuda.is_available():
            raise AdapterUnavailable("no CUDA device visible to torch (CPU-only build or no GPU)")
        requested = os.environ.get(ENV_VAR, "auto")
        if requested != variant:
            raise AdapterUnavailable(
                f"{ENV_VAR}={requested!r} in this process, not {variant!r}: it must be set before "
                "spikingjelly is imported (worker_env)"
            )
        from spikingjelly.activation_based.functional import neuron_implementation

        try:
            chosen = neuron_implementation("lif", torch.device("cuda"))
        except RuntimeError as exc:  # e.g. "No available sj_lif CUDA implementation. cuda: ..."
            raise AdapterUnavailable(f"SpikingJelly {variant} backend unavailable: {exc}") from exc
        if chosen.get("implementation") != variant:
            raise AdapterUnavailable(
                f"SpikingJelly selected {chosen.get('implementation')!r} instead of {variant!r}: "
                f"{chosen.get('unavailable')}"
            )
        if variant != "torch":
            # Triton JIT-compiles its kernels at first use, the native operators load their
            # library: before the case's clock, cached (Triton's cache) for the next case
            from ._prepare import warm_up

            warm_up(self, variant, device, f"SpikingJelly's {variant} backend")

    def _check_legacy(self, variant: str, device: str, version: str) -> None:
        if variant in ("triton", "cuda"):
            raise AdapterUnavailable(
                f"SpikingJelly {version} has no {variant} backend (it arrived in 2.0)"
            )
        if variant == "cupy":
            if device != "cuda":
                raise AdapterUnavailable("the CuPy backend is CUDA-only")
            try:
                import cupy  # noqa: F401
            except Exception as exc:  # CuPy missing or built for another CUDA
                raise AdapterUnavailable(
                    f"cannot import cupy: {type(exc).__name__}: {exc}"
                ) from exc
            # CuPy compiles the backend's kernels with NVRTC at first use (cached in
            # ~/.cupy/kernel_cache): before the case's clock
            from ._prepare import warm_up

            warm_up(self, variant, device, f"SpikingJelly {version}'s CuPy backend")

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        import torch
        from spikingjelly.activation_based import neuron, surrogate

        from ._torch_common import (
            TorchModel,
            input_tensor,
            make_linears,
            make_spike_fn,
        )

        reason = self.reason_skipped(spec, device, variant)
        if reason:
            raise CaseSkipped(reason)
        legacy = _installed_is_legacy()
        linears = make_linears(spec, data, device)
        slope = float(spec.surrogate_slope)
        surrogate_fn: Any
        if spec.surrogate == "atan":
            surrogate_fn = surrogate.ATan(alpha=slope)
        elif spec.surrogate == "sigmoid":
            surrogate_fn = surrogate.Sigmoid(alpha=slope)
        else:
            surrogate_fn = make_spike_fn(spec)
        kwargs: dict[str, Any] = {
            "tau": 1.0 / (1.0 - float(spec.beta)),
            "decay_input": False,
            "v_threshold": float(spec.threshold),
            "v_reset": None if spec.reset == "subtract" else 0.0,
            "surrogate_function": surrogate_fn,
            "detach_reset": spec.detach_reset,
            "step_mode": "m",
        }
        if legacy:
            kwargs["backend"] = variant  # "torch" or "cupy"
        nodes: list[Any] = [neuron.LIFNode(**kwargs).to(device) for _ in range(spec.layers)]

        def network(inp: torch.Tensor) -> torch.Tensor:
            h = inp
            for lin, node in zip(linears, nodes, strict=True):
                node.reset()  # the membrane persists between calls: start every sequence at 0
                h = node(lin(h))
            return h

        class SpikingJellyModel(TorchModel):
            """Resets the nodes on close, dropping the last membrane (and its graph)."""

            def close(self) -> None:
                for node in nodes:
                    node.reset()

        return SpikingJellyModel(network, linears, input_tensor(spec, data, device), device, nodes)


class SpikingJelly(TorchNeuronsAdapter):
    """The registered ``spikingjelly`` adapter (plugin API v2): ``linear-lif`` through
    :class:`SpikingJellyAdapter`, every variant; ``nir-graph`` through
    :mod:`.spikingjelly_graph` (SpikingJelly's own nodes, multi-step) in the ``torch`` variant
    on the CPU only: the graph build gives every node a Python surrogate, which SpikingJelly
    runs only in its Torch reference loop (the CUDA backends never see a graph)."""

    linear_lif = SpikingJellyAdapter

    torch_graph_knobs = SPIKINGJELLY_GRAPH_KNOBS

    def graph_knobs(self, variant: str) -> GraphKnobs | None:
        return self.torch_graph_knobs if variant == "torch" else None

    def graph_reason_skipped(self, workload: NirGraph, device: str,
                             variant: str) -> str | None:
        if device != "cpu":
            return (f"graph on {device} not built: the graph build gives SpikingJelly a Python "
                    f"surrogate, which it refuses on CUDA when {ENV_VAR} selects a backend")
        return None

    def neuron_op(self) -> NeuronBuilder:
        from .spikingjelly_graph import spikingjelly_neuron_op

        return spikingjelly_neuron_op

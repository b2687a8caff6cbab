"""``sinabs-exodus``: sinabs' LIF with the EXODUS CUDA kernels (``sinabs.exodus.layers.LIF``).

EXODUS replaces sinabs' per-step Python loop with one CUDA kernel over all T steps for the
forward pass and a kernel for the backward pass. ``sinabs.exodus.layers.LIF`` subclasses
``sinabs.layers.LIF`` and takes the same arguments, so the configuration is the ``sinabs``
adapter's (SingleSpike, exact alpha via ``train_alphas=True``, ``norm_input=False``, the spec's
surrogate as a ``(v_mem, threshold)`` callable, frozen neuron parameters).

Limits, from the sinabs-exodus 2.x source (``sinabs/exodus/layers/lif.py``, ``spike.py``,
``cuda/lif_kernels.h``):

* CUDA only: the package builds a CUDA extension (``exodus_cuda``) at install time, which needs
  a CUDA build of torch and ``nvcc`` (``make gpu-setup``, or ``pip install sinabs-exodus
  --no-build-isolation``); ``check_variant`` runs its kernels once on a tiny network before the
  case's clock, so an extension built for other GPUs is an ``unavailable`` row;
* reset by subtraction only (``MembraneSubtract``; any other ``reset_fn`` raises);
* the backward kernel always propagates through the reset (factor ``alpha - alpha * threshold *
  surrogate``), i.e. detach_reset=False; the reset class is only read for its subtract value,
  so a detached variant cannot be injected;
* float32 only (``expand_to_1d_contiguous`` casts parameters with ``.float()``; kernels are
  instantiated for float);
* the spike tie is ``v >= threshold`` and the reset is applied before the next decay, the
  canonical order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from snnbench.adapter import Adapter, AdapterUnavailable, Capabilities, Model, distribution_version
from snnbench.workload.linear_lif.spec import SURROGATES, CaseData, NetworkSpec

from ._declared import SINABS_EXODUS_GRAPH_KNOBS
from ._workloads import TorchNeuronsAdapter

if TYPE_CHECKING:  # torch is imported lazily, inside the worker
    from .torch_graph import NeuronBuilder

INSTALL_HINT = ("needs CUDA torch + nvcc: make gpu-setup, or pip install sinabs-exodus "
                "--no-build-isolation")


def exodus_unavailable_reason() -> str | None:
    """Why sinabs-exodus cannot run in this process (a message mentioning CUDA), or None."""
    try:
        import torch
    except Exception as exc:  # a broken torch install is a reason like any other
        return f"cannot import torch ({type(exc).__name__}: {exc}); sinabs-exodus needs CUDA torch"
    if torch.version.cuda is None:
        return f"CUDA only: torch {torch.__version__} is a CPU build ({INSTALL_HINT})"
    try:
        # spike.py imports the compiled extension (exodus_cuda) at module import
        import sinabs.exodus.layers
        import sinabs.exodus.spike  # noqa: F401
    except Exception as exc:  # not installed, or the CUDA extension does not load
        return f"CUDA extension not importable: {type(exc).__name__}: {exc} ({INSTALL_HINT})"
    if not torch.cuda.is_available():
        return "CUDA only: no CUDA device is visible to torch"
    return None


def require_exodus(prefix: str = "") -> None:
    """Raise :class:`AdapterUnavailable` with :func:`exodus_unavailable_reason` (after
    ``prefix``) when sinabs-exodus cannot run in this process."""
    reason = exodus_unavailable_reason()
    if reason is not None:
        raise AdapterUnavailable(prefix + reason)


#: what the EXODUS kernels compute (also under Rockpool's LIFExodus): CUDA, float32, reset
#: "subtract", the reset term never detached
EXODUS_CAPABILITIES = Capabilities(
    devices=("cuda",),
    resets=("subtract",),
    surrogates=SURROGATES,
    detach_reset=(False,),
)


class SinabsExodusAdapter(Adapter):
    """``sinabs.exodus.layers.LIF`` (EXODUS CUDA kernels) after ``nn.Linear``; CUDA only."""

    name = "sinabs-exodus"
    library = "sinabs-exodus"
    module = "sinabs.exodus"
    description = "sinabs LIF with EXODUS CUDA forward/backward kernels (CUDA only)"

    def version(self) -> str:
        require_exodus()
        return distribution_version(self.library)

    def capabilities(self, variant: str) -> Capabilities:
        return EXODUS_CAPABILITIES

    def check_variant(self, variant: str, device: str) -> None:
        """On CUDA, run the EXODUS kernels once (before the case's clock): an extension built
        without this GPU's architecture ("no kernel image is available") is an ``unavailable``
        row naming the fix, not an error mid-case."""
        if device == "cuda":
            from ._prepare import warm_up

            try:
                warm_up(self, variant, device, "sinabs-exodus")
            except AdapterUnavailable as exc:
                raise AdapterUnavailable(
                    f"{exc} (rebuild it for this GPU: make gpu-setup GPU_ARCHS=<major.minor>)"
                ) from exc

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        from sinabs.activation import MembraneSubtract
        from sinabs.exodus.layers import LIF as ExodusLIF

        from ._torch_common import batch_major_model, make_linears
        from .sinabs import make_sinabs_lif

        linears = make_linears(spec, data, device)
        lifs = [
            make_sinabs_lif(ExodusLIF, spec, device, MembraneSubtract()) for _ in range(spec.layers)
        ]
        # the exodus layer keeps v_mem between calls like sinabs: reset per sequence
        return batch_major_model(spec, data, device, linears, lifs, lambda lif: lif.reset_states())


class SinabsExodus(TorchNeuronsAdapter):
    """The registered ``sinabs-exodus`` adapter (plugin API v2): ``linear-lif`` through
    :class:`SinabsExodusAdapter`, ``nir-graph`` through sinabs' graph build with the EXODUS
    layers (:func:`.sinabs_graph.exodus_neuron_op`); CUDA only, as its Linear+LIF build."""

    linear_lif = SinabsExodusAdapter

    torch_graph_knobs = SINABS_EXODUS_GRAPH_KNOBS

    def neuron_op(self) -> NeuronBuilder:
        from .sinabs_graph import exodus_neuron_op

        return exodus_neuron_op

"""``rockpool`` and ``rockpool-exodus``: SynSense's Rockpool LIF modules behind ``nn.Linear``.

``rockpool`` uses ``LIFNeuronTorch`` (``rockpool/nn/modules/torch/lif_neuron_torch.py``, rockpool
3.1.0), the membrane-only LIF: no synaptic current, ``v *= exp(-dt/tau_mem); v += x;
v = v + noise + bias; s = spike_fn(v, threshold); v = v - s * threshold``. Configuration:

* ``dt=1``, ``tau_mem`` a float32 time constant whose float32 ``exp(-1/tau)`` is exactly beta on
  the target device (see ``decay_time_constant``; a beta no float32 tau reaches is skipped);
* ``threshold=θ``, ``bias=0`` (the spec's bias lives in the Linear layer, so the sum
  ``beta*v + (W x + b)`` is rounded in the canonical order), ``noise_std=0``;
* ``spike_generation_fn``: rockpool's own functions (``StepPWL``: a box surrogate
  ``1/θ·[v >= θ - window]``; ``PeriodicExponential``) are not the spec's surrogates, so a
  ``torch.autograd.Function`` with rockpool's signature ``(v, threshold, window,
  max_spikes_per_dt)`` emits ``[v >= θ]`` (one spike, like ``max_spikes_per_dt=1``) and returns
  the spec's surrogate derivative;
* reset by subtraction only, always differentiated through the spike (``v - s * threshold``
  with no detach): resets ``subtract``, detach_reset ``False`` only;
* batch-major (B, T, n); ``reset_state()`` before every sequence (the module keeps the final
  membrane of batch element 0 as its state); torch API via ``to_torch()``;
* rockpool draws ``randn(B, T, n)`` noise at every forward even with ``noise_std=0``; that is
  the library's cost and stays in the timing.

Importing rockpool imports ``samna`` (SynSense's hardware SDK) when installed; its PyPI stub
tries to pip-install itself at import time. The adapter sets ``sys.modules['samna'] = None``
(only in the worker, right before importing rockpool) so rockpool sees samna as absent.

``rockpool-exodus`` uses ``LIFExodus`` (``rockpool/nn/modules/sinabs/lif_exodus.py``) on the
sinabs-exodus CUDA kernels. That module always has a synaptic stage, ``isyn[t] =
b·isyn[t-1] + b·x[t]``, with no pass-through setting (``b=0`` removes the input, ``b=1``
integrates it). The adapter makes it an identity within float32: ``leak_mode="decays"`` with
``b = 2**-64`` and the Linear output scaled by ``2**64`` first (both powers of two, so
``b·(2**64·x)`` is exactly ``x``; the leftover ``2**-64·isyn[t-1]`` is below half an ulp of
``x[t]`` unless ``|x[t]| < 2**-40·|x[t-1]|``). The membrane decay is given as ``alpha=beta``
directly, ``max_spikes_per_dt=1``, and the spec's surrogate replaces rockpool's default
(sinabs ``Heaviside`` window). The extra synaptic kernel and the scaling are timed: they are
what LIFExodus costs. Reset: subtract, through the spike (exodus' backward), float32, CUDA.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from snnbench.adapter import Adapter, AdapterUnavailable, Capabilities, CaseSkipped, Model
from snnbench.workload.linear_lif.spec import MATMUL_PRECISIONS, SURROGATES, CaseData, NetworkSpec

from ._declared import ROCKPOOL_GRAPH_KNOBS, hide_samna
from ._workloads import TorchNeuronsAdapter

if TYPE_CHECKING:  # torch is imported lazily, inside the worker
    from .torch_graph import NeuronBuilder

#: synaptic decay that turns LIFExodus' mandatory synapse into an identity (see module doc)
EXODUS_SYN_DECAY_EXPONENT = 64


def _hide_samna() -> None:
    """Make ``import samna`` fail fast instead of running its self-installing stub
    (:func:`._declared.hide_samna`)."""
    hide_samna()


#: rockpool's torch LIF module: importing it proves the torch backend is usable
LIF_TORCH_MODULE = "rockpool.nn.modules.torch.lif_neuron_torch"


def make_spike_function(spec: NetworkSpec) -> Any:
    """A rockpool ``spike_generation_fn``: ``[v >= threshold]`` with the spec's surrogate."""
    from .rockpool_graph import spike_function

    return spike_function(spec.surrogate, spec.surrogate_slope)


def _frozen_layers(spec: NetworkSpec, device: str, make_layer: Callable[[], Any]) -> list[Any]:
    """``spec.layers`` Rockpool torch neuron layers from ``make_layer``, on ``device``, training,
    with no trainable parameter: only the Linear layers train, as everywhere (frozen decays
    also skip exodus' alpha-gradient kernel)."""
    layers = []
    for _ in range(spec.layers):
        lif = make_layer()
        for p in lif.parameters():
            p.requires_grad_(False)
        lif.to(device)
        lif.train()
        layers.append(lif)
    return layers


class RockpoolAdapter(Adapter):
    """Rockpool ``LIFNeuronTorch`` (membrane-only LIF) after ``nn.Linear``."""

    name = "rockpool"
    library = "rockpool"
    module = LIF_TORCH_MODULE
    description = "Rockpool LIFNeuronTorch (torch backend), per-step Python loop"

    def version(self) -> str:
        _hide_samna()  # before the first rockpool import
        return super().version()

    def capabilities(self, variant: str) -> Capabilities:
        return Capabilities(
            resets=("subtract",),
            surrogates=SURROGATES,
            detach_reset=(False,),
            matmul_precisions=MATMUL_PRECISIONS,
        )

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        _hide_samna()
        from rockpool.nn.modules.torch.lif_neuron_torch import LIFNeuronTorch

        from ._torch_common import batch_major_model, decay_time_constant, make_linears

        try:
            tau = decay_time_constant(spec.beta, device)
        except ValueError as exc:
            raise CaseSkipped(
                f"beta={spec.beta} is not exp(-1/tau) of any float32 tau on {device}; "
                "LIFNeuronTorch takes only tau_mem"
            ) from exc
        spike_fn = make_spike_function(spec)

        def make_layer() -> Any:
            return LIFNeuronTorch(
                (spec.neurons,),
                tau_mem=tau,
                threshold=float(spec.threshold),
                bias=0.0,
                dt=1.0,
                noise_std=0.0,
                spike_generation_fn=spike_fn,
                max_spikes_per_dt=1,
            ).to_torch()

        linears = make_linears(spec, data, device)
        lifs = _frozen_layers(spec, device, make_layer)
        return batch_major_model(spec, data, device, linears, lifs, lambda lif: lif.reset_state())


class Rockpool(TorchNeuronsAdapter):
    """The registered ``rockpool`` adapter (plugin API v2): ``linear-lif`` through
    :class:`RockpoolAdapter`, ``nir-graph`` through :mod:`.rockpool_graph` (``LIFNeuronTorch``
    for LIF and IF nodes; reset subtract through the spike)."""

    linear_lif = RockpoolAdapter

    torch_graph_knobs = ROCKPOOL_GRAPH_KNOBS

    def neuron_op(self) -> NeuronBuilder:
        _hide_samna()
        from .rockpool_graph import rockpool_neuron_op

        return rockpool_neuron_op


class RockpoolExodusAdapter(Adapter):
    """Rockpool ``LIFExodus`` (sinabs-exodus CUDA kernels) after ``nn.Linear``; CUDA only."""

    name = "rockpool-exodus"
    library = "rockpool"
    module = LIF_TORCH_MODULE
    depends_on = ("sinabs-exodus",)
    description = "Rockpool LIFExodus on sinabs-exodus CUDA kernels (CUDA only)"

    def version(self) -> str:
        from .sinabs_exodus import require_exodus

        require_exodus("needs sinabs-exodus: ")
        _hide_samna()  # before the first rockpool import
        version = super().version()
        from rockpool.utilities.backend_management import backend_available

        if not backend_available("sinabs.exodus"):
            raise AdapterUnavailable("rockpool does not detect sinabs.exodus (CUDA backend)")
        return version

    def check_variant(self, variant: str, device: str) -> None:
        """On CUDA, run the EXODUS kernels once (before the case's clock): a build without this
        GPU's architecture is an ``unavailable`` row, not an error mid-case."""
        if device == "cuda":
            from ._prepare import warm_up

            warm_up(self, variant, device, "LIFExodus (sinabs-exodus kernels)")

    def capabilities(self, variant: str) -> Capabilities:
        from .sinabs_exodus import EXODUS_CAPABILITIES

        return dataclasses.replace(
            EXODUS_CAPABILITIES,
            approximation_note=(
                "LIFExodus' mandatory synapse is set to an identity within float32 "
                "(decay 2^-64, input scaled by 2^64)"
            ),
        )

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        _hide_samna()
        import torch
        from rockpool.nn.modules.sinabs.lif_exodus import LIFExodus

        from ._torch_common import VoltageSurrogate, batch_major_model, make_linears

        syn_decay = 2.0**-EXODUS_SYN_DECAY_EXPONENT
        prescale = 2.0**EXODUS_SYN_DECAY_EXPONENT

        def make_layer() -> Any:
            lif = LIFExodus(
                (spec.neurons,),
                tau_mem=None,
                tau_syn=None,
                leak_mode="decays",
                alpha=float(spec.beta),
                beta=syn_decay,
                threshold=float(spec.threshold),
                bias=0.0,
                dt=1.0,
                max_spikes_per_dt=1,
            ).to_torch()
            # LIFExodus passes this callable to exodus as surrogate_grad_fn(v_mem, threshold)
            lif.spike_generation_fn = VoltageSurrogate(spec.surrogate, spec.surrogate_slope)
            return lif

        linears = make_linears(spec, data, device)
        lifs = _frozen_layers(spec, device, make_layer)

        class Prescaled(torch.nn.Module):
            """Scale the synaptic input by 2^64 before LIFExodus' 2^-64 synapse (exact)."""

            def __init__(self, neuron: Any) -> None:
                super().__init__()
                self.neuron = neuron

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.neuron(x * prescale)  # type: ignore[no-any-return]

        wrapped = [Prescaled(lif) for lif in lifs]
        return batch_major_model(
            spec, data, device, linears, wrapped, lambda w: w.neuron.reset_state()
        )

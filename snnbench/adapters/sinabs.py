"""``sinabs``: SynSense's sinabs ``sinabs.layers.LIF`` behind ``torch.nn.Linear``.

Configuration that reproduces the canonical network (checked against sinabs 3.1.3 source,
``sinabs/layers/functional/lif.py`` and ``sinabs/activation/*``):

* ``spike_fn=SingleSpike``: spike = ``(v - threshold >= 0)``, one spike per step (the default
  ``MultiSpike`` emits ``floor(v / threshold)`` spikes);
* ``norm_input=False``: the default scales the input by ``(1 - alpha)``;
* ``train_alphas=True`` with ``alpha_mem`` set to float32(beta) and frozen: sinabs otherwise
  computes ``exp(-1 / tau_mem)`` in float32 at every forward, which for some betas cannot equal
  beta exactly on a given device; parametrising by alpha makes the decay exact everywhere;
* reset: ``MembraneSubtract()`` (``v - s * threshold``, gradient flows through ``s``:
  detach_reset=False) and ``MembraneReset(0.)`` (``v * (s == 0)``, no gradient through ``s``:
  detach_reset=True) are sinabs' own; the other two combinations use a one-line reset callable
  (sinabs' documented ``reset_fn`` extension point) with the same arithmetic;
* ``surrogate_grad_fn``: none of sinabs' surrogates (SingleExponential, PeriodicExponential,
  Heaviside, Gaussian, MultiGaussian) is one of the spec's, so the spec's derivative is passed
  as a callable ``f(v_mem, threshold)``, which sinabs' ``BackwardClass`` calls;
* layers are batch-major (B, T, n): the network transposes the time-major input once and the
  output back; ``reset_states()`` before every sequence (sinabs keeps state between calls);
* neuron parameters (alpha, threshold) are frozen: only the Linear weights and biases train,
  as in every other adapter.

State buffers are created float32 by sinabs and ``SingleSpike`` returns ``.float()``, so a 16-bit
network would silently compute its membrane in float32: only float32 is declared.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from snnbench.adapter import Adapter, Capabilities, Model
from snnbench.workload.linear_lif.spec import MATMUL_PRECISIONS, SURROGATES, CaseData, NetworkSpec

from ._declared import SINABS_GRAPH_KNOBS
from ._workloads import TorchNeuronsAdapter

if TYPE_CHECKING:  # torch is imported lazily, inside the worker
    from .torch_graph import NeuronBuilder


def make_sinabs_lif(layer_cls: Any, spec: NetworkSpec, device: str, reset_fn: Any) -> Any:
    """A sinabs-style ``LIF`` (sinabs or sinabs-exodus class) configured for ``spec``.

    Both libraries share the constructor; alpha is set exactly and every neuron parameter is
    frozen (see the module docstring).
    """
    import math

    import torch
    from sinabs.activation import SingleSpike

    from ._torch_common import VoltageSurrogate

    beta = float(spec.beta)
    # tau only initialises alpha_mem, which is overwritten with float32(beta) just below
    tau = math.inf if beta >= 1.0 else (1e-6 if beta <= 0.0 else -1.0 / math.log(beta))
    lif = layer_cls(
        tau_mem=tau,
        spike_threshold=torch.tensor(float(spec.threshold)),
        spike_fn=SingleSpike,
        reset_fn=reset_fn,
        surrogate_grad_fn=VoltageSurrogate(spec.surrogate, spec.surrogate_slope),
        train_alphas=True,
        norm_input=False,
    )
    with torch.no_grad():
        lif.alpha_mem.fill_(beta)
    for p in lif.parameters():
        p.requires_grad_(False)
    return lif.to(device)


class SinabsAdapter(Adapter):
    """sinabs ``LIF`` (SingleSpike, exact alpha, spec surrogate) after ``nn.Linear``."""

    name = "sinabs"
    library = "sinabs"
    module = "sinabs.layers"
    description = "sinabs LIF layer (SingleSpike, norm_input=False), per-step Python loop"

    def capabilities(self, variant: str) -> Capabilities:
        return Capabilities(
            resets=("subtract", "zero"),
            surrogates=SURROGATES,
            matmul_precisions=MATMUL_PRECISIONS,
        )

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        import sinabs.layers as sl

        from ._torch_common import batch_major_model, make_linears, make_reset_fn

        linears = make_linears(spec, data, device)
        reset_fn = make_reset_fn(spec.reset, spec.detach_reset)
        lifs = [make_sinabs_lif(sl.LIF, spec, device, reset_fn) for _ in range(spec.layers)]
        # reset_states(): sinabs keeps v_mem between calls; each forward is a fresh sequence
        return batch_major_model(spec, data, device, linears, lifs, lambda lif: lif.reset_states())


class Sinabs(TorchNeuronsAdapter):
    """The registered ``sinabs`` adapter (plugin API v2): ``linear-lif`` through
    :class:`SinabsAdapter`, ``nir-graph`` through :mod:`.sinabs_graph` (sinabs' own layers)."""

    linear_lif = SinabsAdapter

    torch_graph_knobs = SINABS_GRAPH_KNOBS

    def neuron_op(self) -> NeuronBuilder:
        from .sinabs_graph import sinabs_neuron_op

        return sinabs_neuron_op

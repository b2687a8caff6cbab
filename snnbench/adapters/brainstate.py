"""``brainstate``: the canonical network written with BrainPy's state system (brainstate).

brainstate (the state system under BrainPy 2.7+, ``brainpy.state``) models a network as
``brainstate.nn.Module`` objects whose parameters are ``ParamState`` and whose dynamics are
``HiddenState``; ``brainstate.transform.for_loop`` runs a step function over time, carrying the
states it reads and writes. The adapter builds, per layer, a ``brainstate.nn.Linear`` holding
the case's weights (stored (in, out), as brainstate does), applied to all T steps at once, and a
small LIF module (:class:`CanonicalLIF`, built lazily by :func:`canonical_lif_class`) whose
membrane is a ``HiddenState``, run with ``for_loop``. ``brainstate.graph.treefy_split`` splits
the ``ParamState`` leaves off the module graph and ``treefy_merge`` puts them back inside the
jitted function, the way brainstate's own transforms do.

Why not ``brainpy.state.LIF`` (brainpy 2.8.2 / brainpy_state 0.1.0): it integrates
``dV/dt = (-V + R·I)/tau`` with ``brainstate.nn.exp_euler_step``, i.e.
``V + (1 - e^{-dt/tau})·(R·I - V)``, a different float32 expression from
``beta·V + x`` (rounding differs in the last bits), in physical units (mV, ms, ohm) through
brainunit, and it scales the surrogate's input by ``1/(V_th - V_reset)``. The dynamics are the
same equation, but not bit for bit; the module below follows the same contract (a ``HiddenState``
``V``, ``init_state(batch)``, ``update(x)`` returning spikes) with the canonical order.

Surrogate: braintools' surrogate objects, the ones BrainPy documents, map exactly onto the spec's:
``fast_sigmoid`` → ``braintools.surrogate.InvSquareGrad(alpha=k)`` (``1/(1+k|x|)²``), ``atan`` →
``Arctan(alpha=k)`` (``(k/2)/(1+(π/2·k·x)²)``), ``sigmoid`` → ``Sigmoid(alpha=k)``
(``k·σ(kx)(1−σ(kx))``). Their forward is the Heaviside ``x >= 0``: the canonical tie rule.

Precision: as the other JAX adapters (variants ``fp32``/``bf16``/``fp16``; automatic mixed
precision on ``fp32`` through :func:`snnbench.adapters._jax_common.amp_linear`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from snnbench.adapter import Model
from snnbench.workload.linear_lif.spec import CaseData, NetworkSpec

from ._declared import BRAINSTATE_GRAPH_KNOBS, BRAINSTATE_SURROGATE_CLASSES
from ._jax_common import JaxAdapterBase
from ._workloads import Fp32GraphAdapter, GraphModelClass

#: the spec's surrogate → the braintools.surrogate class with the same derivative
SURROGATE_CLASSES = BRAINSTATE_SURROGATE_CLASSES


def canonical_lif_class() -> type:
    """The :class:`CanonicalLIF` ``brainstate.nn.Module`` class (built here: lazy import)."""
    import brainstate
    import jax.numpy as jnp
    from jax import lax

    class CanonicalLIF(brainstate.nn.Module):
        """LIF with the canonical order (integrate, spike on the new potential, reset) and a
        ``HiddenState`` membrane, the brainstate neuron contract."""

        def __init__(self, n: int, beta: float, threshold: float, reset: str,
                     detach_reset: bool, spike_fn: Any, dtype: Any) -> None:
            super().__init__()
            self.n = n
            self.beta = beta
            self.threshold = threshold
            self.subtract = reset == "subtract"
            self.detach_reset = detach_reset
            self.spike_fn = spike_fn
            self.dtype = dtype

        def init_state(self, batch_size: int) -> None:
            """A zero membrane for ``batch_size`` sequences."""
            self.V = brainstate.HiddenState(jnp.zeros((batch_size, self.n), self.dtype))

        def update(self, x: Any) -> Any:
            """One time step: input current (B, n) → spikes (B, n); V updated in place."""
            v = self.beta * self.V.value + x
            s = self.spike_fn(v - self.threshold)
            r = lax.stop_gradient(s) if self.detach_reset else s
            self.V.value = v - self.threshold * r if self.subtract else v * (1.0 - r)
            return s

    return CanonicalLIF


def build_brainstate_network(spec: NetworkSpec, data: CaseData) -> Any:
    """A ``brainstate.nn.Module`` mapping (T, B, n) input → last-layer spikes (T, B, n)."""
    import brainstate
    import braintools
    import jax.numpy as jnp

    from ._jax_common import amp_linear, jax_dtype

    dtype = jax_dtype(spec)
    amp = jnp.dtype(spec.amp_dtype) if spec.amp_dtype is not None else None
    surrogate = getattr(braintools.surrogate, SURROGATE_CLASSES[spec.surrogate])(
        alpha=float(spec.surrogate_slope))
    lif_class = canonical_lif_class()

    class Network(brainstate.nn.Module):
        """Per layer: ``brainstate.nn.Linear`` over all T steps, then the LIF over time."""

        def __init__(self) -> None:
            super().__init__()
            self.linears = []
            self.lifs = []
            for w, b in zip(data.weights, data.biases, strict=True):
                self.linears.append(brainstate.nn.Linear(
                    spec.neurons, spec.neurons,
                    w_init=jnp.asarray(w.T, dtype),
                    b_init=jnp.asarray(b, dtype) if spec.bias else None,
                ))
                self.lifs.append(lif_class(spec.neurons, float(spec.beta),
                                           float(spec.threshold), spec.reset,
                                           spec.detach_reset, surrogate, dtype))

        def update(self, x: Any) -> Any:
            h = x
            for lin, lif in zip(self.linears, self.lifs, strict=True):
                if amp is None:
                    current = lin(h)
                else:
                    params = lin.weight.value
                    current = amp_linear(h, params["weight"], params.get("bias"), amp, None)
                lif.init_state(x.shape[1])
                h = brainstate.transform.for_loop(lif.update, current)
            return h

    return Network()


class BrainstateAdapter(JaxAdapterBase):
    """brainstate (BrainPy's state system): ``nn.Linear`` + a HiddenState LIF over
    ``transform.for_loop``, braintools surrogates."""

    name = "brainstate"
    library = "brainstate"
    extra_modules: ClassVar[tuple[str, ...]] = ("braintools",)
    description = "brainstate (BrainPy state system): nn.Linear + HiddenState LIF, for_loop"

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        import brainstate

        from ._jax_common import graph_model

        self._require_supported(spec, device, variant)

        def linears(model: Any) -> list[tuple[Any, Any | None]]:
            values = [lin.weight.value for lin in model.linears]
            return [(v["weight"], v.get("bias")) for v in values]

        return graph_model(
            spec,
            data,
            device,
            network=lambda: build_brainstate_network(spec, data),
            split=lambda net: brainstate.graph.treefy_split(net, brainstate.ParamState, ...),
            merge=brainstate.graph.treefy_merge,
            run=lambda model, inputs: model.update(inputs),
            linears=linears,
        )


class Brainstate(Fp32GraphAdapter):
    """The registered ``brainstate`` adapter (plugin API v2): ``linear-lif`` through
    :class:`BrainstateAdapter`, every variant; ``nir-graph`` through :mod:`.brainstate_graph`
    in the ``fp32`` variant (a graph case is float32)."""

    linear_lif = BrainstateAdapter

    fp32_graph_knobs = BRAINSTATE_GRAPH_KNOBS

    def graph_model(self) -> GraphModelClass:
        from .brainstate_graph import BrainstateGraphModel

        return BrainstateGraphModel

"""``spyx``: the canonical network written the spyx 1.x way (flax.nnx modules run by
``spyx.nn.run``).

spyx 1.0.0 is built on ``flax.nnx``. Its built-in ``spyx.nn.LIF`` cannot be used: it takes the
spike from the *previous* membrane potential (``spikes = spike(V - threshold)`` before
``V = beta*V + x``), so its output is one step late (82 % spike agreement), it has only reset by
subtraction, and it carries ``beta`` as a trainable parameter. The adapter therefore defines a
small ``flax.nnx`` neuron, :class:`CanonicalLIF` (built lazily by :func:`canonical_lif_class`),
that follows spyx's stateful-layer contract (``initial_state(batch)``,
``__call__(x, v) -> (spikes, v)``) with the canonical dynamics, and stacks
``spyx.nn.Sequential(nnx.Linear, CanonicalLIF, ...)``, run over time with ``spyx.nn.run``
(a time-major ``lax.scan``; the Linear layers run inside the scan, per time step, as in spyx's
own examples and ``spyx.bench``).

Surrogate: the spike function is made with ``spyx.axn.custom(bwd, fwd)``, spyx's API for custom
surrogates. ``spyx.axn.superspike(k)``'s derivative ``1/(1+k|x|)^2`` is exactly the spec's
``fast_sigmoid``, but its forward is ``x > 0`` while the canonical spike is ``v >= threshold``
(ties are frequent in bfloat16), so ``fwd`` is ``>=``. ``spyx.axn.arctan(k)`` is
``1/(pi (1+(k pi x)^2))``, a different scale from the spec's ``atan`` ``(k/2)/(1+(pi/2 k x)^2)``
for any k, and spyx has no logistic ``sigmoid`` surrogate (its ``tanh`` is ``sech^2(kx)``, which
is ``4/k`` times the spec's ``sigmoid`` at ``k/2``), so ``bwd`` is always the exact spec formula
(:func:`snnbench.adapters._jax_common.surrogate_derivative`).

Timing follows ``spyx.bench``: ``nnx.split`` the model once, ``nnx.merge`` inside a ``jax.jit``
(cheaper per call than ``nnx.jit``); see :mod:`snnbench.adapters._jax_common` for the
forward/backward split.
"""

from __future__ import annotations

from typing import Any

from snnbench.adapter import Model
from snnbench.workload.linear_lif.spec import CaseData, NetworkSpec

from ._declared import SPYX_GRAPH_KNOBS
from ._jax_common import JaxAdapterBase
from ._workloads import Fp32GraphAdapter, GraphModelClass


def canonical_lif_class() -> type:
    """The :class:`CanonicalLIF` ``flax.nnx`` module class (built here so flax loads lazily)."""
    import jax.numpy as jnp
    from flax import nnx
    from jax import lax

    class CanonicalLIF(nnx.Module):
        """LIF neuron with the canonical order: integrate, spike on the new potential, reset.

        ``beta`` and ``threshold`` are constants (plain floats), not ``nnx.Param``: the
        canonical network trains only the Linear layers.
        """

        def __init__(
            self,
            hidden_shape: tuple[int, ...],
            beta: float,
            threshold: float,
            reset: str,
            detach_reset: bool,
            activation: Any,
            dtype: Any,
            current_dtype: Any = None,
        ) -> None:
            self.hidden_shape = hidden_shape
            self.beta = beta
            self.threshold = threshold
            self.subtract = reset == "subtract"
            self.detach_reset = detach_reset
            self.spike = activation
            self.dtype = dtype
            self.current_dtype = current_dtype

        def __call__(self, x: Any, v: Any) -> tuple[Any, Any]:
            """One time step: (input current (B, n), membrane (B, n)) → (spikes, membrane).

            Under AMP (``current_dtype`` set) the float32 current of the Linear layer before
            (16-bit operands, float32 sum) is rounded once to ``current_dtype`` and back, as
            autocast's Linear output is; the membrane stays float32.
            """
            if self.current_dtype is not None:
                x = x.astype(self.current_dtype).astype(x.dtype)
            v = self.beta * v + x
            s = self.spike(v - self.threshold)
            r = lax.stop_gradient(s) if self.detach_reset else s
            v = v - self.threshold * r if self.subtract else v * (1.0 - r)
            return s, v

        def initial_state(self, batch_size: int) -> Any:
            """Zero membrane potential, (batch, *hidden_shape), in the network's dtype."""
            return jnp.zeros((batch_size, *self.hidden_shape), self.dtype)

    return CanonicalLIF


def build_spyx_network(spec: NetworkSpec, data: CaseData) -> Any:
    """``spyx.nn.Sequential`` of (``nnx.Linear`` holding ``data``'s weights, CanonicalLIF)
    per layer, in the spec's dtype. ``nnx.Linear`` stores its kernel as (in, out)."""
    import jax.numpy as jnp
    import spyx
    from flax import nnx

    from ._jax_common import (
        heaviside_ge,
        jax_dtype,
        lax_precision,
        surrogate_derivative,
    )

    dtype = jax_dtype(spec)
    # AMP: float32 parameters, 16-bit operands with a float32 dot and bias add (nnx.Linear's
    # dtype + preferred_element_type), rounded once in CanonicalLIF (see amp_linear)
    amp = jnp.dtype(spec.amp_dtype) if spec.amp_dtype is not None else None
    name, slope = spec.surrogate, float(spec.surrogate_slope)
    activation = spyx.axn.custom(
        bwd=lambda u: surrogate_derivative(u, name, slope), fwd=heaviside_ge
    )
    lif_class = canonical_lif_class()
    rngs = nnx.Rngs(0)  # required by nnx.Linear; its initialisers are replaced below
    layers: list[Any] = []
    for w, b in zip(data.weights, data.biases, strict=True):
        kernel, bias = jnp.asarray(w.T, dtype), jnp.asarray(b, dtype)
        layers.append(
            nnx.Linear(
                spec.neurons,
                spec.neurons,
                use_bias=spec.bias,
                dtype=dtype if amp is None else amp,
                param_dtype=dtype,
                precision=lax_precision(spec),
                preferred_element_type=None if amp is None else jnp.float32,
                kernel_init=lambda _key, _shape, _dtype, k=kernel: k,
                bias_init=lambda _key, _shape, _dtype, c=bias: c,
                rngs=rngs,
            )
        )
        layers.append(
            lif_class(
                (spec.neurons,),
                float(spec.beta),
                float(spec.threshold),
                spec.reset,
                spec.detach_reset,
                activation,
                dtype,
                amp,
            )
        )
    return spyx.nn.Sequential(*layers)


class SpyxAdapter(JaxAdapterBase):
    """spyx 1.x (flax.nnx): canonical LIF module + ``nnx.Linear`` run with ``spyx.nn.run``."""

    name = "spyx"
    library = "spyx"
    extra_modules = ("flax.nnx",)
    description = "spyx 1.x (flax.nnx): canonical LIF module run with spyx.nn.run"

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        import spyx
        from flax import nnx

        from ._jax_common import graph_model

        self._require_supported(spec, device, variant)

        def run(model: Any, inputs: Any) -> Any:
            spikes, _ = spyx.nn.run(model, inputs)  # type: ignore[no-untyped-call]
            return spikes

        def linears(model: Any) -> list[tuple[Any, Any | None]]:
            layers = [model.layers[2 * layer] for layer in range(spec.layers)]
            return [(lin.kernel[...], lin.bias[...] if lin.bias is not None else None)
                    for lin in layers]

        return graph_model(
            spec,
            data,
            device,
            network=lambda: build_spyx_network(spec, data),
            split=lambda model: nnx.split(model, nnx.Param, ...),  # type: ignore[misc]
            merge=nnx.merge,
            run=run,
            linears=linears,
        )


class Spyx(Fp32GraphAdapter):
    """The registered ``spyx`` adapter (plugin API v2): ``linear-lif`` through
    :class:`SpyxAdapter`, both variants; ``nir-graph`` through :mod:`.spyx_graph` in the
    ``fp32`` variant (a graph case is float32)."""

    linear_lif = SpyxAdapter

    fp32_graph_knobs = SPYX_GRAPH_KNOBS

    def graph_model(self) -> GraphModelClass:
        from .spyx_graph import SpyxGraphModel

        return SpyxGraphModel

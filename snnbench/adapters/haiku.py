"""``haiku``: JAX + dm-haiku, the JAX reference implementation of the canonical network.

Per layer, one ``hk.Linear`` over all T steps at once (a single (T·B, n) × (n, n) GEMM, like the
PyTorch reference), then a hand-written ``lax.scan`` over T with the canonical operations in the
canonical order::

    v = beta * v + x[t];  s = H(v - theta);  v = v - theta * s   (or v * (1 - s))

``H`` is a ``jax.custom_vjp`` Heaviside (``>=``) whose derivative is the spec's surrogate, and
the reset term goes through ``lax.stop_gradient`` when ``detach_reset`` is set. Parameters are the
case's exact weights passed to ``apply`` (haiku stores ``w`` as (in, out): transposed here, and
transposed back for the gradients); ``init`` is never called for values.

Precision: everything (parameters, input, currents, membrane state carried by the scan, spikes)
is in the spec's dtype, as a plain implementation would compute it; XLA may keep intermediates
of one fused element-wise expression in float32 before rounding the result. Under automatic
mixed precision (``amp-bf16`` / ``amp-fp16``, fp32 variant) the parameters, input and state
stay float32 and only the Linear layers compute in 16 bits, hand-cast the way
``torch.autocast`` computes them (:func:`snnbench.adapters._jax_common.amp_linear`).
"""

from __future__ import annotations

from typing import Any

from snnbench.adapter import Model
from snnbench.workload.linear_lif.spec import CaseData, NetworkSpec

from ._declared import HAIKU_GRAPH_KNOBS
from ._jax_common import JaxAdapterBase
from ._workloads import Fp32GraphAdapter, GraphModelClass


def build_haiku_network(spec: NetworkSpec) -> Any:
    """``hk.Transformed`` (apply without rng) mapping input (T, B, n) → last-layer spikes.

    Its parameters are ``{"linear_<l>": {"w": (in, out), "b": (out,)}}`` per layer ``l``
    (no ``"b"`` without bias).
    """
    import haiku as hk
    import jax.numpy as jnp
    from jax import lax

    from ._jax_common import amp_linear, lax_precision, make_spike_fn

    spike = make_spike_fn(spec)
    amp = jnp.dtype(spec.amp_dtype) if spec.amp_dtype is not None else None

    class AmpLinear(hk.Linear):
        """``hk.Linear``'s parameters (same names, shapes, dtype) computed by ``amp_linear``."""

        def __call__(self, inputs: Any, *, precision: Any = None) -> Any:
            n_in = inputs.shape[-1]
            init = hk.initializers.TruncatedNormal(1.0 / n_in**0.5)
            w = hk.get_parameter("w", [n_in, self.output_size], inputs.dtype, init=init)
            b = (hk.get_parameter("b", [self.output_size], inputs.dtype, init=jnp.zeros)
                 if self.with_bias else None)
            return amp_linear(inputs, w, b, amp, precision)

    precision = lax_precision(spec)
    beta, theta = float(spec.beta), float(spec.threshold)
    subtract = spec.reset == "subtract"
    detach = spec.detach_reset

    def lif_step(v: Any, x_t: Any) -> tuple[Any, Any]:
        v = beta * v + x_t
        s = spike(v - theta)
        r = lax.stop_gradient(s) if detach else s
        v = v - theta * r if subtract else v * (1.0 - r)
        return v, s

    def network(x: Any) -> Any:
        h = x
        for layer in range(spec.layers):
            kind = hk.Linear if amp is None else AmpLinear
            linear = kind(spec.neurons, with_bias=spec.bias, name=f"linear_{layer}")
            current = linear(h, precision=precision)
            v0 = jnp.zeros(current.shape[1:], current.dtype)
            _, h = lax.scan(lif_step, v0, current)
        return h

    return hk.without_apply_rng(hk.transform(network))


def _layout(tree: Any) -> dict[str, tuple[tuple[int, ...], Any]]:
    """{path: (shape, dtype)} of a parameter pytree (arrays or ShapeDtypeStructs)."""
    import jax

    return {
        jax.tree_util.keystr(path): (tuple(leaf.shape), leaf.dtype)
        for path, leaf in jax.tree_util.tree_leaves_with_path(tree)
    }


class HaikuAdapter(JaxAdapterBase):
    """JAX + haiku: ``hk.Linear`` and a hand-written ``lax.scan`` LIF (exact canonical model)."""

    name = "haiku"
    library = "dm-haiku"
    module = "haiku"
    description = "JAX + dm-haiku: hk.Linear + hand-written lax.scan LIF (the JAX reference)"

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        import jax

        from ._jax_common import JaxModel, device_array, jax_device

        self._require_supported(spec, device, variant)
        dev = jax_device(device)
        transformed = build_haiku_network(spec)
        params: dict[str, dict[str, Any]] = {}
        for layer, (w, b) in enumerate(zip(data.weights, data.biases, strict=True)):
            entry = {"w": device_array(w.T, spec, dev)}
            if spec.bias:
                entry["b"] = device_array(b, spec, dev)
            params[f"linear_{layer}"] = entry
        x = device_array(data.inputs, spec, dev)
        # the parameter tree must be exactly the one haiku creates (names, shapes, dtypes)
        expected = _layout(jax.eval_shape(transformed.init, jax.random.PRNGKey(0), x))
        if _layout(params) != expected:
            raise RuntimeError(f"parameters {_layout(params)} differ from haiku's {expected}")

        def layer_grads(grads: Any) -> list[tuple[Any, Any | None]]:
            return [
                (grads[f"linear_{layer}"]["w"], grads[f"linear_{layer}"].get("b"))
                for layer in range(spec.layers)
            ]

        return JaxModel(transformed.apply, params, x, dev, spec, layer_grads)


class Haiku(Fp32GraphAdapter):
    """The registered ``haiku`` adapter (plugin API v2): ``linear-lif`` through
    :class:`HaikuAdapter`, both variants; ``nir-graph`` through :mod:`.haiku_graph` in the
    ``fp32`` variant (a graph case is float32)."""

    linear_lif = HaikuAdapter

    fp32_graph_knobs = HAIKU_GRAPH_KNOBS

    def graph_model(self) -> GraphModelClass:
        from .haiku_graph import HaikuGraphModel

        return HaikuGraphModel

"""Shared pieces for JAX-based adapters (``haiku``, ``spyx``): the variant rule, the timed model
wrapper, the spec's surrogate spike function, dtypes, devices and matmul precision.

Nothing here imports JAX at module level: adapter modules import this file at their top, and
``reason_skipped`` runs in the harness's parent process, which must never load a benchmarked
library. Every function that needs JAX imports it inside.

Forward / backward split (how :class:`JaxModel` keeps both phases separately timeable)
------------------------------------------------------------------------------------
JAX is functional: there is no tape to keep between a forward and a backward call. The forward
phase is one compiled function that runs ``jax.vjp`` of the network, i.e. the primal scan *plus*
the residuals the pullback needs (per-step membrane potentials, the layer inputs), and returns
the output spikes and the pullback's residual arrays (the ``jax.vjp`` function flattened to its
leaves; the tree structure is static and captured while tracing). The backward phase is a second
compiled function that rebuilds the pullback from those leaves and applies it to the cotangent of
``loss = sum(spikes)`` (all ones). Nothing is recomputed in the backward phase, and the forward
does strictly more than an inference forward would (it writes the residuals), which is what a
PyTorch training forward does too. ``step`` is a third compiled function, ``value_and_grad`` of
the same loss, which XLA may schedule as one program.

All three functions are compiled ahead of time in the constructor (``jit(...).lower().compile()``),
inside ``jax.default_matmul_precision``, so no timed call ever traces or compiles, and the
precision cannot change through a later global setting. Calls dispatch asynchronously; the
harness closes each timed region with :meth:`JaxModel.synchronize`
(``jax.block_until_ready`` on the last results).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from snnbench.adapter import (
    Adapter,
    AdapterUnavailable,
    Capabilities,
    CaseSkipped,
    Model,
    import_or_unavailable,
)
from snnbench.workload.linear_lif.spec import (
    MATMUL_PRECISIONS,
    SURROGATES,
    CaseData,
    FloatArray,
    NetworkSpec,
)

if TYPE_CHECKING:  # only for annotations; never imported at run time here
    import jax

#: variant name → the only spec dtype that variant runs (no mixed precision under another dtype)
VARIANT_DTYPES: dict[str, str] = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}

#: spec ``matmul_precision`` → JAX's name for it (``jax.default_matmul_precision``) and the
#: ``lax.Precision`` member put on every dot. On GPU ``HIGHEST`` is full fp32 and ``HIGH`` is
#: TF32 (jax/_src/lax/lax.py, ``Precision``); on CPU both are plain fp32.
#: Under AMP the float32 parts are strict and the 16-bit dots take ``DEFAULT`` (their operands
#: are already 16-bit: no precision flag changes them).
MATMUL_PRECISION_NAMES: dict[str, str] = {"strict": "float32", "tf32": "tensorfloat32",
                                          "amp-bf16": "float32", "amp-fp16": "float32"}
_LAX_PRECISION_MEMBERS: dict[str, str] = {"strict": "HIGHEST", "tf32": "HIGH",
                                          "amp-bf16": "DEFAULT", "amp-fp16": "DEFAULT"}

#: (kernel as stored by the library, bias or None) per layer, read from a gradient pytree
LayerGrads = Callable[[Any], Sequence[tuple[Any, Any | None]]]


# -- adapter side: no JAX import ------------------------------------------------------------
class JaxAdapterBase(Adapter):
    """Common adapter behaviour for the JAX libraries: variants ``fp32`` / ``bf16``.

    Variant rule: ``fp32`` runs only ``dtype=float32`` cases and ``bf16`` only ``bfloat16``
    cases; any other combination is skipped (an fp32 case is never run in mixed precision).
    Subclasses set :attr:`extra_modules` to the modules whose import proves the stack works.
    """

    framework = "jax"
    variants: tuple[str, ...] = tuple(VARIANT_DTYPES)
    #: imported by :meth:`version` besides ``jax`` and :attr:`module`
    extra_modules: ClassVar[tuple[str, ...]] = ()

    def version(self) -> str:
        """The library's version; imports jax, the library and :attr:`extra_modules` lazily
        (in that order: a missing jax is named before the library it breaks)."""
        import_or_unavailable("jax")
        version = super().version()
        for module in self.extra_modules:
            import_or_unavailable(module)
        return version

    def capabilities(self, variant: str) -> Capabilities:
        dtype = VARIANT_DTYPES.get(variant)
        return Capabilities(
            dtypes=(dtype,) if dtype else (),
            surrogates=SURROGATES,
            # automatic mixed precision is a float32 network with 16-bit matmuls: the fp32
            # variant runs it (amp_linear); the 16-bit variants are 16-bit throughout
            matmul_precisions=MATMUL_PRECISIONS if dtype == "float32" else ("strict", "tf32"),
        )

    def reason_skipped(self, spec: NetworkSpec, device: str, variant: str) -> str | None:
        """The variant/dtype rule first, then :meth:`capabilities`. Never imports JAX."""
        dtype = VARIANT_DTYPES.get(variant)
        if dtype is None:
            return f"unknown variant {variant!r} (variants: {', '.join(self.variants)})"
        if spec.dtype != dtype:
            return f"variant {variant} runs only dtype={dtype} (case is {spec.dtype})"
        return self.capabilities(variant).reason_unsupported(spec, device)

    def check_variant(self, variant: str, device: str) -> None:
        """Unknown variants, and ``cuda`` without a JAX GPU backend, are unavailable."""
        if variant not in VARIANT_DTYPES:
            raise AdapterUnavailable(
                f"unknown variant {variant!r} (variants: {', '.join(self.variants)})"
            )
        jax_device(device)  # raises AdapterUnavailable when the backend is missing

    def _require_supported(self, spec: NetworkSpec, device: str, variant: str) -> None:
        """Raise :class:`CaseSkipped` in ``build`` for what :meth:`reason_skipped` refuses
        (``verify.check_adapter`` calls ``build`` directly)."""
        reason = self.reason_skipped(spec, device, variant)
        if reason is not None:
            raise CaseSkipped(reason)


# -- JAX helpers: import JAX inside -----------------------------------------------------------
def jax_device(device: str) -> jax.Device:
    """The first JAX device for the harness's ``cpu`` / ``cuda``.

    Raises :class:`AdapterUnavailable` when JAX has no such backend (e.g. a CPU-only jaxlib).
    """
    import jax

    platform = {"cpu": "cpu", "cuda": "gpu"}.get(device)
    if platform is None:
        raise AdapterUnavailable(f"device {device!r} is not supported by the JAX adapters")
    try:
        devices = jax.devices(platform)
    except RuntimeError as exc:
        raise AdapterUnavailable(
            f"JAX has no {platform} backend here ({exc}); GPU runs need JAX's CUDA plugin "
            "(jax[cuda13] or jax[cuda12], matching the CUDA of the machine; make gpu-setup)"
        ) from exc
    if not devices:
        raise AdapterUnavailable(f"JAX found no {platform} device")
    return devices[0]


def jax_dtype(spec: NetworkSpec) -> Any:
    """The JAX (NumPy-compatible) dtype named by the spec: float32, bfloat16 or float16."""
    import jax.numpy as jnp

    return jnp.dtype(spec.dtype)


def device_array(a: FloatArray, spec: NetworkSpec, device: jax.Device) -> jax.Array:
    """``a`` (float32 NumPy) cast to the spec dtype on the host (round to nearest even, as
    ``reference.round_to_dtype``) and committed to ``device``."""
    import jax

    out: jax.Array = jax.device_put(np.asarray(a).astype(jax_dtype(spec)), device)
    return out


def lax_precision(spec: NetworkSpec) -> Any:
    """The ``lax.Precision`` to put on every dot for the spec's ``matmul_precision``."""
    from jax import lax

    return getattr(lax.Precision, _LAX_PRECISION_MEMBERS[spec.matmul_precision])


def amp_linear(
    h: jax.Array, kernel: jax.Array, bias: jax.Array | None, compute_dtype: Any, precision: Any
) -> jax.Array:
    """``h @ kernel + bias`` the way ``torch.autocast`` computes a Linear layer, hand-cast.

    ``h``, the (in, out) ``kernel`` and ``bias`` are float32; they are rounded to
    ``compute_dtype`` (bfloat16 or float16), multiplied with float32 accumulation
    (``preferred_element_type``), the bias added in float32, and the sum rounded once to
    ``compute_dtype``; the result is returned as float32 so that the LIF state stays float32.
    Its gradient is rounded to ``compute_dtype`` on the way back (the casts' transposes), as
    autocast's is. Not a ``jmp`` policy on purpose: ``hk.mixed_precision`` or ``nnx.Linear``
    with ``dtype=bfloat16`` round the dot's output and then add the bias in bfloat16, two
    roundings that move 26 % of the currents by one ulp (docs/methodology.md).
    """
    import jax.numpy as jnp

    y = jnp.dot(h.astype(compute_dtype), kernel.astype(compute_dtype), precision=precision,
                preferred_element_type=jnp.float32)
    if bias is not None:
        y = y + bias.astype(compute_dtype).astype(jnp.float32)
    return y.astype(compute_dtype).astype(jnp.float32)


def surrogate_derivative(u: jax.Array, name: str, slope: float) -> jax.Array:
    """d spike / d u at ``u = v_pre - threshold``, in ``u``'s dtype.

    The formulas and the order of the float32 constants are those of
    :func:`snnbench.workload.linear_lif.reference.surrogate_grad`. Constants are Python floats
    (weakly typed in JAX), so a bfloat16 ``u`` gives a bfloat16 derivative, as a plain
    implementation would.
    """
    import jax.numpy as jnp

    k = float(np.float32(slope))
    if name == "fast_sigmoid":
        return 1.0 / (1.0 + k * jnp.abs(u)) ** 2
    if name == "atan":
        # reference: (k/2) / (1 + (f32(pi/2) * k * u)^2), with f32(pi/2)*k rounded to float32
        c = float(np.float32(math.pi / 2) * np.float32(slope))
        return (k / 2.0) / (1.0 + (c * u) ** 2)
    if name == "sigmoid":
        sig = 1.0 / (1.0 + jnp.exp(-k * u))
        return k * sig * (1.0 - sig)
    raise ValueError(f"unknown surrogate {name!r}")


def heaviside_ge(u: jax.Array) -> jax.Array:
    """The canonical spike: 1 where ``u >= 0`` (i.e. ``v_pre >= threshold``), in ``u``'s dtype."""
    return (u >= 0).astype(u.dtype)


def make_spike_fn(spec: NetworkSpec) -> Callable[[jax.Array], jax.Array]:
    """Heaviside(u) with the spec's surrogate derivative, as a ``jax.custom_vjp``.

    The residual is ``u`` itself (one (B, n) array per step, saved by the scan's VJP).
    """
    import jax

    name, slope = spec.surrogate, float(spec.surrogate_slope)

    @jax.custom_vjp
    def spike(u: jax.Array) -> jax.Array:
        return heaviside_ge(u)

    def spike_fwd(u: jax.Array) -> tuple[jax.Array, jax.Array]:
        return heaviside_ge(u), u

    def spike_bwd(u: jax.Array, g: jax.Array) -> tuple[jax.Array]:
        return (g * surrogate_derivative(u, name, slope),)

    spike.defvjp(spike_fwd, spike_bwd)
    return spike


# -- the timed model ------------------------------------------------------------------------
@dataclass
class JaxHandle:
    """What :meth:`JaxModel.forward` returns: the output spikes (T, B, n) on the device and
    the pullback's residual arrays (dropped by :meth:`JaxModel.backward` once used, so they are
    freed like a PyTorch graph after ``backward``; ``None`` for a :meth:`JaxModel.step` handle).
    """

    spikes: jax.Array
    residuals: list[jax.Array] | None


class JaxModel(Model):
    """Times a pure function ``apply(params, x) -> last-layer spikes (T, B, n)``.

    ``params`` is any pytree of device arrays (the network's parameters in the spec dtype),
    ``x`` the time-major input on the same device. ``layer_grads`` reads, from a gradient
    pytree shaped like ``params``, each layer's (kernel, bias or None) with the kernel stored
    as the library stores it, (in, out) (``hk.Linear``, ``nnx.Linear``); it is transposed to
    torch's (out, in) here.

    Peak memory: on a GPU, ``peak_bytes_in_use`` of the device's allocator. JAX cannot reset
    that peak (google/jax#8096), so it covers the whole process since start-up: compilation,
    the equivalence check and warm-up included; the harness runs one process per case.
    On the CPU JAX reports no memory statistics and the harness falls back to process RSS.
    """

    def __init__(
        self,
        apply: Callable[[Any, jax.Array], jax.Array],
        params: Any,
        x: jax.Array,
        device: jax.Device,
        spec: NetworkSpec,
        layer_grads: LayerGrads,
    ) -> None:
        import jax
        import jax.numpy as jnp

        self.params = params
        self.x = x
        self.device = device
        self._layer_grads = layer_grads
        self._grads: Any = None
        self._last: Any = None  # what synchronize() blocks on
        vjp_tree: list[Any] = []  # the pullback's tree structure, captured while tracing
        out_info: list[Any] = []  # the spikes' shape and dtype, known once forward is lowered

        def forward(params: Any, x: jax.Array) -> tuple[jax.Array, list[jax.Array]]:
            spikes, pullback = jax.vjp(lambda p: apply(p, x), params)
            leaves, treedef = jax.tree_util.tree_flatten(pullback)
            vjp_tree[:] = [treedef]
            return spikes, leaves

        def backward(residuals: list[jax.Array]) -> Any:
            pullback = jax.tree_util.tree_unflatten(vjp_tree[0], residuals)
            # loss = sum(spikes): its cotangent w.r.t. the spikes is all ones
            (grads,) = pullback(jnp.ones(out_info[0].shape, out_info[0].dtype))
            return grads

        def step(params: Any, x: jax.Array) -> tuple[jax.Array, Any]:
            def loss(p: Any) -> tuple[jax.Array, jax.Array]:
                spikes = apply(p, x)
                return jnp.sum(spikes), spikes

            (_, spikes), grads = jax.value_and_grad(loss, has_aux=True)(params)
            return spikes, grads

        # Ahead-of-time compilation under the spec's matmul precision: timed calls never trace,
        # and a later global precision setting cannot change the compiled programs.
        with jax.default_matmul_precision(MATMUL_PRECISION_NAMES[spec.matmul_precision]):
            self._forward = jax.jit(forward).lower(params, x).compile()
            spikes_info, residual_info = self._forward.out_info
            out_info[:] = [spikes_info]
            self._backward = jax.jit(backward).lower(residual_info).compile()
            self._step = jax.jit(step).lower(params, x).compile()

    def forward(self) -> JaxHandle:
        spikes, residuals = self._forward(self.params, self.x)
        self._last = (spikes, residuals)
        return JaxHandle(spikes, residuals)

    def backward(self, handle: JaxHandle) -> None:
        if handle.residuals is None:
            raise ValueError("backward needs a forward() handle (a step() handle has no pullback)")
        self._grads = self._backward(handle.residuals)
        # the residuals are not needed again (a PyTorch graph is freed by backward too);
        # JAX keeps the buffers alive until the dispatched backward has read them
        handle.residuals = None
        self._last = self._grads

    def step(self) -> JaxHandle:
        spikes, self._grads = self._step(self.params, self.x)
        self._last = (spikes, self._grads)
        return JaxHandle(spikes, None)

    def zero_grad(self) -> None:
        # gradients are fresh arrays each time; dropping the reference is all there is to do
        self._grads = None
        self._last = None

    def synchronize(self) -> None:
        import jax

        if self._last is not None:
            jax.block_until_ready(self._last)  # type: ignore[no-untyped-call]

    def spikes(self, handle: JaxHandle) -> FloatArray:
        return np.asarray(handle.spikes).astype(np.float32)

    def gradients(self) -> tuple[list[FloatArray], list[FloatArray]]:
        import jax

        grads = self._grads
        if grads is None:  # no backward since zero_grad: zeros, as torch's None grads read
            grads = jax.tree_util.tree_map(lambda p: np.zeros(p.shape, np.float32), self.params)
        grad_w: list[FloatArray] = []
        grad_b: list[FloatArray] = []
        for kernel, bias in self._layer_grads(grads):
            k = np.asarray(kernel).astype(np.float32)
            grad_w.append(np.ascontiguousarray(k.T))  # (in, out) → (out, in) like torch
            grad_b.append(
                np.asarray(bias).astype(np.float32)
                if bias is not None
                else np.zeros(k.shape[1], dtype=np.float32)
            )
        return grad_w, grad_b

    def peak_memory_bytes(self) -> int | None:
        """Allocator peak on a GPU since process start (cannot be reset); None on the CPU."""
        stats = self.device.memory_stats()
        if not stats or "peak_bytes_in_use" not in stats:
            return None
        return int(stats["peak_bytes_in_use"])

    def close(self) -> None:
        self._grads = None
        self._last = None


def split_on_device(network: Callable[[], Any], split: Callable[[Any], Sequence[Any]],
                    dev: jax.Device) -> tuple[Any, Any, Any]:
    """``network()`` built on ``dev`` and ``split`` into (graph, parameters, other state), the
    two trees put on ``dev``."""
    import jax

    with jax.default_device(dev):
        built = network()
    graph, params, rest = split(built)
    return graph, jax.device_put(params, dev), jax.device_put(rest, dev)


def graph_model(
    spec: NetworkSpec,
    data: CaseData,
    device: str,
    network: Callable[[], Any],
    split: Callable[[Any], Sequence[Any]],
    merge: Callable[[Any, Any, Any], Any],
    run: Callable[[Any, jax.Array], jax.Array],
    linears: LayerGrads,
) -> JaxModel:
    """The :class:`JaxModel` of a module graph with its state inside, as flax.nnx and
    brainstate keep it: ``network()`` is built on ``device``; ``split`` parts it into
    (graph, parameters, other state) and ``merge`` puts a parameter tree back, so the parameters
    alone are what JAX differentiates, the way the libraries' own transforms do. ``run``
    applies a merged module to the (T, B, n) input; ``linears`` reads each layer's (kernel,
    bias or None) from a merged module whose parameters are gradients."""
    dev = jax_device(device)
    graph, params, rest = split_on_device(network, split, dev)

    def apply(p: Any, inputs: jax.Array) -> jax.Array:
        return run(merge(graph, p, rest), inputs)

    def layer_grads(grads: Any) -> Sequence[tuple[Any, Any | None]]:
        return linears(merge(graph, grads, rest))

    return JaxModel(apply, params, device_array(data.inputs, spec, dev), dev, spec, layer_grads)

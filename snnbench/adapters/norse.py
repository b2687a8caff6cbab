"""``norse`` and ``norse-compile``: Norse's ``LIFBoxCell`` stepped over T by a Python loop.

How the canonical network maps onto Norse 1.1 (``norse/torch/functional/lif_box.py``). One
``LIFBoxCell`` step computes::

    v_decayed = v + dt·tau_mem_inv·(i + v_leak - v)
    z         = threshold(v_decayed - v_th, method, alpha)       # Heaviside: v_decayed - v_th > 0
    v_new     = reset_method(z, v_decayed, v_reset, v_th)

With ``dt = 1``, ``tau_mem_inv = 1 - β`` and ``v_leak = 0`` this is ``β·v + (1-β)·i``: the
canonical ``β·v + x`` when the input current is ``i = x / (1-β)``. That factor is folded into the
Linear layers (weights and bias times ``1/(1-β)``, exact for β = 0.875 where it is 8), so the cell
sees membranes in canonical units and no extra op runs per step. The gradients reported for the
canonical weights are the library's gradients times ``1/(1-β)`` (the chain rule of that fixed
rescaling).

* The spike test is strict (``> 0``); passing ``v_th`` = the largest float below θ
  (:func:`strict_threshold`) makes it exactly the canonical ``v >= θ``. The subtractive reset
  uses Norse's own ``reset_subtract`` with the exact θ.
* The loop is per step (one ``LIFBoxCell`` call per time step, with the state carried), not one
  call on the whole (T, B, n) tensor, which would be a single step of a (T·B·n)-neuron layer.
* Norse's reset always carries gradient through the spike (``(1-z)·v + z·(v - θ)``): only
  ``detach_reset=False`` can be built.
* Surrogates are a fixed menu selected by name: ``fast_sigmoid`` maps to ``"super"``, which is
  ``1 / (1 + |u|)²`` whatever ``alpha`` says (slope fixed at 1); ``sigmoid`` maps to ``"tanh"``
  with ``alpha = slope/2``, whose derivative ``1 - tanh²(slope·u/2)`` is the spec's
  ``slope·σ(1-σ)`` times ``4/slope``. So gradients are exact only for fast_sigmoid with slope 1
  and sigmoid with slope 4; otherwise the adapter runs with ``exact_gradient=False`` and the
  verification's gradient cosine says how far off they are. ``atan`` has no Norse counterpart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from snnbench.adapter import Adapter, Capabilities, CaseSkipped, Model
from snnbench.workload.linear_lif.spec import DTYPES, MATMUL_PRECISIONS, CaseData, NetworkSpec

from ._declared import NORSE_GRAPH_KNOBS
from ._workloads import TorchNeuronsAdapter
from .torch_variants import COMPILE_CHUNK_STEPS, CompiledChunks

if TYPE_CHECKING:  # torch is imported lazily, inside the worker
    import torch

    from ._torch_common import LifStep, TimeLoop
    from .torch_graph import NeuronBuilder

#: spec surrogate → (Norse threshold method, alpha as a function of the spec slope)
NORSE_SURROGATES: dict[str, tuple[str, Callable[[float], float]]] = {
    "fast_sigmoid": ("super", lambda slope: slope),  # alpha is ignored by Norse's SuperSpike
    "sigmoid": ("tanh", lambda slope: slope / 2.0),
}

APPROXIMATION_NOTE = (
    "Norse's surrogates are a fixed menu: fast_sigmoid → 'super' = 1/(1+|u|)² (slope fixed at 1, "
    "alpha ignored), sigmoid → 'tanh' with alpha=slope/2 = (4/slope)·the spec's; gradients are "
    "exact only at fast_sigmoid slope 1 or sigmoid slope 4"
)


def _reset_subtract_exact(theta: float) -> Callable[..., Any]:
    """Norse's ``reset_subtract`` with the canonical θ (the cell's ``v_th`` is one ulp below)."""
    from norse.torch.functional.reset import reset_subtract

    def reset(z: Any, v: Any, v_reset: Any, v_th: Any) -> Any:
        return reset_subtract(z, v, v_reset, theta)

    return reset


def build_norse_network(
    spec: NetworkSpec,
    data: CaseData,
    device: str,
    time_loop: Callable[[LifStep], TimeLoop] | None = None,
) -> tuple[Callable[[Any], Any], Any, float]:
    """(network, linears, grad_scale): (T, B, n) input → (T, B, n) spikes through LIFBoxCells.

    ``linears`` hold the case's weights times ``grad_scale = 1/(1-β)``; multiply their gradients
    by ``grad_scale`` to get the gradients of the canonical weights. ``time_loop(step)`` runs
    the per-step cell call over T (default: the eager Python loop).
    """
    import torch
    from norse.torch import LIFBoxCell, LIFBoxParameters
    from norse.torch.functional.lif_box import LIFBoxFeedForwardState
    from norse.torch.functional.reset import reset_value

    from ._torch_common import (
        eager_time_loop,
        make_linears,
        strict_threshold,
        torch_dtype,
    )

    beta, theta = float(spec.beta), float(spec.threshold)
    scale = 1.0 / (1.0 - beta)
    linears = make_linears(spec, data, device)
    with torch.no_grad():
        for lin in linears:
            # ModuleList yields Modules; these are the nn.Linear layers make_linears built
            assert isinstance(lin, torch.nn.Linear)
            lin.weight.mul_(scale)
            if lin.bias is not None:
                lin.bias.mul_(scale)
    method, alpha_of = NORSE_SURROGATES[spec.surrogate]
    params = LIFBoxParameters(
        # Python floats: the same arithmetic as 0-dim tensors, without per-step tensor ops
        tau_mem_inv=1.0 - beta,  # type: ignore[arg-type]
        v_leak=0.0,  # type: ignore[arg-type]
        v_th=strict_threshold(theta, torch_dtype(spec)),  # type: ignore[arg-type]
        v_reset=0.0,  # type: ignore[arg-type]
        method=method,
        alpha=alpha_of(float(spec.surrogate_slope)),
        reset_method=_reset_subtract_exact(theta) if spec.reset == "subtract" else reset_value,
    )
    # One cell for every layer: a LIFBoxCell holds only its (identical) parameters, and one
    # step function lets a compiled time loop compile once for all layers.
    cell = LIFBoxCell(params, dt=1.0)

    def step(v: torch.Tensor, x_t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z, state = cell(x_t, LIFBoxFeedForwardState(v=v))
        return state.v, z

    lif = (time_loop or eager_time_loop)(step)

    def network(inp: torch.Tensor) -> torch.Tensor:
        h = inp
        for lin in linears:
            h = lif(lin(h))
        return h

    return network, linears, scale


class NorseAdapter(Adapter):
    """Norse ``LIFBoxCell`` per step (see the module docstring for the mapping)."""

    name = "norse"
    library = "norse"
    module = "norse.torch"
    description = "Norse LIFBoxCell, Python loop over T (reset gradient never detached)"

    def capabilities(self, variant: str) -> Capabilities:
        return Capabilities(
            dtypes=DTYPES,
            surrogates=tuple(NORSE_SURROGATES),
            detach_reset=(False,),
            matmul_precisions=MATMUL_PRECISIONS,
            exact_gradient=False,
            approximation_note=APPROXIMATION_NOTE,
        )

    def reason_skipped(self, spec: NetworkSpec, device: str, variant: str) -> str | None:
        reason = super().reason_skipped(spec, device, variant)
        if reason is None and spec.beta >= 1.0:
            # tau_mem_inv = 1 - beta = 0 leaves the input out entirely; 1/(1-beta) is infinite
            reason = "beta=1 not supported (Norse's leak scales the input by 1-beta)"
        return reason

    def _network(
        self,
        spec: NetworkSpec,
        data: CaseData,
        device: str,
        time_loop: Callable[[LifStep], TimeLoop] | None = None,
    ) -> tuple[Any, Any, float]:
        reason = self.reason_skipped(spec, device, self.variants[0])
        if reason:
            raise CaseSkipped(reason)
        return build_norse_network(spec, data, device, time_loop)

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        from ._torch_common import input_tensor

        network, linears, scale = self._network(spec, data, device)
        return _scaled_model(network, linears, input_tensor(spec, data, device), device, scale)


class NorseCompileAdapter(CompiledChunks, NorseAdapter):
    """The same Norse loop, compiled with ``torch.compile`` in chunks of time steps (lazily, on
    the first call); the design and its measurement are ``torch-compile``'s
    (:mod:`snnbench.adapters.torch_variants`)."""

    name = "norse-compile"
    description = (
        f"Norse LIFBoxCell loop under torch.compile, {COMPILE_CHUNK_STEPS}-step compiled chunks "
        "(compile time in first call)"
    )
    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        import torch

        from ._torch_common import compiled_time_loop, input_tensor

        # A fresh dynamo cache: every build compiles (its cost is the first call's), and no
        # earlier build's guards count towards the recompile limit (past it dynamo runs eager).
        torch._dynamo.reset()
        chunk = self.chunk_steps
        network, linears, scale = self._network(
            spec, data, device, lambda step: compiled_time_loop(step, chunk)
        )
        return _scaled_model(network, linears, input_tensor(spec, data, device), device, scale)


def _scaled_model(network: Any, linears: Any, x: Any, device: str, scale: float) -> Model:
    """A :class:`TorchModel` reporting gradients of the canonical (unscaled) weights."""
    import numpy as np

    from ._torch_common import TorchModel

    factor = np.float32(scale)

    class ScaledGradModel(TorchModel):
        """Gradients of the canonical weights, from those of the rescaled Linear layers."""

        def gradients(self) -> tuple[list[Any], list[Any]]:
            grad_w, grad_b = super().gradients()
            # d loss / d W = d loss / d (scale·W) · scale
            return [g * factor for g in grad_w], [g * factor for g in grad_b]

    return ScaledGradModel(network, linears, x, device)


class Norse(TorchNeuronsAdapter):
    """The registered ``norse`` adapter (plugin API v2): ``linear-lif`` through
    :class:`NorseAdapter`, ``nir-graph`` through :mod:`.norse_graph` (Norse's own cells).

    Its capabilities declare gradients approximate, as for Linear+LIF (one flag for both
    kinds); the graph build refuses every surrogate slope Norse does not compute exactly, so
    its graph gradients are exact BPTT."""

    linear_lif = NorseAdapter

    torch_graph_knobs = NORSE_GRAPH_KNOBS

    def neuron_op(self) -> NeuronBuilder:
        from .norse_graph import norse_neuron_op

        return norse_neuron_op

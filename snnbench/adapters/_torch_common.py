"""Shared pieces for PyTorch-based adapters: tensors from CaseData, the timed model wrapper,
and a surrogate spike function usable with any library that accepts a custom one.

Imported only inside workers (it imports torch at module level, so adapters import it lazily).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from snnbench.adapter import Model
from snnbench.workload.linear_lif.spec import CaseData, FloatArray, NetworkSpec

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


def torch_dtype(spec: NetworkSpec) -> torch.dtype:
    """The torch dtype named by the spec."""
    return TORCH_DTYPES[spec.dtype]


def surrogate_derivative(u: torch.Tensor, name: str, slope: float) -> torch.Tensor:
    """d spike / d u at u = v_pre - threshold; the same formulas as
    ``snnbench.workload.linear_lif.reference``."""
    if name == "fast_sigmoid":
        return 1.0 / (1.0 + slope * u.abs()) ** 2
    if name == "atan":
        return (slope / 2.0) / (1.0 + (math.pi / 2.0 * slope * u) ** 2)
    if name == "sigmoid":
        sig = torch.sigmoid(slope * u)
        return slope * sig * (1.0 - sig)
    raise ValueError(f"unknown surrogate {name!r}")


class _Heaviside(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, u: torch.Tensor, name: str, slope: float) -> torch.Tensor:
        ctx.save_for_backward(u)
        ctx.name = name
        ctx.slope = slope
        return (u >= 0).to(u.dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (u,) = ctx.saved_tensors
        return grad * surrogate_derivative(u, ctx.name, ctx.slope), None, None


def make_spike_fn(spec: NetworkSpec) -> Callable[[torch.Tensor], torch.Tensor]:
    """Heaviside(u) with the spec's surrogate gradient: spike = [u >= 0], u = v - threshold."""
    name, slope = spec.surrogate, float(spec.surrogate_slope)

    def spike(u: torch.Tensor) -> torch.Tensor:
        return _Heaviside.apply(u, name, slope)  # type: ignore[no-any-return,no-untyped-call]

    return spike


class AmpLinear(nn.Linear):
    """``nn.Linear`` run under ``torch.autocast(compute_dtype)``, returning a float32 output.

    The network's automatic mixed precision (spec ``amp-bf16`` / ``amp-fp16``): the weights
    stay float32 parameters, autocast rounds input, weight and bias to ``compute_dtype`` for the
    GEMM (float32 accumulation, output rounded once), and the output is cast back to float32 so
    that the neuron after it keeps a float32 membrane. Without that cast autocast would hand
    the neuron a 16-bit current, and libraries that create their state as ``zeros_like(input)``
    (snnTorch, SpikingJelly...) would carry a 16-bit membrane: not the AMP users train with.

    Entering autocast here, per layer, is what wrapping the whole forward in
    ``torch.autocast`` gives for this network: the Linear layers are its only ops on autocast's
    lower-precision list, and the LIF's element-wise ops see float32 tensors either way. It lets
    every adapter built on :func:`make_linears` honour AMP without touching its library code.
    ``cache_enabled=False``: the weight-cast cache is per autocast region anyway, and CUDA
    graph capture needs it off.

    The input is flattened to (rows, in) first. ``F.linear`` under autocast fuses the bias
    into the GEMM (one rounding of the float32 sum) when it can view its input as rows, but
    for a 3-D input that is not contiguous (sinabs' batch-major view of the time-major input)
    it runs ``matmul`` and adds the bias in 16 bits: two roundings, which moved 27 % of the
    currents by one ulp and 0.08 % of the spikes (docs/methodology.md). ``reshape`` copies
    such an input, as ``F.linear`` would, and costs nothing on a contiguous one.
    """

    def __init__(self, *args: Any, compute_dtype: torch.dtype, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.compute_dtype = compute_dtype

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        rows = inp.reshape(-1, self.in_features)
        with torch.autocast(self.weight.device.type, dtype=self.compute_dtype,
                            cache_enabled=False):
            out = super().forward(rows)
        return out.float().view(*inp.shape[:-1], self.out_features)


def make_linears(spec: NetworkSpec, data: CaseData, device: str) -> nn.ModuleList:
    """``spec.layers`` nn.Linear(n, n) holding exactly ``data``'s weights (no re-initialisation);
    :class:`AmpLinear` layers when the spec asks for automatic mixed precision."""
    dtype = torch_dtype(spec)
    layers = nn.ModuleList()
    for w, b in zip(data.weights, data.biases, strict=True):
        lin = (
            nn.Linear(spec.neurons, spec.neurons, bias=spec.bias, device=device, dtype=dtype)
            if spec.amp_dtype is None
            else AmpLinear(spec.neurons, spec.neurons, bias=spec.bias, device=device,
                           dtype=dtype, compute_dtype=TORCH_DTYPES[spec.amp_dtype])
        )
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
            if spec.bias:
                assert lin.bias is not None
                lin.bias.copy_(torch.from_numpy(b))
        layers.append(lin)
    return layers


def input_tensor(spec: NetworkSpec, data: CaseData, device: str) -> torch.Tensor:
    """The case input (T, B, n) on ``device`` in the spec's dtype; no gradient required."""
    return torch.from_numpy(data.inputs).to(device=device, dtype=torch_dtype(spec))


def to_numpy(t: torch.Tensor) -> FloatArray:
    """Detached float32 NumPy copy of a tensor."""
    return t.detach().to(device="cpu", dtype=torch.float32).numpy().astype(np.float32)


#: forward+backward passes a float16 GradScaler may take to settle before the build gives up
SCALER_SETTLE_PASSES = 24


class OnTorchDevice:
    """What every torch model does alike, the Linear+LIF ones (:class:`TorchModel`) and the
    NIR graph's: wait for its ``device``, read spikes back as numpy."""

    device: torch.device

    def synchronize(self) -> None:
        """Wait for the work queued on the device (nothing to wait for on the CPU)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def spikes(self, handle: Any) -> FloatArray:
        """The spikes ``handle`` holds, as a numpy array."""
        return to_numpy(handle)


class TorchModel(OnTorchDevice, Model):
    """Times ``network(x)`` where ``network`` maps time-major (T, B, n) input to (T, B, n) spikes.

    ``linears`` are the network's Linear layers (for gradients). Adapters whose library wants
    another layout transpose inside ``network`` (that cost is part of using the library).

    Float16 AMP (``linears`` are :class:`AmpLinear` computing in float16) trains the way users
    do, with a ``torch.amp.GradScaler``: every backward is ``scaler.scale(loss).backward()``,
    then ``unscale_`` (the gradients read by :meth:`gradients` are the true ones, and the
    inf/NaN check is part of the timed backward) and ``update``. The scaler's optimizer holds
    the parameters and is never stepped (nothing is trained). The scaler starts at 2¹⁶, whose
    gradients overflow float16 on this network, so the constructor runs forward+backward until
    a pass has no inf, as the first skipped steps of a training run would.
    """

    def __init__(
        self,
        network: nn.Module | Callable[[torch.Tensor], torch.Tensor],
        linears: nn.ModuleList,
        x: torch.Tensor,
        device: str,
        keep_alive: Any = None,
        grad_scaler: bool = False,
    ) -> None:
        """``grad_scaler``: train with a float16 ``GradScaler`` (class docstring) although
        ``linears`` are not float16 :class:`AmpLinear` (a network doing its own casts)."""
        self.network = network
        self.linears = linears
        self.x = x
        self.device = torch.device(device)
        self._keep_alive = keep_alive
        if isinstance(network, nn.Module):
            network.train()
        self._scaler: torch.amp.GradScaler | None = None
        self._optimizer: torch.optim.Optimizer | None = None
        if grad_scaler or any(isinstance(lin, AmpLinear) and lin.compute_dtype == torch.float16
                              for lin in linears):
            self._scaler = torch.amp.GradScaler(self.device.type)
            self._optimizer = torch.optim.SGD(list(linears.parameters()), lr=0.0)
            self._settle_scaler()

    def _settle_scaler(self) -> None:
        assert self._scaler is not None
        for _ in range(SCALER_SETTLE_PASSES):
            before = self._scaler.get_scale()
            self.zero_grad()
            self.backward(self.forward())
            if self._scaler.get_scale() >= before:  # no inf/NaN: the scale was kept
                self.zero_grad()
                return
        raise RuntimeError(f"float16 GradScaler found inf/NaN gradients in all "
                           f"{SCALER_SETTLE_PASSES} passes (scale now {self._scaler.get_scale()})")

    def forward(self) -> torch.Tensor:
        return self.network(self.x)

    def backward(self, handle: torch.Tensor) -> None:
        if self._scaler is None:
            handle.sum().backward()  # type: ignore[no-untyped-call]
            return
        assert self._optimizer is not None
        self._scaler.scale(handle.sum()).backward()  # type: ignore[no-untyped-call]
        self._scaler.unscale_(self._optimizer)
        self._scaler.update()

    def zero_grad(self) -> None:
        for p in self.linears.parameters():
            p.grad = None


    def gradients(self) -> tuple[list[FloatArray], list[FloatArray]]:
        grad_w: list[FloatArray] = []
        grad_b: list[FloatArray] = []
        for lin in self.linears:
            assert isinstance(lin, nn.Linear)
            gw = lin.weight.grad
            grad_w.append(to_numpy(gw) if gw is not None else np.zeros_like(to_numpy(lin.weight)))
            gb = lin.bias.grad if lin.bias is not None else None
            grad_b.append(
                to_numpy(gb) if gb is not None else np.zeros(lin.out_features, dtype=np.float32)
            )
        return grad_w, grad_b


# -- the loop over time steps: eager, or compiled in chunks ----------------------------------------

#: one LIF time step: (membrane after the previous step, input current) -> (membrane, spikes)
LifStep = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
#: one layer's neurons over all time steps: (T, B, n) currents -> (T, B, n) spikes
TimeLoop = Callable[[torch.Tensor], torch.Tensor]


def eager_time_loop(step: LifStep) -> TimeLoop:
    """``step`` applied to each time step in a Python loop, from a zero membrane."""

    def loop(x: torch.Tensor) -> torch.Tensor:
        v = torch.zeros_like(x[0])
        out = []
        # unbind: indexing x[t] in the loop would make autograd keep T full-size select grads
        for x_t in x.unbind(0):
            v, s = step(v, x_t)
            out.append(s)
        return torch.stack(out)

    return loop


def compiled_time_loop(step: LifStep, chunk: int) -> TimeLoop:
    """``step`` over T time steps: ``torch.compile`` of ``chunk`` consecutive steps, called
    from a Python loop over the ``ceil(T / chunk)`` chunks, the membrane carried between calls.

    Dynamo unrolls a Python loop, so compiling all T steps at once costs time proportional to
    T (minutes at T=500). Compiling one chunk bounds it by ``chunk`` whatever T is, while
    Inductor still fuses the element-wise work of ``chunk`` steps (into one forward and one
    backward kernel for the canonical LIF step), so the per-call overhead (guards, the compiled
    autograd node, kernel launches) is paid T/chunk times rather than T times. ``chunk=1``
    compiles the per-step function alone.

    At most two graphs are compiled: one for the full chunks and one for a shorter last chunk
    when ``chunk`` does not divide T (``dynamic=False``: each length gets its own static graph
    rather than a dynamic-shape one). ``fullgraph=True`` turns any graph break into an error
    instead of a silent fall-back to eager code. The initial membrane requires grad whenever
    the input does, so that the first chunk sees the same input metadata as the following
    ones (dynamo guards on ``requires_grad``; otherwise the first chunk compiles a graph of
    its own); its gradient is computed and dropped.
    """
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")

    def run_chunk(v: torch.Tensor, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = []
        for x_t in xs.unbind(0):
            v, s = step(v, x_t)
            out.append(s)
        return v, torch.stack(out)

    compiled = torch.compile(run_chunk, fullgraph=True, dynamic=False)

    def loop(x: torch.Tensor) -> torch.Tensor:
        v = torch.zeros_like(x[0], requires_grad=x.requires_grad)
        outs = []
        for xs in torch.split(x, chunk):
            v, s = compiled(v, xs)
            outs.append(s)
        return outs[0] if len(outs) == 1 else torch.cat(outs)

    return loop


# -- helpers for libraries parametrised by a time constant or a (v, threshold) surrogate ------


def decay_time_constant(beta: float, device: str, dt: float = 1.0) -> float:
    """A float32 time constant ``tau`` whose float32 ``exp(-dt / tau)`` on ``device`` is ``beta``.

    Libraries that take ``tau_mem`` (sinabs, sinabs-exodus, rockpool) compute the decay as
    ``torch.exp(-dt / tau)`` in float32. The textbook ``tau = -dt / ln(beta)`` can land one ulp
    away from float32(beta), and a decay one ulp off makes membranes drift from the canonical
    network. The candidates are the float32 neighbours of the textbook value, evaluated with the
    same expression on the target device (CPU and CUDA ``exp`` may round differently).
    ``beta == 1`` gives ``inf`` (exp(-0) = 1); ``beta == 0`` gives ``0`` (exp(-inf) = 0).

    Raises ValueError when no float32 tau within 256 ulps reproduces beta exactly.
    """
    target = float(np.float32(beta))
    if target == 1.0:
        return math.inf
    if target == 0.0:
        return 0.0
    start = np.float32(-dt / math.log(beta))
    # float32 neighbours of start, ordered by distance: start, +1 ulp, -1 ulp, +2 ulp, ...
    bits = np.array([start], dtype=np.float32).view(np.int32)[0]
    offsets = np.array([0] + [s * k for k in range(1, 257) for s in (1, -1)], dtype=np.int64)
    cand = (np.int64(bits) + offsets).astype(np.int32).view(np.float32)
    cand = cand[np.isfinite(cand) & (cand > 0)]
    taus = torch.from_numpy(cand.copy()).to(device=device)
    decays = torch.exp(-dt / taus).cpu().numpy()
    hits = np.flatnonzero(decays == np.float32(target))
    if hits.size == 0:
        raise ValueError(f"no float32 tau gives exp(-{dt}/tau) == {beta!r} on {device}")
    return float(cand[hits[0]])


def make_reset_fn(reset: str, detach_reset: bool) -> Any:
    """The sinabs ``reset_fn`` for a reset mode and detach rule (sinabs and its graph build).

    sinabs' own classes where their gradient matches the rule, else a subclass with the same
    forward arithmetic and the other gradient.
    """
    from sinabs.activation import MembraneReset, MembraneSubtract

    if reset == "subtract":
        if not detach_reset:
            return MembraneSubtract()

        class DetachedMembraneSubtract(MembraneSubtract):  # type: ignore[misc]
            """``v - threshold * s`` with ``s`` detached (no gradient through the reset)."""

            def __call__(self, spikes: Any, state: Any, threshold: Any) -> Any:
                return super().__call__(spikes.detach(), state, threshold)

        return DetachedMembraneSubtract()
    if detach_reset:
        # v * (s == 0) + 0: the comparison carries no gradient, i.e. the reset is detached
        return MembraneReset(reset_value=0.0)

    class AttachedMembraneReset(MembraneReset):  # type: ignore[misc]
        """``v * (1 - s)``: like MembraneReset(0) but the gradient flows through ``s``."""

        def __call__(self, spikes: Any, state: Any, spike_threshold: Any) -> Any:
            new_state = state.copy()
            new_state["v_mem"] = new_state["v_mem"] * (1.0 - spikes)
            return new_state

    return AttachedMembraneReset(reset_value=0.0)


class VoltageSurrogate:
    """The spec's surrogate derivative as a function of ``(v_mem, threshold)``.

    This is the calling convention of sinabs' and sinabs-exodus' ``surrogate_grad_fn``; it
    evaluates :func:`surrogate_derivative` at ``u = v_mem - threshold``, like the reference.
    """

    def __init__(self, name: str, slope: float) -> None:
        self.name = name
        self.slope = float(slope)

    def __call__(self, v_mem: torch.Tensor, threshold: Any) -> torch.Tensor:
        return surrogate_derivative(v_mem - threshold, self.name, self.slope)

    def __repr__(self) -> str:
        return f"VoltageSurrogate({self.name!r}, slope={self.slope})"


def batch_major_network(
    linears: nn.ModuleList,
    neurons: list[Any],
    reset_state: Callable[[Any], Any],
) -> Callable[[torch.Tensor], torch.Tensor]:
    """(T, B, n) input → (T, B, n) spikes through Linear + batch-major (B, T, n) neuron layers.

    For libraries whose layers take batch-major sequences (sinabs, rockpool): the time-major
    input is transposed once at the start and the spikes back at the end, inside the timed
    network. ``reset_state(neuron)`` runs before every sequence, because these layers keep
    their membrane state between calls.
    """

    def network(inp: torch.Tensor) -> torch.Tensor:
        h = inp.transpose(0, 1)
        for lin, neuron in zip(linears, neurons, strict=True):
            reset_state(neuron)
            h = neuron(lin(h))
        return h.transpose(0, 1)

    return network



def batch_major_model(
    spec: NetworkSpec,
    data: CaseData,
    device: str,
    linears: nn.ModuleList,
    neurons: list[Any],
    reset_state: Callable[[Any], Any],
) -> TorchModel:
    """The :class:`TorchModel` of :func:`batch_major_network`, its neuron layers in training
    mode and kept alive with the model."""
    for neuron in neurons:
        neuron.train()
    network = batch_major_network(linears, neurons, reset_state)
    return TorchModel(
        network, linears, input_tensor(spec, data, device), device, keep_alive=neurons
    )

# -- helpers for libraries with a strict spike test, and for torch.compile ---------------------


def strict_threshold(theta: float, dtype: torch.dtype) -> float:
    """The largest ``dtype`` value below ``theta``, for libraries that spike on ``v - v_th > 0``.

    For any ``v`` of that dtype, ``v - t > 0`` holds exactly when ``v >= theta`` (an IEEE
    subtraction of two finite values is positive iff the first is larger), so passing this as
    the library's threshold gives the canonical tie rule (``v_pre == threshold`` spikes) with
    no extra operation. Use the canonical ``theta`` wherever the library also subtracts the
    threshold (a subtractive reset).
    """
    t = torch.tensor(theta, dtype=dtype)
    return float(torch.nextafter(t, torch.tensor(-math.inf, dtype=dtype)).item())


def compile_unavailable_reason(device: str) -> str | None:
    """Why ``torch.compile`` cannot run on ``device`` here, or None when it can.

    Cheap checks only (no trial compilation): dynamo support for this Python, a C++ compiler
    for Inductor's CPU code, Triton for its CUDA code.
    """
    import torch._dynamo

    if not torch._dynamo.is_dynamo_supported():  # type: ignore[attr-defined]
        return "torch.compile (dynamo) is not supported on this Python version"
    if device == "cpu":
        try:
            from torch._inductor.cpp_builder import get_cpp_compiler

            get_cpp_compiler()
        except Exception as exc:  # Inductor raises its own exception types; any means "no"
            return f"torch.compile on CPU needs a C++ compiler: {type(exc).__name__}: {exc}"
        return None
    from torch.utils._triton import has_triton

    if not has_triton():
        return "torch.compile on CUDA needs Triton with a supported GPU (has_triton() is False)"
    return None


def cuda_unavailable_reason(device: str, what: str) -> str | None:
    """Why ``what`` (a CUDA-only variant) cannot run on ``device`` here, or None when it can."""
    if device != "cuda":
        return f"{what} need a CUDA device"
    if not torch.cuda.is_available():
        return "no CUDA device visible to torch (CPU-only build or no GPU)"
    return None


def cuda_graphed_model(
    network: Callable[[torch.Tensor], torch.Tensor],
    linears: nn.ModuleList,
    x: torch.Tensor,
    device: str,
) -> TorchModel:
    """``network``'s forward and backward captured as two CUDA graphs, as a :class:`TorchModel`.

    ``torch.cuda.make_graphed_callables`` warms up (3 forward+backward iterations on a side
    stream, so lazy work such as kernel compilation happens before capture), then captures the
    forward and the backward into two graphs sharing one private memory pool, with static
    input, outputs and gradient buffers (the input of a case never changes, so replays copy
    nothing). Each timed forward replays the forward graph inside an autograd node whose
    backward replays the backward graph; parameter gradients come back through autograd as
    usual. What is removed is the per-kernel CPU launch and autograd bookkeeping, nothing of
    the GPU work.
    """

    class Network(nn.Module):
        """``network`` as a Module, so that its Linear parameters are graph inputs."""

        def __init__(self) -> None:
            super().__init__()
            self.linears = linears

        def forward(self, inp: torch.Tensor) -> torch.Tensor:
            return network(inp)

    module = Network().train()
    graphed = torch.cuda.make_graphed_callables(module, (x,), num_warmup_iters=3)
    torch.cuda.synchronize(device)
    # make_graphed_callables returns the type it was given: a Module here
    return TorchModel(cast(nn.Module, graphed), linears, x, device, keep_alive=module)

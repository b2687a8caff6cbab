"""``lava-dl``: Intel's lava-dl SLAYER CUBA neuron (``slayer.neuron.cuba.Neuron``) behind
``nn.Linear``.

Configuration (lava-dl 0.6.0, ``lava/lib/dl/slayer/neuron/cuba.py`` and
``neuron/dynamics/leaky_integrator.py``):

* ``current_decay=1.0``: the current stage ``u[t] = (1 - 1)·u[t-1] + x[t]`` passes the input
  through, so the neuron is the canonical LIF ``v[t] = beta·v[t-1] + x[t]``;
  ``voltage_decay = 1 - beta``; ``threshold = θ``;
* reset to zero only (``v = v·(1 - s)``): resets ``zero``;
* layout (B, n, T): the network transposes the Linear output to it and the spikes back;
* synapse: ``nn.Linear`` rather than ``slayer.synapse.Dense`` (a 1×1 Conv3d over (B, C, T)):
  the same product ``W x + b`` with the case's weights and the harness' (out, in) gradient
  layout; SLAYER's synapse would add weight-quantisation hooks that are not part of the
  canonical network;
* fixed-point state, the library's Loihi emulation: the neuron keeps its state as integers
  scaled by ``s_scale = scale·64``. With ``scale=1<<12`` that is a 2⁻¹⁸ grid: the current is
  truncated to it at every step, the decay is applied as ``(v·(4096 - round(4096·(1-beta))))
  >> 12`` (beta is rounded to a multiple of 1/4096; 0.875 is exact), the threshold is
  ``floor(4096·θ)/4096`` and spikes need ``v > θ`` (lava adds ``0.01/s_scale`` so that Loihi's
  strict ``>`` holds). Spikes therefore differ from the float32 reference wherever the
  membrane passes within ~1e-5 of the threshold: ``exact_dynamics=False``; the verify result
  reports how many. On CUDA states are 32-bit integers: |v| must stay below 2¹³ = 8192;
* gradient (``exact_gradient=False``): the backward of the voltage stage is a plain leaky
  integrator, ignoring the reset entirely (neither the ``(1 - s)`` factor nor the path through
  the spike), and the forward quantisation is a straight-through identity. The surrogate is
  lava's own ``scale/(2·tau)·exp(-|v - θ|/tau)``; the adapter picks ``tau_grad``/``scale_grad``
  so that it has the same peak and area as the spec's surrogate (fast_sigmoid: peak 1,
  area 2/k; atan: peak k/2, area 1; sigmoid: peak k/4, area 1);
* on CUDA lava JIT-compiles its leaky-integrator kernel with ``torch.utils.cpp_extension.load``
  (needs nvcc and ninja; a minute or more the first time, then loaded from torch's extension
  cache); ``check_variant`` triggers that compilation and runs a tiny network, so the build is
  set-up (``prepare_s``), never part of a case, and a failure reads as "unavailable" rather than
  an error in the timed loop. ``make gpu-setup`` does the first build on a GPU box.

The registered adapter is :class:`~snnbench.adapters.lava_dl_graph.LavaDl` (plugin API v2):
``linear-lif`` cases through :class:`LavaDlAdapter` here, unchanged, and ``nir-graph`` chains
of Affine → LIF or CubaLIF layers, declared approximate as the Linear+LIF build is.

Import quirks (worker only, never at module import): lava-dl 0.6 declares Python < 3.11 (install
with ``pip install --no-deps --ignore-requires-python lava-dl`` plus opencv-python-headless);
``import lava.lib.dl.slayer`` imports torchvision for its object-detection helpers, and a CPU
torchvision wheel that does not match torch fails to load: then empty stub modules stand in for
``torchvision``, ``torchvision.ops`` and ``torchvision.transforms``. The import prints a
Prophesee toolbox warning on stdout, which is redirected to stderr.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import types
from typing import Any

from snnbench.adapter import Adapter, AdapterUnavailable, Capabilities, Model, import_or_unavailable
from snnbench.workload.linear_lif.spec import MATMUL_PRECISIONS, SURROGATES, CaseData, NetworkSpec

#: lava's neuron scale: states live on a grid of 1 / (SCALE · 64) = 2^-18
SCALE = 1 << 12
#: multipliers lava applies to tau_grad and scale_grad (``slayer/neuron/cuba.py``)
TAU_RHO_MULT = 100.0
SCALE_RHO_MULT = 0.1
_TORCHVISION_STUBS = ("torchvision", "torchvision.ops", "torchvision.transforms")


def _ensure_torchvision() -> None:
    """Make ``import torchvision`` succeed: the real one if it loads, else empty stubs.

    slayer imports torchvision only for object-detection helpers this adapter never uses.
    """
    if "torchvision" in sys.modules:
        return
    try:
        import torchvision  # noqa: F401
    except Exception:  # a wheel built for another torch raises at import
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        for name in _TORCHVISION_STUBS:
            stub = types.ModuleType(name)
            stub.__dict__["__snnbench_stub__"] = True
            sys.modules[name] = stub
        sys.modules["torchvision"].__dict__["ops"] = sys.modules["torchvision.ops"]
        sys.modules["torchvision"].__dict__["transforms"] = sys.modules["torchvision.transforms"]


def import_slayer() -> Any:
    """``lava.lib.dl.slayer``, imported in the worker with the quirks above handled; any
    failure to import it is :class:`AdapterUnavailable` naming it."""
    _ensure_torchvision()
    with contextlib.redirect_stdout(sys.stderr):  # the Prophesee warning is printed on stdout
        return import_or_unavailable("lava.lib.dl.slayer")


def pin_jit_arch(slayer: Any, capability: tuple[int, int]) -> str:
    """Make lava compile its CUDA extension for this GPU; return the arch list it will use.

    lava-dl 0.6's ``slayer/jitconfig.py`` sets ``TORCH_CUDA_ARCH_LIST = '8.0'`` on every GPU of
    compute capability 8 or more (a work-around from the RTX 3080's days) and writes it into the
    environment before it compiles. An sm_80 binary does not run on a Hopper (9.0) or later GPU:
    every launch fails with "no kernel image is available for the device", as it did on the
    H100. The arch list the user set wins when it names this GPU's capability; else it is the
    GPU's own. The extension's build command changes with the list, so ninja rebuilds a cached
    sm_80 build once.
    """
    own = f"{capability[0]}.{capability[1]}"
    wanted = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    archs = {a.removesuffix("+PTX") for a in re.split(r"[;, ]+", wanted.strip())}
    arch_list = wanted if own in archs else own
    slayer.jitconfig.TORCH_CUDA_ARCH_LIST = arch_list
    return arch_list


def surrogate_grad_params(spec: NetworkSpec, threshold: float) -> tuple[float, float]:
    """(tau_grad, scale_grad) giving lava's exponential surrogate the spec surrogate's peak
    and area (:func:`grad_params`)."""
    return grad_params(spec.surrogate, float(spec.surrogate_slope), threshold)


def grad_params(surrogate: str, slope: float, threshold: float) -> tuple[float, float]:
    """(tau_grad, scale_grad) giving lava's exponential surrogate the peak and area of
    ``surrogate`` of slope ``slope``.

    lava's derivative is ``s/(2τ)·exp(-|u|/τ)`` with ``τ = tau_grad·θ·100`` and
    ``s = scale_grad·0.1``: peak ``s/(2τ)``, area ``s``.
    """
    k = float(slope)
    if surrogate == "fast_sigmoid":  # 1/(1+k|u|)^2
        peak, area = 1.0, 2.0 / k
    elif surrogate == "atan":  # (k/2)/(1+(pi/2 k u)^2)
        peak, area = k / 2.0, 1.0
    elif surrogate == "sigmoid":  # k σ(ku)(1-σ(ku))
        peak, area = k / 4.0, 1.0
    else:
        raise ValueError(f"unknown surrogate {surrogate!r}")
    tau_eff = area / (2.0 * peak)
    return tau_eff / (threshold * TAU_RHO_MULT), area / SCALE_RHO_MULT


class LavaDlAdapter(Adapter):
    """lava-dl SLAYER CUBA neuron (current decay 1, voltage decay 1-β) after ``nn.Linear``."""

    name = "lava-dl"
    library = "lava-dl"
    module = "lava.lib.dl.slayer"
    description = "lava-dl SLAYER CUBA neuron (fixed-point Loihi emulation), reset to zero"

    def version(self) -> str:
        import_slayer()  # with its quirks handled; the base's import of it is then a no-op
        return super().version()

    def capabilities(self, variant: str) -> Capabilities:
        return Capabilities(
            resets=("zero",),
            surrogates=SURROGATES,
            matmul_precisions=MATMUL_PRECISIONS,
            exact_dynamics=False,
            exact_gradient=False,
            approximation_note=(
                "fixed-point state on a 2^-18 grid (beta rounded to 1/4096, spike needs "
                "v > threshold); backward ignores the reset; lava's exponential surrogate "
                "with the spec surrogate's peak and area"
            ),
        )

    def check_variant(self, variant: str, device: str) -> None:
        """On CUDA: compile (first time) or load (cached) lava's leaky-integrator extension,
        then run a tiny network once, all before the case's clock and timeout start."""
        if device != "cuda":
            return
        from ._prepare import ensure_ninja_on_path, warm_up

        slayer = import_slayer()
        if ensure_ninja_on_path() is None:
            raise AdapterUnavailable(
                "lava-dl compiles its CUDA extension with ninja, which is not installed "
                "(pip install ninja, or make gpu-setup)"
            )
        import torch

        if torch.cuda.is_available():  # without a GPU lava's own loader says why it cannot build
            pin_jit_arch(slayer, torch.cuda.get_device_capability())
        try:
            # First use JIT-compiles leaky_integrator.cu with nvcc (a minute or more); torch
            # caches the build under TORCH_EXTENSIONS_DIR (~/.cache/torch_extensions), so later
            # processes only load it. `make gpu-setup` does the first build on a GPU box.
            _ = slayer.neuron.dynamics.leaky_integrator.Accelerated.leaky_integrator
        except Exception as exc:  # compiler missing, CUDA mismatch...
            raise AdapterUnavailable(
                f"lava-dl could not JIT-compile its CUDA leaky integrator: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        warm_up(self, variant, device, "lava-dl's CUDA neuron")

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        import torch

        from ._torch_common import TorchModel, input_tensor, make_linears

        slayer = import_slayer()
        threshold = float(spec.threshold)
        tau_grad, scale_grad = surrogate_grad_params(spec, int(threshold * SCALE) / SCALE)
        linears = make_linears(spec, data, device)
        neurons = [
            slayer.neuron.cuba.Neuron(
                threshold=threshold,
                current_decay=1.0,
                voltage_decay=1.0 - float(spec.beta),
                tau_grad=tau_grad,
                scale_grad=scale_grad,
                scale=SCALE,
                persistent_state=False,  # zero state at every forward: a fresh sequence
                requires_grad=False,  # decays are not trained, as everywhere
            ).to(device)
            for _ in range(spec.layers)
        ]

        def network(inp: torch.Tensor) -> torch.Tensor:
            h = inp
            for lin, neuron in zip(linears, neurons, strict=True):
                # (T, B, n) → lava's (B, n, T) and back
                h = neuron(lin(h).permute(1, 2, 0)).permute(2, 0, 1)
            return h

        return TorchModel(
            network, linears, input_tensor(spec, data, device), device, keep_alive=neurons
        )

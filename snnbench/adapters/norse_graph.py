"""A ``nir-graph`` workload built natively with Norse's cells (not its NIR importer).

The synaptic nodes are PyTorch's ops (:mod:`.torch_graph`); each stateful node is a Norse cell
stepped over T with ``dt = 1`` and ``tau_mem_inv = 1 − a``, so that its step
``v + (1 − a)·(i − v)`` is a·v + (1 − a)·i, fed i = (g·x + l)/(1 − a) (``docs/nir.md``):

* LIF: ``LIFBoxCell``; its spike test is strict (``v − v_th > 0``), so ``v_th`` is the float32
  just below θ, and a subtract reset is Norse's ``reset_subtract`` with the exact θ;
* LI: ``LIBoxCell``;
* CubaLIF: ``LIFCell`` (Norse's LIF is current-based: the input jumps the current, the
  membrane integrates it, then the current decays), with ``tau_syn_inv = 1 − α``, fed
  g·γ·x/(1 − a), its ``v_leak`` l/(1 − a); its reset is to ``v_reset`` only.

Refused, with the reason: IF (a = 1: Norse's leak scales the input by 1 − a), a detached reset
(Norse's reset always carries the spike's gradient), a subtract reset of a CubaLIF, and a
surrogate Norse cannot compute exactly: its menu has ``super`` = 1/(1 + |u|)², the
``fast_sigmoid`` of slope 1, and ``tanh``, the ``sigmoid`` of slope 4 when alpha = 2.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from snnbench.adapter import CaseSkipped
from snnbench.workload.graph.nodes import IF, LI, LIF, CubaLIF, Node
from snnbench.workload.graph.reference import Dynamics

from ._graph_common import step_coefficients
from .torch_graph import Op, coefficient, input_term

#: the (surrogate, slope) pairs Norse computes exactly → its (method, alpha)
EXACT_SURROGATES: dict[tuple[str, float], tuple[str, float]] = {
    ("fast_sigmoid", 1.0): ("super", 1.0),
    ("sigmoid", 4.0): ("tanh", 2.0),
}


def _strict(theta: np.ndarray) -> np.ndarray:
    """The float32 just below θ: Norse's ``v − v_th > 0`` is then the canonical v ≥ θ."""
    t32 = np.asarray(theta, dtype=np.float32)
    return np.nextafter(t32, np.float32(-np.inf)).astype(np.float64)


def norse_neuron_op(node: Node, dyn: Dynamics, device: str) -> Op:
    """The node as Norse cells over T (module docstring); what Norse cannot build exactly
    raises :class:`CaseSkipped`."""
    from norse.torch import (
        LIBoxCell,
        LIBoxParameters,
        LIFBoxCell,
        LIFBoxParameters,
        LIFCell,
        LIFParameters,
    )
    from norse.torch.functional.leaky_integrator_box import LIBoxState
    from norse.torch.functional.lif import LIFFeedForwardState
    from norse.torch.functional.lif_box import LIFBoxFeedForwardState
    from norse.torch.functional.reset import reset_subtract, reset_value

    if isinstance(node, IF):
        raise CaseSkipped("IF not built: Norse's leak scales the input by 1 − a, which is 0 "
                          "for a neuron without leak")
    spiking = not isinstance(node, LI)
    if spiking and dyn.detach_reset:
        raise CaseSkipped("detach_reset not built: Norse's reset always carries the spike's "
                          "gradient")
    menu = EXACT_SURROGATES.get((dyn.surrogate, float(dyn.surrogate_slope)))
    if spiking and menu is None:
        raise CaseSkipped(f"surrogate {dyn.surrogate} of slope {dyn.surrogate_slope:g} not "
                          "built: Norse's menu is exact only for fast_sigmoid of slope 1 "
                          "('super') and sigmoid of slope 4 ('tanh')")
    method, alpha = menu or ("super", 1.0)
    c = step_coefficients(node, dyn)
    leak_share = 1.0 - c["a"]
    if np.any(leak_share <= 0):
        raise CaseSkipped(f"{node.kind} without leak (a = 1) not built: Norse's leak scales "
                          "the input by 1 − a")
    tau_mem_inv = coefficient(leak_share, device)
    gain: float | torch.Tensor
    leak: float | torch.Tensor
    cell: Any
    if isinstance(node, LIF):
        theta = coefficient(c["theta"], device)
        reset: Any = reset_value
        if dyn.reset == "subtract":
            def reset(z: Any, v: Any, v_reset: Any, v_th: Any) -> Any:
                return reset_subtract(z, v, v_reset, theta)
        cell = LIFBoxCell(LIFBoxParameters(
            tau_mem_inv=tau_mem_inv, v_leak=0.0, v_th=coefficient(_strict(c["theta"]), device),
            v_reset=0.0, method=method, alpha=alpha, reset_method=reset), dt=1.0)
        gain = coefficient(c["g"] / leak_share, device)
        leak = coefficient(c["l"] / leak_share, device)
    elif isinstance(node, LI):
        cell = LIBoxCell(LIBoxParameters(tau_mem_inv=tau_mem_inv, v_leak=0.0), dt=1.0)
        gain = coefficient(c["g"] / leak_share, device)
        leak = coefficient(c["l"] / leak_share, device)
    else:
        assert isinstance(node, CubaLIF)
        if dyn.reset == "subtract":
            raise CaseSkipped("CubaLIF with reset 'subtract' not built: Norse's LIFCell "
                              "resets to v_reset only")
        cell = LIFCell(LIFParameters(
            tau_syn_inv=coefficient(1.0 - c["alpha"], device), tau_mem_inv=tau_mem_inv,
            v_leak=coefficient(c["l"] / leak_share, device),
            v_th=coefficient(_strict(c["theta"]), device), v_reset=0.0, method=method,
            alpha=alpha), dt=1.0)
        gain = coefficient(c["g"] * c["gamma"] / leak_share, device)
        leak = 0.0
    cell = cell.to(device)

    def run(x: torch.Tensor) -> torch.Tensor:
        drive = input_term(x, gain, leak)
        v = torch.zeros_like(drive[0])
        out = []
        if isinstance(node, LI):
            li_state = LIBoxState(v=v)
            for x_t in drive.unbind(0):
                v, li_state = cell(x_t, li_state)
                out.append(v)
        elif isinstance(node, LIF):
            box_state = LIFBoxFeedForwardState(v=v)
            for x_t in drive.unbind(0):
                z, box_state = cell(x_t, box_state)
                out.append(z)
        else:
            cuba_state = LIFFeedForwardState(v=v, i=torch.zeros_like(v))
            for x_t in drive.unbind(0):
                z, cuba_state = cell(x_t, cuba_state)
                out.append(z)
        return torch.stack(out)

    return run

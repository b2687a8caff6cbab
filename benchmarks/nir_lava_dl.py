"""How far a lava-dl build of a NIR graph is from the float64 reference: the measurement behind
docs/nir.md's lava-dl row.

lava-dl's only trainable spiking neuron, SLAYER's CUBA (``slayer.neuron.cuba.Neuron``), is
u ← (1 − current_decay)·u + x, v ← (1 − voltage_decay)·v + u, a spike when v > θ, reset to
zero, in fixed point (the adapter's docstring, ``snnbench/adapters/lava_dl.py``). A LIF node
is that with current_decay = 1 (the ``linear-lif`` adapter's build), a CubaLIF node with
current_decay = dt/τ_syn (forward Euler) and its synaptic gain γ = w_in·dt/τ_syn applied to the
affine's output. This builds the ``linear-lif`` and ``cuba-mlp`` examples so, on the CPU, runs
forward and backward and prints :func:`~snnbench.workload.graph.compare.compare_graph`'s
figures (reset zero, forward Euler, dt = 1 ms). Run:
``.venv/bin/python benchmarks/nir_lava_dl.py``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from snnbench.adapters.lava_dl import SCALE, import_slayer, surrogate_grad_params
from snnbench.workload import NirGraph
from snnbench.workload.graph.compare import compare_graph
from snnbench.workload.graph.examples import write_example
from snnbench.workload.graph.nodes import LIF, Affine, CubaLIF
from snnbench.workload.graph.reference import membrane_coefficients, synapse_coefficients
from snnbench.workload.linear_lif.spec import NetworkSpec


def _first(value: Any) -> float:
    return float(np.asarray(value, dtype=np.float64).reshape(-1)[0])


def lava_graph(workload: NirGraph, data: Any) -> tuple[Any, dict[str, torch.Tensor]]:
    """(network, parameters) of a chain Affine → (LIF | CubaLIF) × k in lava-dl's CUBA."""
    slayer = import_slayer()
    dyn = workload.dynamics
    params = {k: torch.tensor(np.array(v), requires_grad=True) for k, v in data.params.items()}
    steps = []
    nodes = dict(data.graph.nodes)
    names = [n for n, _ in data.graph.nodes]
    for name in names:
        node = nodes[name]
        if not isinstance(node, LIF | CubaLIF):
            continue
        syn = names[names.index(name) - 1]
        assert isinstance(nodes[syn], Affine)
        tau = node.tau if isinstance(node, LIF) else node.tau_mem
        a, g, _ = (_first(c) for c in membrane_coefficients(tau, node.r, node.v_leak, dyn))
        current_decay, gamma = 1.0, 1.0
        if isinstance(node, CubaLIF):
            alpha, gam = synapse_coefficients(node.tau_syn, node.w_in, dyn)
            current_decay, gamma = 1.0 - _first(alpha), _first(gam)
        theta = _first(node.v_threshold)
        spec = NetworkSpec(neurons=8, threshold=theta, surrogate=dyn.surrogate,
                           surrogate_slope=dyn.surrogate_slope)
        tau_grad, scale_grad = surrogate_grad_params(spec, int(theta * SCALE) / SCALE)
        neuron = slayer.neuron.cuba.Neuron(
            threshold=theta, current_decay=current_decay, voltage_decay=1.0 - a,
            tau_grad=tau_grad, scale_grad=scale_grad, scale=SCALE, persistent_state=False,
            requires_grad=False)
        steps.append((syn, gamma * g, neuron))

    def network(x: torch.Tensor) -> torch.Tensor:
        h = x
        for syn, gain, neuron in steps:
            z = torch.nn.functional.linear(h, params[f"{syn}.weight"], params[f"{syn}.bias"])
            h = neuron((gain * z).permute(1, 2, 0)).permute(2, 0, 1)
        return h

    return network, params


def measure(name: str, folder: Path) -> None:
    """Print the agreement of lava-dl's build of example ``name`` with the reference."""
    path = write_example(name, folder / f"{name}.nir")
    workload = NirGraph.from_file(path, dt=1e-3, time_steps=100, batch_size=8, reset="zero")
    data = workload.make_data()
    network, params = lava_graph(workload, data)
    out = network(torch.tensor(np.array(data.inputs)))
    out.sum().backward()
    grads = {k: p.grad.numpy() for k, p in params.items() if p.grad is not None}
    eq = compare_graph(out.detach().numpy(), grads, workload.reference(data),
                       data.graph.spiking_output())
    print(f"{name}: spikes equal on {eq.output_match:.4%} of entries, rate "
          f"{eq.output_rate:.4f} (reference {eq.reference_rate:.4f}); least gradient "
          f"cosine {eq.grad_cosine:.4f} ({eq.worst_parameter}); "
          f"{'; '.join(eq.problems()) or 'within the exact bars'}")


def main() -> None:
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("linear-lif", "cuba-mlp"):
            measure(name, Path(tmp))


if __name__ == "__main__":
    main()

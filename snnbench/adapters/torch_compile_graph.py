"""A ``nir-graph`` workload built by ``torch-compile``: the plain PyTorch graph build
(:mod:`.torch_graph`) with each neuron node's loop over time compiled in chunks, as the
``torch-compile`` adapter compiles the Linear+LIF loop (:mod:`.torch_variants`).

The synaptic nodes run eagerly, as there (one op over all T steps: inside a compiled graph
Inductor would call the same BLAS or convolution routine). Each neuron node's step, the
operations of :func:`.torch_graph.torch_neuron_step` in the same order and with the same float32
coefficients, is compiled over ``chunk`` consecutive steps (``torch.compile``, Inductor,
``fullgraph=True``, static shapes) and called ``ceil(T / chunk)`` times with its state (the
membrane, and a CubaLIF's synaptic current) carried between calls.

Every node's chunk is the same Python function with other constants, so dynamo keeps one cache
entry per node and chunk length on that one code object: its recompile limit is raised to what
the graph needs (two lengths per node), or past it dynamo would run the rest eagerly, silently.
torch is imported at module level: import this module lazily, in a worker.
"""

from __future__ import annotations

import torch

from snnbench.workload.graph import NirGraph
from snnbench.workload.graph.nodes import Node
from snnbench.workload.graph.reference import Dynamics

from .torch_graph import NeuronBuilder, Op, torch_neuron_step

Tensor = torch.Tensor


def compiled_neuron_builder(chunk: int) -> NeuronBuilder:
    """A :data:`~.torch_graph.NeuronBuilder` whose loops over time run ``chunk`` steps per
    compiled call."""

    def build(node: Node, dyn: Dynamics, device: str) -> Op:
        drive_of, step = torch_neuron_step(node, dyn, device)

        def run_chunk(v: Tensor, cur: Tensor, drive: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            out = []
            for d_t in drive.unbind(0):
                s, v, cur = step(d_t, v, cur)
                out.append(s)
            return v, cur, torch.stack(out)

        compiled = torch.compile(run_chunk, fullgraph=True, dynamic=False)

        def run(x: Tensor) -> Tensor:
            drive = drive_of(x)
            # the state requires grad from the start, as after the first chunk: one guard set
            v = torch.zeros(drive.shape[1:], dtype=drive.dtype, device=drive.device,
                            requires_grad=drive.requires_grad)
            cur = torch.zeros_like(v, requires_grad=drive.requires_grad)
            outs = []
            for piece in torch.split(drive, chunk):
                v, cur, s = compiled(v, cur, piece)
                outs.append(s)
            return outs[0] if len(outs) == 1 else torch.cat(outs)

        return run

    return build


def allow_recompiles(workload: NirGraph) -> None:
    """Raise dynamo's per-code recompile limit to what ``workload``'s neuron nodes need (a
    full and a shorter last chunk each), never lowering it."""
    import torch._dynamo.config as config

    nodes = sum(1 for _, node in workload.load().nodes if node.stateful)
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, max(int(getattr(config, name)), 2 * nodes + 2))

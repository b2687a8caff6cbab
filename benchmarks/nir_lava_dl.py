"""How far lava-dl's build of a NIR graph is from the float64 reference: the measurement behind
docs/nir.md's lava-dl row.

The ``lava-dl`` adapter builds a chain of Affine → LIF or CubaLIF layers with SLAYER's CUBA
neuron (:mod:`snnbench.adapters.lava_dl_graph`), a declared approximation: fixed-point state and
a backward that ignores the reset. This builds the ``linear-lif`` and ``cuba-mlp`` examples on
the CPU (reset zero, forward Euler, dt = 1 ms, T = 100, B = 8), runs forward and backward and
prints :func:`~snnbench.workload.graph.compare.compare_graph`'s figures. Run:
``.venv/bin/python benchmarks/nir_lava_dl.py``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from snnbench.adapters.lava_dl_graph import LavaDl
from snnbench.workload import NirGraph
from snnbench.workload.graph.compare import compare_graph
from snnbench.workload.graph.examples import write_example


def measure(name: str, folder: Path) -> None:
    """Print the agreement of lava-dl's build of example ``name`` with the reference."""
    path = write_example(name, folder / f"{name}.nir")
    workload = NirGraph.from_file(path, dt=1e-3, time_steps=100, batch_size=8, reset="zero")
    data = workload.make_data()
    model = LavaDl().build(workload, data, "cpu", "default")
    model.zero_grad()
    handle = model.forward()
    model.backward(handle)
    eq = compare_graph(model.spikes(handle), model.gradients(), workload.reference(data),
                       data.graph.spiking_output())
    print(f"{name}: spikes equal on {eq.output_match:.4%} of entries, rate "
          f"{eq.output_rate:.4f} (reference {eq.reference_rate:.4f}); least gradient "
          f"cosine {eq.grad_cosine:.4f} ({eq.worst_parameter}); "
          f"{'; '.join(eq.problems()) or 'within the exact bars'}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("linear-lif", "cuba-mlp"):
            measure(name, Path(tmp))


if __name__ == "__main__":
    main()

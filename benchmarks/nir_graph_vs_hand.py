"""A graph case against the hand-written Linear+LIF case of the same network, per library.

The Linear+LIF spec is written as a NIR graph (``linear_lif_graph``), read back as a
``nir-graph`` workload and built by the library's graph builder; the hand-written build is the
library's ``linear-lif`` adapter. Both compute the same network (the tests prove it spike for
spike); this prints the median forward+backward time of each, in alternating order (ABBA), and
their ratio. Single-threaded, CPU. Run: ``.venv/bin/python benchmarks/nir_graph_vs_hand.py``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SIZE = {"neurons": 256, "layers": 2, "batch_size": 16, "time_steps": 100}
PAIRS = 15


def _step(model: Any) -> float:
    model.zero_grad()
    start = time.perf_counter()
    handle = model.forward()
    model.backward(handle)
    model.synchronize()  # JAX dispatches asynchronously
    return time.perf_counter() - start


def _compare(label: str, hand: Any, graph: Any) -> None:
    for model in (hand, graph):
        for _ in range(3):
            _step(model)
    a: list[float] = []
    b: list[float] = []
    for _ in range(PAIRS):
        a.append(_step(hand))
        b.append(_step(graph))
        b.append(_step(graph))
        a.append(_step(hand))
    ma, mb = statistics.median(a), statistics.median(b)
    qa, qb = statistics.quantiles(a, n=4), statistics.quantiles(b, n=4)
    print(f"{label:13} hand {ma * 1e3:7.1f} ms (IQR {qa[0] * 1e3:.1f}-{qa[2] * 1e3:.1f})  "
          f"graph {mb * 1e3:7.1f} ms (IQR {qb[0] * 1e3:.1f}-{qb[2] * 1e3:.1f})  "
          f"graph/hand {mb / ma:.3f}")


def main() -> int:
    """Time every pair whose library is installed."""
    import torch

    from snnbench.adapters.torch_graph import NeuronBuilder, TorchGraphModel, torch_neuron_op
    from snnbench.adapters.torch_ref import TorchAdapter
    from snnbench.workload import NirGraph
    from snnbench.workload.graph.examples import linear_lif_graph, write_graph
    from snnbench.workload.linear_lif.spec import NetworkSpec, make_case_data

    torch.set_num_threads(1)
    pairs: list[tuple[str, dict[str, Any], Callable[[], Any], NeuronBuilder | Any]] = [
        ("torch", {"reset": "subtract"}, TorchAdapter, torch_neuron_op)]
    try:
        from snnbench.adapters.snntorch import SnnTorchAdapter
        from snnbench.adapters.snntorch_graph import snntorch_neuron_op

        pairs.append(("snntorch", {"reset": "zero"}, SnnTorchAdapter, snntorch_neuron_op))
    except ImportError:
        pass
    try:
        from snnbench.adapters.spikingjelly import SpikingJellyAdapter
        from snnbench.adapters.spikingjelly_graph import spikingjelly_neuron_op

        pairs.append(("spikingjelly", {"reset": "subtract"}, SpikingJellyAdapter,
                      spikingjelly_neuron_op))
    except ImportError:
        pass
    try:
        from snnbench.adapters.sinabs import SinabsAdapter
        from snnbench.adapters.sinabs_graph import sinabs_neuron_op

        pairs.append(("sinabs", {"reset": "subtract"}, SinabsAdapter, sinabs_neuron_op))
    except ImportError:
        pass
    try:
        from snnbench.adapters.norse import NorseAdapter
        from snnbench.adapters.norse_graph import norse_neuron_op

        # what Norse builds exactly: a reset carrying gradient, its 'super' surrogate (slope 1)
        pairs.append(("norse", {"reset": "subtract", "detach_reset": False,
                                "surrogate_slope": 1.0}, NorseAdapter, norse_neuron_op))
    except ImportError:
        pass
    try:
        from snnbench.adapters.haiku import HaikuAdapter
        from snnbench.adapters.haiku_graph import HaikuGraphModel

        pairs.append(("haiku", {"reset": "subtract"}, HaikuAdapter, HaikuGraphModel))
    except ImportError:
        pass
    with tempfile.TemporaryDirectory() as folder:
        for label, choice, adapter, builder in pairs:
            spec = NetworkSpec(**choice, **SIZE)
            path = write_graph(linear_lif_graph(spec, 1e-3), Path(folder) / f"{label}.nir")
            workload = NirGraph.from_file(path, dt=1e-3, time_steps=spec.time_steps,
                                          batch_size=spec.batch_size, **choice)
            variant = {"spikingjelly": "torch", "haiku": "fp32"}.get(label, "default")
            hand = adapter().build(spec, make_case_data(spec), "cpu", variant)
            graph = (HaikuGraphModel(workload, workload.make_data(), "cpu")
                     if label == "haiku"
                     else TorchGraphModel(workload, workload.make_data(), "cpu", builder))
            _compare(label, hand, graph)
            hand.close()
            graph.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A graph case against the hand-written Linear+LIF case of the same network, per library.

The Linear+LIF spec is written as a NIR graph (``linear_lif_graph``), read back as a
``nir-graph`` workload and built by the library's graph builder; the hand-written build is the
library's ``linear-lif`` adapter. Both compute the same network (the tests prove it spike for
spike); this prints the median forward+backward time of each, in alternating order (ABBA), and
their ratio. Both are built by the registered adapter (``linear-lif`` and ``nir-graph`` kinds),
as the harness builds them. Single-threaded, CPU. Run:
``.venv/bin/python benchmarks/nir_graph_vs_hand.py [ADAPTER ...]`` (all that build graphs).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
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


#: the choices each library builds exactly (the default: reset subtract, detached)
CHOICES: dict[str, dict[str, Any]] = {
    "snntorch": {"reset": "zero"},
    # a reset carrying gradient, its 'super' surrogate (slope 1)
    "norse": {"reset": "subtract", "detach_reset": False, "surrogate_slope": 1.0},
    # subtract through the spike only
    "rockpool": {"reset": "subtract", "detach_reset": False},
}


def main(names: list[str]) -> int:
    """Time every registered adapter that builds graphs (or those named), through the plugin
    API the harness speaks: ``build(LinearLif(spec))`` against ``build(NirGraph(...))``."""
    import torch

    from snnbench.adapter import AdapterUnavailable
    from snnbench.registry import discover
    from snnbench.workload import LinearLif, NirGraph
    from snnbench.workload.graph.examples import linear_lif_graph, write_graph
    from snnbench.workload.linear_lif.spec import NetworkSpec, make_case_data

    torch.set_num_threads(1)
    entries = discover()
    with tempfile.TemporaryDirectory() as folder:
        for name in names or sorted(entries):
            adapter = entries[name].create()
            variants = [v for v in adapter.variants
                        if adapter.capabilities(v).knobs("nir-graph") is not None]
            if not variants:
                continue
            try:
                adapter.version()
            except AdapterUnavailable as exc:
                print(f"{name:13} unavailable: {exc}")
                continue
            choice = CHOICES.get(name, {"reset": "subtract"})
            spec = NetworkSpec(**choice, **SIZE)
            path = write_graph(linear_lif_graph(spec, 1e-3), Path(folder) / f"{name}.nir")
            workload = NirGraph.from_file(path, dt=1e-3, time_steps=spec.time_steps,
                                          batch_size=spec.batch_size, **choice)
            hand_case = LinearLif(spec)
            reason = (adapter.reason_skipped(hand_case, "cpu", variants[0])
                      or adapter.reason_skipped(workload, "cpu", variants[0]))
            if reason:
                print(f"{name:13} skipped: {reason}")
                continue
            hand = adapter.build(hand_case, make_case_data(spec), "cpu", variants[0])
            graph = adapter.build(workload, workload.make_data(), "cpu", variants[0])
            _compare(name, hand, graph)
            hand.close()
            graph.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

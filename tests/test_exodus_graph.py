"""The ``sinabs-exodus`` graph build: declared (sinabs' build with the EXODUS layers, reset
subtract through the spike only, CUDA only), still unavailable on a CPU torch with the CUDA
reason, and its wiring run on the CPU with sinabs' own layers standing in for EXODUS' (which
subclass them with the same arguments; the kernels themselves need a GPU:
``benchmarks/gpu_lease.sh``, step ``exodus-graph``). ``rockpool-exodus`` builds no graph."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

pytest.importorskip("nir")

from snnbench.adapter import AdapterUnavailable
from snnbench.plugin import Adapter as AdapterV2
from snnbench.registry import discover
from snnbench.workload import GraphKnobs, NirGraph
from snnbench.workload.graph.compare import compare_graph
from snnbench.workload.graph.examples import write_example, write_graph
from tests.fixtures.graphs import conv1d_nir


def _exodus() -> AdapterV2:
    adapter = discover()["sinabs-exodus"].create()
    assert isinstance(adapter, AdapterV2) and type(adapter).api_version == 2, type(adapter)
    return adapter


def test_sinabs_exodus_declares_graphs_of_what_its_kernels_compute() -> None:
    from snnbench.adapters._declared import ALL_NODE_KINDS

    caps = _exodus().capabilities("default")
    knobs = caps.knobs("nir-graph")
    assert isinstance(knobs, GraphKnobs)
    assert knobs.node_kinds == ALL_NODE_KINDS
    assert (knobs.resets, knobs.detach_reset) == (("subtract",), (False,))
    assert caps.devices == ("cuda",)
    # rockpool-exodus: LIFExodus' mandatory synapse is not reused for graphs
    assert "nir-graph" not in discover()["rockpool-exodus"].create().capabilities(
        "default").workloads


def test_sinabs_exodus_refuses_a_graph_on_the_cpu_with_the_reason(tmp_path: Path) -> None:
    import torch

    adapter = _exodus()
    if not torch.cuda.is_available():
        with pytest.raises(AdapterUnavailable, match="CUDA"):
            adapter.version()
    workload = NirGraph.from_file(write_example("conv", tmp_path / "conv.nir"), dt=1e-3,
                                  detach_reset=False)
    reason = adapter.reason_skipped(workload, "cpu", "default")
    assert reason is not None and "cpu" in reason
    zero = NirGraph.from_file(tmp_path / "conv.nir", dt=1e-3, reset="zero",
                              detach_reset=False)
    reason = adapter.reason_skipped(zero, "cuda", "default")
    assert reason is not None and "zero" in reason


@pytest.fixture
def sinabs_as_exodus(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``sinabs.exodus.layers`` made of subclasses of sinabs' own LIF, IAF and ExpLeak (as
    EXODUS' are, with the same arguments); the list names each layer made from it."""
    sinabs_layers = pytest.importorskip("sinabs.layers")
    made: list[str] = []
    layers = types.ModuleType("sinabs.exodus.layers")
    for name in ("LIF", "IAF", "ExpLeak"):
        base = getattr(sinabs_layers, name)

        def init(self: object, *args: object, _base: type = base, _name: str = name,
                 **kwargs: object) -> None:
            made.append(_name)
            _base.__init__(self, *args, **kwargs)  # type: ignore[misc]

        setattr(layers, name, type(name, (base,), {"__init__": init}))
    package = types.ModuleType("sinabs.exodus")
    package.layers = layers  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sinabs.exodus", package)
    monkeypatch.setitem(sys.modules, "sinabs.exodus.layers", layers)
    return made


@pytest.mark.slow
@pytest.mark.parametrize("graph", ["conv1d", "shd-mlp", "cuba-mlp"])
def test_sinabs_exodus_graph_wiring_on_cpu_stand_ins(tmp_path: Path,
                                                     sinabs_as_exodus: list[str],
                                                     graph: str) -> None:
    path = (write_graph(conv1d_nir(), tmp_path / "g.nir") if graph == "conv1d"
            else write_example(graph, tmp_path / "g.nir"))
    workload = NirGraph.from_file(path, dt=1e-3, time_steps=20, batch_size=2,
                                  detach_reset=False)
    adapter = _exodus()
    knobs = adapter.capabilities("default").knobs("nir-graph")
    assert isinstance(knobs, GraphKnobs) and knobs.reason_unsupported(workload) is None
    data = workload.make_data()
    # the graph build itself (the device check is the adapter's, above)
    model = adapter.build_graph(workload, data, "cpu", "default")  # type: ignore[attr-defined]
    model.zero_grad()
    handle = model.forward()
    model.backward(handle)
    eq = compare_graph(model.spikes(handle), model.gradients(), workload.reference(data),
                       data.graph.spiking_output())
    assert eq.problems() == [] and eq.reference_rate != 0
    # every neuron node was built from the (stand-in) EXODUS layers
    neurons = {"conv1d": ["LIF", "LIF"], "shd-mlp": ["LIF", "LIF", "ExpLeak"],
               "cuba-mlp": ["LIF", "LIF"]}[graph]
    assert sinabs_as_exodus == neurons

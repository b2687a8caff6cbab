"""The plain PyTorch build of a graph workload reproduces the float64 reference: every shipped
example, every node kind, both resets and both discretisations; a build of another network
(another dt) is caught."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("nir")
pytest.importorskip("torch")

from snnbench.adapters.torch_graph import TORCH_GRAPH_KNOBS, TorchGraphModel
from snnbench.workload import NirGraph
from snnbench.workload.graph.compare import compare_graph
from snnbench.workload.graph.examples import EXAMPLES, write_example
from snnbench.workload.graph.nodes import NODE_TYPES

CHOICES = [
    {},
    {"reset": "zero", "discretisation": "exponential", "surrogate": "atan",
     "detach_reset": False},
]


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("graphs")
    return {name: write_example(name, folder / f"{name}.nir") for name in EXAMPLES}


@pytest.mark.parametrize("choice", CHOICES, ids=["subtract-euler", "zero-exponential"])
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_torch_build_is_exact(examples: dict[str, Path], name: str,
                              choice: dict[str, object]) -> None:
    workload = NirGraph.from_file(examples[name], dt=1e-3, time_steps=30, batch_size=2,
                                  **choice)  # type: ignore[arg-type]
    assert TORCH_GRAPH_KNOBS.reason_unsupported(workload) is None
    data = workload.make_data()
    model = TorchGraphModel(workload, data, "cpu")
    model.zero_grad()
    handle = model.forward()
    model.backward(handle)
    eq = compare_graph(model.spikes(handle), model.gradients(), workload.reference(data),
                       data.graph.spiking_output())
    assert eq.problems() == []
    if eq.spiking_output:
        assert eq.output_match == 1.0 and eq.reference_rate > 0


def test_a_build_of_another_network_is_caught(examples: dict[str, Path]) -> None:
    workload = NirGraph.from_file(examples["cuba-mlp"], dt=1e-3, time_steps=40, batch_size=2)
    data = workload.make_data()
    # what an importer assuming another time step builds: the same file, another network
    other = TorchGraphModel(replace(workload, dt=0.5e-3), data, "cpu")
    handle = other.forward()
    other.backward(handle)
    eq = compare_graph(other.spikes(handle), other.gradients(), workload.reference(data),
                       data.graph.spiking_output())
    assert any("spikes match only" in p for p in eq.problems())


def test_the_knobs_cover_every_node_kind() -> None:
    assert set(TORCH_GRAPH_KNOBS.node_kinds) == set(NODE_TYPES)

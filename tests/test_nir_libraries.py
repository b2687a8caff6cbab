"""snnTorch's and SpikingJelly's native builds of a graph workload (their neurons, never their
NIR importers) reproduce the float64 reference; what a library cannot build exactly is a
``CaseSkipped`` with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

nir = pytest.importorskip("nir")
pytest.importorskip("torch")

from snnbench.adapter import CaseSkipped  # noqa: E402
from snnbench.adapters.torch_graph import TorchGraphModel, torch_neuron_op  # noqa: E402
from snnbench.workload import NirGraph  # noqa: E402
from snnbench.workload.graph.compare import compare_graph  # noqa: E402
from snnbench.workload.graph.examples import EXAMPLES, write_example, write_graph  # noqa: E402


def _snntorch() -> Any:
    pytest.importorskip("snntorch")
    from snnbench.adapters.snntorch_graph import snntorch_neuron_op

    return snntorch_neuron_op


def test_snntorch_neurons_are_released_on_close(tmp_path: Path) -> None:
    _snntorch()
    import snntorch as snn

    from snnbench.adapters.snntorch_graph import snntorch_graph_model

    workload = NirGraph.from_file(write_example("shd-mlp", tmp_path / "s.nir"), dt=1e-3,
                                  time_steps=3, batch_size=1, reset="zero")
    before = list(snn.SpikingNeuron.instances)
    # a verification build and the timed build live in one worker process: closing one
    # releases its own neurons, never the other's (nor those of any earlier model)
    first = snntorch_graph_model(workload, workload.make_data(), "cpu")
    second = snntorch_graph_model(workload, workload.make_data(), "cpu")
    assert len(snn.SpikingNeuron.instances) == len(before) + 6
    first.close()
    assert len(snn.SpikingNeuron.instances) == len(before) + 3
    assert snn.SpikingNeuron.instances[:len(before)] == before
    second.close()
    assert snn.SpikingNeuron.instances == before


def _spikingjelly() -> Any:
    pytest.importorskip("spikingjelly")
    from snnbench.adapters.spikingjelly_graph import spikingjelly_neuron_op

    return spikingjelly_neuron_op


def _norse() -> Any:
    pytest.importorskip("norse")
    from snnbench.adapters.norse_graph import norse_neuron_op

    return norse_neuron_op


def _sinabs() -> Any:
    pytest.importorskip("sinabs")
    from snnbench.adapters.sinabs_graph import sinabs_neuron_op

    return sinabs_neuron_op


def _haiku() -> Any:
    pytest.importorskip("haiku")
    from snnbench.adapters.haiku_graph import HaikuGraphModel

    def build(workload: NirGraph, data: Any) -> Any:
        return HaikuGraphModel(workload, data, "cpu")

    build.whole_model = True  # type: ignore[attr-defined]
    return build


def _brainstate() -> Any:
    pytest.importorskip("brainstate")
    from snnbench.adapters.brainstate_graph import BrainstateGraphModel

    def build(workload: NirGraph, data: Any) -> Any:
        return BrainstateGraphModel(workload, data, "cpu")

    build.whole_model = True  # type: ignore[attr-defined]
    return build


def _spyx() -> Any:
    pytest.importorskip("spyx")
    from snnbench.adapters.spyx_graph import SpyxGraphModel

    def build(workload: NirGraph, data: Any) -> Any:
        return SpyxGraphModel(workload, data, "cpu")

    build.whole_model = True  # type: ignore[attr-defined]
    return build


BUILDERS = {"torch": lambda: torch_neuron_op, "snntorch": _snntorch,
            "spikingjelly": _spikingjelly, "norse": _norse, "sinabs": _sinabs,
            "haiku": _haiku, "brainstate": _brainstate, "spyx": _spyx}
#: zero reset, not detached: the one setting every library builds for every node kind; the
#: sigmoid of slope 4, the one surrogate Norse's menu shares exactly with the others
EVERYONE = {"reset": "zero", "detach_reset": False, "discretisation": "exponential",
            "surrogate": "sigmoid", "surrogate_slope": 4.0}


def _if_dag() -> Any:
    """Input → (Affine, Linear·Scale) summed → IF → AvgPool-free read-out: IF, Linear and
    Scale, none of which the examples use, and two edges into one node."""
    rng = np.random.default_rng(1)
    nodes = {
        "input": nir.Input({"input": np.array([12])}),
        "aff": nir.Affine(weight=rng.normal(size=(6, 12)) * 0.5, bias=rng.normal(size=6) * 0.1),
        "lin": nir.Linear(weight=rng.normal(size=(6, 12)) * 0.5),
        "scale": nir.Scale(scale=np.full(6, 0.5)),
        "if": nir.IF(r=np.full(6, 400.0), v_threshold=np.ones(6)),
        "output": nir.Output({"output": np.array([6])}),
    }
    edges = [("input", "aff"), ("input", "lin"), ("lin", "scale"), ("aff", "if"),
             ("scale", "if"), ("if", "output")]
    return nir.NIRGraph(nodes=nodes, edges=edges)


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("graphs")
    out = {name: write_example(name, folder / f"{name}.nir") for name in EXAMPLES}
    out["if-dag"] = write_graph(_if_dag(), folder / "if-dag.nir")
    return out


def _check(workload: NirGraph, builder: Any) -> None:
    data = workload.make_data()
    model = (builder(workload, data) if getattr(builder, "whole_model", False)
             else TorchGraphModel(workload, data, "cpu", builder))
    handle = model.forward()
    model.backward(handle)
    eq = compare_graph(model.spikes(handle), model.gradients(), workload.reference(data),
                       data.graph.spiking_output())
    assert eq.problems() == []
    assert eq.reference_rate != 0
    # a second forward starts from rest (a library keeping its state would differ)
    model.zero_grad()
    again = model.forward()
    np.testing.assert_array_equal(model.spikes(again), model.spikes(handle))
    model.close()


@pytest.mark.parametrize("library", sorted(BUILDERS))
@pytest.mark.parametrize("name", [*sorted(EXAMPLES), "if-dag"])
def test_native_build_is_exact(graphs: dict[str, Path], library: str, name: str) -> None:
    builder = BUILDERS[library]()
    if library == "norse" and name == "if-dag":
        pytest.skip("Norse builds no IF (test_norse_refuses_what_it_cannot_build)")
    workload = NirGraph.from_file(graphs[name], dt=1e-3, time_steps=40, batch_size=3,
                                  **EVERYONE)  # type: ignore[arg-type]
    _check(workload, builder)


def test_norse_builds_subtract_euler_at_its_exact_surrogate(graphs: dict[str, Path]) -> None:
    workload = NirGraph.from_file(graphs["conv"], dt=1e-3, time_steps=40, batch_size=3,
                                  detach_reset=False, surrogate_slope=1.0)
    _check(workload, _norse())


def test_norse_refuses_what_it_cannot_build(graphs: dict[str, Path]) -> None:
    builder = _norse()
    cases = [
        ("if-dag", EVERYONE, "IF not built"),
        ("shd-mlp", {**EVERYONE, "detach_reset": True}, "detach_reset not built"),
        ("shd-mlp", {**EVERYONE, "surrogate": "atan"}, "surrogate atan of slope 4 not built"),
        ("cuba-mlp", {**EVERYONE, "reset": "subtract"}, "CubaLIF with reset 'subtract'"),
    ]
    for name, choice, message in cases:
        workload = NirGraph.from_file(graphs[name], dt=1e-3, time_steps=5, batch_size=1,
                                      **choice)  # type: ignore[arg-type]
        with pytest.raises(CaseSkipped, match=message):
            TorchGraphModel(workload, workload.make_data(), "cpu", builder)


@pytest.mark.parametrize("library", ["spikingjelly", "sinabs", "brainstate", "spyx"])
@pytest.mark.parametrize("name", [*sorted(EXAMPLES), "if-dag"])
def test_subtract_detached_euler_too(graphs: dict[str, Path], library: str, name: str) -> None:
    workload = NirGraph.from_file(graphs[name], dt=1e-3, time_steps=40, batch_size=3)
    _check(workload, BUILDERS[library]())


def test_sinabs_builds_per_neuron_parameters(tmp_path: Path) -> None:
    # sinabs' alpha and threshold are tensors: per-neuron values are built, not refused
    rng = np.random.default_rng(2)
    graph = nir.NIRGraph.from_list(
        nir.Input({"input": np.array([4])}),
        nir.Affine(weight=rng.normal(size=(5, 4)), bias=np.zeros(5)),
        nir.LIF(tau=np.linspace(0.005, 0.02, 5), r=np.full(5, 8.0), v_leak=np.zeros(5),
                v_threshold=np.linspace(0.8, 1.2, 5)),
        nir.Output({"output": np.array([5])}))
    workload = NirGraph.from_file(write_graph(graph, tmp_path / "g.nir"), dt=1e-3,
                                  time_steps=60, batch_size=3)
    _check(workload, _sinabs())


def test_snntorch_refuses_what_it_cannot_build(graphs: dict[str, Path]) -> None:
    builder = _snntorch()
    subtract = NirGraph.from_file(graphs["shd-mlp"], dt=1e-3, time_steps=5, batch_size=1)
    with pytest.raises(CaseSkipped, match="reset mode 'subtract' not supported"):
        TorchGraphModel(subtract, subtract.make_data(), "cpu", builder)
    detached = NirGraph.from_file(graphs["cuba-mlp"], dt=1e-3, time_steps=5, batch_size=1,
                                  reset="zero")
    with pytest.raises(CaseSkipped, match="CubaLIF with detach_reset not built"):
        TorchGraphModel(detached, detached.make_data(), "cpu", builder)


def test_spikingjelly_refuses_per_neuron_time_constants(tmp_path: Path) -> None:
    graph = nir.NIRGraph.from_list(
        nir.Input({"input": np.array([2])}),
        nir.LIF(tau=np.array([0.01, 0.02]), r=np.ones(2), v_leak=np.zeros(2),
                v_threshold=np.ones(2)),
        nir.Output({"output": np.array([2])}))
    workload = NirGraph.from_file(write_graph(graph, tmp_path / "g.nir"), dt=1e-3)
    with pytest.raises(CaseSkipped, match="per-neuron time constants not built"):
        TorchGraphModel(workload, workload.make_data(), "cpu", _spikingjelly())

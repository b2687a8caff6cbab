"""The ``nir-graph`` workload: a NIR file read into snnbench's typed graph, every defect one
line, and a case identity that covers the graph's content and every choice it leaves open."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

nir = pytest.importorskip("nir")

from snnbench.errors import UserError  # noqa: E402
from snnbench.workload import GraphKnobs, NirGraph, kinds, workload_from_dict  # noqa: E402
from snnbench.workload.graph.examples import EXAMPLES, write_example, write_graph  # noqa: E402
from snnbench.workload.graph.load import GraphError, from_nir, read_graph  # noqa: E402
from snnbench.workload.graph.nodes import LIF, Affine  # noqa: E402


def _io(n: int) -> tuple[object, object]:
    return nir.Input({"input": np.array([n])}), nir.Output({"output": np.array([n])})


def _lif(n: int, tau: float = 0.01) -> object:
    return nir.LIF(tau=np.full(n, tau), r=np.ones(n), v_leak=np.zeros(n),
                   v_threshold=np.ones(n))


def _affine(n_out: int, n_in: int, value: float = 0.1) -> object:
    return nir.Affine(weight=np.full((n_out, n_in), value), bias=np.zeros(n_out))


def _write(tmp_path: Path, graph: object, name: str = "g.nir") -> Path:
    return write_graph(graph, tmp_path / name)


def _chain(*nodes: object) -> object:
    return nir.NIRGraph.from_list(*nodes)


def test_the_kind_is_registered_after_linear_lif() -> None:
    assert kinds()[:2] == ("linear-lif", "nir-graph")


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_reads_back_checked(tmp_path: Path, name: str) -> None:
    path = write_example(name, tmp_path / f"{name}.nir")
    graph = read_graph(path)
    assert graph.node(graph.input).kind == "Input"
    assert graph.node(graph.output).kind == "Output"
    assert graph.neurons() > 0 and graph.parameter_names()
    workload = NirGraph.from_file(path, dt=1e-3, time_steps=30, batch_size=2)
    data = workload.make_data()
    result = workload.reference(data)
    assert result.output.shape[:2] == (30, 2)
    assert set(result.grads) == set(workload.parameter_names())
    # every example is active enough to be a benchmark: its read-out moves
    assert np.abs(result.output).sum() > 0


def test_shd_mlp_is_the_promised_network(tmp_path: Path) -> None:
    graph = read_graph(write_example("shd-mlp", tmp_path / "shd.nir"))
    shapes = [(name, node.kind, node.out_shape) for name, node in graph.nodes]
    assert [k for _, k, _ in shapes] == ["Input", "Affine", "LIF", "Affine", "LIF", "Affine",
                                         "LI", "Output"]
    assert [s for _, k, s in shapes if k == "Affine"] == [(256,), (256,), (20,)]
    assert graph.neurons() == 256 + 256 + 20


def test_the_graph_is_typed_and_frozen(tmp_path: Path) -> None:
    graph = read_graph(_write(tmp_path, _chain(*_io(3)[:1], _affine(2, 3), _lif(2),
                                               _io(2)[1])))
    kinds_ = [type(node) for _, node in graph.nodes]
    assert Affine in kinds_ and LIF in kinds_
    affine = graph.node("affine")
    assert isinstance(affine, Affine)
    with pytest.raises(ValueError):
        affine.weight[0, 0] = 5.0  # read-only
    with pytest.raises(AttributeError):
        affine.weight = np.zeros((2, 3))  # type: ignore[misc]


# -- bad input: one line each, a UserError ------------------------------------------------------

def test_a_file_that_is_not_nir(tmp_path: Path) -> None:
    path = tmp_path / "net.nir"
    path.write_text("not hdf5 at all\n")
    with pytest.raises(GraphError, match="is not a NIR file") as err:
        NirGraph.from_file(path, dt=1e-3)
    assert "\n" not in str(err.value)
    assert isinstance(err.value, UserError)


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(GraphError, match="no such file"):
        NirGraph.from_file(tmp_path / "absent.nir", dt=1e-3)


def test_an_unsupported_node(tmp_path: Path) -> None:
    path = _write(tmp_path, _chain(_io(2)[0], nir.Threshold(threshold=np.ones(2)), _io(2)[1]))
    with pytest.raises(GraphError, match="is a Threshold, a node kind snnbench does not read"):
        read_graph(path)


def test_a_cycle(tmp_path: Path) -> None:
    i, o = _io(2)
    graph = nir.NIRGraph(nodes={"input": i, "a": _affine(2, 2), "lif": _lif(2), "output": o},
                         edges=[("input", "a"), ("a", "lif"), ("lif", "a"), ("lif", "output")])
    with pytest.raises(GraphError, match=r"recurrent connections \(the cycle 'a' -> 'lif' -> "
                                         r"'a'\) are not supported: only feed-forward"):
        read_graph(_write(tmp_path, graph))


def test_an_affine_from_a_layer_to_itself_is_refused_as_recurrent() -> None:
    graph = nir.NIRGraph(
        nodes={"input": nir.Input({"input": np.array([2])}),
               "fc": nir.Affine(weight=np.eye(2), bias=np.zeros(2)),
               "rec": nir.Linear(weight=np.eye(2)),
               "output": nir.Output({"output": np.array([2])})},
        edges=[("input", "fc"), ("fc", "output"), ("rec", "rec"), ("fc", "rec")])
    with pytest.raises(GraphError, match=r"recurrent connections \(the cycle 'rec' -> 'rec'\) "
                                         r"are not supported: only feed-forward graphs are$"):
        from_nir(graph)
    # the line names the cycle, not a node after it (here the first name in any order)
    graph = nir.NIRGraph(
        nodes={"input": nir.Input({"input": np.array([2])}), "x": _affine(2, 2),
               "z_lif": _lif(2), "z_rec": _affine(2, 2), "a_out": _io(2)[1]},
        edges=[("input", "x"), ("x", "z_lif"), ("z_lif", "z_rec"), ("z_rec", "z_lif"),
               ("z_lif", "a_out")])
    with pytest.raises(GraphError, match=r"\(the cycle 'z_lif' -> 'z_rec' -> 'z_lif'\)"):
        from_nir(graph)


def test_mismatched_shapes(tmp_path: Path) -> None:
    nodes = {"input": _io(3)[0], "a": _affine(4, 3), "b": _affine(2, 5), "lif": _lif(2),
             "output": _io(2)[1]}
    graph = nir.NIRGraph(nodes=nodes, edges=[("input", "a"), ("a", "b"), ("b", "lif"),
                                             ("lif", "output")])
    with pytest.raises(GraphError, match=r"'a' gives shape \(4\), 'b' takes \(5\)"):
        read_graph(_write(tmp_path, graph))
    path = _write(tmp_path, _chain(_io(3)[0], _affine(4, 3), _lif(5), _io(5)[1]), "n.nir")
    with pytest.raises(GraphError, match=r"tau of shape \(5\) does not fit the \(4\) neurons"):
        read_graph(path)


def test_what_exporters_write_is_read(tmp_path: Path) -> None:
    # one value for a whole layer (sinabs, Norse) and the batch axis of the exporter's sample
    # in the Input and Output types (Norse): read as one value per neuron, shapes without it
    lif = nir.LIF(tau=np.array(0.01), r=np.array(1.0), v_leak=np.array(0.0),
                  v_threshold=np.array(1.0))
    graph = nir.NIRGraph(
        nodes={"input": nir.Input({"input": np.array([1, 3])}), "fc": _affine(2, 3),
               "lif": lif, "output": nir.Output({"output": np.array([1, 2])})},
        edges=[("input", "fc"), ("fc", "lif"), ("lif", "output")])
    read = read_graph(_write(tmp_path, graph))
    assert read.node("input").in_shape == (3,) and read.node("output").in_shape == (2,)
    node = read.node("lif")
    assert isinstance(node, LIF) and node.tau.shape == (2,) and node.tau[1] == 0.01


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_parameters_that_are_not_finite(tmp_path: Path, bad: float) -> None:
    affine = nir.Affine(weight=np.array([[1.0, bad]]), bias=np.zeros(1))
    path = _write(tmp_path, _chain(_io(2)[0], affine, _lif(1), _io(1)[1]))
    with pytest.raises(GraphError, match="weight is not finite"):
        read_graph(path)


def test_malformed_node_fields(tmp_path: Path) -> None:
    i, o = _io(2)
    pool = nir.SumPool2d(kernel_size=np.array([2, 2]), stride=np.array([2.5, 2]),
                         padding=np.array([0, 0]))
    graph = nir.NIRGraph(nodes={"input": nir.Input({"input": np.array([1, 4, 4])}),
                                "pool": pool, "output": nir.Output({"output": np.array([1, 2, 2])})},
                         edges=[("input", "pool"), ("pool", "output")])
    with pytest.raises(GraphError, match=r"stride .* is not one or two integers"):
        read_graph(_write(tmp_path, graph, "pool.nir"))
    # (a file cannot even hold text weights: the graph in memory, as nir.read would give it)
    weird = nir.Affine(weight=np.array([["a", "b"]]), bias=np.zeros(1))
    with pytest.raises(GraphError, match="weight is not numeric"):
        from_nir(_chain(i, weird, _lif(1), _io(1)[1]))
    text_pool = nir.SumPool2d(kernel_size="two", stride=np.array([2, 2]),
                              padding=np.array([0, 0]))
    with pytest.raises(GraphError, match="kernel_size 'two' is not one or two integers"):
        from_nir(nir.NIRGraph(nodes={"input": nir.Input({"input": np.array([1, 4, 4])}),
                                     "pool": text_pool,
                                     "output": nir.Output({"output": np.array([1, 2, 2])})},
                              edges=[("input", "pool"), ("pool", "output")]))
    del o


def test_a_graph_without_neurons(tmp_path: Path) -> None:
    path = _write(tmp_path, _chain(_io(3)[0], _affine(2, 3), _io(2)[1]))
    assert read_graph(path).neurons() == 0
    with pytest.raises(GraphError, match="has no neuron"):
        NirGraph.from_file(path, dt=1e-3)


def test_a_time_constant_that_is_not_positive(tmp_path: Path) -> None:
    path = _write(tmp_path, _chain(_io(2)[0], _lif(2, tau=0.0), _io(2)[1]))
    with pytest.raises(GraphError, match="tau must be > 0"):
        read_graph(path)


def test_a_missing_dt(tmp_path: Path) -> None:
    path = write_example("cuba-mlp", tmp_path / "c.nir")
    with pytest.raises(GraphError, match="dt is missing"):
        NirGraph.from_file(path)
    with pytest.raises(UserError, match="dt is missing"):
        workload_from_dict({"kind": "nir-graph", "graph": str(path), "network": "c",
                            "graph_hash": "x", "neurons": 3, "node_kinds": "LIF"})


def test_a_dt_forward_euler_cannot_take(tmp_path: Path) -> None:
    path = write_example("cuba-mlp", tmp_path / "c.nir")
    with pytest.raises(GraphError, match="forward Euler is unstable"):
        NirGraph.from_file(path, dt=0.01)
    # the exact exponential step takes any dt
    NirGraph.from_file(path, dt=0.01, discretisation="exponential")


def test_an_unknown_setting_and_a_bad_choice(tmp_path: Path) -> None:
    path = write_example("cuba-mlp", tmp_path / "c.nir")
    with pytest.raises(GraphError, match="unknown graph setting 'beta'"):
        NirGraph.from_file(path, dt=1e-3, beta=0.9)
    with pytest.raises(UserError, match="reset must be one of"):
        NirGraph.from_file(path, dt=1e-3, reset="hard")


def test_the_path_is_recorded_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_example("cuba-mlp", tmp_path / "c.nir")
    monkeypatch.chdir(tmp_path)
    workload = NirGraph.from_file("c.nir", dt=1e-3)
    assert workload.graph == str(tmp_path / "c.nir") and workload.network == "c"
    monkeypatch.chdir("/")
    assert workload.make_data().graph.content_hash == workload.graph_hash


def test_a_file_changed_after_the_case_was_made(tmp_path: Path) -> None:
    path = _write(tmp_path, _chain(_io(2)[0], _affine(2, 2), _lif(2), _io(2)[1]))
    workload = NirGraph.from_file(path, dt=1e-3)
    path.unlink()
    _write(tmp_path, _chain(_io(2)[0], _affine(2, 2, value=0.2), _lif(2), _io(2)[1]))
    with pytest.raises(GraphError, match="changed since this case was made"):
        workload.make_data()


# -- identity -----------------------------------------------------------------------------------

def test_case_id_covers_the_content_and_every_choice_not_the_path(tmp_path: Path) -> None:
    a = _write(tmp_path, _chain(_io(2)[0], _affine(2, 2), _lif(2), _io(2)[1]), "a.nir")
    b = _write(tmp_path, _chain(_io(2)[0], _affine(2, 2), _lif(2), _io(2)[1]), "b.nir")
    c = _write(tmp_path, _chain(_io(2)[0], _affine(2, 2, 0.3), _lif(2), _io(2)[1]), "c.nir")
    base = NirGraph.from_file(a, dt=1e-3)
    assert NirGraph.from_file(b, dt=1e-3).case_id == base.case_id
    assert NirGraph.from_file(c, dt=1e-3).case_id != base.case_id
    others = [dict(dt=2e-3), dict(dt=1e-3, reset="zero"),
              dict(dt=1e-3, discretisation="exponential"), dict(dt=1e-3, surrogate="atan"),
              dict(dt=1e-3, surrogate_slope=5.0), dict(dt=1e-3, time_steps=7),
              dict(dt=1e-3, batch_size=3), dict(dt=1e-3, input_kind="bernoulli"),
              dict(dt=1e-3, seed=4), dict(dt=1e-3, detach_reset=False)]
    ids = {NirGraph.from_file(a, **choice).case_id for choice in others}  # type: ignore[arg-type]
    assert len(ids) == len(others) and base.case_id not in ids


def test_params_round_trip_without_the_file(tmp_path: Path) -> None:
    path = write_example("cuba-mlp", tmp_path / "c.nir")
    workload = NirGraph.from_file(path, dt=1e-3, reset="zero", seed=3)
    stored = workload.to_dict()
    path.unlink()  # a record is read back without its graph file
    again = workload_from_dict(stored)
    assert again == workload and again.case_id == workload.case_id
    # every parameter a column; the file's name as graph_name (the tables' own "network"
    # column says what varies)
    assert set(workload.columns) == set(workload.params()) - {"network"} | {"graph_name"}
    assert workload.size == 138 and workload.size_param == "neurons"
    assert again.label == "c n=138 B=16 T=100 dt=0.001 zero euler float32"
    assert NirGraph.row_label({**workload.cells(stored), "device": "cpu"}) == (
        "cpu c n=138 B=16 T=100 dt=0.001 zero euler float32")


def test_knobs_skip_what_an_adapter_does_not_build(tmp_path: Path) -> None:
    workload = NirGraph.from_file(write_example("cuba-mlp", tmp_path / "c.nir"), dt=1e-3)
    assert GraphKnobs().reason_unsupported(workload) == (
        "node kind CubaLIF not built (builds: Input, Output, Affine, Linear, LIF)")
    wide = GraphKnobs(node_kinds=("Input", "Output", "Affine", "CubaLIF"))
    assert wide.reason_unsupported(workload) is None
    assert GraphKnobs(node_kinds=wide.node_kinds, resets=("zero",)).reason_unsupported(
        workload) == "reset mode 'subtract' not supported (supports: zero)"

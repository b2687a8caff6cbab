"""The fused adapter builds a NIR graph that is a chain of Affine → LIF layers mapping exactly
onto its fused layers, spike for spike and gradient by name against the float64 reference; it
refuses anything else with the reason (a ``skipped`` row)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

nir = pytest.importorskip("nir")
pytest.importorskip("torch")

from snnbench.adapter import CaseSkipped  # noqa: E402
from snnbench.adapters.fused import Fused  # noqa: E402
from snnbench.adapters.fused_graph import plan_chain  # noqa: E402
from snnbench.registry import get_entry  # noqa: E402
from snnbench.workload import NirGraph  # noqa: E402
from snnbench.workload.graph.examples import write_example, write_graph  # noqa: E402
from tests.fixtures.graphs import run_against_reference  # noqa: E402


def _workload(path: Path, **choices: Any) -> NirGraph:
    return NirGraph.from_file(path, dt=1e-3, time_steps=30, batch_size=2, **choices)


def _check(workload: NirGraph) -> Any:
    return run_against_reference(Fused(), workload)


@pytest.mark.parametrize("choice", [
    {},
    {"reset": "zero", "surrogate": "sigmoid", "detach_reset": False},
    {"surrogate": "atan", "input_kind": "bernoulli", "input_rate": 0.3},
], ids=["subtract", "zero-sigmoid-attached", "atan-bernoulli"])
def test_the_linear_lif_example_is_built_exactly(tmp_path: Path,
                                                 choice: dict[str, Any]) -> None:
    workload = _workload(write_example("linear-lif", tmp_path / "g.nir"), **choice)
    eq = _check(workload)
    assert eq.problems() == []
    assert eq.output_match == 1.0 and eq.reference_rate > 0


def _chain(tmp_path: Path, *, tau: Any = 0.01, r: float = 10.0, v_leak: float = 0.0,
           layers: int = 2, n: int = 16, bias: bool = True) -> Path:
    """A chain of Affine (or Linear) → LIF layers of n neurons."""
    rng = np.random.default_rng(1)
    named: list[tuple[str, Any]] = [("input", nir.Input({"input": np.array([n])}))]
    for i in range(layers):
        w = rng.uniform(-0.5, 0.5, (n, n)).astype(np.float32)
        syn = (nir.Affine(weight=w, bias=rng.uniform(-0.1, 0.1, n).astype(np.float32))
               if bias else nir.Linear(weight=w))
        named.append((f"fc{i}", syn))
        named.append((f"lif{i}", nir.LIF(tau=np.broadcast_to(np.asarray(tau, float), n).copy(),
                                         r=np.full(n, r), v_leak=np.full(n, v_leak),
                                         v_threshold=np.full(n, 0.5))))
    named.append(("output", nir.Output({"output": np.array([n])})))
    names = [name for name, _ in named]
    graph = nir.NIRGraph(nodes=dict(named), edges=list(itertools.pairwise(names)))
    return write_graph(graph, tmp_path / "chain.nir")


def test_a_power_of_two_gain_is_folded_into_the_weights(tmp_path: Path) -> None:
    # τ = 10 ms, r = 5 at dt = 1 ms: g = r·dt/τ = 0.5, exact in float32; a Linear, no bias
    workload = _workload(_chain(tmp_path, r=5.0, bias=False))
    data = workload.make_data()
    assert [layer.gain for layer in plan_chain(data.graph, data.params,
                                               workload.dynamics)] == [0.5, 0.5]
    eq = _check(workload)
    assert eq.problems() == [] and eq.output_match == 1.0 and eq.reference_rate > 0


@pytest.mark.parametrize(("kwargs", "choice", "reason"), [
    ({"r": 3.0}, {}, "does not fold into fc0's float32 weights exactly"),
    ({}, {"discretisation": "exponential"}, "does not fold"),
    ({"tau": np.linspace(0.01, 0.02, 16)}, {}, "lif0.tau differs between neurons"),
    ({"v_leak": 0.1}, {}, "lif0.v_leak is not 0"),
])
def test_what_does_not_map_exactly_is_skipped_with_the_reason(
        tmp_path: Path, kwargs: dict[str, Any], choice: dict[str, Any], reason: str) -> None:
    workload = _workload(_chain(tmp_path, **kwargs), **choice)
    with pytest.raises(CaseSkipped) as caught:
        Fused().build(workload, workload.make_data(), "cpu", "default")
    assert reason in str(caught.value)


@pytest.mark.parametrize(("example", "reason"), [
    ("shd-mlp", "node kind LI not built"),
    ("conv", "node kind Conv2d not built"),
    ("cuba-mlp", "node kind CubaLIF not built"),
])
def test_other_examples_are_refused_before_anything_is_built(
        tmp_path: Path, example: str, reason: str) -> None:
    workload = _workload(write_example(example, tmp_path / f"{example}.nir"))
    assert reason in (Fused().reason_skipped(workload, "cpu", "default") or "")
    with pytest.raises(CaseSkipped, match=reason):
        Fused().build(workload, workload.make_data(), "cpu", "default")


def test_a_branch_is_not_a_chain(tmp_path: Path) -> None:
    n = 8
    rng = np.random.default_rng(0)

    def lif() -> Any:
        return nir.LIF(tau=np.full(n, 0.01), r=np.full(n, 10.0), v_leak=np.zeros(n),
                       v_threshold=np.ones(n))

    def affine() -> Any:
        return nir.Affine(weight=rng.uniform(-1, 1, (n, n)).astype(np.float32),
                          bias=np.zeros(n, np.float32))

    graph = nir.NIRGraph(
        nodes={"input": nir.Input({"input": np.array([n])}), "a": affine(), "b": affine(),
               "lif": lif(), "output": nir.Output({"output": np.array([n])})},
        edges=[("input", "a"), ("input", "b"), ("a", "lif"), ("b", "lif"),
               ("lif", "output")])
    workload = _workload(write_graph(graph, tmp_path / "branch.nir"))
    with pytest.raises(CaseSkipped, match="not a chain at node 'input'"):
        Fused().build(workload, workload.make_data(), "cpu", "default")


def test_the_registered_adapter_declares_graphs_in_its_default_variant_only() -> None:
    entry = get_entry("fused")
    assert entry.adapter_class is Fused
    adapter = Fused()
    assert adapter.capabilities("default").knobs("nir-graph") is not None
    assert adapter.capabilities("cudagraph").knobs("nir-graph") is None
    linear = adapter.capabilities("default").knobs("linear-lif")
    assert linear == adapter.spec_adapter.capabilities("default").knobs()

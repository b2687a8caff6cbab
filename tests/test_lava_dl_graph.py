"""lava-dl builds a NIR graph chain of Affine → LIF or CubaLIF layers with SLAYER's CUBA neuron,
a declared approximation (fixed-point state, a backward that ignores the reset): the
reference's spikes, gradients that point its way; what it cannot build is skipped with the
reason."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

nir = pytest.importorskip("nir")
pytest.importorskip("torch")

from snnbench.adapter import CaseSkipped  # noqa: E402
from snnbench.adapters.lava_dl_graph import LavaDl, plan_chain  # noqa: E402
from snnbench.registry import get_entry  # noqa: E402
from snnbench.workload import NirGraph  # noqa: E402
from snnbench.workload.graph.compare import MIN_SPIKE_MATCH  # noqa: E402
from snnbench.workload.graph.examples import write_example, write_graph  # noqa: E402
from tests.conftest import library_installed  # noqa: E402
from tests.fixtures.graphs import run_against_reference  # noqa: E402

needs_lava = pytest.mark.skipif(not library_installed("lava-dl"),
                                reason="lava-dl is not installed")


def _workload(path: Path, **choices: Any) -> NirGraph:
    return NirGraph.from_file(path, dt=1e-3, time_steps=60, batch_size=4,
                              **{"reset": "zero", **choices})


def test_a_cuba_lif_maps_onto_lavas_current_and_voltage_decays(tmp_path: Path) -> None:
    # τ_syn 5 ms, w_in 2, τ_mem 10 ms, r 10 at dt = 1 ms: α = 0.8, γ = 0.4, a = 0.9, g = 1
    workload = _workload(write_example("cuba-mlp", tmp_path / "g.nir"))
    (first, _) = plan_chain(workload.load(), workload.dynamics)
    assert first.current_decay == pytest.approx(0.2)
    assert first.voltage_decay == pytest.approx(0.1)
    assert first.gain == pytest.approx(0.4)
    assert (first.weight, first.bias, first.threshold) == ("fc1.weight", "fc1.bias", 1.0)


@needs_lava
@pytest.mark.parametrize("example", ["linear-lif", "cuba-mlp"])
def test_the_build_gives_the_references_spikes_and_declares_its_gradient_approximate(
        tmp_path: Path, example: str) -> None:
    workload = _workload(write_example(example, tmp_path / "g.nir"))
    adapter = LavaDl()
    caps = adapter.capabilities("default")
    assert not caps.exact_dynamics and not caps.exact_gradient  # a declared approximation
    eq = run_against_reference(adapter, workload)
    assert eq.output_match >= MIN_SPIKE_MATCH and eq.reference_rate > 0
    # the backward ignores the reset: not the reference's gradient, but its direction
    assert 0.5 < eq.grad_cosine < 0.999


def _chain(tmp_path: Path, **lif: Any) -> Path:
    n = 8
    fields = {"tau": np.full(n, 0.01), "r": np.full(n, 10.0), "v_leak": np.zeros(n),
              "v_threshold": np.ones(n), **lif}
    rng = np.random.default_rng(0)
    named = [("input", nir.Input({"input": np.array([n])})),
             ("fc", nir.Affine(weight=rng.uniform(-1, 1, (n, n)).astype(np.float32),
                               bias=np.zeros(n, np.float32))),
             ("lif", nir.LIF(**fields)), ("output", nir.Output({"output": np.array([n])}))]
    graph = nir.NIRGraph(nodes=dict(named),
                         edges=list(itertools.pairwise(n for n, _ in named)))
    return write_graph(graph, tmp_path / "chain.nir")


@pytest.mark.parametrize(("path", "choice", "reason"), [
    (lambda t: write_example("shd-mlp", t / "g.nir"), {}, "node kind LI not built"),
    (lambda t: write_example("conv", t / "g.nir"), {}, "node kind Conv2d not built"),
    (lambda t: write_example("linear-lif", t / "g.nir"), {"reset": "subtract"},
     "reset mode 'subtract' not supported"),
])
def test_what_lava_cannot_build_is_refused_before_building(
        tmp_path: Path, path: Any, choice: dict[str, Any], reason: str) -> None:
    workload = _workload(path(tmp_path), **choice)
    assert reason in (LavaDl().reason_skipped(workload, "cpu", "default") or "")
    with pytest.raises(CaseSkipped, match=reason):
        LavaDl().build(workload, workload.make_data(), "cpu", "default")


@pytest.mark.parametrize(("lif", "reason"), [
    ({"v_leak": np.full(8, 0.1)}, "lif.v_leak is not 0"),
    ({"tau": np.linspace(0.01, 0.02, 8)}, "lif.tau differs between neurons"),
])
def test_what_does_not_map_is_skipped_with_the_reason(tmp_path: Path, lif: dict[str, Any],
                                                     reason: str) -> None:
    workload = _workload(_chain(tmp_path, **lif))
    with pytest.raises(CaseSkipped, match=reason):
        plan_chain(workload.load(), workload.dynamics)


def test_the_registered_adapter_is_the_v2_one() -> None:
    entry = get_entry("lava-dl")
    assert entry.adapter_class is LavaDl
    linear = LavaDl().capabilities("default").knobs("linear-lif")
    assert linear == LavaDl().spec_adapter.capabilities("default").knobs()

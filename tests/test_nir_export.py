"""``snnbench export-nir``: a Linear+LIF spec written as a NIR graph that, read back as a
``nir-graph`` case with the same dt and reset, computes what the ``linear-lif`` case does; bad
input is one line and exit 2, and nothing is overwritten."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("nir")

from snnbench.workload import NirGraph
from snnbench.workload.graph.load import read_graph
from snnbench.workload.graph.reference import run_graph_reference
from snnbench.workload.linear_lif.reference import run_reference
from snnbench.workload.linear_lif.spec import NetworkSpec, make_case_data
from tests.conftest import run_cli


def test_export_writes_the_spec_network(tmp_path: Path) -> None:
    out = tmp_path / "net.nir"
    proc = run_cli("export-nir", str(out), "--neurons", "20", "--layers", "2", "--seed", "5",
                   "--dt", "0.002")
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}" in proc.stdout
    spec = NetworkSpec(neurons=20, layers=2, seed=5, batch_size=2, time_steps=30)
    data = make_case_data(spec)
    graph = read_graph(out)
    assert graph.node_kinds() == ("Affine", "Input", "LIF", "Output")
    np.testing.assert_array_equal(graph.parameters()["fc1.weight"], data.weights[1])
    workload = NirGraph.from_file(out, dt=0.002, reset=spec.reset, time_steps=30, batch_size=2)
    got = run_graph_reference(graph, data.inputs, workload.dynamics)
    np.testing.assert_array_equal(got.output, run_reference(data).output_spikes)


@pytest.mark.parametrize(("args", "message"), [
    (["--example", "nosuch"], "unknown example graph 'nosuch'"),
    (["--example", "conv", "--neurons", "8"], "example 'conv' is its own network"),
    (["--neurons", "0"], "neurons must be a positive integer"),
    (["--dt", "0"], "dt must be a positive number"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, args: list[str],
                                                  message: str) -> None:
    out = tmp_path / "net.nir"
    proc = run_cli("export-nir", str(out), *args)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_an_existing_file_is_not_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "net.nir"
    out.write_text("mine")
    proc = run_cli("export-nir", str(out), "--example", "shd-mlp")
    assert proc.returncode == 2 and "exists; not overwritten" in proc.stderr
    assert out.read_text() == "mine"

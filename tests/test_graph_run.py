"""A ``nir-graph`` workload goes from a job to a stored record exactly as a ``linear-lif`` one
does (issue 34: the case carries any workload): the job and the record hold it on disk as
``kind`` + ``spec``, the worker checks the build against the graph's own reference (its
``spike_match`` is the output's match, its ``grad_cosine`` the worst parameter's) and times it.

The adapter is a tiny v2 plugin registered for these tests as ``torch``, building the graph with
:class:`~snnbench.adapters.torch_graph.TorchGraphModel` (variant ``wrong-dt``: the same file at
half the time step, what an importer that assumes another dt builds).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("nir")
pytest.importorskip("torch")

from snnbench.adapters.torch_graph import TORCH_GRAPH_KNOBS, TorchGraphModel
from snnbench.measure import worker
from snnbench.measure.timing import MeasureSettings
from snnbench.measure.verify import cached_reference
from snnbench.measure.worker import run_job
from snnbench.plugin import Adapter, Capabilities, Model
from snnbench.records.contract import CaseRecord, Job
from snnbench.records.schema import REFERENCES_DIR
from snnbench.registry import AdapterEntry
from snnbench.workload import NirGraph, Workload
from snnbench.workload.graph.examples import write_example

FAST = MeasureSettings(repeats=2, max_repeats=2, min_time_s=0.0, warmup=0, warmup_s=0.0)


class GraphTorch(Adapter):
    """Builds a graph workload in plain PyTorch; ``wrong-dt`` builds another network."""

    name = "torch"
    library = "torch"
    module = "torch"
    framework = "torch"
    variants = ("default", "wrong-dt")

    def capabilities(self, variant: str) -> Capabilities:
        return Capabilities(workloads={"nir-graph": TORCH_GRAPH_KNOBS}, devices=("cpu",))

    def build(self, workload: Workload, data: Any, device: str, variant: str) -> Model:
        assert isinstance(workload, NirGraph)
        if variant == "wrong-dt":
            workload = replace(workload, dt=workload.dt / 2)
        return TorchGraphModel(workload, data, device)


@pytest.fixture
def torch_graph(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``torch`` is :class:`GraphTorch` for the worker (in this process)."""
    entry = AdapterEntry("torch", f"{__name__}:GraphTorch", adapter_class=GraphTorch)

    def get_entry(name: str) -> AdapterEntry:
        if name != "torch":
            raise KeyError(name)
        return entry

    monkeypatch.setattr(worker, "get_entry", get_entry)
    yield


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("graphs")
    # a spiking read-out (CubaLIF) and a leaky one (LI)
    return {name: write_example(name, folder / f"{name}.nir") for name in ("cuba-mlp", "shd-mlp")}


def _graph(graphs: dict[str, Path], name: str = "cuba-mlp") -> NirGraph:
    return NirGraph.from_file(graphs[name], dt=1e-3, time_steps=30, batch_size=2)


def _job(workload: Workload, tmp_path: Path, **changes: Any) -> Job:
    """A job for the ``torch`` adapter, written to its file and read back as a worker reads it."""
    fields: dict[str, Any] = {"adapter": "torch", "variant": "default", "device": "cpu",
                              "workload": workload, "measure": FAST, "verify_time_steps": 20}
    job = Job(**{**fields, **changes})
    path = tmp_path / "job.json"
    job.write(path)
    on_disk = json.loads(path.read_text())
    # the file holds the workload as every job file has: its kind and its parameters
    assert on_disk["kind"] == "nir-graph" and on_disk["spec"] == workload.params()
    assert "workload" not in on_disk
    again = Job.read(path)
    assert again == job and again.workload == workload and again.key == job.key
    return again


def _round_trips(record: CaseRecord, tmp_path: Path) -> None:
    record.write(tmp_path / "record.json")
    on_disk = json.loads((tmp_path / "record.json").read_text())
    assert on_disk["kind"] == "nir-graph" and on_disk["case_id"] == record.workload.case_id
    again = CaseRecord.read(tmp_path / "record.json")
    assert again == record and again.workload.kind == "nir-graph"
    assert CaseRecord.from_dict(record.to_dict()) == record


@pytest.mark.parametrize("name", ["cuba-mlp", "shd-mlp"])
def test_a_graph_case_is_checked_and_timed(graphs: dict[str, Path], tmp_path: Path,
                                          torch_graph: None, name: str) -> None:
    workload = _graph(graphs, name)
    record = run_job(_job(workload, tmp_path))
    assert record.status == "ok", record.message
    assert record.message == ""
    assert record.spike_match == 1.0
    assert record.grad_cosine is not None and record.grad_cosine >= 0.999
    assert record.equivalence is not None
    assert record.equivalence["worst_parameter"] in workload.parameter_names()
    # the graph asks for strict float32 and its own seed
    assert record.settings["matmul_precision"] == "strict"
    assert record.settings["torch_tf32"] is False
    for phase in ("forward", "backward", "step"):
        assert len(record.samples[phase]["time_s"]) >= 2
    assert record.samples["step"]["samples_per_s"][0] > 0
    if name == "cuba-mlp":
        assert 0 < record.samples["case"]["firing_rate"][0] < 1
    _round_trips(record, tmp_path)


def test_a_graph_is_verified_and_dumped(graphs: dict[str, Path], tmp_path: Path,
                                       torch_graph: None) -> None:
    workload = _graph(graphs)
    dump = tmp_path / "check.npz"
    record = run_job(_job(workload, tmp_path, mode="verify", dump_path=str(dump)))
    assert record.status == "ok", record.message
    assert record.spike_match == 1.0 and record.exact_dynamics is True
    assert not record.samples  # verify times nothing
    with np.load(dump, allow_pickle=False) as arrays:
        assert arrays["output"].shape == workload.output_shape()
        assert {f"grad:{n}" for n in workload.parameter_names()} <= set(arrays.files)
        assert json.loads(str(arrays["spec_json"]))["graph_hash"] == workload.graph_hash
    _round_trips(record, tmp_path)


def test_a_build_of_another_network_is_not_timed(graphs: dict[str, Path], tmp_path: Path,
                                                 torch_graph: None) -> None:
    record = run_job(_job(_graph(graphs), tmp_path, variant="wrong-dt"))
    assert record.status == "mismatch"
    assert "output spikes match only" in record.message
    assert record.message.endswith("not timed (use --allow-mismatch to time it)")
    assert record.spike_match is not None and record.spike_match < 0.999
    assert not record.samples
    _round_trips(record, tmp_path)


def test_a_graph_reference_is_kept_and_read_back(graphs: dict[str, Path], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    workload = _graph(graphs, "shd-mlp").shortened(10)
    fresh = cached_reference(workload, tmp_path)
    (kept,) = tmp_path.glob("*.npz")

    def no_second_computation(self: NirGraph, data: Any) -> Any:
        raise AssertionError("the kept reference was not read")

    monkeypatch.setattr(NirGraph, "reference", no_second_computation)
    again = cached_reference(workload, tmp_path)
    assert again.output_name == fresh.output_name
    np.testing.assert_array_equal(again.output, fresh.output)
    assert set(again.grads) == set(fresh.grads)
    for key, grad in fresh.grads.items():
        np.testing.assert_array_equal(again.grads[key], grad)
    # another case (another seed) is filed apart
    other = replace(workload, seed=1)
    monkeypatch.undo()
    cached_reference(other, tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 2 and kept.exists()


def test_the_sweep_shares_a_graph_reference_between_its_cases(
        graphs: dict[str, Path], tmp_path: Path, torch_graph: None) -> None:
    workload = _graph(graphs)
    records = []
    for replicate in (0, 1):
        job = _job(workload, tmp_path, replicate=replicate)
        folder = tmp_path / "jobs" / job.key
        folder.mkdir(parents=True)
        records.append(run_job(job.with_result_in(folder)))
    assert [r.status for r in records] == ["ok", "ok"]
    assert records[0].samples["case"] == records[1].samples["case"]
    assert len(list((tmp_path / "jobs" / REFERENCES_DIR).glob("*.npz"))) == 1

"""A run folder of graph cases reads back (issues 34 item 2 and 35): the tables take their case
columns from the workload kinds of their rows, so ``show``, ``report``, ``compare`` and
``history`` read a folder of ``nir-graph`` cases, and one holding ``linear-lif`` and graph
cases together, each case its own row and series; a folder of ``linear-lif`` cases writes the
very tables it always did."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pandas as pd
import pytest

from snnbench.gate.compare import compare
from snnbench.records import schema
from snnbench.records.contract import CaseRecord
from snnbench.report.history import collect
from snnbench.report.pages import report
from snnbench.report.tables import case_rows, headers, typed_rows
from snnbench.store.rundir import RunFolder, load_run
from snnbench.store.storage import StorageError
from snnbench.workload import NirGraph
from snnbench.workload.linear_lif.spec import NetworkSpec
from tests.fixtures.runfolders import write_run

pytest.importorskip("nir")


def _invoke(args: list[str]) -> Any:
    from typer.testing import CliRunner

    from snnbench.cli import app

    return CliRunner().invoke(app, args)


def _graph(name: str = "shd-mlp", graph_hash: str = "a" * 64, neurons: int = 532) -> NirGraph:
    """A graph case as its record stores it (no file is read)."""
    return NirGraph(graph=f"/nets/{name}.nir", network=name, graph_hash=graph_hash,
                    neurons=neurons, node_kinds="Affine,Input,LI,LIF,Output", dt=1e-3,
                    time_steps=10, batch_size=2, reset="zero")


def _record(kind: str, params: dict[str, Any], adapter: str, values: list[float]) -> CaseRecord:
    return CaseRecord.from_dict({
        "adapter": adapter, "variant": "default", "device": "cpu", "kind": kind,
        "spec": params, "status": "ok", "library": adapter, "library_version": "1.0",
        "samples": {phase: {"time_s": values} for phase in ("forward", "backward", "step")},
    })


def _folder(path: Path, workloads: list[tuple[str, dict[str, Any]]], seed: int = 0) -> Path:
    """A run folder of ``workloads`` (kind, params) timed by torch and snntorch, its tables
    built from the records as ``run`` and ``merge`` build them."""
    write_run(path, [])
    folder = RunFolder(path)
    (path / schema.CASES_DIR).mkdir()
    rng = np.random.default_rng(seed)
    for kind, params in workloads:
        for adapter in ("torch", "snntorch"):
            folder.write_case(_record(kind, params, adapter, list(rng.normal(1e-3, 1e-5, 9))))
    folder.rebuild_tables(path.name)
    return path


def _mixed(path: Path, seed: int = 0) -> Path:
    """linear-lif n=16 beside two graphs: shd-mlp, and another file of that name with other
    content (an equal label, another case)."""
    return _folder(path, [
        ("linear-lif", NetworkSpec(neurons=16, batch_size=2, time_steps=10).to_dict()),
        ("nir-graph", _graph().params()),
        ("nir-graph", _graph(graph_hash="b" * 64).params()),
    ], seed)


def test_a_graph_names_its_file_graph_name_and_reads_as_before() -> None:
    graph = _graph()
    cells = graph.cells(graph.params())
    assert cells["graph_name"] == "shd-mlp" and schema.NETWORK not in cells
    assert graph.label == "shd-mlp n=532 B=2 T=10 dt=0.001 zero euler float32"
    assert NirGraph.row_label({"device": "cpu", **cells}) == f"cpu {graph.label}"


def test_a_folder_of_linear_lif_cases_writes_the_tables_it_always_did(tmp_path: Path) -> None:
    path = _folder(tmp_path / "r", [("linear-lif", NetworkSpec(neurons=16).to_dict())])
    assert tuple(pd.read_parquet(path / schema.SUMMARY_PARQUET).columns) == \
        schema.SUMMARY_COLUMNS
    assert tuple(pd.read_csv(path / schema.SUMMARY_CSV).columns) == schema.SUMMARY_COLUMNS
    assert tuple(pd.read_parquet(path / schema.SAMPLES_PARQUET).columns) == \
        schema.SAMPLE_COLUMNS


def test_a_mixed_folder_has_each_kinds_columns(tmp_path: Path) -> None:
    path = _mixed(tmp_path / "m")
    written = pd.read_parquet(path / schema.SUMMARY_PARQUET)
    assert tuple(written.columns) == schema.summary_columns(("linear-lif", "nir-graph"))
    ll, graph = written[written["kind"] == "linear-lif"], written[written["kind"] == "nir-graph"]
    assert set(ll["layers"]) == {1.0} and graph["layers"].isna().all()
    assert set(ll["graph_name"]) == {""} and set(graph["graph_name"]) == {"shd-mlp"}
    assert ll["dt"].isna().all() and set(graph["dt"]) == {1e-3}
    assert set(written["neurons"]) == {16, 532} and written["neurons"].dtype == np.int64
    samples = pd.read_parquet(path / schema.SAMPLES_PARQUET)
    assert set(samples["kind"]) == {"linear-lif", "nir-graph"}


def test_every_reader_keeps_each_case_of_a_mixed_folder_apart(tmp_path: Path) -> None:
    path = _mixed(tmp_path / "m")
    run = load_run(path)
    summary = run.summary
    assert summary["case_id"].nunique() == 3
    # show: a row per adapter and case, the graph's columns beside the Linear+LIF ones
    rows = case_rows(summary)
    assert len(rows) == 6
    head = headers(summary)
    assert {"bias", "graph", "dt", "step"} <= set(head)
    graph_rows = [dict(zip(head, r, strict=True)) for r in rows
                  if r[head.index("graph")] == "shd-mlp"]
    assert len(graph_rows) == 4 and {r["n"] for r in graph_rows} == {"532"}
    assert {r["bias"] for r in graph_rows} == {""}
    # show --format json validates against the shipped schema
    from importlib.resources import files

    shipped = json.loads(files("snnbench.schemas").joinpath("show.schema.json")
                         .read_text(encoding="utf-8"))
    from snnbench.report.export.json import show_json
    from snnbench.report.ranking import rank_run

    doc = json.loads(json.dumps(show_json(run.run_id, typed_rows(summary), rank_run(run))))
    jsonschema.validate(doc, shipped)
    kinds = {r.get("kind", "linear-lif") for r in doc["rows"]}
    assert kinds == {"linear-lif", "nir-graph"}
    # compare: a case per identity, the two graphs of one name apart; A/A passes
    cmp = compare(path, path)
    keys = {(p.case["adapter"], p.case["case_id"]) for p in cmp.time_pairs()}
    assert len(keys) == 6 and {p.mark for p in cmp.time_pairs()} == {"same"}
    assert cmp.exit_code == 0
    # compare --format json: each pair in its own kind's columns (linear-lif's as before)
    as_json = {p.case["kind"]: p.as_dict() for p in cmp.time_pairs()}
    assert not {"kind", "graph_name", "dt"} & set(as_json["linear-lif"])
    assert as_json["nir-graph"]["graph_name"] == "shd-mlp"
    assert "layers" not in as_json["nir-graph"]
    # report: each kind its own groups, the graph's plots over neurons
    names = {p.name for p in report(path, tmp_path / "rep")}
    assert "cpu-float32-B2-T10-L1-subtract_scaling.png" in names, names
    # two files of one name and size: told apart by their content, never one panel
    for graph in ("aaaaaaaa", "bbbbbbbb"):
        slug = f"cpu-shd-mlp-B2-T10-dt0.001-zero-euler-float32-graph-{graph}"
        assert f"{slug}_scaling.png" in names, names
    page = (tmp_path / "rep" / "report.md").read_text()
    assert "shd-mlp n=532 B=2 T=10 dt=0.001 zero euler float32 · graph=aaaaaaaa" in page
    # history: a series per case, never pooled
    history = collect([path, _mixed(tmp_path / "m2", seed=1)])
    step = [s for s in history.series
            if s.label == "torch" and s.phase == "step" and s.metric == "time_s"]
    assert len(step) == 3 and all(len(s.points) == 2 for s in step)
    assert {s.kind for s in step} == {"linear-lif", "nir-graph"}
    assert {s.size for s in step} == {16, 532}


def test_a_damaged_graph_row_is_one_line(tmp_path: Path) -> None:
    path = _folder(tmp_path / "g", [("nir-graph", _graph().params())])
    summary = pd.read_parquet(path / schema.SUMMARY_PARQUET)
    assert "layers" not in summary.columns  # a graph-only table: the graph's columns only
    load_run(path)
    summary.loc[0, "neurons"] = 0
    summary.to_parquet(path / schema.SUMMARY_PARQUET, index=False)
    with pytest.raises(StorageError, match=r"column neurons holds .*\(a nir-graph case\)"):
        load_run(path)
    summary.loc[0, "neurons"] = 532
    summary.loc[0, "kind"] = "spiral"
    summary.to_parquet(path / schema.SUMMARY_PARQUET, index=False)
    with pytest.raises(StorageError, match="unknown workload kind"):
        load_run(path)
    summary.drop(columns=["kind", "graph_name"]).to_parquet(path / schema.SUMMARY_PARQUET,
                                                            index=False)
    with pytest.raises(StorageError, match="missing columns layers"):
        load_run(path)  # read as linear-lif rows, which they are not


def test_a_graph_run_reads_back_through_the_cli(tmp_path: Path) -> None:
    """The issue's command, end to end: run a shipped graph with torch, then show (terminal,
    md, json), report, compare (A/A passes) and history read the folder back."""
    out = tmp_path / "r"
    result = _invoke(["run", "--network", "example:shd-mlp", "--dt", "1e-3", "--steps", "10",
                      "--batch-size", "2", "--adapters", "torch", "--out", str(out)])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    written = pd.read_parquet(out / schema.SUMMARY_PARQUET)
    torch = written[written["adapter"] == "torch"]
    assert set(torch["status"]) == {"ok"}, set(torch["message"])
    assert set(written["kind"]) == {"nir-graph"} and set(written["graph_name"]) == {"shd-mlp"}
    assert "layers" not in written.columns
    shown = _invoke(["show", str(out)])
    assert shown.exit_code == 0, (shown.stdout, shown.stderr)
    assert "shd-mlp n=532 B=2 T=10 dt=0.001 zero euler float32" in " ".join(
        shown.stdout.split())
    md = _invoke(["show", str(out), "--format", "md"])
    assert md.exit_code == 0 and "| graph |" in md.stdout and "| shd-mlp |" in md.stdout
    doc = json.loads(_invoke(["show", str(out), "--format", "json"]).stdout)
    (row,) = [r for r in doc["rows"] if r["adapter"] == "torch"]
    assert (row["kind"], row["n"], row["layers"], row["graph_name"]) == \
        ("nir-graph", 532, None, "shd-mlp")
    assert math.isclose(row["dt"], 1e-3)
    rep = _invoke(["report", str(out), "--out", str(tmp_path / "rep")])
    assert rep.exit_code == 0, (rep.stdout, rep.stderr)
    assert (tmp_path / "rep" / "scaling.png").is_file()
    assert "shd-mlp" in (tmp_path / "rep" / "report.md").read_text()
    cmp = _invoke(["compare", str(out), str(out)])
    assert cmp.exit_code == 0, (cmp.stdout, cmp.stderr)
    assert "PASS" in cmp.stdout
    hist = _invoke(["history", str(out), "--out", str(tmp_path / "h")])
    assert hist.exit_code == 0, (hist.stdout, hist.stderr)
    assert (tmp_path / "h" / "index.html").is_file()


def test_a_mixed_folder_keeps_the_depth_plot_and_names_each_case(tmp_path: Path) -> None:
    """A graph's row first, then Linear+LIF at two depths: the time-per-layer plot is still
    drawn (the depth is the kind's that has one), and the fastest list names every case in
    its own kind's words."""
    from snnbench.report.ranking import case_labels

    path = _folder(tmp_path / "m", [
        ("nir-graph", _graph().params()),
        *(("linear-lif", NetworkSpec(neurons=16, layers=depth, batch_size=2,
                                     time_steps=10).to_dict()) for depth in (1, 2)),
    ])
    names = {p.name for p in report(path, tmp_path / "rep")}
    assert "cpu-float32-B2-T10-subtract_layers.png" in names, names
    labels = set(case_labels(load_run(path).summary).values())
    assert len(labels) == 3 and any("shd-mlp" in label for label in labels), labels
    assert any("L=2" in label for label in labels), labels

"""``nir-check --out RUN`` keeps its result in the run folder; ``report RUN`` shows it, in
every page format, and a bad result file (a received folder is untrusted) is one line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from snnbench.records.fileio import WRITTEN_LEDGER, StorageError
from snnbench.report import conformance
from snnbench.report.pages import report
from snnbench.workload.graph.conformance.result import (
    DIFFERENT,
    EXACT,
    UNSUPPORTED,
    ConformanceReport,
    LibraryCheck,
)
from tests.fixtures.runfolders import timed_case, write_run


def _report(network: str = "shd-mlp", dt: float = 1e-3) -> ConformanceReport:
    return ConformanceReport(
        graph=f"/x/{network}.nir", network=network, graph_hash="ab" * 32, dt=dt,
        time_steps=100, batch_size=4, seed=0, input_std=1.0, reset="zero",
        discretisation="euler", versions={"nir": "1.0.4"},
        checks=(LibraryCheck("SpikingJelly", "2.0.0", EXACT, called="sj(g)", agreement=1.0,
                             output_mean=0.1, reference_mean=0.1),
                LibraryCheck("Spyx", "1.0.0", DIFFERENT,
                             findings=("fires one step late", "behaves as dt = 1 s | x"),
                             agreement=float("nan")),
                LibraryCheck("Rockpool", "3.1.0", UNSUPPORTED,
                             reason="AttributeError: 'LIF' has no attribute 'tau_mem'")))


def _run(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    return write_run(tmp_path / "run", [timed_case(a, 64, rng, median_s=1e-3)
                                        for a in ("torch", "snntorch")])


def _pages(run: Path) -> tuple[str, str]:
    report(run)
    return ((run / "report" / "report.md").read_text(),
            (run / "report" / "report.html").read_text())


def test_a_kept_result_round_trips_and_is_shown_in_every_page_format(tmp_path: Path) -> None:
    run = _run(tmp_path)
    saved = conformance.save_check(run, _report())
    assert saved.parent == run / "nir-check"
    assert saved.name == f"shd-mlp-{_report().check_id}.json"
    data = json.loads(saved.read_text())
    assert data["schema"] == 1 and data["checks"][1]["agreement"] is None  # NaN: null
    assert ConformanceReport.from_dict(data).checks[0] == _report().checks[0]
    md, page = _pages(run)
    assert "## Importer conformance (nir-check): shd-mlp" in md
    assert "| SpikingJelly | 2.0.0 | exact | - | sj(g) |" in md
    assert "fires one step late; behaves as dt = 1 s \\| x" in md
    assert "'LIF' has no attribute 'tau_mem'" in md
    assert "reference at dt = 0.001 s" in md
    assert "Importer conformance (nir-check): shd-mlp</h2>" in page
    assert "fires one step late" in page and "has no attribute &#x27;tau_mem&#x27;" in page
    # after the measurements, before the environment
    assert md.index("Importer conformance") < md.index("## Environment")


def test_a_report_without_results_has_no_such_section(tmp_path: Path) -> None:
    md, page = _pages(_run(tmp_path))
    assert "nir-check" not in md and "nir-check" not in page


def test_the_same_check_replaces_its_file_another_adds_one(tmp_path: Path) -> None:
    run = _run(tmp_path)
    first = conformance.save_check(run, _report())
    assert conformance.save_check(run, _report()) == first
    other = conformance.save_check(run, _report(dt=1e-4))
    assert other != first
    found, bad = conformance.load_checks(run)
    assert sorted(r.dt for _, r in found) == [1e-4, 1e-3] and bad == []


def test_a_file_snnbench_did_not_write_is_never_overwritten(tmp_path: Path) -> None:
    run = _run(tmp_path)
    target = conformance.save_check(run, _report())
    target.write_text("mine\n")  # the user's edit: no longer snnbench's file
    with pytest.raises(StorageError, match="left as it is"):
        conformance.save_check(run, _report())
    assert target.read_text() == "mine\n"


def test_a_foreign_ledger_is_never_overwritten(tmp_path: Path) -> None:
    run = _run(tmp_path)
    (run / "nir-check").mkdir()
    ledger = run / "nir-check" / WRITTEN_LEDGER
    ledger.write_text("not a ledger\n")
    with pytest.raises(StorageError, match="not a ledger snnbench wrote"):
        conformance.save_check(run, _report())
    assert ledger.read_text() == "not a ledger\n"
    assert [p.name for p in (run / "nir-check").iterdir()] == [WRITTEN_LEDGER]


@pytest.mark.parametrize("where", ["not a run folder", "a link"])
def test_a_folder_that_cannot_take_the_result_is_refused(tmp_path: Path, where: str) -> None:
    if where == "a link":
        run = _run(tmp_path)
        (tmp_path / "elsewhere").mkdir()
        (run / "nir-check").symlink_to(tmp_path / "elsewhere")
    else:
        run = tmp_path / "plain"
        run.mkdir()
    with pytest.raises(StorageError):
        conformance.save_check(run, _report())
    assert not any((tmp_path / "elsewhere").glob("*")) if where == "a link" else \
        not any(run.iterdir())


def _bad_files(run: Path, outside: Path) -> dict[str, str]:
    """Every kind of bad result file, by name, with a word of the line it must give."""
    folder = run / "nir-check"
    folder.mkdir()
    good = _report().to_dict()
    outside.write_text(json.dumps(good))
    (folder / "link.json").symlink_to(outside)
    (folder / "big.json").write_bytes(b" " * (conformance.MAX_BYTES + 1))
    (folder / "text.json").write_text("not json")
    (folder / "schema.json").write_text(json.dumps({**good, "schema": 99}))
    (folder / "verdict.json").write_text(json.dumps(
        {**good, "checks": [{**good["checks"][0], "verdict": "great"}]}))
    (folder / "dt.json").write_text(json.dumps({**good, "dt": "1e-3"}))
    (folder / "list.json").write_text("[1, 2]")
    os.mkfifo(folder / "fifo.json")
    return {"link.json": "symbolic link", "big.json": "larger than",
            "text.json": "not JSON", "schema.json": "schema 99",
            "verdict.json": "unknown verdict", "dt.json": "'dt'",
            "list.json": "not a nir-check result", "fifo.json": "FIFO"}


def test_bad_result_files_are_one_line_each_and_the_report_stands(tmp_path: Path) -> None:
    run = _run(tmp_path)
    expected = _bad_files(run, tmp_path / "outside.json")
    conformance.save_check(run, _report())
    found, bad = conformance.load_checks(run)
    assert len(found) == 1
    lines = dict(bad)
    assert sorted(lines) == sorted(f"nir-check/{n}" for n in expected)
    for name, word in expected.items():
        assert word in lines[f"nir-check/{name}"], (name, lines[f"nir-check/{name}"])
        assert "\n" not in lines[f"nir-check/{name}"]
    md, page = _pages(run)
    assert "## Importer conformance (nir-check): shd-mlp" in md
    assert "files that could not be read" in md and "| nir-check/big.json |" in md
    assert "nir-check/fifo.json" in page


def test_a_nir_check_folder_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    run = _run(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "g.json").write_text(json.dumps(_report().to_dict()))
    (run / "nir-check").symlink_to(elsewhere)
    found, bad = conformance.load_checks(run)
    assert found == [] and bad == [("nir-check", "a symbolic link, which is not followed "
                                                 "here")]


def _invoke(*args: str) -> Any:
    from typer.testing import CliRunner

    from snnbench.cli import app

    return CliRunner().invoke(app, list(args))


def test_the_command_keeps_its_result_with_out(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from snnbench.workload.graph.conformance import check as check_module
    from snnbench.workload.graph.examples import write_example

    graph = write_example("linear-lif", tmp_path / "g.nir")
    calls: list[Any] = []

    def fake(*args: Any, **kwargs: Any) -> ConformanceReport:
        calls.append(args)
        return _report("g")

    monkeypatch.setattr(check_module, "check_graph", fake)
    run = _run(tmp_path)
    result = _invoke("nir-check", str(graph), "--dt", "1e-3", "--out", str(run))
    assert result.exit_code == 0, result.output
    (kept,) = (run / "nir-check").glob("g-*.json")
    back = ConformanceReport.from_dict(json.loads(kept.read_text()))
    assert back.check_id == _report("g").check_id and back.checks[2] == _report().checks[2]
    assert kept.name in json.loads((run / "nir-check" / WRITTEN_LEDGER).read_text())["files"]
    # a folder that is no run folder is refused before the check runs
    calls.clear()
    result = _invoke("nir-check", str(graph), "--dt", "1e-3", "--out", str(tmp_path / "none"))
    assert result.exit_code == 2 and calls == []
    assert "not a run folder" in result.output

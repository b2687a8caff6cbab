"""Linear bookkeeping (issue 34, item 6): a sweep writes each case's record as it finishes and
rebuilds its tables only as the records double and at its end; a folder it leaves at any
moment (between cases, mid-write) is read whole by every reader, and ``--resume`` and ``merge``
rebuild its tables from the records."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import snnbench.records.fileio
from snnbench.records import schema
from snnbench.records.contract import CaseRecord
from snnbench.store.overhead import PROBES
from snnbench.store.rundir import TABLES_STALE, RunFolder, load_run
from snnbench.workload.linear_lif.spec import NetworkSpec
from tests.conftest import FAKE_PLUGIN_DIR, REPO, run_cli

# ci-smoke keeps the spec defaults the fakes declare; with its null probe: 4 cases
SWEEP = ["--adapters", "fake-ok", "--neurons", "8,12,16", "--steps", "5", "--batch-size", "2",
         "--config", "ci-smoke", "--repeats", "3", "--warmup", "1", "--threads", "1",
         "--device", "cpu"]

#: ``snnbench ARGS`` that SIGKILLs itself once the sweep has stored argv[1] cases: killed
#: between two cases (the record of the last is in, the next has not started)
KILL_BETWEEN_CASES = """
import os, signal, sys
from snnbench.store.rundir import RunFolder

real = RunFolder.tables_if_due

def tables_if_due(self, run_id):
    # the sweep's second half of add_case: the record stored, the tables rebuilt when due
    real(self, run_id)
    if self._stored == int(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGKILL)

RunFolder.tables_if_due = tables_if_due
from snnbench.cli import app
app(sys.argv[2:], prog_name="snnbench")
"""


def _invoke(*args: str) -> Any:
    from typer.testing import CliRunner

    from snnbench.cli import app

    return CliRunner().invoke(app, list(args))


def _record(adapter: str, neurons: int, seed: int) -> CaseRecord:
    values = list(np.random.default_rng(seed).normal(1e-3, 1e-5, 8))
    return CaseRecord.from_dict({
        "adapter": adapter, "variant": "default", "device": "cpu",
        "spec": NetworkSpec(neurons=neurons, batch_size=2, time_steps=5).to_dict(),
        "status": "ok", "library": adapter, "library_version": "1.0", "order": seed,
        "finished_utc": f"2026-01-01T00:00:{seed:02d}Z",
        "samples": {phase: {"time_s": values, "peak_mem_bytes": [4e6]}
                    for phase in ("forward", "backward", "step")},
    })


def _records(count: int) -> list[CaseRecord]:
    return [_record(("torch", "fused")[i % 2], 8 + 4 * (i // 2), i) for i in range(count)]


def _folder(path: Path, run_id: str = "r") -> RunFolder:
    """A new run folder with a real manifest (merge and resume check it whole)."""
    folder = RunFolder.create(path)
    manifest = json.loads((REPO / "results" / "baselines" / "cpu-smoke" / schema.MANIFEST_FILE)
                          .read_text())
    folder.write_manifest({**manifest, "run_id": run_id})
    return folder


def _stored_cases(run: Path) -> set[tuple[str, str]]:
    """(adapter, case_id) of every record the folder holds."""
    return {(r.adapter, r.case_id) for r in RunFolder(run).case_records()}


def _table_cases(run: Path) -> set[tuple[str, str]]:
    """(adapter, case_id) of the rows summary.parquet holds, as the file is."""
    table = pd.read_parquet(run / schema.SUMMARY_PARQUET)
    return set(zip(table["adapter"], table["case_id"], strict=True))


def _every_reader_sees(run: Path, tmp_path: Path) -> None:
    """show, report, compare and history take the folder and show each of its records."""
    records = RunFolder(run).case_records()
    cases = {(r.adapter, r.case_id) for r in records}
    sizes = {(r.adapter, r.workload.spec.neurons) for r in records}

    assert {(r.adapter, r.case_id) for r in load_run(run).summary.itertuples()} == cases
    samples = load_run(run).samples
    assert samples is not None and set(zip(samples["adapter"], samples["case_id"],
                                           strict=True)) == cases

    show = _invoke("show", str(run), "--format", "json")
    assert show.exit_code == 0, show.stderr
    assert {(row["adapter"], row["n"]) for row in json.loads(show.stdout)["rows"]} == sizes

    out = tmp_path / f"report-{run.name}"
    report = _invoke("report", str(run), "--out", str(out))
    assert report.exit_code == 0, report.stderr
    page = (out / "report.md").read_text()
    for adapter, n in sizes:
        assert f"| {adapter} | default | cpu float32 n={n} B=2 T=5 L=1 subtract | step |" in page

    compare = _invoke("compare", str(run), str(run), "--format", "json")
    assert compare.exit_code == 0, compare.stderr
    assert {(p["adapter"], p["case_id"]) for p in json.loads(compare.stdout)["pairs"]} == cases

    from snnbench.report.history import collect

    drawn = {s.label for s in collect([run]).series}
    assert drawn == {adapter for adapter, _ in cases if adapter not in PROBES}
    assert len({(s.label, s.case) for s in collect([run]).series}) == len(
        [c for c in cases if c[0] not in PROBES])


def _assert_tables_are_a_full_rebuild(run: Path, tmp_path: Path) -> None:
    """The folder's three tables equal what a rebuild from its records writes, and no stale
    mark is left."""
    assert not (run / TABLES_STALE).exists()
    copy = tmp_path / f"rebuilt-{run.name}"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns(".lock"))
    folder = RunFolder(copy)
    folder.rebuild_tables(folder.manifest_data()["run_id"])
    for name in (schema.SUMMARY_PARQUET, schema.SAMPLES_PARQUET):
        pd.testing.assert_frame_equal(pd.read_parquet(run / name), pd.read_parquet(copy / name))
    assert (run / schema.SUMMARY_CSV).read_text() == (copy / schema.SUMMARY_CSV).read_text()
    assert _table_cases(run) == _stored_cases(run)


# -- the writer ------------------------------------------------------------------------------
def test_a_sweep_rebuilds_its_tables_only_as_the_records_double(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _folder(tmp_path / "run")
    built: list[int] = []
    real = RunFolder._write_tables

    def write_tables(self: RunFolder, run_id: str) -> pd.DataFrame:
        built.append(len(list(self.cases_dir.glob("*.json"))))
        return real(self, run_id)

    monkeypatch.setattr(RunFolder, "_write_tables", write_tables)
    folder.begin_cases()
    for record in _records(20):
        folder.add_case(record, "r")
        assert (folder.path / TABLES_STALE).exists()  # until the sweep's own end
    # each rebuild reads every record: 1 + 2 + 4 + 8 + 16 < 2 × 20, never one per case
    assert built == [1, 2, 4, 8, 16]
    folder.rebuild_tables("r")
    assert built[-1] == 20 and not (folder.path / TABLES_STALE).exists()
    _assert_tables_are_a_full_rebuild(folder.path, tmp_path)


def test_a_resumed_sweep_counts_the_records_it_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _folder(tmp_path / "run")
    for record in _records(6):
        first.add_case(record, "r")
    built: list[int] = []
    real = RunFolder._write_tables

    def write_tables(self: RunFolder, run_id: str) -> pd.DataFrame:
        built.append(len(list(self.cases_dir.glob("*.json"))))
        return real(self, run_id)

    monkeypatch.setattr(RunFolder, "_write_tables", write_tables)
    resumed = RunFolder(first.path)  # a new process on the killed folder
    for record in _records(14)[6:]:
        resumed.add_case(record, "r")
    assert built == [12]


def test_tables_rebuilt_while_a_record_arrives_stay_marked_stale(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster task may write a record straight into cases/ while the tables are built: those
    tables may lack it, so the mark stays and readers go on to the records."""
    folder = _folder(tmp_path / "run")
    records = _records(3)
    for record in records[:2]:
        folder.add_case(record, "r")
    real = RunFolder._write_tables

    def write_tables(self: RunFolder, run_id: str) -> pd.DataFrame:
        summary = real(self, run_id)
        records[2].write(self.cases_dir / f"{records[2].key}.json")  # as a cluster task does
        return summary

    monkeypatch.setattr(RunFolder, "_write_tables", write_tables)
    folder.rebuild_tables("r")
    assert (folder.path / TABLES_STALE).exists()
    assert len(_table_cases(folder.path)) == 2
    assert {(r.adapter, r.case_id) for r in load_run(folder.path).summary.itertuples()} == (
        _stored_cases(folder.path))


# -- the readers of a folder a sweep left ----------------------------------------------------
def test_a_sweep_killed_between_cases_is_whole_for_every_reader(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "run")
    for record in _records(6):
        folder.add_case(record, "r")
    # as a kill leaves it: the tables hold the first 4 cases, the records all 6
    assert len(_table_cases(folder.path)) == 4 and len(_stored_cases(folder.path)) == 6
    _every_reader_sees(folder.path, tmp_path)


def test_a_sweep_killed_mid_write_is_whole_for_every_reader(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _folder(tmp_path / "run")
    records = _records(4)
    for record in records[:3]:
        folder.add_case(record, "r")
    real = os.replace

    def replace(src: str, dst: str) -> None:
        if Path(dst).name == schema.SUMMARY_PARQUET:  # samples.parquet is new, the summary old
            raise KeyboardInterrupt
        real(src, dst)

    monkeypatch.setattr(snnbench.records.fileio.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        folder.add_case(records[3], "r")  # its 4th record: the tables are rebuilt
    monkeypatch.setattr(snnbench.records.fileio.os, "replace", real)
    assert len(_table_cases(folder.path)) == 2
    assert len(pd.read_parquet(folder.path / schema.SAMPLES_PARQUET)
               .drop_duplicates(["adapter", "case_id"])) == 4
    _every_reader_sees(folder.path, tmp_path)


def test_records_without_tables_are_read_from_the_records(tmp_path: Path) -> None:
    """Cluster tasks wrote records, the sweep that submitted them died before any table."""
    folder = _folder(tmp_path / "run")
    for record in _records(3):
        folder.write_case(record)
    assert not (folder.path / schema.SUMMARY_PARQUET).exists()
    _every_reader_sees(folder.path, tmp_path)


def test_a_stale_folder_reads_as_its_rebuilt_self(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "run")
    for record in _records(5):
        folder.add_case(record, "r")
    stale = load_run(folder.path)
    folder.rebuild_tables("r")
    rebuilt = load_run(folder.path)
    pd.testing.assert_frame_equal(stale.summary, rebuilt.summary)
    assert stale.samples is not None and rebuilt.samples is not None
    pd.testing.assert_frame_equal(stale.samples, rebuilt.samples)


def test_a_damaged_record_of_a_stale_folder_is_one_line(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "run")
    for record in _records(3):
        folder.add_case(record, "r")
    (folder.cases_dir / "torn.json").write_text("{torn")
    result = _invoke("show", str(folder.path))
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "torn.json" in lines[0] and "did not finish" in lines[0]


def test_merge_rebuilds_the_tables_of_a_killed_sweep(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "run")
    for record in _records(6):
        folder.add_case(record, "r")
    result = _invoke("merge", str(folder.path))
    assert result.exit_code == 0, result.stderr
    _assert_tables_are_a_full_rebuild(folder.path, tmp_path)


def test_committed_folders_are_read_from_their_tables() -> None:
    """No committed folder carries the mark: each loads from its own tables, as before."""
    folders = [m.parent for m in (REPO / "results").rglob(schema.MANIFEST_FILE)]
    assert folders
    assert not [f for f in folders if RunFolder(f).tables_stale()]


# -- a real sweep, killed and resumed --------------------------------------------------------
@pytest.mark.parametrize(("stored", "tabled"), [
    (3, 2),
    # every case stored, the sweep's own rebuild never came: --resume has nothing to run
    pytest.param(4, 4, marks=pytest.mark.slow),
], ids=["mid-sweep", "before-the-end"])
def test_a_real_sweep_killed_between_cases_is_whole_and_resume_rebuilds(
        tmp_path: Path, stored: int, tabled: int) -> None:
    env = {**os.environ, "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join([str(FAKE_PLUGIN_DIR), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "run"
    killed = subprocess.run([sys.executable, "-c", KILL_BETWEEN_CASES, str(stored), "run",
                             *SWEEP, "--out", str(out)], env=env, cwd=REPO, capture_output=True,
                            text=True, timeout=600)
    assert killed.returncode == -9, killed.stderr
    assert (out / TABLES_STALE).exists()
    assert len(_stored_cases(out)) == stored and len(_table_cases(out)) == tabled
    _every_reader_sees(out, tmp_path)

    resumed = run_cli("run", "--resume", "--out", str(out), env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{stored} cases were already done" in resumed.stdout
    assert len(_stored_cases(out)) == 4
    _assert_tables_are_a_full_rebuild(out, tmp_path)
    _every_reader_sees(out, tmp_path)

"""Run-folder storage: atomic writes, damaged files, schema checks."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from snnbench.records.contract import CaseRecord, ContractError
from snnbench.records.schema import SUMMARY_COLUMNS
from snnbench.store.rundir import RunDir
from snnbench.store.storage import StorageError, atomic_write_json, read_summary, summary_frame
from snnbench.workload.linear_lif.spec import NetworkSpec


def _record(adapter: str, status: str = "ok", **extra: object) -> CaseRecord:
    spec = NetworkSpec(neurons=8, batch_size=2, time_steps=5)
    return CaseRecord.from_dict({"adapter": adapter, "variant": "default", "device": "cpu",
                                 "spec": spec.to_dict(), "status": status, **extra})


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    atomic_write_json(target, {"a": 1, "nan": math.nan})
    assert json.loads(target.read_text()) == {"a": 1, "nan": None}
    atomic_write_json(target, {"b": 2})
    assert json.loads(target.read_text()) == {"b": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]  # no temporary left behind


def test_summary_rows_and_floor_ratio() -> None:
    records = [
        _record("torch", samples={"step": {"time_s": [0.4, 0.5, 0.6]}}),
        _record("floor", samples={"step": {"time_s": [0.1, 0.1, 0.1]}}),
        _record("broken", status="error", message="boom"),
    ]
    frame = summary_frame(records, "run1")
    assert tuple(frame.columns) == SUMMARY_COLUMNS
    torch_row = frame[frame["adapter"] == "torch"].iloc[0]
    assert torch_row["median"] == 0.5 and torch_row["floor_ratio"] == pytest.approx(5.0)
    assert torch_row["unit"] == "s" and torch_row["n_samples"] == 3
    broken = frame[frame["adapter"] == "broken"]
    assert len(broken) == 1 and broken.iloc[0]["phase"] == "" and math.isnan(broken.iloc[0]["median"])


def test_damaged_case_record_and_wrong_schema(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run")
    (run.cases_dir / "x.json").write_text("{torn")
    with pytest.raises(ContractError, match=r"x\.json: damaged or not JSON"):
        run.case_records()
    (run.cases_dir / "x.json").write_text('{"hello": 1}')
    with pytest.raises(ContractError, match=r"x\.json is not a case record: it lacks 'adapter'"):
        run.case_records()
    (run.cases_dir / "x.json").unlink()
    run.write_manifest({"run_id": "r"})
    data = json.loads(run.manifest_path.read_text())
    data["schema_version"] = 999
    run.manifest_path.write_text(json.dumps(data))
    with pytest.raises(StorageError, match="schema version 999"):
        run.read_manifest()
    pd.DataFrame({"median": [1.0]}).to_parquet(tmp_path / "run" / "summary.parquet")
    with pytest.raises(StorageError, match="lacks columns"):
        read_summary(tmp_path / "run")


def test_lock_is_exclusive(tmp_path: Path) -> None:
    first = RunDir.create(tmp_path / "run")
    first.lock()
    other = RunDir(tmp_path / "run")
    with pytest.raises(StorageError, match="in use by another live run"):
        other.lock()
    first.unlock()
    other.lock()
    other.unlock()


def test_spike_match_text_never_rounds_up_to_a_perfect_match() -> None:
    from snnbench.report.tables import spike_match_text

    assert spike_match_text(1.0) == "100 %"
    assert spike_match_text(0.999996) == "99.999 %"
    assert spike_match_text(0.5) == "50.000 %"
    assert spike_match_text(math.nan) == ""


def test_every_summary_column_has_exactly_one_type() -> None:
    from snnbench.records import schema

    typed = (schema.SUMMARY_FLOAT_COLUMNS + schema.SUMMARY_INT_COLUMNS
             + schema.SUMMARY_TEXT_COLUMNS + schema.SUMMARY_BOOL_COLUMNS)
    assert sorted(typed) == sorted(SUMMARY_COLUMNS)

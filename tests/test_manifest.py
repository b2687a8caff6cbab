"""The typed manifest: every committed run folder reads and writes back unchanged, our own
format refuses unknown keys, and every problem is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from snnbench.records.fileio import StorageError
from snnbench.store.manifest import Execution, Manifest
from snnbench.store.rundir import RunFolder
from tests.conftest import REPO

COMMITTED = sorted(p.parent for p in (REPO / "results").glob("*/*/manifest.json"))


def test_there_are_committed_folders() -> None:
    assert len(COMMITTED) >= 4


@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_committed_manifest_reads_and_writes_back_unchanged(folder: Path) -> None:
    raw = json.loads((folder / "manifest.json").read_text())
    manifest = RunFolder(folder).manifest()
    assert manifest.run_id == raw["run_id"]
    assert manifest.settings.device == raw["settings"]["device"]
    assert manifest.to_json() == raw


def _minimal(**extra: object) -> dict[str, object]:
    return {"schema_version": 1, "run_id": "r", "config": {}, "settings": {"device": "cpu"},
            **extra}


def test_unknown_keys_are_refused_in_one_line() -> None:
    with pytest.raises(StorageError, match=r"m\.json is damaged: unknown key surprise$"):
        Manifest.parse(_minimal(surprise=1), "m.json")
    with pytest.raises(StorageError, match=r"unknown key settings\.seed"):
        Manifest.parse(_minimal(settings={"device": "cpu", "seed": 0}), "m.json")
    with pytest.raises(StorageError, match=r"settings\.device must be cpu or cuda, got 'tpu'"):
        Manifest.parse(_minimal(settings={"device": "tpu"}), "m.json")


def test_another_version_is_refused_and_only_set_keys_are_written() -> None:
    with pytest.raises(StorageError, match="schema version 7"):
        Manifest.parse({**_minimal(), "schema_version": 7}, "m.json")
    manifest = Manifest.parse(_minimal(), "m.json")
    assert manifest.to_json() == _minimal()
    # what is assigned is written; an execution keeps its executor's own keys
    manifest.add_execution(Execution.model_validate({"name": "toy", "order": "last first"}))
    assert manifest.open_execution("") is None  # it has no start time: not this one
    data = manifest.to_json()
    assert data["executions"] == [{"name": "toy", "order": "last first"}]
    assert "preflight" not in data and "hosts" not in data

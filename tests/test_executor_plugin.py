"""Adding an executor is one file and one entry point: a toy executor from a test package
(tests/fake_executor, a fake distribution) runs a small sweep end to end."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from snnbench.config import RunConfig
from snnbench.executors import ExecutorSettings, executor_class, make_executor
from snnbench.runner import start_run

TOY_DIR = Path(__file__).parent / "fake_executor"


@pytest.fixture
def toy_executor(monkeypatch: pytest.MonkeyPatch, fake_plugins: Path) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(TOY_DIR))
    old = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(TOY_DIR), old) if p))
    importlib.invalidate_caches()
    yield TOY_DIR


def test_a_toy_executor_from_an_entry_point_runs_a_sweep(toy_executor: Path,
                                                          tmp_path: Path) -> None:
    settings = ExecutorSettings.from_dict({"name": "toy"})
    assert executor_class("toy").__name__ == "ToyExecutor"
    assert make_executor(settings, "cpu", 1).name == "toy"
    config = RunConfig.from_dict({
        "run": {"repeats": 3, "max_repeats": 5, "min_time_s": 0.0, "warmup": 1,
                "warmup_s": 0.0, "threads": 1, "device": "cpu", "overhead_probe": False,
                "adapters": ["fake-ok"]},
        "network": {"batch_size": 2, "time_steps": 10},
        "sweep": [{"neurons": [8, 16]}],
    })
    out = tmp_path / "run"
    outcome = start_run(config, out, tmp_path, False, executor_settings=settings)
    assert not outcome.failed, [(r.adapter, r.status, r.message) for r in outcome.records]
    summary = pd.read_parquet(out / "summary.parquet")
    assert set(summary["status"]) == {"ok"}
    assert set(summary["executor"]) == {"toy"} and summary["neurons"].nunique() == 2
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["executions"][-1]["name"] == "toy"
    assert manifest["executions"][-1]["order"] == "last first"
    assert manifest["config"]["executor"]["name"] == "toy"
    # it runs elsewhere: no pre-flight check of this machine, no host record of this machine;
    # and the file it kept in the jobs folder went with the jobs folder
    assert manifest["preflight"] == []
    assert not (out / "jobs").exists()


def test_an_unknown_executor_names_the_installed_ones(toy_executor: Path) -> None:
    from snnbench.executors import ExecutorError

    # the installed plugins are named among the known ones
    with pytest.raises(ExecutorError, match=r"unknown executor 'sge' \(known: .*toy"):
        ExecutorSettings.from_dict({"name": "sge"})

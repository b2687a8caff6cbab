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

from snnbench.executors import ExecutorSettings, executor_class, make_executor
from snnbench.sweep.config import RunConfig
from snnbench.sweep.run import start_run

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


def test_a_plugin_executor_owns_its_settings_table(toy_executor: Path, tmp_path: Path) -> None:
    """The toy declares ToySettings: its [executor.toy] table reaches it, and a key it does not
    know is refused in one line (exit 2), like a key of [executor.slurm]."""
    from snnbench.sweep.config import load_config
    from tests.conftest import run_cli

    config = tmp_path / "toy.toml"
    config.write_text('[run]\nadapters = ["fake-ok"]\n[executor]\nname = "toy"\n'
                      '[executor.toy]\norder = "as given"\n')
    settings = load_config(config).executor
    assert settings.table("toy").order == "as given" and settings.toy.order == "as given"
    executor = make_executor(settings, "cpu", 1)
    assert executor.describe() == {"name": "toy", "order": "as given"}
    recorded = settings.to_dict()
    assert recorded["toy"] == {"order": "as given"}
    assert ExecutorSettings.from_dict(recorded) == settings
    # without the table the toy's defaults apply
    assert make_executor(ExecutorSettings(name="toy"), "cpu", 1).describe()["order"] == \
        "last first"

    config.write_text('[run]\nadapters = ["fake-ok"]\n[executor]\nname = "toy"\n'
                      '[executor.toy]\nordre = "as given"\n')
    proc = run_cli("run", "--config", str(config), "--out", str(tmp_path / "run"))
    assert proc.returncode == 2, proc.stderr
    assert "[executor.toy]: unknown key(s) ordre (known: order)" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2  # one line (a long one may wrap once)
    assert not (tmp_path / "run").exists()

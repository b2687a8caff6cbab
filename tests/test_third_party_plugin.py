"""The README's third-party adapter example, installed from its own folder, appears and runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.conftest import REPO, run_cli

EXAMPLE = REPO / "examples" / "snnbench-example-adapter"


def test_example_plugin_installs_lists_and_runs(tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(EXAMPLE)],
        check=True, capture_output=True, text=True,
    )
    env = {"PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}
    listed = run_cli("list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["numpy-loop"]["available"] is True
    out = tmp_path / "run"
    ran = run_cli("run", "--config", "ci-smoke", "--adapters", "numpy-loop", "--neurons", "16", "--steps", "10",
                  "--batch-size", "2", "--reset", "both", "--repeats", "3", "--threads", "1",
                  "--device", "cpu", "--out", str(out), env=env)
    assert ran.returncode == 0, ran.stderr + ran.stdout
    summary = pd.read_parquet(out / "summary.parquet")
    by_reset = summary.groupby("reset")["status"].first().to_dict()
    assert by_reset == {"subtract": "ok", "zero": "skipped"}
    ok = summary[summary["reset"] == "subtract"]
    assert ok["spike_match"].iloc[0] == 1.0 and ok["grad_cosine"].iloc[0] > 0.9999

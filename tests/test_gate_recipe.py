"""The maintainer's CI recipe (examples/github-workflow-snnbench-gate.yml), its commands run end
to end on a toy library: the workflow's own `run:` steps, read from the file, in order, with the
env block set for the toy (GitHub's `uses:` steps and the install step are what this test
environment already provides)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.test_gate import TOY_SOURCE, toy_wheelhouse

WORKFLOW = REPO / "examples" / "github-workflow-snnbench-gate.yml"

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "snnbench-toylib"
version = "{version}"

[tool.setuptools]
packages = ["snnbench_toylib"]
"""


def toy_checkout(folder: Path, passes: int, version: str = "1.1.dev0") -> Path:
    """A source checkout of the toy library whose ``work()`` does ``passes`` passes."""
    (folder / "snnbench_toylib").mkdir(parents=True)
    (folder / "pyproject.toml").write_text(PYPROJECT.format(version=version))
    (folder / "snnbench_toylib" / "__init__.py").write_text(
        f"__version__ = {version!r}\n" + TOY_SOURCE.format(passes=passes))
    return folder


def _workflow() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    return doc


def run_recipe(workspace: Path, overrides: dict[str, str]) -> tuple[str, int, str]:
    """Run the workflow's `run:` steps (all but the install) in ``workspace`` as GitHub would
    (bash -e, the env block, GITHUB_STEP_SUMMARY): the name and exit code of the first failing
    step ("", 0 when none failed) and the job summary (or that step's stderr)."""
    doc = _workflow()
    summary = workspace / "summary.md"
    env = {**os.environ, **{k: str(v) for k, v in doc["env"].items()}, **overrides,
           "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(workspace),
           # this venv's python and snnbench, as the install step would have put them
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    for step in doc["jobs"]["gate"]["steps"]:
        if "run" not in step or step.get("id") == "install":
            continue
        script = workspace / "step.sh"
        script.write_text(step["run"])
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-e", str(script)],
                              cwd=workspace, env=env, capture_output=True, text=True,
                              timeout=900)
        if proc.returncode != 0:
            text = summary.read_text() if summary.exists() else proc.stdout + proc.stderr
            return str(step["name"]), proc.returncode, text
    return "", 0, summary.read_text()


def test_the_workflow_is_well_formed() -> None:
    doc = _workflow()
    steps = doc["jobs"]["gate"]["steps"]
    assert doc["on"] if "on" in doc else doc[True]  # YAML 1.1 reads `on:` as True
    runs = [s for s in steps if "run" in s]
    assert [s.get("name") for s in runs] == ["Install snnbench", "Build both sides",
                                             "Run both sides, interleaved", "Gate"]
    # the run steps use only the env block (no ${{ }} expressions): runnable outside GitHub
    assert not [s for s in runs if "${{" in s["run"]]
    gate = runs[-1]["run"]
    assert "--envs release,head" in gate and "3)" in gate
    assert "--replicates \"$REPLICATES\"" in runs[2]["run"]


@pytest.mark.slow
def test_the_recipe_fails_a_planted_regression_and_passes_an_unchanged_head(
        tmp_path: Path, fake_plugins: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SNNBENCH_ENV_CACHE", str(tmp_path / "envs"))
    wheels = toy_wheelhouse(tmp_path / "wheelhouse")
    # 7 replicates, as the workflow ships: at 5 one disturbed process on a loaded runner can
    # widen the Student interval of a real × 2 past the factor (tests/test_gate.py)
    common = {"ADAPTER": "fake-toy", "PACKAGE": "snnbench-toylib", "REPLICATES": "7",
              # offline: build from the venv's setuptools, resolve from the wheelhouse
              "PIP_WHEEL_ARGS": "--no-build-isolation --no-index",
              "SNNBENCH_ARGS": f"--neurons 8 --steps 4 --batch-size 2 --repeats 20 "
                               f"--threads 1 --wheelhouse {wheels}"}

    # base: the default branch built as a wheel; head: a pull request that plants × 2 work
    planted = tmp_path / "planted"
    toy_checkout(planted / "base", 200, "1.0.dev0")
    toy_checkout(planted / "head", 400)
    step, code, summary = run_recipe(planted, {**common, "BASE_REQUIREMENT": ""})
    assert (step, code) == ("Gate", 1), summary
    assert "❌ **FAIL" in summary and "| regression | fake-toy" in summary
    toml = (planted / "snnbench-gate" / "gate.toml").read_text()
    assert "snnbench-toylib @ file://" in toml and "[environments.head]" in toml

    # base: the last release from the index (the wheelhouse); head: unchanged code
    same = tmp_path / "same"
    toy_checkout(same / "head", 200)
    step, code, summary = run_recipe(same, {**common,
                                            "BASE_REQUIREMENT": "snnbench-toylib==1.0"})
    assert (step, code) == ("", 0), summary  # pass, or inconclusive (a warning by default)
    assert "✅ **PASS" in summary or "❔ **INCONCLUSIVE" in summary
    assert "| regression |" not in summary and "| improved |" not in summary

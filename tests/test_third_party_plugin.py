"""The third-party adapter guide (docs/adapters.md): the example package installs, appears, runs
the shipped default config, and the guide documents what a plugin author needs (kept in step)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from snnbench.adapter import Adapter, Capabilities, Model
from snnbench.sweep.config import load_config
from snnbench.workload.linear_lif.equivalence import GRAD_COSINE_MIN, MIN_SPIKE_MATCH
from snnbench.workload.linear_lif.spec import SURROGATES
from tests.conftest import REPO, assert_exact, run_cli

EXAMPLE = REPO / "examples" / "snnbench-example-adapter"
EXAMPLE_SOURCE = EXAMPLE / "src" / "snnbench_example" / "adapter.py"
ADAPTERS_DOC = REPO / "docs" / "adapters.md"
_DOC = ADAPTERS_DOC.read_text()
#: the guide is the doc's last part: from its heading to the end of the file
GUIDE = _DOC[_DOC.index("## Writing a third-party adapter"):]


@pytest.fixture
def example_adapter(monkeypatch: pytest.MonkeyPatch) -> Iterator[Adapter]:
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    from snnbench_example.adapter import NumpyLoopAdapter

    yield NumpyLoopAdapter()


def test_example_plugin_installs_lists_and_runs_the_default_config(tmp_path: Path) -> None:
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
    # the shipped default config (zero reset, reset not detached, sigmoid surrogate), small
    ran = run_cli("run", "--adapters", "numpy-loop", "--neurons", "16", "--steps", "10",
                  "--batch-size", "2", "--layers", "1", "--repeats", "3", "--threads", "1",
                  "--out", str(out), env=env)
    assert ran.returncode == 0, ran.stderr + ran.stdout
    summary = pd.read_parquet(out / "summary.parquet")
    assert set(summary["status"]) == {"ok"}, summary[["status", "message"]]
    # beside the default config's null probe, which is never verified
    mine = summary[summary["adapter"] == "numpy-loop"]
    assert mine["spike_match"].iloc[0] == 1.0 and mine["grad_cosine"].iloc[0] > 0.9999
    two = run_cli("run", "--adapters", "numpy-loop", "--neurons", "16", "--steps", "10",
                  "--batch-size", "2", "--layers", "2", "--out", str(tmp_path / "two"), env=env)
    assert two.returncode == 0
    # a skipped row, counted by run and listed with its reason by show --skipped
    assert "--skipped' lists them" in two.stdout
    skipped = run_cli("show", str(tmp_path / "two"), "--skipped", env=env)
    assert skipped.returncode == 0, skipped.stderr
    assert "layers=2 not supported (at most 1)" in " ".join(skipped.stdout.split())


def test_example_runs_every_case_of_the_default_config_exactly(example_adapter: Adapter) -> None:
    default = load_config(REPO / "configs" / "default.toml")
    for spec in (w.spec for w in default.cases()):
        assert example_adapter.reason_skipped(spec, "cpu", "default") is None, spec.label
        assert_exact(example_adapter, spec.replace(neurons=24, time_steps=30, batch_size=3,
                                                   input_std=2.0))
    for reset in ("subtract", "zero"):
        for detach in (True, False):
            for surrogate in SURROGATES:
                spec = default.cases()[0].spec.replace(
                    neurons=16, time_steps=25, batch_size=2, reset=reset, detach_reset=detach,
                    surrogate=surrogate, surrogate_slope=3.0, input_std=2.0)
                assert_exact(example_adapter, spec)


def _python_block(text: str) -> str:
    match = re.search(r"```python\n(.*?)```", text, re.S)
    assert match
    return match.group(1)


def test_guide_code_is_quoted_from_the_example() -> None:
    source = {line.strip() for line in EXAMPLE_SOURCE.read_text().splitlines()}
    quoted = [line.strip() for line in _python_block(GUIDE).splitlines()
              if line.strip() and not line.strip().startswith("...")]
    missing = [line for line in quoted if line not in source]
    assert not missing, f"{ADAPTERS_DOC.name} lines not in {EXAMPLE_SOURCE.name}: {missing}"
    toml = (EXAMPLE / "pyproject.toml").read_text()
    assert 'numpy-loop = "snnbench_example.adapter:NumpyLoopAdapter"' in toml
    assert 'numpy-loop = "snnbench_example.adapter:NumpyLoopAdapter"' in GUIDE


def _shown(value: Any) -> str:
    """A default as the guide writes it: ("a", "b"), True, None, ""."""
    if isinstance(value, tuple):
        items = ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in value)
        return f"({items}{',' if len(value) == 1 else ''})"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def test_guide_documents_every_capabilities_field_with_its_default() -> None:
    for field in dataclasses.fields(Capabilities):
        row = f"| `{field.name}` | `{_shown(field.default)}` |"
        assert row in GUIDE, f"the guide lacks the row for Capabilities.{field.name}: {row}"


def test_guide_documents_the_adapter_attributes_and_methods() -> None:
    for name in ("name", "library", "module", "framework", "variants", "description"):
        assert f"| `{name}` |" in GUIDE, name
        assert hasattr(Adapter, name)
    for method in ("version", "capabilities", "check_variant", "worker_env", "reason_skipped",
                   "build"):
        assert f"`{method}(" in GUIDE, method
        assert hasattr(Adapter, method)
    for method in ("forward", "backward", "zero_grad", "synchronize", "spikes", "gradients",
                   "step", "peak_memory_bytes", "reset_peak_memory", "close"):
        assert f"`{method}(" in GUIDE, method
        assert hasattr(Model, method)
    assert "AdapterUnavailable" in GUIDE and "CaseSkipped" in GUIDE
    assert "imported from `snnbench.adapter`" in GUIDE
    for field in ("inputs", "weights", "biases"):
        assert f"| `{field}` |" in GUIDE, field


def test_guide_states_the_surrogates_and_the_tolerances_in_force() -> None:
    for name in SURROGATES:
        assert f"| `{name}` |" in GUIDE, name
    assert "v_pre − threshold" in GUIDE
    spike = f"≥ {MIN_SPIKE_MATCH['float32']:.1%}".replace("%", " %")
    assert spike in GUIDE, spike
    assert f"{MIN_SPIKE_MATCH['bfloat16']:.0%} bfloat16".replace("%", " %") in GUIDE
    assert f"≥ {GRAD_COSINE_MIN['float32']}" in GUIDE
    assert f"{GRAD_COSINE_MIN['bfloat16']}" in GUIDE and f"{GRAD_COSINE_MIN['float16']}" in GUIDE

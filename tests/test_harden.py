"""Issue 21: nothing leaks, nothing foreign is overwritten, a received run folder runs no code.

One test (or a few) per item of the issue, each a reproduction of what its probe found.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from snnbench.config import RunConfig
from snnbench.runner import start_run
from tests.conftest import FAKE_PLUGIN_DIR, run_cli

FAST = {"repeats": 3, "max_repeats": 5, "min_time_s": 0.0, "warmup": 1, "warmup_s": 0.0,
        "threads": 1, "device": "cpu"}


def _env() -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(FAKE_PLUGIN_DIR), os.environ.get("PYTHONPATH", "")])}


def _config(adapters: list[str], **run: object) -> RunConfig:
    return RunConfig.from_dict({
        "run": {**FAST, "adapters": adapters, "timeout_s": 60.0, **run},
        "network": {"batch_size": 2, "time_steps": 10},
        "sweep": [{"neurons": [8]}],
    })


# -- item 16: a network with wrong gradients is not timed as ok ----------------------------
def test_wrong_gradients_are_a_mismatch_in_run_and_show_gives_the_cosine(
        fake_plugins: Path, tmp_path: Path) -> None:
    outcome = start_run(_config(["fake-wrong-grad", "fake-ok"]), tmp_path / "run", tmp_path,
                        False)
    summary = pd.read_parquet(tmp_path / "run" / "summary.parquet")
    bad = summary[summary["adapter"] == "fake-wrong-grad"]
    assert bad["status"].tolist() == ["mismatch"] and outcome.failed
    assert "weight-gradient cosine" in bad["message"].iloc[0]
    assert "not timed" in bad["message"].iloc[0]
    assert bad["median"].isna().all() and bad["grad_cosine"].iloc[0] < 0.5
    show = run_cli("show", str(tmp_path / "run"), env=_env())
    assert show.returncode == 0, show.stderr
    assert "grad cos" in show.stdout
    assert f"{bad['grad_cosine'].iloc[0]:.6f}" in show.stdout

    allowed = start_run(_config(["fake-wrong-grad"], allow_mismatch=True), tmp_path / "allowed",
                        tmp_path, False)
    timed = pd.read_parquet(tmp_path / "allowed" / "summary.parquet")
    assert (timed["status"] == "ok").all() and not allowed.failed
    assert "--allow-mismatch" in timed["message"].iloc[0]
    assert timed[timed["metric"] == "time_s"]["median"].notna().all()


# -- item 19: a crash inside an adapter names the adapter's frame; the log keeps the traceback
def test_adapter_crash_names_its_frame_and_the_log_keeps_the_traceback(
        fake_plugins: Path, tmp_path: Path) -> None:
    start_run(_config(["fake-raises"]), tmp_path / "run", tmp_path, False)
    summary = pd.read_parquet(tmp_path / "run" / "summary.parquet")
    message = summary["message"].iloc[0]
    assert summary["status"].iloc[0] == "error"
    # the plugin's own file, line and function: where its author has to look
    assert "(at snnbench_fake_adapters.py:" in message and "in forward)" in message
    logs = list((tmp_path / "run" / "logs").glob("*.log"))
    assert len(logs) == 1
    text = logs[0].read_text()
    assert "Traceback (most recent call last)" in text
    assert "RuntimeError: injected failure in forward" in text


# -- item 18: rows say which network they are ------------------------------------------------
def test_rows_name_their_network_in_the_summary_and_show(fake_plugins: Path,
                                                         tmp_path: Path) -> None:
    config = RunConfig.from_dict({
        "run": {**FAST, "adapters": ["fake-ok"], "timeout_s": 60.0, "phases": ["step"]},
        "network": {"batch_size": 2, "time_steps": 10},
        "sweep": [{"neurons": [8], "detach_reset": [True, False]}],
    })
    start_run(config, tmp_path / "run", tmp_path, False)
    csv = pd.read_csv(tmp_path / "run" / "summary.csv", keep_default_na=False)
    step = csv[(csv["phase"] == "step") & (csv["metric"] == "time_s")]
    assert sorted(step["detach_reset"].astype(str).str.lower()) == ["false", "true"]
    assert set(step["surrogate"]) == {"fast_sigmoid"}
    assert set(step["surrogate_slope"]) == {25.0}
    assert set(step["bias"].astype(str).str.lower()) == {"true"}
    assert set(step["input_kind"]) == {"gaussian"}
    md = run_cli("show", str(tmp_path / "run"), "--format", "md", env=_env())
    assert md.returncode == 0, md.stderr
    header = md.stdout.splitlines()[0]
    for column in ("surrogate", "slope", "detach reset", "bias", "input"):
        assert f"| {column} |" in header
    text = run_cli("show", str(tmp_path / "run"), env=_env())
    assert "detach_reset=true" in text.stdout and "detach_reset=false" in text.stdout

"""Issue 33 (hardening, round 3), items 14, 15, 19, 22 and 23: a verification proves what it
says, a report folder stays its own after an interrupt, damaged files and empty list items
are one line and exit 2.

One test (or a few) per item, each a reproduction of what the probe found.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from snnbench.sweep.config import RunConfig
from snnbench.sweep.run import start_run
from tests.test_harden import _files, _invoke, _one_line_error

FAST = {
    "repeats": 3,
    "max_repeats": 5,
    "min_time_s": 0.0,
    "warmup": 1,
    "warmup_s": 0.0,
    "threads": 1,
    "device": "cpu",
}


def _config(adapters: list[str], **run: object) -> RunConfig:
    return RunConfig.from_dict(
        {
            "run": {**FAST, "adapters": adapters, "timeout_s": 60.0, **run},
            "network": {"batch_size": 2, "time_steps": 10},
            "sweep": [{"neurons": [8]}],
        }
    )




VERIFY = ("verify", "--neurons", "8", "--steps", "6", "--reset", "subtract")


# -- item 14: an adapter that changes the shared arrays computes another network ------------
def test_an_adapter_that_scales_the_weights_in_place_is_no_match(fake_plugins: Path) -> None:
    from snnbench_fake_adapters import MutatesAdapter, OkAdapter

    from snnbench.measure.verify import check_adapter
    from snnbench.workload.linear_lif.spec import NetworkSpec

    spec = NetworkSpec(neurons=8, batch_size=2, time_steps=6)
    adapter = MutatesAdapter()
    eq, arrays = check_adapter(adapter, "default", spec, "cpu")
    assert eq.changed == ("weights",)
    assert "changed the weights it was given in place" in eq.unproven(adapter.capabilities(""))
    # the reference and the dump are of the case's own arrays, never the scaled ones
    from snnbench.workload.linear_lif.spec import make_case_data

    assert np.array_equal(arrays["weight"], make_case_data(spec).weights[0])
    ok, _ = check_adapter(OkAdapter(), "default", spec, "cpu")
    assert ok.changed == () and ok.unproven(OkAdapter().capabilities("")) == ""


def test_verify_and_run_refuse_an_adapter_that_changes_its_arrays(
    fake_plugins: Path, tmp_path: Path
) -> None:
    result = _invoke(*VERIFY, "--adapters", "fake-mutates")
    assert result.exit_code == 1, result.stdout + result.stderr
    text = " ".join(result.stdout.split())  # the table wraps its notes
    assert "changed the weights it was given in place" in text
    assert "FAILED: 0 of 1 checks matched" in text

    outcome = start_run(_config(["fake-mutates"]), tmp_path / "run", tmp_path, False)
    summary = pd.read_parquet(tmp_path / "run" / "summary.parquet")
    assert summary["status"].tolist() == ["mismatch"] and outcome.failed
    assert "changed the weights" in summary["message"].iloc[0]
    assert "not timed" in summary["message"].iloc[0]


# -- item 15: agreeing on nothing is no match ----------------------------------------------
def test_zero_vectors_have_no_cosine_and_silence_proves_nothing() -> None:
    import math

    from snnbench.adapter import Capabilities
    from snnbench.workload.linear_lif.equivalence import compare_outputs
    from snnbench.workload.linear_lif.reference import ReferenceResult

    spikes = np.zeros((4, 2, 3), dtype=np.float32)
    zeros = [np.zeros((3, 3), dtype=np.float32)]
    bias = [np.zeros(3, dtype=np.float32)]
    reference = ReferenceResult(
        spikes=(spikes,), grad_weights=tuple(zeros), grad_biases=tuple(bias)
    )
    eq = compare_outputs(spikes, zeros, bias, reference)
    assert math.isnan(eq.grad_cosine)
    why = eq.unproven(Capabilities(devices=("cpu",)))
    assert why.startswith(
        "no output spike and zero weight gradients on both sides: equivalence not shown"
    )
    # a silent last layer alone is evidence enough: the surrogate gradients carry the dynamics
    grads = [np.ones((3, 3), dtype=np.float32)]
    alive = ReferenceResult(spikes=(spikes,), grad_weights=tuple(grads), grad_biases=tuple(bias))
    assert (
        compare_outputs(spikes, grads, bias, alive).unproven(Capabilities(devices=("cpu",))) == ""
    )


def test_verify_a_stack_whose_last_layer_never_fires_is_not_a_match(
    fake_plugins: Path, tmp_path: Path
) -> None:
    # n = 64: the 100th layer never fires and every gradient underflows to zero
    result = _invoke(
        "verify",
        "--neurons",
        "64",
        "--steps",
        "6",
        "--reset",
        "subtract",
        "--adapters",
        "fake-ok",
        "--layers",
        "100",
    )
    assert result.exit_code == 1, result.stdout + result.stderr
    text = " ".join(result.stdout.split())  # the table wraps its notes
    assert "no output spike and zero weight gradients on both sides: equivalence not shown" in text
    # no cosine of two zero vectors, in the row or among the columns every row shares
    row = next(line for line in result.stdout.splitlines() if "fake-ok" in line)
    assert "mismatch" in row and "1.000000" not in row and "dW=1.000000" not in text
    assert "FAILED: 0 of 1 checks matched" in text

    config = RunConfig.from_dict(
        {
            "run": {**FAST, "adapters": ["fake-ok"], "timeout_s": 60.0},
            "network": {"batch_size": 2, "time_steps": 6, "layers": 100},
            "sweep": [{"neurons": [64]}],
        }
    )
    outcome = start_run(config, tmp_path / "run", tmp_path, False)
    summary = pd.read_parquet(tmp_path / "run" / "summary.parquet")
    assert summary["status"].tolist() == ["mismatch"] and outcome.failed
    assert "equivalence not shown" in summary["message"].iloc[0]
    assert summary["grad_cosine"].isna().all()


# -- item 19: a report folder stays the report's own -----------------------------------------
def _multilayer_run(path: Path, scale: float = 1.0) -> Path:
    from tests.fixtures.runfolders import timed_case, write_run

    rng = np.random.default_rng(0)
    return write_run(
        path,
        [
            timed_case(a, n, rng, median_s=scale * k * 1e-3 * n / 64, layers=layers)
            for a, k in (("torch", 1.0), ("norse", 2.0))
            for n in (64, 128)
            for layers in (1, 2)
        ],
    )


def test_a_second_report_of_a_multilayer_run_refreshes_the_first(tmp_path: Path) -> None:
    run = _multilayer_run(tmp_path / "run")
    out = tmp_path / "figs"
    for _ in range(2):
        result = _invoke("report", str(run), "--out", str(out))
        assert result.exit_code == 0, result.stderr
    ledger = json.loads((out / ".snnbench-written.json").read_text())
    layer_plots = [p.name for p in out.glob("*layers.png")]
    assert layer_plots, sorted(p.name for p in out.iterdir())
    # every file the report wrote is in the ledger, the time-per-layer plot included
    assert {p.name for p in out.iterdir()} - {".snnbench-written.json"} <= set(ledger["files"])


@pytest.mark.parametrize("victim", ["report.md", "phases.png"])
def test_a_report_interrupted_after_a_replacement_leaves_the_folder_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, victim: str
) -> None:
    import snnbench.records.fileio

    run = _multilayer_run(tmp_path / "run")
    out = tmp_path / "figs"
    assert _invoke("report", str(run), "--out", str(out)).exit_code == 0
    # new figures, so the files change; the report is stopped right after one is replaced
    _multilayer_run(run, scale=3.0)
    real = os.replace

    def replace_then_interrupt(src: Any, dst: Any) -> None:
        real(src, dst)
        if Path(dst).name.endswith(victim):
            raise KeyboardInterrupt

    monkeypatch.setattr(snnbench.records.fileio.os, "replace", replace_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        from snnbench.report.pages import report

        report(run, out)
    monkeypatch.setattr(snnbench.records.fileio.os, "replace", real)
    result = _invoke("report", str(run), "--out", str(out))
    assert result.exit_code == 0, result.stderr
    # and it is whole again: the ledger matches every file
    again = _invoke("report", str(run), "--out", str(out))
    assert again.exit_code == 0, again.stderr
    assert "pending" not in json.loads((out / ".snnbench-written.json").read_text())


KILL_MID_WRITE = """
import os, signal, sys
from pathlib import Path
import snnbench.records.fileio
from snnbench.report.pages import report

real = os.replace

def replace(src, dst):
    if Path(dst).name.endswith(sys.argv[3]):  # the new file is whole, not yet in place: killed
        os.kill(os.getpid(), signal.SIGKILL)
    real(src, dst)

snnbench.records.fileio.os.replace = replace
report(sys.argv[1], sys.argv[2])
"""


def test_a_report_killed_mid_write_leaves_the_folder_its_own(tmp_path: Path) -> None:
    import subprocess
    import sys

    run = _multilayer_run(tmp_path / "run")
    out = tmp_path / "figs"
    assert _invoke("report", str(run), "--out", str(out)).exit_code == 0
    _multilayer_run(run, scale=3.0)
    killed = subprocess.run(
        [sys.executable, "-c", KILL_MID_WRITE, str(run), str(out), "phases.png"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -9, killed.stderr
    assert list(out.glob(".*phases.png.*.tmp"))  # what the kill left
    result = _invoke("report", str(run), "--out", str(out))
    assert result.exit_code == 0, result.stderr
    assert not list(out.glob("*.tmp"))


# -- item 22: damaged tables and deeply nested JSON are one line -----------------------------
def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("levels", [100, 5000, 200000])
def test_a_deeply_nested_manifest_is_damaged_for_every_reader(tmp_path: Path, levels: int) -> None:
    from tests.fixtures.runfolders import timed_case, write_run

    rng = np.random.default_rng(0)
    run = write_run(tmp_path / "run", [timed_case("torch", 64, rng, median_s=1e-3)])
    manifest = json.loads((run / "manifest.json").read_text())
    text = json.dumps({**manifest, "config": {}}).replace(
        '"config": {}', f'"config": {_deep(levels)}'
    )
    (run / "manifest.json").write_text(text)
    base = write_run(tmp_path / "base", [timed_case("torch", 64, rng, median_s=1e-3)])
    before = _files(run)
    for args in (
        ["show", str(run)],
        ["report", str(run), "--out", str(tmp_path / "r")],
        ["compare", str(base), str(run)],
        ["merge", str(run)],
        ["run", "--resume", "--out", str(run)],
    ):
        result = _invoke(*args)
        _one_line_error(result, "manifest")
    history = _invoke("history", str(run))
    assert "Traceback" not in history.stdout + history.stderr and history.exit_code == 2, (
        history.stdout,
        history.stderr,
    )
    assert _files(run) == before


@pytest.mark.parametrize("levels", [100, 5000])
def test_a_deeply_nested_case_record_is_damaged(tmp_path: Path, levels: int) -> None:
    from snnbench.records.contract import CaseRecord, ContractError

    path = tmp_path / "cases" / "x.json"
    path.parent.mkdir()
    path.write_text(
        '{"schema": 1, "adapter": "a", "variant": "default", "device": "cpu", '
        f'"status": "ok", "spec": {{}}, "settings": {_deep(levels)}}}'
    )
    with pytest.raises(ContractError, match="damaged or not JSON"):
        CaseRecord.read(path)


def test_merge_and_resume_call_a_deeply_nested_case_record_damaged(
    fake_plugins: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    start_run(_config(["fake-ok"]), run, tmp_path, False)
    case = next((run / "cases").glob("*.json"))
    data = json.loads(case.read_text())
    text = json.dumps({**data, "settings": {}})
    case.write_text(text.replace('"settings": {}', f'"settings": {_deep(5000)}'))
    before = _files(run)
    for args in (["merge", str(run)], ["run", "--resume", "--out", str(run)]):
        _one_line_error(_invoke(*args), "damaged or not JSON (nested too deeply")
    assert _files(run) == before


def test_a_summary_with_duplicated_rows_or_a_non_numeric_neurons_is_one_line(
    tmp_path: Path,
) -> None:
    from tests.fixtures.runfolders import timed_case, write_run

    rng = np.random.default_rng(0)
    cases = [
        timed_case(a, n, rng, median_s=1e-3 * n / 64) for a in ("torch", "norse") for n in (64, 128)
    ]
    dup = write_run(tmp_path / "dup", cases)
    frame = pd.read_parquet(dup / "summary.parquet")
    pd.concat([frame, frame]).to_parquet(dup / "summary.parquet", index=False)
    _one_line_error(_invoke("report", str(dup), "--out", str(tmp_path / "r1")), "summary")

    text = write_run(tmp_path / "text", cases)
    frame = pd.read_parquet(text / "summary.parquet")
    frame["neurons"] = frame["neurons"].astype(str)
    frame.loc[0, "neurons"] = "many"
    frame.to_parquet(text / "summary.parquet", index=False)
    _one_line_error(_invoke("report", str(text), "--out", str(tmp_path / "r2")), "neurons")
    assert not (tmp_path / "r2").exists() or not any((tmp_path / "r2").iterdir())


# -- item 23: an empty item of a comma-list choice is refused before any folder is made -------
@pytest.mark.parametrize(
    ("flag", "value", "fragment"),
    [
        ("--precision", "", "--precision must name at least one value"),
        ("--dtype", "", "--dtype must name at least one value"),
        ("--reset", "", "--reset must name at least one value"),
        ("--reset", "zero,", "--reset has an empty item"),
        ("--dtype", "float32,,bfloat16", "--dtype has an empty item"),
        ("--adapters", "", "--adapters must name at least one value"),
    ],
)
def test_an_empty_choice_is_refused_before_a_run_folder_exists(
    tmp_path: Path, flag: str, value: str, fragment: str
) -> None:
    out = tmp_path / "run"
    _one_line_error(_invoke("run", "--adapters", "null", flag, value, "--out", str(out)), fragment)
    assert not out.exists()


def test_verify_refuses_an_empty_reset_item(tmp_path: Path) -> None:
    _one_line_error(
        _invoke("verify", "--adapters", "null", "--reset", "zero,"), "--reset has an empty item"
    )
    _one_line_error(
        _invoke("verify", "--adapters", "", "--reset", "zero"),
        "--adapters must name at least one value",
    )

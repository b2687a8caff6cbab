"""Issue 21: nothing leaks, nothing foreign is overwritten, a received run folder runs no code.

One test (or a few) per item of the issue, each a reproduction of what its probe found.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from snnbench.sweep.config import RunConfig
from snnbench.sweep.run import start_run
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


# -- item 1: secrets are never recorded or published -----------------------------------------
SECRETS = {
    "TF_TOKEN_app_terraform_io": "tf-secret-value-1",
    "TF_VAR_db_password": "tf-secret-value-2",
    "NVIDIA_API_KEY": "nvapi-secret-value-3",
    "SNNBENCH_UPLOAD_TOKEN": "snn-secret-value-4",
    "CUDA_AUTH_HEADER": "cuda-secret-value-5",
}


def test_relevant_env_vars_keep_measurement_variables_and_mask_credentials() -> None:
    from snnbench.host.environment import relevant_env_vars

    env = {**SECRETS, "OMP_NUM_THREADS": "2", "NVIDIA_TF32_OVERRIDE": "0",
           "TF_CLI_CONFIG_FILE": "/root/.terraformrc", "LD_PRELOAD": "libjemalloc.so",
           "TORCHINDUCTOR_CACHE_DIR": "/x", "HOME": "/root"}
    recorded = relevant_env_vars(env)
    assert recorded == {"OMP_NUM_THREADS": "2", "NVIDIA_TF32_OVERRIDE": "0",
                        "LD_PRELOAD": "libjemalloc.so", "TORCHINDUCTOR_CACHE_DIR": "/x",
                        "SNNBENCH_UPLOAD_TOKEN": "***", "CUDA_AUTH_HEADER": "***"}


def test_no_secret_reaches_a_run_folder_or_its_report(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", "--adapters", "fake-ok", "--neurons", "8", "--steps", "5",
                   "--batch-size", "2", "--config", "ci-smoke", "--repeats", "3", "--warmup",
                   "1", "--threads", "1", "--device", "cpu", "--out", str(out),
                   env={**_env(), **SECRETS})
    assert proc.returncode == 0, proc.stderr
    report = run_cli("report", str(out), "--out", str(tmp_path / "report"), env=_env())
    assert report.returncode == 0, report.stderr
    env_json = run_cli("env", "--json", env={**_env(), **SECRETS})
    written = [p for p in [*out.rglob("*"), *(tmp_path / "report").rglob("*")] if p.is_file()]
    assert any(p.name == "report.md" for p in written)
    for path in written:
        data = path.read_bytes()
        for value in SECRETS.values():
            assert value.encode() not in data, f"{value} leaked into {path}"
    for value in SECRETS.values():
        assert value not in env_json.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["env_vars"]["SNNBENCH_UPLOAD_TOKEN"] == "***"


def test_a_received_folder_s_secrets_are_masked_in_its_report(tmp_path: Path) -> None:
    import numpy as np

    from tests.fixtures.runfolders import timed_case, write_run

    run = write_run(tmp_path / "old", [timed_case("torch", 64, np.random.default_rng(0),
                                                   median_s=1e-3)],
                    manifest={"env_vars": {**SECRETS, "OMP_NUM_THREADS": "2"}})
    proc = run_cli("report", str(run), "--out", str(tmp_path / "report"))
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "OMP_NUM_THREADS=2" in text
    for value in SECRETS.values():
        assert value not in text


def test_committed_references_hold_no_unrecorded_or_secret_variables() -> None:
    import subprocess

    from snnbench.host.environment import looks_secret, records_variable
    from snnbench.store.rundir import load_run
    from tests.conftest import REPO

    files = subprocess.run(["git", "ls-files", "results"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    folders = {Path(f).parents[0] for f in files if f.endswith("manifest.json")}
    assert folders
    for folder in folders:
        load_run(REPO / folder)  # still loadable after the scrub
    for name in files:
        if not name.endswith((".json", ".md", ".html")):
            continue
        text = (REPO / name).read_text()
        assert "terraformrc" not in text and "TF_CLI_CONFIG_FILE" not in text, name
        if name.endswith(".json") and ("manifest" in name or "/hosts/" in name):
            for env_vars in _env_var_tables(json.loads(text)):
                assert all(records_variable(k) for k in env_vars), (name, env_vars)
                assert all(v == "***" for k, v in env_vars.items() if looks_secret(k))


def _env_var_tables(node: object) -> list[dict[str, str]]:
    """Every ``env_vars`` table anywhere in a manifest or host record."""
    if isinstance(node, dict):
        found = [node["env_vars"]] if isinstance(node.get("env_vars"), dict) else []
        return found + [t for k, v in node.items() if k != "env_vars"
                        for t in _env_var_tables(v)]
    if isinstance(node, list):
        return [t for v in node for t in _env_var_tables(v)]
    return []


# -- item 2: a received run folder runs no shell text -------------------------------------------
RUN_FAST = ["--config", "ci-smoke", "--repeats", "3", "--warmup", "1", "--threads", "1",
            "--device", "cpu"]


def _finished_run(out: Path, *extra: str) -> None:
    proc = run_cli("run", "--adapters", "fake-ok", "--neurons", "8,16", "--steps", "5",
                   "--batch-size", "2", *RUN_FAST, *extra, "--out", str(out), env=_env())
    assert proc.returncode == 0, proc.stderr


def _received_partial_run_with_setup(out: Path, pwned: Path) -> dict[Path, bytes]:
    """A finished run whose manifest, as if received, names a Slurm setup that touches
    ``pwned``, less one case (a partial run: work to do); the bytes of its files."""
    _finished_run(out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["config"]["executor"]["name"] = "slurm"
    manifest["config"]["executor"]["slurm"].update(
        {"setup": [f"touch {pwned}"], "cluster": "local", "gpus_per_node": 0})
    (out / "manifest.json").write_text(json.dumps(manifest))
    next(iter((out / "cases").glob("fake-ok*.json"))).unlink()
    return {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_resume_never_runs_the_setup_a_received_manifest_names(tmp_path: Path) -> None:
    out, pwned = tmp_path / "run", tmp_path / "PWNED"
    before = _received_partial_run_with_setup(out, pwned)

    proc = run_cli("run", "--resume", "--out", str(out), env=_env())
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert "touch" in proc.stderr and "--trust-folder" in proc.stderr
    assert not pwned.exists()
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before

    # the user's own executor options: the recorded setup is not used
    local = run_cli("run", "--resume", "--executor", "local", "--out", str(out), env=_env())
    assert local.returncode == 0, local.stderr
    assert not pwned.exists()


def test_resume_with_executor_options_alone_runs_no_recorded_setup(tmp_path: Path) -> None:
    # `--resume --timeout-min 10` keeps the recorded executor (to resubmit timed-out cases):
    # it must still not run the setup the received manifest names
    pytest.importorskip("submitit")
    out, pwned = tmp_path / "run", tmp_path / "PWNED"
    before = _received_partial_run_with_setup(out, pwned)

    proc = run_cli("run", "--resume", "--timeout-min", "10", "--out", str(out), env=_env())
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert "touch" in proc.stderr and "--trust-folder" in proc.stderr
    assert not pwned.exists()
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_trust_folder_belongs_to_resume(tmp_path: Path) -> None:
    proc = run_cli("run", "--adapters", "fake-ok", "--trust-folder", "--out",
                   str(tmp_path / "run"), env=_env())
    assert proc.returncode == 2 and "--trust-folder applies to --resume only" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_recorded_commands_name_every_kind_of_command_text() -> None:
    from snnbench.executors import ExecutorSettings
    from snnbench.executors.plugins import recorded_commands

    assert recorded_commands(ExecutorSettings()) == []
    settings = ExecutorSettings.from_dict({
        "name": "slurm", "slurm": {"setup": ["module load x"], "image": "/a.sif",
                                   "container_args": ["--bind", "/x"]}})
    found = recorded_commands(settings)
    assert len(found) == 4 and "setup 'module load x'" in found
    ray = ExecutorSettings.from_dict({"name": "ray", "ray": {"address": "evil:6379"}})
    assert recorded_commands(ray) == ["Ray address 'evil:6379'"]


# -- items 3, 4: only files snnbench itself wrote are ever replaced ---------------------------
def _invoke(*args: str) -> Any:
    from typer.testing import CliRunner

    from snnbench.cli import app

    return CliRunner().invoke(app, list(args))


def _one_line_error(result: Any, fragment: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], lines
    assert "Traceback" not in result.stdout + result.stderr


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_report_out_replaces_only_what_snnbench_wrote(tmp_path: Path) -> None:
    import numpy as np

    from tests.fixtures.runfolders import timed_case, write_run

    rng = np.random.default_rng(0)
    run = write_run(tmp_path / "run", [timed_case("torch", n, rng, median_s=1e-3 * n / 64)
                                       for n in (64, 128)]
                    + [timed_case("norse", n, rng, median_s=2e-3 * n / 64) for n in (64, 128)])
    mine = tmp_path / "myfigs"
    mine.mkdir()
    (mine / "report.md").write_text("# my thesis notes\n")
    (mine / "phases.png").write_bytes(b"\x89PNG my own figure")
    before = _files(mine)
    _one_line_error(_invoke("report", str(run), "--out", str(mine)), "not empty")
    assert _files(mine) == before

    ours = tmp_path / "figs"
    for _ in range(2):  # a report refreshes its own earlier report
        result = _invoke("report", str(run), "--out", str(ours))
        assert result.exit_code == 0, result.stderr
    assert (ours / "phases.png").is_file()
    # once the user edits a file snnbench wrote, it is theirs
    (ours / "report.md").write_text("# my thesis notes\n")
    before = _files(ours)
    _one_line_error(_invoke("report", str(run), "--out", str(ours)), "report.md")
    assert _files(ours) == before


def test_verify_dump_replaces_only_what_snnbench_wrote(fake_plugins: Path,
                                                      tmp_path: Path) -> None:
    args = ["verify", "--adapters", "fake-ok", "--neurons", "8", "--steps", "6", "--reset",
            "subtract"]
    mine = tmp_path / "mydata"
    mine.mkdir()
    (mine / "fake-ok-default-subtract.npz").write_bytes(b"my own arrays")
    before = _files(mine)
    _one_line_error(_invoke(*args, "--dump", str(mine)), "fake-ok-default-subtract.npz")
    assert _files(mine) == before

    ours = tmp_path / "dumps"
    for _ in range(2):  # earlier dumps of snnbench are refreshed
        result = _invoke(*args, "--dump", str(ours))
        assert result.exit_code == 0, result.stderr + result.stdout
    assert (ours / "fake-ok-default-subtract.npz").stat().st_size > 100


# -- item 5: case records are trusted by their content, never by their file name -------------
def test_copied_or_renamed_case_records_are_refused(tmp_path: Path) -> None:
    import shutil

    out = tmp_path / "run"
    _finished_run(out)
    records = sorted((out / "cases").glob("fake-ok*.json"))
    assert len(records) == 2
    # a copy under another name would be merged as a second replicate
    copy = out / "cases" / "fake-ok--default--cpu--0123456789ab.json"
    shutil.copy(records[0], copy)
    before = _files(out)
    merged = _invoke("merge", str(out))
    _one_line_error(merged, f"holds the record of case {records[0].stem}")
    assert _files(out) == before
    copy.unlink()

    # a record renamed over another case's name would make --resume skip that case
    records[1].unlink()
    records[0].rename(records[1])
    before = _files(out)
    resumed = run_cli("run", "--resume", "--out", str(out), env=_env())
    assert resumed.returncode == 2, resumed.stdout + resumed.stderr
    assert len(resumed.stderr.strip().splitlines()) == 1 and "Traceback" not in resumed.stderr
    assert f"restore its name ({records[0].stem}.json)" in resumed.stderr
    assert _files(out) == before


# -- item 6: --resume keeps the recorded settings and records every execution ----------------
def test_resume_refuses_jobs_that_would_change_the_threads(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _finished_run(out)  # --threads 1 … recorded: give it 2 as if it ran with 2
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["settings"]["threads"] = 2
    (out / "manifest.json").write_text(json.dumps(manifest))
    next(iter((out / "cases").glob("fake-ok*.json"))).unlink()
    before = _files(out)
    proc = run_cli("run", "--resume", "--jobs", "2", "--out", str(out), env=_env())
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "was run with 2 threads per case" in proc.stderr and "gives" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert _files(out) == before


def test_an_interrupted_execution_is_recorded(tmp_path: Path, process_tag: str) -> None:
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import REPO, TAG_VAR, wait_until_gone

    out = tmp_path / "run"
    env = {**os.environ, **_env(), "SNNBENCH_FAKE_SLOW_S": "0.05", TAG_VAR: process_tag}
    proc = subprocess.Popen(
        [sys.executable, "-m", "snnbench", "run", "--adapters", "fake-slow", "--neurons",
         "8,16,24", "--steps", "5", "--batch-size", "2", *RUN_FAST, "--out", str(out)],
        env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list((out / "cases").glob("fake-slow*")):
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    assert not wait_until_gone(process_tag)
    executions = json.loads((out / "manifest.json").read_text())["executions"]
    # one entry, written as it started; the SIGTERM says when and how it stopped
    assert len(executions) == 1 and executions[0]["interrupted"] == "SIGTERM"
    assert executions[0]["finished_utc"] and executions[0]["started_utc"]
    assert executions[0]["name"] == "local" and executions[0]["threads"] == 1
    resumed = run_cli("run", "--resume", "--out", str(out), env={**_env(),
                                                                 "SNNBENCH_FAKE_SLOW_S": "0"})
    assert resumed.returncode == 0, resumed.stderr
    executions = json.loads((out / "manifest.json").read_text())["executions"]
    assert len(executions) == 2 and executions[0]["interrupted"] == "SIGTERM"
    assert executions[1]["finished_utc"]


# -- items 7, 8: unusable paths and a full stdout are one line and exit 2, never 1 ------------
LONG = "a" * 300  # one path component over the 255 bytes of every common filesystem


def _path_cases(tmp_path: Path) -> list[list[str]]:
    run = str(Path(__file__).parent.parent / "results" / "baselines" / "cpu-smoke")
    long = str(tmp_path / LONG)
    return [
        ["show", long], ["merge", long], ["compare", long, run], ["compare", run, long],
        ["report", run, "--out", long], ["run", "--config", long + ".toml"],
        ["run", "--resume", "--out", long], ["run", "--adapters", "null", "--out", long],
        ["verify", "--adapters", "null", "--dump", long],
    ]


def test_unusable_paths_are_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in _path_cases(tmp_path):
        result = _invoke(*args)
        assert result.exit_code == 2, (args, result.exit_code, result.stderr, result.exception)
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, result.stderr)
        assert "Traceback" not in result.stdout + result.stderr
    assert not any(p.name.startswith("a" * 200) for p in tmp_path.iterdir())


def test_a_full_stdout_is_one_line_and_exit_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import REPO

    run = str(REPO / "results" / "baselines" / "cpu-smoke")
    for args in (["compare", run, run], ["show", run], ["env", "--json"],
                 ["run", "--adapters", "fake-ok", "--neurons", "8", "--steps", "5",
                  "--batch-size", "2", *RUN_FAST, "--out", str(tmp_path / "run")]):
        with open("/dev/full", "w") as full:
            proc = subprocess.run([sys.executable, "-m", "snnbench", *args], stdout=full,
                                  stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=300,
                                  env={**os.environ, **_env()})
        assert proc.returncode == 2, (args, proc.stderr)
        lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
        assert lines == ["error: cannot write the output: No space left on device"], proc.stderr
        assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


# -- item 13: the null probe is never gated ---------------------------------------------------
def test_a_failed_null_probe_is_not_a_regression(tmp_path: Path) -> None:
    import numpy as np

    from snnbench.gate.compare import compare
    from tests.fixtures.runfolders import FakeCase, timed_case, write_run

    rng = np.random.default_rng(0)
    base = write_run(tmp_path / "base", [timed_case("torch", 64, rng, median_s=1e-3),
                                         timed_case("null", 64, rng, median_s=1e-6)])
    cand = write_run(tmp_path / "cand", [timed_case("torch", 64, rng, median_s=1e-3),
                                         FakeCase("null", 64, status="error",
                                                  message="injected")])
    result = compare(base, cand)
    assert result.exit_code == 0, [p.mark for p in result.regressions]
    null = [p for p in result.pairs if p.key[0] == "null"]
    assert null and all(p.mark == "info" for p in null)
    assert "harness probe, not gated (would be new failure)" in null[0].note
    proc = _invoke("compare", str(base), str(cand))
    assert proc.exit_code == 0, proc.stdout


# -- item 12: one reader, one set of rules for show, report and compare ----------------------
def _copy_run(tmp_path: Path, name: str) -> Path:
    import shutil

    from tests.conftest import REPO

    return Path(shutil.copytree(REPO / "results" / "baselines" / "cpu-smoke", tmp_path / name))


def test_show_report_and_compare_read_by_one_set_of_rules(tmp_path: Path) -> None:
    from snnbench.store.rundir import RunDir

    good = _copy_run(tmp_path, "good")
    for name, content in (("garbage", b"{not json"), ("list", b"[]"), ("latin1", b"\xff\xfe{}"),
                          ("v99", json.dumps({"schema_version": 99, "run_id": "x"}).encode())):
        run = _copy_run(tmp_path, name)
        (run / "manifest.json").write_bytes(content)
        for args in (["show", str(run)], ["report", str(run), "--out", str(tmp_path / "r")],
                     ["compare", str(good), str(run)]):
            _one_line_error(_invoke(*args), str(run))
        assert not (tmp_path / "r").exists()

    # a live run still writes into the folder: nobody reads it yet
    live = _copy_run(tmp_path, "live")
    holder = RunDir(live)
    holder.lock()
    try:
        for args in (["show", str(live)], ["report", str(live), "--out", str(tmp_path / "r")],
                     ["compare", str(good), str(live)], ["compare", str(live), str(good)]):
            _one_line_error(_invoke(*args), "in use by a live run")
    finally:
        holder.unlock()
    assert _invoke("show", str(live)).exit_code == 0

    # summary.parquet gone: all three read the CSV alike
    csv_only = _copy_run(tmp_path, "csv")
    (csv_only / "summary.parquet").unlink()
    shown = _invoke("show", str(csv_only))
    assert shown.exit_code == 0, shown.stderr
    assert _invoke("compare", str(good), str(csv_only)).exit_code == 0
    assert _invoke("report", str(csv_only), "--out", str(tmp_path / "r")).exit_code == 0


# -- item 11: options of another executor are refused, not ignored ----------------------------
def test_options_of_another_executor_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    for flags, message in (
            (["--partition", "gpu"], "--partition is an option of the slurm executor"),
            (["--image", "/x.sif"], "--image is an option of the slurm executor"),
            (["--setup", "touch x"], "--setup is an option of the slurm executor"),
            (["--ray-address", "h:1"], "--ray-address is an option of the ray executor"),
            (["--executor", "ray", "--partition", "gpu"], "not of 'ray'"),
            (["--bind-cpus"], "--bind-cpus pins cases")):
        result = _invoke("run", "--adapters", "null", *flags, "--out", str(out))
        _one_line_error(result, message)
        assert not out.exists()


# -- item 15: "--neurons 1,,2" is a typo, not [1, 2] -------------------------------------------
def test_an_empty_item_in_a_list_flag_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _one_line_error(_invoke("run", "--adapters", "null", "--neurons", "1,,2", "--out", str(out)),
                    "--neurons has an empty item")
    assert not out.exists()


# -- item 17: verify checks every network an adapter declares, and the networks a config runs --
def test_verify_checks_layers_bias_input_kind_and_a_config_s_networks(
        fake_plugins: Path, tmp_path: Path) -> None:
    import numpy as np

    from snnbench.workload.linear_lif.spec import NetworkSpec

    base = ["verify", "--neurons", "8", "--steps", "6", "--reset", "zero"]
    # one layer with a bias (verify's default network) hides both planted defects
    hidden = _invoke(*base, "--adapters", "fake-wrong-deep,fake-always-bias")
    assert hidden.exit_code == 0, hidden.stdout + hidden.stderr
    deep = _invoke(*base, "--adapters", "fake-wrong-deep", "--layers", "3")
    assert deep.exit_code == 1 and "mismatch" in deep.stdout and "L=3" in deep.stdout
    assert "weight-gradient cosine" in deep.stdout
    dump = tmp_path / "dump"
    free = _invoke(*base, "--adapters", "fake-always-bias,fake-ok", "--no-bias",
                   "--input-kind", "bernoulli", "--dump", str(dump))
    assert free.exit_code == 1 and "FAILED: 1 of 2 checks" in free.stdout, free.stdout
    with np.load(dump / "fake-ok-default-zero.npz") as z:
        spec = NetworkSpec.from_dict(json.loads(str(z["spec_json"])))
    assert (spec.bias, spec.input_kind) == (False, "bernoulli")

    config = tmp_path / "deep.toml"
    config.write_text('[run]\nadapters = ["fake-ok", "fake-wrong-deep"]\nverify_time_steps = 5\n'
                      '[network]\nbatch_size = 2\ntime_steps = 40\nlayers = 2\nbias = false\n'
                      'input_kind = "bernoulli"\nreset = "zero"\n[[sweep]]\nneurons = [4, 8]\n')
    dumps = tmp_path / "config-dumps"
    swept = _invoke("verify", "--config", str(config), "--dump", str(dumps))
    assert swept.exit_code == 1, swept.stdout + swept.stderr
    assert "FAILED: 2 of 4 checks matched the reference" in swept.stdout
    files = sorted(p.name for p in dumps.glob("*.npz"))
    assert len(files) == 2 and files[0].startswith("fake-ok-default-zero-")
    with np.load(dumps / files[0]) as z:
        spec = NetworkSpec.from_dict(json.loads(str(z["spec_json"])))
    # the config's network, as the run checks it before timing: T cut to verify_time_steps
    assert (spec.neurons, spec.layers, spec.bias, spec.input_kind, spec.time_steps,
            spec.batch_size) == (8, 2, False, "bernoulli", 5, 2)
    # an option given with --config overrides the config's value
    one = _invoke("verify", "--config", str(config), "--layers", "1", "--neurons", "8")
    assert one.exit_code == 0 and "OK: 2 of 2 checks" in one.stdout, one.stdout


def test_verify_help_says_how_its_defaults_differ_from_the_default_run() -> None:
    result = _invoke("verify", "--help")
    text = " ".join(result.stdout.split())
    assert "not the one a plain 'snnbench run' times" in text
    assert "'--config default' checks exactly those" in text


# -- item 9: bad environment inputs are exit 2 before anything is written ---------------------
def test_bad_environment_inputs_are_refused_before_anything_is_written(
        fake_plugins: Path, tmp_path: Path, monkeypatch: Any) -> None:
    from tests.test_libenv import make_wheel

    cache = tmp_path / "envs"
    monkeypatch.setenv("SNNBENCH_ENV_CACHE", str(cache))
    house = tmp_path / "wheelhouse"
    house.mkdir()
    make_wheel(house, "snnbench-fakelib", "1.0")
    out = tmp_path / "run"
    small = ["--neurons", "8", "--steps", "4"]

    def config(requirement: str) -> str:
        path = tmp_path / f"env-{len(list(tmp_path.glob('env-*')))}.toml"
        path.write_text(f'[run]\nadapters = ["fake-ok", "fake-ok@mine"]\n'
                        f'[network]\nsurrogate = "fast_sigmoid"\n'
                        f'[environments.mine]\nrequirements = [{json.dumps(requirement)}]\n')
        return str(path)

    for args, message in (
            (["--adapters", "fake-ok,fake-lib@1.0", "--wheelhouse", str(tmp_path / "nope")],
             f"the wheelhouse {tmp_path / 'nope'} does not exist"),
            (["--adapters", "fake-lib@1.0", "--wheelhouse", config("x")],
             "is not a folder"),
            (["--config", config("snnbench-fakelib @ file:///nonexistent.whl")],
             "names a file that does not exist: /nonexistent.whl"),
            (["--config", config('snnbench-fakelib==1.0; python_version < "3"'),
              "--wheelhouse", str(house)],
             "exclude this Python")):
        _one_line_error(_invoke("run", *args, *small, "--out", str(out)), message)
        assert not out.exists() and not cache.exists()
    # verify and list refuse them alike
    _one_line_error(_invoke("verify", "--adapters", "fake-lib@1.0", "--wheelhouse",
                            str(tmp_path / "nope")), "does not exist")
    _one_line_error(_invoke("list", "--adapters", "fake-lib@1.0", "--wheelhouse",
                            str(tmp_path / "nope")), "does not exist")
    assert not cache.exists()


# -- item 10: an --out that cannot be used is checked first, alone ------------------------------
def test_an_unusable_out_is_refused_first_alone(fake_plugins: Path, tmp_path: Path,
                                               monkeypatch: Any) -> None:
    from tests.test_libenv import make_wheel

    cache = tmp_path / "envs"
    monkeypatch.setenv("SNNBENCH_ENV_CACHE", str(cache))
    house = tmp_path / "wheelhouse"
    house.mkdir()
    make_wheel(house, "snnbench-fakelib", "1.0")
    (tmp_path / "a-file").write_text("not a folder\n")
    # 64 threads on this machine: the pre-flight check would warn, were it reached
    args = ["--adapters", "fake-ok,fake-lib@1.0", "--wheelhouse", str(house), "--threads", "64",
            "--neurons", "8", "--steps", "4"]
    for out, message in ((tmp_path / "a-file" / "run", "a-file is not a folder"),
                         # a pseudo file system: even root cannot make a folder there
                         (Path("/proc/snnbench-test-run"), "cannot create output folder")):
        _one_line_error(_invoke("run", *args, "--out", str(out)), message)
        assert not cache.exists()  # no environment was built before the refusal
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "wheelhouse"]


# -- item 11 (rest): a missing Apptainer image is refused up front ----------------------------
def test_a_missing_image_is_refused_up_front(fake_plugins: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    for image, message in ((tmp_path / "nonexistent.sif", "no such Apptainer image"),
                           (tmp_path, "is a folder, not an image")):
        result = _invoke("run", "--executor", "slurm", "--slurm-cluster", "local", "--image",
                         str(image), "--adapters", "fake-ok", "--neurons", "8", "--out", str(out))
        _one_line_error(result, f"--image {image}: {message}")
        assert not out.exists()


# -- item 15 (rest): smaller things --------------------------------------------------------------
def test_a_bad_fused_gemm_variable_is_one_line_before_anything_runs(
        tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("SNNBENCH_FUSED_CPU_GEMM", "garbage")
    out, dump = tmp_path / "run", tmp_path / "dump"
    message = "SNNBENCH_FUSED_CPU_GEMM must be onednn or blas (or unset), got 'garbage'"
    _one_line_error(_invoke("run", "--adapters", "fused", "--out", str(out)), message)
    _one_line_error(_invoke("verify", "--adapters", "fused", "--dump", str(dump)), message)
    assert not out.exists() and not dump.exists()


def test_a_huge_memory_floor_names_the_flag() -> None:
    from tests.conftest import REPO

    run = str(REPO / "results" / "baselines" / "cpu-smoke")
    result = _invoke("compare", run, run, "--mem-floor-mib", "1e308")
    _one_line_error(result, "--mem-floor-mib is too large")
    assert "mem_floor_bytes" not in result.stderr


def test_a_relative_env_cache_is_recorded_absolute(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "rel.toml"
    config.write_text('[run]\nadapters = ["null"]\nenv_cache = "my-envs"\nwheelhouse = "wh"\n'
                      "repeats = 1\nmin_time_s = 0.0\nwarmup = 0\n[network]\nneurons = 4\n"
                      "time_steps = 2\nbatch_size = 1\n")
    result = _invoke("run", "--config", str(config), "--out", str(tmp_path / "run"))
    assert result.exit_code == 0, result.stderr
    recorded = json.loads((tmp_path / "run" / "manifest.json").read_text())["config"]["run"]
    assert recorded["env_cache"] == str(tmp_path / "my-envs")
    assert recorded["wheelhouse"] == str(tmp_path / "wh")


def test_a_file_named_like_a_shipped_config_does_not_shadow_it(
        tmp_path: Path, monkeypatch: Any) -> None:
    from snnbench.sweep.config import config_path

    monkeypatch.chdir(tmp_path)
    (tmp_path / "default").write_text("this is my own notes file, not TOML\n")
    assert config_path("default").name == "default.toml"
    assert config_path("default").read_text().startswith("# What `snnbench run`")
    assert config_path("./default") == Path("./default")  # the local file, asked for as a path
    # the shipped default is read (its adapters resolve), not the local file (not TOML)
    _one_line_error(_invoke("run", "--adapters", "nosuch", "--out", str(tmp_path / "run")),
                    "nosuch")
    _one_line_error(_invoke("run", "--config", "./default", "--out", str(tmp_path / "run")),
                    "not valid TOML")


def test_a_damaged_or_misnamed_host_record_is_refused_by_merge_and_resume(
        tmp_path: Path) -> None:
    import shutil

    from tests.conftest import REPO

    run = Path(shutil.copytree(REPO / "results" / "baselines" / "cpu-smoke", tmp_path / "run"))
    (run / "hosts").mkdir()
    before = _files(run)
    for name, text, message in (
            ("node1.json", "{not json", "damaged or not JSON"),
            ("node1.json", "[1, 2]", "node1.json is not a machine record"),
            ("node2.json", json.dumps({"host": "node1", "cpu": "x"}),
             "node2.json is the record of host 'node1'")):
        (run / "hosts" / name).write_text(text)
        for args in (["merge", str(run)], ["run", "--resume", "--out", str(run)]):
            _one_line_error(_invoke(*args), message)
        (run / "hosts" / name).unlink()
        assert _files(run) == before  # nothing rewritten before the refusal


def test_run_help_shows_the_environments_table_literally() -> None:
    result = _invoke("run", "--help")
    assert "[environments.ENV]" in result.stdout


# -- item 20: the plugin guide says what a plugin author has to know ---------------------------
def test_the_plugin_s_own_version_is_recorded_in_every_case_record(
        fake_plugins: Path, tmp_path: Path) -> None:
    start_run(_config(["fake-ok"], phases=["step"]), tmp_path / "run", tmp_path, False)
    record = json.loads(next((tmp_path / "run" / "cases").glob("*.json")).read_text())
    assert record["library"] == "numpy"
    # the distribution that registers fake-ok (tests/fake_plugin), beside its library
    assert record["packages"]["snnbench-fake-adapters"] == "0.1"


def test_the_plugin_guide_states_what_the_code_does() -> None:
    import numpy as np

    from snnbench.workload.linear_lif.equivalence import compare_outputs
    from snnbench.workload.linear_lif.reference import run_reference
    from snnbench.workload.linear_lif.spec import CaseData, NetworkSpec, make_case_data
    from tests.conftest import REPO

    doc = (REPO / "docs" / "adapters.md").read_text()
    guide = " ".join(doc[doc.index("## Writing a third-party adapter"):].split())
    for claim in ("membrane starts at 0", "layer l+1 takes layer l's spikes **of the same step**",
                  "import that submodule inside `build`", "**What `library` names.**",
                  "every case record's `packages`", "`verify`'s defaults are **not** the "
                  "default run's network", "every layer's weight gradient, flattened and joined "
                  "into one vector", "does not make a mismatch by itself"):
        assert claim in guide, claim
    # ... and the code does what the guide says
    spec = NetworkSpec(neurons=6, batch_size=2, time_steps=5, layers=2)
    data = make_case_data(spec)
    ref = run_reference(data)
    # layer 1 takes layer 0's spikes of the same step: the two layers run one after the other
    # (each membrane starting at 0) give the two-layer network's spikes
    single = spec.replace(layers=1)
    first = run_reference(CaseData(inputs=data.inputs, weights=data.weights[:1],
                                   biases=data.biases[:1], spec=single)).output_spikes
    second = run_reference(CaseData(inputs=first, weights=data.weights[1:],
                                    biases=data.biases[1:], spec=single))
    assert np.array_equal(second.output_spikes, ref.output_spikes)
    assert ref.output_spikes.any()  # not trivially equal
    # one cosine over all layers' weight gradients; a wrong bias gradient alone is no mismatch
    wrong_bias = [-b for b in ref.grad_biases]
    eq = compare_outputs(ref.output_spikes, list(ref.grad_weights), wrong_bias, ref)
    assert eq.grad_cosine > 0.999999 and eq.bias_grad_cosine < 0
    # a wrong hidden layer counts, inside the one cosine
    grads = [np.zeros_like(ref.grad_weights[0]), ref.grad_weights[1]]
    eq = compare_outputs(ref.output_spikes, grads, list(ref.grad_biases), ref)
    norms = [float(np.linalg.norm(g.astype(np.float64))) for g in ref.grad_weights]
    assert abs(eq.grad_cosine - norms[1] / np.hypot(*norms)) < 1e-9

"""What a user types never loses data nor shows a traceback (issue 11): one line, exit 2.

Most tests call the CLI in-process (typer's CliRunner): it is the same code path as the console
script, without a Python start-up per case.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner, Result

from snnbench.cli import app
from snnbench.sweep.config import ConfigError, RunSettings, load_config
from snnbench.workload.linear_lif.spec import FLOAT_FIELDS, NetworkSpec, SpecError
from tests.conftest import run_cli

FAST = ["--config", "ci-smoke", "--repeats", "3", "--warmup", "1", "--threads", "1",
        "--device", "cpu", "--steps", "5", "--batch-size", "2"]
RUN_FLOATS = ("min_time_s", "warmup_s", "timeout_s")


def invoke(*args: str) -> Result:
    """``snnbench ARGS`` in this process."""
    return CliRunner().invoke(app, list(args))


def assert_one_line_error(result: Result, *fragments: str) -> str:
    """Exit 2, exactly one line on stderr naming the problem, and no traceback anywhere."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr,
                                   result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.stdout + result.stderr
    return lines[0]


def snapshot(root: Path) -> dict[str, Any]:
    """Every entry under ``root`` (and root itself): type, bytes, mode and mtime."""
    out: dict[str, Any] = {}
    for path in [root, *sorted(root.rglob("*"))]:
        st = path.lstat()
        content = path.read_bytes() if path.is_file() else None
        out[str(path.relative_to(root))] = (st.st_mode, st.st_mtime_ns, st.st_size, content)
    return out


def precious_folder(path: Path) -> Path:
    """A folder that is not a run: names a run would write, plus a hidden file and a subfolder."""
    path.mkdir()
    (path / "summary.csv").write_text("precious\n")
    (path / "manifest.txt").write_text("not a manifest\n")
    (path / ".hidden").write_bytes(b"\x00\x01")
    (path / "logs").mkdir()
    (path / "logs" / "old.log").write_text("keep me\n")
    return path


# -- --out: a new or empty folder, or with --resume a run folder ---------------------------
@pytest.mark.parametrize("extra", [
    ["--adapters", "torch", "--neurons", "64", "--steps", "10", "--batch-size", "2"],
    ["--resume"],
])
def test_out_existing_folder_is_left_byte_for_byte_unchanged(tmp_path: Path,
                                                             extra: list[str]) -> None:
    out = precious_folder(tmp_path / "x")
    before = snapshot(out)
    args = ["--config", "ci-smoke", *extra] if extra != ["--resume"] else extra
    result = invoke("run", *args, "--out", str(out))
    line = assert_one_line_error(result, str(out))
    assert "not empty" in line or "not a run folder" in line
    assert snapshot(out) == before


def test_out_root_is_refused() -> None:
    # issue 11: `--out /` wrote cases/, logs/, the manifest and the tables into /
    from snnbench.store.storage import StorageError, claim_folder

    with pytest.raises(StorageError, match="is not empty"):
        claim_folder(Path("/"), "--out", lambda p: False)


def test_out_refuses_a_file_and_a_run_folder(tmp_path: Path) -> None:
    afile = tmp_path / "file"
    afile.write_text("x")
    assert_one_line_error(invoke("run", "--adapters", "torch", "--out", str(afile)),
                          "not a folder")
    assert afile.read_text() == "x"
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text("{}")
    assert_one_line_error(invoke("run", "--adapters", "torch", "--out", str(run)),
                          "already holds a run", "--resume")


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def test_empty_out_folder_is_used_lock_removed_one_mode_for_every_file(
    fake_plugins: Path, tmp_path: Path
) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    with umask(0o027):
        result = invoke("run", "--adapters", "fake-ok", "--neurons", "8", *FAST,
                        "--out", str(out))
    assert result.exit_code == 0, result.stderr + result.stdout
    assert not (out / ".lock").exists()
    files = [p for p in out.rglob("*") if p.is_file()]
    kinds = {p.suffix for p in files}
    assert {".json", ".parquet", ".csv", ".log"} <= kinds
    modes = {p.relative_to(out).as_posix(): oct(p.stat().st_mode & 0o777) for p in files}
    assert set(modes.values()) == {"0o640"}, modes  # 0o666 under umask 027, results and logs


def test_lock_released_and_removed_after_a_failed_run(tmp_path: Path) -> None:
    from snnbench.store.rundir import RunDir

    run = RunDir.create(tmp_path / "run")
    run.lock()
    assert (run.path / ".lock").read_text().startswith("pid ")
    run.unlock()
    assert not (run.path / ".lock").exists()
    run.lock()  # a new lock file, locked again
    run.unlock()


# -- a full disk ---------------------------------------------------------------------------
def _full_disk_checks(out: Path, result_stderr: str, finished_before: int) -> None:
    last = result_stderr.strip().splitlines()[-1]
    assert last.startswith("error: cannot write ") and "No space left on device" in last
    assert f"snnbench run --resume --out {out}" in last
    assert "Traceback" not in result_stderr
    records = [json.loads(r.read_text()) for r in sorted((out / "cases").glob("*.json"))]
    assert all("status" in r for r in records)  # every record kept is whole
    assert sum(r["status"] == "ok" for r in records) >= finished_before
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]  # no torn file
    assert not (out / ".lock").exists()
    pd.read_parquet(out / "summary.parquet")  # the last complete table is readable


def test_full_disk_mid_sweep_keeps_records_and_says_how_to_resume(
    fake_plugins: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"
    real = pd.DataFrame.to_parquet
    calls = {"n": 0}

    def to_parquet(self: pd.DataFrame, path: Any, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] > 2:  # the tables of the first case are written, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_parquet", to_parquet)
    result = invoke("run", "--adapters", "fake-ok", "--neurons", "8,12,16", *FAST,
                    "--out", str(out))
    assert result.exit_code == 2, result.stderr + result.stdout
    _full_disk_checks(out, result.stderr, finished_before=1)
    assert len(list((out / "cases").glob("*.json"))) == 2  # stopped at the second case
    monkeypatch.setattr(pd.DataFrame, "to_parquet", real)
    resumed = invoke("run", "--resume", "--out", str(out))
    assert resumed.exit_code == 0, resumed.stderr
    summary = pd.read_parquet(out / "summary.parquet")
    assert sorted(summary["neurons"].unique()) == [8, 12, 16]


def _mount_tmpfs(where: Path, size: str) -> bool:
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    where.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, check=False)
    return proc.returncode == 0


@pytest.mark.slow
def test_full_disk_on_a_real_150k_tmpfs(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "150k"):
        pytest.skip("cannot mount a tmpfs here (needs root and mount)")
    try:
        out = disk / "run"
        proc = run_cli("run", "--adapters", "torch", "--neurons", "64,96,128,160,192,224",
                       "--config", "ci-smoke", "--steps", "20", "--batch-size", "2",
                       "--repeats", "30", "--threads", "1", "--out", str(out))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        _full_disk_checks(out, proc.stderr, finished_before=1)
    finally:
        subprocess.run(["umount", str(disk)], check=False)


# -- configs and flags ------------------------------------------------------------------------
def test_config_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "latin1.toml"
    cfg.write_bytes("[run]\n# réglages\n".encode("latin-1"))
    assert_one_line_error(invoke("run", "--config", str(cfg)), "not UTF-8", str(cfg))


@pytest.mark.parametrize("text", ["", "\n  \n", "# only a comment\n"])
def test_empty_config_is_refused(tmp_path: Path, text: str) -> None:
    cfg = tmp_path / "empty.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match="empty"):
        load_config(cfg)
    assert_one_line_error(invoke("run", "--config", str(cfg)), "empty")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "+nan"])
@pytest.mark.parametrize("key", [f"network.{f}" for f in FLOAT_FIELDS]
                         + [f"sweep.{f}" for f in FLOAT_FIELDS]
                         + [f"run.{f}" for f in RUN_FLOATS])
def test_nan_and_inf_are_refused_in_every_float_of_a_config(tmp_path: Path, key: str,
                                                            value: str) -> None:
    table, name = key.split(".")
    body = f"[[sweep]]\n{name} = [{value}]\n" if table == "sweep" else f"[{table}]\n{name} = {value}\n"
    cfg = tmp_path / "c.toml"
    cfg.write_text(body)
    with pytest.raises(ConfigError, match=f"{name} must be a finite number"):
        load_config(cfg)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_nan_and_inf_are_refused_by_the_spec_and_the_settings(value: float) -> None:
    for name in FLOAT_FIELDS:
        with pytest.raises(SpecError, match=name):
            NetworkSpec(**{name: value})  # type: ignore[arg-type]
    for name in RUN_FLOATS:
        with pytest.raises(ConfigError, match=name):
            RunSettings(**{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(("args", "fragment"), [
    (["verify", "--surrogate-slope", "nan"], "surrogate_slope must be a finite number"),
    (["verify", "--surrogate-slope", "inf"], "surrogate_slope must be a finite number"),
    (["verify", "--timeout", "nan"], "timeout_s must be a finite number"),
    (["verify", "--detach-reset", "maybe"], "--detach-reset must be"),
    (["verify", "--device", "tpu"], "--device must be"),
    (["run", "--timeout", "nan"], "timeout_s must be a finite number"),
    (["run", "--timeout", "inf"], "timeout_s must be a finite number"),
    (["run", "--adapters", ","], "adapters must name at least one"),
    (["list", "--timeout", "nan"], "--timeout must be a finite number"),
    (["list", "--timeout", "0"], "--timeout must be a finite number"),
    (["compare", "a", "b", "--factor", "inf"], "--factor must be a finite number"),
    (["compare", "a", "b", "--factor", "nan"], "--factor must be a finite number"),
    (["compare", "a", "b", "--mem-threshold", "inf"], "--mem-threshold must be a finite"),
    (["compare", "a", "b", "--alpha", "nan"], "--alpha must be between 0 and 1"),
])
def test_bad_flags_are_one_line(args: list[str], fragment: str) -> None:
    assert_one_line_error(invoke(*args), fragment)


@pytest.mark.parametrize(("body", "fragment"), [
    ("[run]\nadapters = 5\n", "adapters must be a list"),
    ("[run]\nadapters = [1, 2]\n", "adapters must be a list of names"),
    ("[run]\nverify = 'yes'\n", "verify must be true or false"),
    ("[run]\ndevice = ['cpu']\n", "device must be one of"),
    ("[network]\nbias = 1\n", "bias must be true or false"),
    ("[network]\nseed = -1\n", "seed must be an integer"),
    ("[network]\nbeta = '0.5'\n", "beta must be a number"),
    ("[network]\ndtype = {a = 1}\n", "dtype must be one of"),
    ("network = 3\n", "[network] must be a table"),
    # found by the property test: a [network] value every [[sweep]] overrides was never checked,
    # and a date there crashed the manifest's JSON
    ("[network]\nbatch_size = 1979-05-27T07:32:00Z\n[[sweep]]\nbatch_size = [2]\n",
     "[network] batch_size must be a positive integer"),
])
def test_wrong_types_in_a_config_are_one_line(tmp_path: Path, body: str, fragment: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(body)
    assert_one_line_error(invoke("run", "--config", str(cfg)), fragment)


def test_an_integer_float_field_is_the_same_case_as_its_float() -> None:
    assert NetworkSpec(beta=1).case_id == NetworkSpec(beta=1.0).case_id
    assert isinstance(NetworkSpec(threshold=2).threshold, float)


# -- resume of a damaged run folder -------------------------------------------------------------
@pytest.mark.parametrize("drop", ["config", "settings", "run_id"])
def test_resume_with_a_damaged_manifest_is_one_line(tmp_path: Path, drop: str) -> None:
    from snnbench.records import schema

    out = tmp_path / "run"
    (out / "cases").mkdir(parents=True)
    manifest = {"schema_version": schema.SCHEMA_VERSION, "run_id": "r",
                "config": {"run": {"adapters": ["torch"]}}, "settings": {"device": "cpu"}}
    del manifest[drop]
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert_one_line_error(invoke("run", "--resume", "--out", str(out)), "damaged", drop)
    assert not (out / ".lock").exists()


# -- verify ------------------------------------------------------------------------------------
def test_verify_with_nothing_checked_is_not_a_pass(fake_plugins: Path) -> None:
    result = invoke("verify", "--adapters", "fake-subtract-only", "--reset", "zero",
                    "--neurons", "8", "--steps", "5")
    assert result.exit_code == 2
    last = result.stderr.splitlines()[-1]  # after the progress lines of each check
    assert last.startswith("error: nothing was verified: 1 of 1 checks skipped"), last
    assert "reset mode 'zero' not supported" in result.stdout  # the reason, above the verdict
    ok = invoke("verify", "--adapters", "fake-subtract-only", "--neurons", "8", "--steps", "5")
    assert ok.exit_code == 0, ok.stderr  # one check of two ran and matched: a pass, said so
    assert "OK: 1 of 1 checks matched the reference; 1 not checked" in ok.stdout


def test_verify_dump_never_overwrites_a_foreign_folder(tmp_path: Path) -> None:
    dump = precious_folder(tmp_path / "dump")
    before = snapshot(dump)
    assert_one_line_error(invoke("verify", "--adapters", "torch", "--dump", str(dump)),
                          "not empty")
    assert snapshot(dump) == before


def test_report_out_never_overwrites_a_foreign_folder(tmp_path: Path) -> None:
    import numpy as np

    from tests.fixtures.runfolders import timed_case, write_run

    run = write_run(tmp_path / "run", [timed_case("torch", 64, np.random.default_rng(0),
                                                  median_s=1e-3)])
    out = tmp_path / "mine"
    out.mkdir()
    (out / "report.md").write_text("my notes")
    (out / "notes.txt").write_text("keep")
    before = snapshot(out)
    assert_one_line_error(invoke("report", str(run), "--out", str(out)), "not empty")
    assert snapshot(out) == before
    # the default folder, written twice: an earlier report is refreshed
    for _ in range(2):
        result = invoke("report", str(run))
        assert result.exit_code == 0, result.stderr


# -- list --------------------------------------------------------------------------------------
def test_cuda_only_adapters_are_not_available_on_a_cpu_only_torch() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: torch-cudagraph can run here")
    from snnbench.probe import probe

    cudagraph = probe("torch-cudagraph")
    assert cudagraph["available"] is False
    assert cudagraph["reason"].startswith("CUDA only: CUDA graphs need a CUDA build of torch"), \
        cudagraph["reason"]
    fused = probe("fused")  # runs on the CPU; its CUDA-only variants do not
    assert fused["available"] is True
    assert set(fused["variants_unavailable"]) == {"cudagraph", "chunked"}


def test_list_text_says_torch_cudagraph_needs_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from snnbench.cli import list as list_command
    from snnbench.registry import discover

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible")
    # the real probes (one process each), of these two adapters only
    entries = {n: e for n, e in discover().items() if n in ("torch-cudagraph", "fused")}
    monkeypatch.setattr(list_command, "discover", lambda **_: entries)
    monkeypatch.setenv("COLUMNS", "400")
    result = invoke("list")
    assert result.exit_code == 0, result.stderr
    rows = {li.split("│")[1].strip(): li for li in result.stdout.splitlines() if "│" in li}
    assert "unavailable" in rows["torch-cudagraph"], rows
    assert "CUDA only" in rows["torch-cudagraph"]
    assert "available; not here: cudagraph: CUDA only" in rows["fused"], rows["fused"]


# -- Ctrl-C ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_interrupt_says_how_to_resume_also_without_out(tmp_path: Path) -> None:
    import signal
    import sys
    import time

    from tests.conftest import FAKE_PLUGIN_DIR

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(FAKE_PLUGIN_DIR), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "snnbench", "run", "--adapters", "fake-sleep",
         "--neurons", "8,12,16,20,24,28,32,36,40,44,48,52", *FAST],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    deadline = time.time() + 120
    while time.time() < deadline and not list(tmp_path.glob("results/*/cases/*.json")):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    (run,) = tmp_path.glob("results/*")
    hint = f"finish with 'snnbench run --resume --out {run.relative_to(tmp_path)}'"
    assert hint in err, err
    assert "Traceback" not in err
    assert not (run / ".lock").exists()
    resumed = subprocess.run(
        [sys.executable, "-m", "snnbench", "run", "--resume", "--out",
         str(run.relative_to(tmp_path))],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert resumed.returncode == 0, resumed.stderr

"""Issue 33, items 1-5, 18 and 25: a received run folder runs no code, nothing outside the
output is touched, nothing hangs, a full disk is said as such.

One test (or a few) per item, each a reproduction of what the issue's probe found.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAKE_PLUGIN_DIR, run_cli

RUN_FAST = ["--config", "ci-smoke", "--repeats", "3", "--warmup", "1", "--threads", "1",
            "--device", "cpu", "--steps", "5", "--batch-size", "2"]
#: a hang fails the test instead of blocking it
HANG_S = 120


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join([str(FAKE_PLUGIN_DIR), os.environ.get("PYTHONPATH", "")])
    return {"PYTHONPATH": path, **extra}


def _finished_run(out: Path, adapters: str = "fake-ok", **env: str) -> None:
    proc = run_cli("run", "--adapters", adapters, "--neurons", "8,16", *RUN_FAST,
                   "--out", str(out), env=_env(**env), timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def _one_line_exit_2(proc: Any, *fragments: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _received_with_environment(out: Path, run: dict[str, Any] | None = None) -> str:
    """A finished run whose manifest, as if received, adds the environment ``evil`` (a
    requirement to build) and a case of it still to run; returns that requirement."""
    _finished_run(out)
    requirement = "snnbench-evil==1.0"
    manifest = json.loads((out / "manifest.json").read_text())
    config = manifest["config"]
    config["environments"] = {"evil": {"requirements": [requirement]}}
    config["run"]["adapters"] = ["fake-ok", "fake-ok@evil"]
    config["run"].update(run or {})
    (out / "manifest.json").write_text(json.dumps(manifest))
    return requirement


# -- item 1: resume builds no environment and takes no cache a received manifest names ------
def test_resume_builds_no_environment_a_received_manifest_names(tmp_path: Path) -> None:
    out, cache = tmp_path / "run", tmp_path / "envs"
    _received_with_environment(out)
    before = _files(out)
    proc = run_cli("run", "--resume", "--out", str(out), timeout=HANG_S,
                   env=_env(SNNBENCH_ENV_CACHE=str(cache), UV_OFFLINE="1"))
    _one_line_exit_2(proc, "snnbench-evil==1.0", "--trust-folder")
    assert not cache.exists()  # nothing resolved, nothing built
    assert _files(out) == before
    # the user's own executor options do not make the folder's environments theirs
    local = run_cli("run", "--resume", "--executor", "local", "--out", str(out),
                    timeout=HANG_S, env=_env(SNNBENCH_ENV_CACHE=str(cache), UV_OFFLINE="1"))
    _one_line_exit_2(local, "--trust-folder")


def test_resume_takes_no_environment_cache_from_a_received_manifest(tmp_path: Path) -> None:
    from snnbench.host.libenv import MARKER_FILE, Base, environment_key

    out, pwned = tmp_path / "run", tmp_path / "PWNED"
    shipped = out / "shipped-cache"
    requirement = _received_with_environment(out, {"env_cache": str(shipped)})
    # the folder ships a "cached" environment whose interpreter is a script of its own
    fake = shipped / environment_key((requirement,), Base.current())
    (fake / "bin").mkdir(parents=True)
    (fake / MARKER_FILE).write_text(json.dumps({"resolved": [requirement]}))
    python = fake / "bin" / "python"
    python.write_text(f"#!/bin/sh\ntouch {pwned}\n")
    python.chmod(0o755)
    before = _files(out)
    proc = run_cli("run", "--resume", "--out", str(out), timeout=HANG_S,
                   env=_env(SNNBENCH_ENV_CACHE=str(tmp_path / "envs"), UV_OFFLINE="1"))
    _one_line_exit_2(proc, str(shipped), "--trust-folder")
    assert not pwned.exists()
    assert _files(out) == before


# -- item 2: nothing outside the folder is written through a link ----------------------------
def test_a_linked_lock_is_never_opened(tmp_path: Path) -> None:
    out, outside = tmp_path / "run", tmp_path / "outside.txt"
    _finished_run(out)
    outside.write_text("precious\n")
    (out / ".lock").symlink_to(outside)
    for args in (("merge", str(out)), ("run", "--resume", "--out", str(out))):
        proc = run_cli(*args, env=_env(), timeout=HANG_S)
        _one_line_exit_2(proc, ".lock", "symbolic link")
        assert outside.read_text() == "precious\n"
        assert (out / ".lock").is_symlink()


def test_a_linked_log_is_replaced_never_truncated(tmp_path: Path) -> None:
    out, outside = tmp_path / "run", tmp_path / "outside.log"
    _finished_run(out)
    record = next((out / "cases").glob("fake-ok*.json"))
    record.unlink()  # resume runs that case again, and writes its log
    outside.write_text("precious\n")
    log = out / "logs" / f"{record.stem}.log"
    log.unlink(missing_ok=True)
    log.symlink_to(outside)
    proc = run_cli("run", "--resume", "--out", str(out), env=_env(), timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr
    assert outside.read_text() == "precious\n"
    assert not log.is_symlink() and log.is_file() and record.is_file()


@pytest.mark.parametrize("inner", ["logs", "hosts"])
def test_a_linked_folder_inside_a_run_folder_is_refused(tmp_path: Path, inner: str) -> None:
    out, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    _finished_run(out)
    (out / inner).rename(elsewhere)
    (out / inner).symlink_to(elsewhere)
    next((out / "cases").glob("fake-ok*.json")).unlink()  # work for a resume to do
    before = _files(elsewhere)
    for args in (("merge", str(out)), ("run", "--resume", "--out", str(out))):
        proc = run_cli(*args, env=_env(), timeout=HANG_S)
        _one_line_exit_2(proc, f"{out / inner}")
        assert _files(elsewhere) == before


def test_report_never_follows_a_linked_report_folder(tmp_path: Path) -> None:
    import numpy as np

    from tests.fixtures.runfolders import timed_case, write_run

    rng = np.random.default_rng(0)
    run = write_run(tmp_path / "run", [timed_case("torch", n, rng, median_s=1e-3 * n / 64)
                                       for n in (64, 128)])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "report").symlink_to(elsewhere)
    proc = run_cli("report", str(run), timeout=HANG_S)
    _one_line_exit_2(proc, "symbolic link")
    assert list(elsewhere.iterdir()) == []
    # an --out the user names is theirs, a link included
    mine = tmp_path / "mine"
    mine.symlink_to(elsewhere)
    assert run_cli("report", str(run), "--out", str(mine)).returncode == 0
    assert (elsewhere / "report.md").is_file()


def test_a_plugin_named_like_a_path_writes_inside_the_run_folder(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    info = plugin / "evil_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil-plugin\nVersion: 0.1\n")
    # an adapter class without a name of its own: any entry-point name loads it
    (info / "entry_points.txt").write_text(
        "[snnbench.adapters]\n../../escaped = snnbench_fake_adapters:_Base\n")
    out = tmp_path / "deep" / "run"
    env = {"PYTHONPATH": os.pathsep.join([str(plugin), str(FAKE_PLUGIN_DIR),
                                          os.environ.get("PYTHONPATH", "")])}
    proc = run_cli("run", "--adapters", "../../escaped", "--neurons", "8", *RUN_FAST,
                   "--out", str(out), env=env, timeout=HANG_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    outside = [p for p in tmp_path.rglob("*escaped*") if out not in p.parents]
    assert outside == []
    (record,) = (out / "cases").glob("*escaped*.json")
    assert json.loads(record.read_text())["adapter"] == "../../escaped"
    assert list((out / "logs").glob("*escaped*.log"))


def test_names_become_single_file_name_components() -> None:
    from snnbench.records.contract import case_key, file_safe

    assert case_key("torch", "compile", "cpu", "abc") == "torch--compile--cpu--abc"
    key = case_key("../../x", "a/b", "cpu", "abc")
    assert "/" not in key and "\\" not in file_safe("..\\x")
    assert file_safe("a/b") != file_safe("a%2Fb")  # two names never share a file


# -- item 3: history --out replaces only what history wrote ----------------------------------
def test_history_out_never_replaces_a_users_own_site_files(tmp_path: Path) -> None:
    from tests.test_history import _series_runs

    _series_runs(tmp_path / "runs", [0.01, 0.011])
    for name in ("history.json", "index.html"):
        mine = tmp_path / f"mine-{name}"
        mine.mkdir()
        (mine / name).write_text("my own file\n")
        proc = run_cli("history", str(tmp_path / "runs"), "--out", str(mine))
        _one_line_exit_2(proc, name)
        assert _files(mine) == {name: b"my own file\n"}


# -- item 4: verify --dump on a full disk ----------------------------------------------------
def test_verify_dump_on_a_full_disk_keeps_earlier_dumps_and_says_so(
        fake_plugins: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np
    from typer.testing import CliRunner

    from snnbench.cli import app
    from snnbench.measure import worker
    from snnbench.sweep import verify_cmd

    args = ["verify", "--adapters", "fake-ok", "--neurons", "8", "--steps", "6", "--reset",
            "subtract", "--dump", str(tmp_path / "dumps")]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.stdout + first.stderr
    before = _files(tmp_path / "dumps")
    assert any(name.endswith(".npz") for name in before)

    def full_disk(file: Any, **arrays: Any) -> None:
        file.write(b"PK\x03\x04 half an archive")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    # the worker in this process, so its write can be made to fail
    monkeypatch.setattr(verify_cmd, "run_in_folder", lambda job, *a, **k: worker.run_job(job))
    monkeypatch.setattr(np, "savez", full_disk)
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 2, again.stdout + again.stderr
    # the progress lines, then the one line of the error
    errors = [line for line in again.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("error: cannot write"), again.stderr
    assert "No space left on device" in errors[0] and "Traceback" not in again.stderr
    assert "equivalence" not in again.stderr.lower()
    assert _files(tmp_path / "dumps") == before  # earlier dumps whole, no temporary left


# -- item 5: nothing hangs on a FIFO or an endless file --------------------------------------
@pytest.mark.parametrize("where", ["cases", "hosts"])
def test_a_fifo_in_a_run_folder_is_a_damaged_folder(tmp_path: Path, where: str) -> None:
    out = tmp_path / "run"
    _finished_run(out)
    os.mkfifo(out / where / "planted.json")
    for args in (("merge", str(out)), ("run", "--resume", "--out", str(out))):
        proc = run_cli(*args, env=_env(), timeout=HANG_S)
        _one_line_exit_2(proc, "planted.json", "FIFO")


def test_a_fifo_at_the_manifest_blocks_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _finished_run(out)
    (out / "manifest.json").unlink()
    os.mkfifo(out / "manifest.json")
    for args in (("run", "--resume", "--jobs", "1", "--out", str(out)), ("merge", str(out)),
                 ("show", str(out))):
        proc = run_cli(*args, env=_env(), timeout=HANG_S)
        _one_line_exit_2(proc, "manifest.json")


def test_a_fifo_at_a_log_does_not_block_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _finished_run(out)
    record = next((out / "cases").glob("fake-ok*.json"))
    record.unlink()
    log = out / "logs" / f"{record.stem}.log"
    log.unlink(missing_ok=True)
    os.mkfifo(log)
    proc = run_cli("run", "--resume", "--out", str(out), env=_env(), timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr
    assert log.is_file() and record.is_file()


@pytest.mark.parametrize("command", ["run", "verify"])
def test_a_config_that_is_no_regular_file_is_refused(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "sweep.toml"
    os.mkfifo(fifo)
    for config, fragment in ((fifo, "FIFO"), (Path("/dev/zero"), "character device")):
        proc = run_cli(command, "--config", str(config), "--out" if command == "run" else
                       "--neurons", str(tmp_path / "out") if command == "run" else "8",
                       env=_env(), timeout=HANG_S)
        _one_line_exit_2(proc, str(config), fragment)
    assert not (tmp_path / "out").exists()


def test_a_config_larger_than_a_config_is_refused(tmp_path: Path) -> None:
    from snnbench.sweep.config import CONFIG_MAX_BYTES, ConfigError, load_config

    big = tmp_path / "big.toml"
    big.write_text("# padding\n" * (CONFIG_MAX_BYTES // 10 + 1))
    with pytest.raises(ConfigError, match="larger than"):
        load_config(big)


# -- item 18: a result the worker could not write is run again by --resume ------------------
def test_a_result_the_worker_could_not_write_is_lost_not_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from snnbench.executors.launch import Exit, classify_exit
    from snnbench.measure import worker
    from snnbench.records.contract import RESULT_NOT_WRITTEN_EXIT, CaseRecord, Job
    from snnbench.records.fileio import WriteError
    from snnbench.records.schema import FAILED_STATUSES, RETRY_STATUSES
    from snnbench.workload import LinearLif
    from snnbench.workload.linear_lif.spec import NetworkSpec

    job = Job(adapter="fake-ok", variant="default", device="cpu",
              workload=LinearLif(NetworkSpec(neurons=8, batch_size=2, time_steps=4)),
              result_path=str(tmp_path / "result.json"))

    def full(self: CaseRecord, path: Path) -> None:
        raise WriteError(path, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))

    monkeypatch.setattr(CaseRecord, "write", full)
    assert worker.write_result(CaseRecord.for_job(job, "ok"), job) == RESULT_NOT_WRITTEN_EXIT
    status, message = classify_exit(Exit(RESULT_NOT_WRITTEN_EXIT, "", 1.0), job)
    # resume runs it again, and the run that lost it exits non-zero
    assert status in RETRY_STATUSES and status in FAILED_STATUSES
    assert "--resume" in message


# -- item 25: a wheelhouse that is not there is refused, cached environment or not ----------
def test_a_missing_wheelhouse_is_refused_when_the_environment_is_cached(tmp_path: Path) -> None:
    from snnbench.host.libenv import (
        MARKER_FILE,
        Base,
        BuildSettings,
        EnvironmentRequest,
        EnvironmentSpecError,
        environment_key,
        prepare,
    )

    request = EnvironmentRequest("fake-lib@1.0", ("snnbench-fakelib==1.0",))
    base = Base.current()
    cached = tmp_path / "envs" / environment_key(request.requirements, base)
    (cached / "bin").mkdir(parents=True)
    (cached / "bin" / "python").write_text("")
    (cached / MARKER_FILE).write_text("{}")
    settings = BuildSettings(cache_dir=tmp_path / "envs")
    assert prepare([request], settings, base)["fake-lib@1.0"].pins == ()  # cached: no build
    missing = BuildSettings(cache_dir=tmp_path / "envs", wheelhouse=tmp_path / "nope")
    with pytest.raises(EnvironmentSpecError, match="does not exist"):
        prepare([request], missing, base)

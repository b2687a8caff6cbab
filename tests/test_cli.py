"""The command line as a user runs it: exit codes, bad input, resume, list, show."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import FAKE_PLUGIN_DIR, REPO, run_cli

# ci-smoke keeps the spec defaults (fast sigmoid, detached subtract reset) the fakes declare
FAST = ["--config", "ci-smoke", "--repeats", "3", "--warmup", "1", "--threads", "1",
        "--device", "cpu"]


def _env() -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(FAKE_PLUGIN_DIR), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--adapters", "nosuch"], "unknown adapter 'nosuch'"),
        (["--adapters", "torch", "--neurons", "0"], "neurons must be a positive integer"),
        (["--adapters", "torch", "--neurons", "a,b"], "comma-separated integers"),
        (["--adapters", "torch", "--dtype", "float64"], "dtype must be one of"),
        (["--adapters", "torch", "--device", "tpu"], "device must be one of"),
        (["--adapters", "torch:nosuch"], "has no variant"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", *args, "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()  # nothing written


def test_config_typo_exits_2(tmp_path: Path) -> None:
    cfg = tmp_path / "typo.toml"
    cfg.write_text("[run]\nadapter = ['torch']\n")
    proc = run_cli("run", "--config", str(cfg))
    assert proc.returncode == 2 and "unknown key(s) in [run]: adapter" in proc.stderr


def test_every_shipped_config_resolves_by_name(tmp_path: Path) -> None:
    from snnbench.sweep.config import BUILTIN_CONFIGS, config_path

    shipped = sorted(p.stem for p in (REPO / "configs").glob("*.toml"))
    assert sorted(BUILTIN_CONFIGS) == shipped and BUILTIN_CONFIGS[0] == "default"
    for name in shipped:
        assert config_path(name).read_text() == (REPO / "configs" / f"{name}.toml").read_text()
    # from another directory, where no configs/ folder is beside the user
    proc = subprocess.run([sys.executable, "-c", "from snnbench.sweep.config import config_path; "
                           "print(config_path('fused-gpu').is_file())"],
                          cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.stdout.strip() == "True", proc.stderr


def test_unwritable_output_exits_2(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        target = Path("/proc/snnbench-cannot-write-here")  # root can write anywhere else
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        target = locked / "run"
    proc = run_cli("run", "--adapters", "torch", "--out", str(target))
    assert proc.returncode == 2 and "cannot create output folder" in proc.stderr


def test_existing_run_is_not_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "manifest.json").write_text('{"keep": true}')
    proc = run_cli("run", "--adapters", "torch", "--out", str(out))
    assert proc.returncode == 2 and "already holds a run" in proc.stderr
    assert json.loads((out / "manifest.json").read_text()) == {"keep": True}


def test_run_ok_then_show_and_failure_exit_code(tmp_path: Path) -> None:
    out = tmp_path / "ok"
    proc = run_cli("run", "--adapters", "fake-ok", "--neurons", "8,16", "--steps", "5",
                   "--batch-size", "2", *FAST, "--out", str(out),
                   env={**_env(), "SNNBENCH_FUSED_CPU_GEMM": "blas", "NOT_RECORDED": "x"})
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "fake-ok" in proc.stdout
    # variables that change a measurement are in the manifest, others are not
    env_vars = json.loads((out / "manifest.json").read_text())["env_vars"]
    assert env_vars["SNNBENCH_FUSED_CPU_GEMM"] == "blas" and "NOT_RECORDED" not in env_vars
    show = run_cli("show", str(out), "--format", "md", env=_env())
    assert show.returncode == 0 and show.stdout.startswith("| adapter |")
    assert show.stdout.count("| fake-ok |") == 2
    bad = run_cli("run", "--adapters", "fake-raises", "--neurons", "8", "--steps", "5",
                  *FAST, "--out", str(tmp_path / "bad"), env=_env())
    assert bad.returncode == 1


def test_show_damaged_or_missing_run_exits_2(tmp_path: Path) -> None:
    proc = run_cli("show", str(tmp_path / "nothing"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "manifest.json").write_bytes(
        (REPO / "results" / "baselines" / "cpu-smoke" / "manifest.json").read_bytes())
    (damaged / "summary.parquet").write_bytes(b"PAR1 torn file")
    proc = run_cli("show", str(damaged))
    assert proc.returncode == 2 and "cannot read summary" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_second_live_run_on_same_folder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = subprocess.Popen(
        [sys.executable, "-m", "snnbench", "run", "--adapters", "fake-hang", "--neurons", "8",
         "--steps", "5", "--timeout", "30", *FAST, "--out", str(out)],
        env={**os.environ, **_env()}, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            if (out / ".lock").exists() and (out / "manifest.json").exists():
                break
            time.sleep(0.1)
        proc = run_cli("run", "--resume", "--out", str(out), env=_env())
        assert proc.returncode == 2 and "in use by another live run" in proc.stderr
    finally:
        first.kill()
        first.wait()


def test_kill_then_resume_completes_without_duplicates(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = [sys.executable, "-m", "snnbench", "run", "--adapters", "fake-sleep,fake-ok",
            "--neurons", "8,12,16,20", "--steps", "5", "--batch-size", "2", *FAST,
            "--out", str(out)]
    proc = subprocess.Popen(args, env={**os.environ, **_env()}, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    cases = out / "cases"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(cases.glob("*.json"))) < 3:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole group: harness and its worker
    proc.wait()
    done_before = len(list(cases.glob("*.json")))
    assert 3 <= done_before < 9  # 2 adapters × 4 sizes, and the default config's null probe
    summary = pd.read_parquet(out / "summary.parquet")  # complete file despite the kill
    assert set(summary["status"]) == {"ok"}
    resumed = run_cli("run", "--resume", "--out", str(out), env=_env())
    assert resumed.returncode == 0, resumed.stderr
    summary = pd.read_parquet(out / "summary.parquet")
    per_case = summary[summary["metric"] == "time_s"].groupby(
        ["adapter", "neurons", "phase"]).size()
    assert len(per_case) == (2 * 4 + 1) * 3 and (per_case == 1).all()
    assert f"{done_before} cases were already done" in resumed.stdout


def test_list_reports_unavailable_with_reasons(tmp_path: Path) -> None:
    proc = run_cli("list", "--json", env=_env())
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert rows["fake-ok"]["available"] is True
    assert rows["fake-missing"]["available"] is False
    assert "not installed" in rows["fake-missing"]["reason"]
    assert "snnbench_fake_adapters_broken" in rows["fake-broken"]["reason"]
    assert rows["torch"]["available"] is True


def test_list_works_with_no_benchmarked_library(tmp_path: Path) -> None:
    # A finder that makes every benchmarked library look uninstalled, in all processes.
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "BLOCK = {'torch', 'jax', 'jaxlib', 'snntorch', 'norse', 'spikingjelly', 'sinabs', "
        "'lava', 'spyx', 'haiku', 'rockpool', 'triton', 'flax'}\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCK:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
        "        return None\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    proc = run_cli("list", "--json", env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert rows["torch"]["available"] is False
    assert "No module named 'torch'" in rows["torch"]["reason"]
    # only the null probe, which needs no library, is available
    assert [name for name, r in rows.items() if r["available"]] == ["null"]
    text = run_cli("list", env={"PYTHONPATH": str(tmp_path), "COLUMNS": "250"})
    assert text.returncode == 0 and "unavailable" in text.stdout


def test_env_reads_no_gpu_as_absent() -> None:
    proc = run_cli("env", "--json")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    assert isinstance(data["gpus"], list)
    assert data["packages"]["torch"] is not None
    assert "cores_logical" in data["cpu"]

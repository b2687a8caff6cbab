"""The harness as PID 1 (issue 33, item 11): a container run without ``--init`` makes
``snnbench`` the first process of its PID namespace, so each worker's parent is pid 1. The
worker's lifeline read a parent of 1 as "re-parented to init, the launcher is gone" and killed
itself: every case was lost as "killed by SIGKILL from outside"."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FAKE_PLUGIN_DIR, REPO, TAG_VAR

#: a new PID namespace (and its own /proc) whose first process is the command: PID 1
UNSHARE = ["unshare", "--fork", "--pid", "--mount-proc"]

#: a worker's lifeline armed with the launcher pid 1, as the parent it sees (getppid faked, so
#: this runs without the privileges a PID namespace needs)
_ARM_UNDER_PID_1 = """
import os, sys
os.getppid = lambda: 1
from snnbench.host import lifeline
assert lifeline.arm(None)
print("armed and alive")
"""


def test_a_worker_whose_launcher_is_pid_1_lives() -> None:
    from snnbench.host.lifeline import PARENT_PID_VAR

    result = subprocess.run([sys.executable, "-c", _ARM_UNDER_PID_1],
                            env={**os.environ, PARENT_PID_VAR: "1"}, cwd=REPO,
                            capture_output=True, text=True, timeout=60,
                            start_new_session=True)
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert result.stdout == "armed and alive\n"


def test_a_worker_re_parented_to_init_still_dies() -> None:
    """The check the fix narrows still holds: launcher 4242 gone, parent now 1."""
    from snnbench.host.lifeline import PARENT_PID_VAR

    dead = subprocess.Popen(["true"])
    dead.wait()
    result = subprocess.run([sys.executable, "-c", _ARM_UNDER_PID_1],
                            env={**os.environ, PARENT_PID_VAR: str(dead.pid)}, cwd=REPO,
                            capture_output=True, text=True, timeout=60,
                            start_new_session=True)
    assert result.returncode == -signal.SIGKILL and result.stdout == ""


def _pid_1_or_skip() -> None:
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1)")
    probe = subprocess.run([*UNSHARE, sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0 or probe.stdout.strip() != "1":
        pytest.skip("cannot start a process as PID 1 of a new PID namespace here (needs root "
                    f"or user namespaces): {probe.stderr.strip()[:200]}")


@pytest.mark.slow
def test_a_sweep_whose_harness_is_pid_1_records_every_case(tmp_path: Path,
                                                           process_tag: str) -> None:
    """`podman run` without --init, on the host: ``snnbench run`` is PID 1 of its namespace."""
    _pid_1_or_skip()
    out = tmp_path / "run"
    env = {**os.environ, TAG_VAR: process_tag, "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join([str(FAKE_PLUGIN_DIR), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [*UNSHARE, sys.executable, "-m", "snnbench", "run", "--config", "ci-smoke",
         "--adapters", "torch,fake-ok", "--neurons", "16", "--steps", "5", "--batch-size", "2",
         "--repeats", "1", "--warmup", "0", "--threads", "1", "--device", "cpu",
         "--out", str(out)],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rows = [json.loads(p.read_text()) for p in (out / "cases").glob("*.json")]
    assert {r["adapter"] for r in rows} >= {"torch", "fake-ok"}  # and the null baseline
    assert [(r["adapter"], r["status"]) for r in rows if r["status"] != "ok"] == []
    assert not (out / "jobs").exists()

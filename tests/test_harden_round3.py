"""Issue 33, items 6-10, 20 and 21: nothing hangs on a plugin, no process outlives its case,
verify leaves no scratch folder, no credential inside a value is written or printed.

One test (or a few) per item, each a reproduction of what its probe found.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import FAKE_PLUGIN_DIR, REPO, run_cli

SMALL = ("--neurons", "8", "--steps", "5", "--batch-size", "2", "--config", "ci-smoke",
         "--repeats", "3", "--warmup", "1", "--threads", "1", "--device", "cpu")

ADAPTER_BASE = '''
import numpy as np
from snnbench.adapter import Adapter, Capabilities, Model
from snnbench.workload.linear_lif.reference import run_reference


class _Model(Model):
    def __init__(self, data):
        self.result = run_reference(data)

    def forward(self):
        return self.result.output_spikes

    def backward(self, handle):
        pass

    def zero_grad(self):
        pass

    def synchronize(self):
        pass

    def spikes(self, handle):
        return np.asarray(handle, dtype=np.float32)

    def gradients(self):
        return list(self.result.grad_weights), list(self.result.grad_biases)


class Base(Adapter):
    library = "numpy"
    framework = "numpy"

    def capabilities(self, variant):
        return Capabilities(devices=("cpu",))

    def build(self, spec, data, device, variant):
        return _Model(data)
'''


def write_plugin(root: Path, module: str, source: str, adapters: dict[str, str]) -> Path:
    """A plugin distribution (module + dist-info) under ``root``: ``adapters`` maps entry-point
    names to class names in ``module``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(source)
    info = root / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[snnbench.adapters]\n" + "".join(f"{k} = {module}:{v}\n" for k, v in adapters.items()))
    return root


def plugin_env(*roots: Path, **extra: str) -> dict[str, str]:
    path = [str(r) for r in roots] + [str(FAKE_PLUGIN_DIR), os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(p for p in path if p), **extra}


# -- item 6: a plugin that hangs at import hangs no command ---------------------------------
HANGS = ADAPTER_BASE + '''
import time
time.sleep(3600)


class Hangs(Base):
    name = "hangs-at-import"
'''


def test_a_plugin_that_hangs_at_import_is_a_broken_row_not_a_hung_command(
        tmp_path: Path) -> None:
    env = plugin_env(write_plugin(tmp_path / "site", "snnbench_hangs", HANGS,
                                  {"hangs-at-import": "Hangs"}))
    started = time.monotonic()
    listed = run_cli("list", "--json", "--timeout", "5", "--adapters",
                     "hangs-at-import,fake-ok", env=env, timeout=120)
    took = time.monotonic() - started
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["hangs-at-import"]["available"] is False
    assert "did not finish importing within 5 s" in rows["hangs-at-import"]["reason"]
    assert rows["fake-ok"]["available"] is True
    # 5 s of import limit plus the probes of a loaded machine; hung, it would never return
    assert took < 60, took
    # a run of another adapter never imports the hanging module at all
    out = tmp_path / "run"
    ran = run_cli("run", "--adapters", "fake-ok", *SMALL, "--out", str(out), env=env,
                  timeout=300)
    assert ran.returncode == 0, ran.stderr
    summary = pd.read_parquet(out / "summary.parquet")
    assert set(summary[summary["adapter"] == "fake-ok"]["status"]) == {"ok"}


def test_discovery_imports_no_plugin_module_and_a_hang_is_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    from snnbench import registry

    module = "snnbench_hangs_here"
    write_plugin(tmp_path, module, "import time\ntime.sleep(3600)\n", {})
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [importlib.metadata.EntryPoint(name="hangs", value=f"{module}:Hangs",
                                         group=registry.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(registry, "_entry_points", lambda: eps)
    found = registry.discover(timeout_s=0.5)
    assert module not in sys.modules  # metadata only
    started = time.monotonic()
    assert found["hangs"].adapter_class is None
    assert time.monotonic() - started < 30
    assert "did not finish importing within 0.5 s" in found["hangs"].error


# -- item 21: a plugin that prints at import does not corrupt list --json -------------------
PRINTS = ADAPTER_BASE + '''
print("hello from a chatty plugin")


class Chatty(Base):
    name = "chatty"

    def version(self):
        print("version() chatters too")
        return "1.0"
'''


def test_a_plugin_that_prints_at_import_leaves_list_json_intact(tmp_path: Path) -> None:
    env = plugin_env(write_plugin(tmp_path / "site", "snnbench_chatty", PRINTS,
                                  {"chatty": "Chatty"}))
    listed = run_cli("list", "--json", "--adapters", "chatty,fake-ok", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}  # nothing but the JSON
    assert rows["chatty"]["available"] is True
    assert "hello from a chatty plugin" in listed.stderr


# -- item 7: a helper process the adapter starts dies with its case -------------------------
DAEMON = ADAPTER_BASE + '''
import os
import subprocess
import sys


class Daemon(Base):
    name = "starts-daemon"

    def build(self, spec, data, device, variant):
        # a compile server: double-forked, re-parented to init, in the worker's group
        marker = os.environ["SNNBENCH_TEST_DAEMON_MARK"]
        code = ("import os, time\\n"
                "if os.fork() == 0:\\n"
                "    if os.fork() == 0:\\n"
                "        os.execvp('sleep', ['" + marker + "', '300'])\\n"
                "    os._exit(0)\\n"
                "os.wait()\\n")
        subprocess.run([sys.executable, "-c", code], check=True)
        return super().build(spec, data, device, variant)
'''


def _sleepers(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline[0] == marker.encode():  # argv[0]: a sleep named after this test
            found.append(int(entry))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_a_daemon_an_adapter_starts_does_not_outlive_run_or_verify(tmp_path: Path) -> None:
    marker = f"snnbench-test-daemon-{os.getpid()}-{time.monotonic_ns()}"
    env = plugin_env(write_plugin(tmp_path / "site", "snnbench_daemon", DAEMON,
                                  {"starts-daemon": "Daemon"}),
                     SNNBENCH_TEST_DAEMON_MARK=marker)
    try:
        ran = run_cli("run", "--adapters", "starts-daemon", *SMALL, "--out",
                      str(tmp_path / "run"), env=env)
        assert ran.returncode == 0, ran.stderr
        assert _sleepers(marker) == []
        checked = run_cli("verify", "--adapters", "starts-daemon", "--neurons", "8", env=env)
        assert checked.returncode == 0, checked.stderr + checked.stdout
        assert _sleepers(marker) == []
    finally:
        for pid in _sleepers(marker):
            os.kill(pid, signal.SIGKILL)


def test_kill_leftovers_kills_the_group_and_the_session_of_an_exited_child() -> None:
    from snnbench.host.processes import kill_leftovers

    # the child leaves one process in its group and one in a group of its own (same session)
    code = ("import os, subprocess\n"
            "subprocess.Popen(['sleep', '300'])\n"
            "subprocess.Popen(['sleep', '300'], process_group=0)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    proc.wait()
    from snnbench.host.processes import session_members

    left = session_members(proc.pid)
    assert len(left) == 2
    kill_leftovers(proc)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_running(pid) for pid in left):
        time.sleep(0.05)
    assert not any(_running(pid) for pid in left)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


# -- item 8: verify stopped by SIGTERM or SIGKILL leaves no scratch folder -----------------
def _verify_scratch() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("snnbench-verify-*"))


def test_verify_stopped_by_sigterm_says_so_and_removes_its_scratch_folder(
        tmp_path: Path) -> None:
    before = _verify_scratch()
    env = {**os.environ, **plugin_env(), "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "snnbench", "verify", "--adapters", "fake-hang",
         "--neurons", "8", "--timeout", "120"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (_verify_scratch() - before):
        time.sleep(0.1)
    mine = _verify_scratch() - before
    assert mine, "verify never made its scratch folder"
    assert all(f"snnbench-verify-{proc.pid}-" in p.name for p in mine)
    time.sleep(1.0)  # the worker is running by now, or about to
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "stopped by SIGTERM" in err
    assert "Traceback" not in err
    assert not any(p.exists() for p in mine)


def test_a_scratch_folder_of_a_killed_verify_is_removed_by_the_next(tmp_path: Path) -> None:
    from snnbench.host.scratch import remove_stale, scratch_folder

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"snnbench-verify-{dead.pid}-abc"
    (stale / "jobs").mkdir(parents=True)
    live = tmp_path / f"snnbench-verify-{os.getppid()}-def"
    live.mkdir()
    other = tmp_path / "snnbench-verify-oldstyle"
    other.mkdir()
    link_target = tmp_path / "target"
    link_target.mkdir()
    link = tmp_path / f"snnbench-verify-{dead.pid}-lnk"
    link.symlink_to(link_target)
    assert remove_stale("snnbench-verify-", tmp_path) == [stale]
    assert not stale.exists() and live.exists() and other.exists() and link_target.exists()
    with scratch_folder("snnbench-test-scratch-") as folder:
        assert folder.name.startswith(f"snnbench-test-scratch-{os.getpid()}-")
    assert not folder.exists()


# -- items 9 and 10: credentials inside values are masked wherever values are written -------
VALUE_SECRETS = {
    "SNNBENCH_DSN": "postgres://u:pw-secret-1@h/d",
    "TRITON_CACHE_URL": "https://user:pw-secret-2@cache.example/",
    "SNNBENCH_X": "--password=pw-secret-3 --verbose",
    "CUDA_CRED": "cred-secret-4",
    "TORCH_EXTRA": "token=pw-secret-5&x=1",
}


def test_mask_value_masks_urls_password_options_and_credential_names() -> None:
    from snnbench.host.masking import mask_text, masked_env_vars

    masked = masked_env_vars({**VALUE_SECRETS, "OMP_NUM_THREADS": "2",
                              "TORCHINDUCTOR_CACHE_DIR": "/x/y"})
    assert masked == {
        "SNNBENCH_DSN": "***",  # DSN: a credential by its name
        "TRITON_CACHE_URL": "https://user:***@cache.example/",
        "SNNBENCH_X": "--password=*** --verbose",
        "CUDA_CRED": "***",
        "TORCH_EXTRA": "token=***&x=1",
        "OMP_NUM_THREADS": "2",
        "TORCHINDUCTOR_CACHE_DIR": "/x/y",
    }
    assert mask_text("postgres://u:pw@h/d") == "postgres://u:***@h/d"
    assert mask_text("run --db-password hunter22 -v") == "run --db-password *** -v"
    assert mask_text("https://example.com/a:b@c") == "https://example.com/a:b@c"  # a path


def test_no_credential_inside_a_value_reaches_a_run_folder_report_or_env(
        tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", "--adapters", "fake-ok", *SMALL, "--out", str(out),
                   env=plugin_env(**VALUE_SECRETS))
    assert proc.returncode == 0, proc.stderr
    report = run_cli("report", str(out), "--out", str(tmp_path / "report"), env=plugin_env())
    assert report.returncode == 0, report.stderr
    env_json = run_cli("env", "--json", env=plugin_env(**VALUE_SECRETS))
    written = [p for p in [*out.rglob("*"), *(tmp_path / "report").rglob("*")] if p.is_file()]
    assert any(p.name == "report.html" for p in written)
    assert any(p.parent.name == "hosts" for p in written)
    for path in written:
        data = path.read_bytes()
        for value in ("pw-secret-1", "pw-secret-2", "pw-secret-3", "cred-secret-4",
                      "pw-secret-5"):
            assert value.encode() not in data, f"{value} leaked into {path}"
            assert value not in env_json.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["env_vars"]["TRITON_CACHE_URL"] == "https://user:***@cache.example/"


def test_compare_masks_a_received_manifest_s_credentials(tmp_path: Path) -> None:
    from tests.fixtures.runfolders import timed_case, write_run

    rng = np.random.default_rng(0)
    base = write_run(tmp_path / "base", [timed_case("torch", 64, rng, median_s=1e-3)],
                     manifest={"env_vars": {"OMP_NUM_THREADS": "2"}})
    cand = write_run(tmp_path / "cand", [timed_case("torch", 64, rng, median_s=1e-3)],
                     manifest={"env_vars": {"OMP_NUM_THREADS": "2",
                                            "A_TOKEN": "ghp_token-secret-6",
                                            "SNNBENCH_DSN_URL": "mysql://me:pw-secret-7@db/x",
                                            "TORCH_OPTS": "--password=pw-secret-8"}})
    for fmt in ("text", "md", "json"):
        proc = run_cli("compare", str(base), str(cand), "--format", fmt)
        assert proc.returncode in (0, 1), proc.stderr
        shown = proc.stdout + proc.stderr
        assert "environment variable A_TOKEN differs" in shown, fmt
        for value in ("token-secret-6", "pw-secret-7", "pw-secret-8"):
            assert value not in shown, (fmt, value)


# -- item 20: a worker's output is scrubbed of its environment's credentials ----------------
LEAKS = ADAPTER_BASE + '''
import os


class Leaks(Base):
    name = "leaks"

    def build(self, spec, data, device, variant):
        print("my token is", os.environ["GITHUB_TOKEN"], flush=True)
        raise RuntimeError("cannot connect to " + os.environ["DATABASE_URL"])
'''


def test_worker_output_is_scrubbed_of_credentials(tmp_path: Path) -> None:
    env = plugin_env(write_plugin(tmp_path / "site", "snnbench_leaks", LEAKS,
                                  {"leaks": "Leaks"}),
                     GITHUB_TOKEN="ghp_worker-secret-9",
                     DATABASE_URL="postgresql://app:pw-secret-10@db.internal/prod")
    out = tmp_path / "run"
    proc = run_cli("run", "--adapters", "leaks", *SMALL, "--out", str(out), env=env)
    assert proc.returncode in (0, 1), proc.stderr
    logs = list((out / "logs").glob("*.log"))
    assert logs and "my token is ***" in "".join(p.read_text() for p in logs)
    summary = pd.read_parquet(out / "summary.parquet")
    leaks = summary[summary["adapter"] == "leaks"]
    assert "postgresql://app:***@db.internal/prod" in leaks["message"].iloc[0]
    for path in [p for p in out.rglob("*") if p.is_file()]:
        data = path.read_bytes()
        for value in (b"worker-secret-9", b"pw-secret-10"):
            assert value not in data, f"{value!r} leaked into {path}"
    assert "worker-secret-9" not in proc.stdout + proc.stderr
    assert "pw-secret-10" not in proc.stdout + proc.stderr


def test_scrub_masks_the_environment_s_secret_values() -> None:
    from snnbench.host.masking import scrub, secret_values

    env = {"GITHUB_TOKEN": "ghp_abcdef", "HOME": "/root", "SHORT_KEY": "1",
           "DATABASE_URL": "postgres://u:longpassword@h/d"}
    secrets = secret_values(env)
    assert "ghp_abcdef" in secrets and "longpassword" in secrets and "1" not in secrets
    text = "token ghp_abcdef; url postgres://u:longpassword@h/d; home /root; 1 2 3"
    assert scrub(text, secrets) == "token ***; url postgres://u:***@h/d; home /root; 1 2 3"

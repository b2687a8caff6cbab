"""Shared fixtures: the fake plugin distribution, and helpers to run the CLI in a subprocess."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from snnbench.adapter import Adapter, AdapterBase, AdapterUnavailable, Model
from snnbench.workload.linear_lif.spec import NetworkSpec

FAKE_PLUGIN_DIR = Path(__file__).parent / "fake_plugin"
REPO = Path(__file__).resolve().parent.parent
#: every process the tests start inherits this variable: its value tags them as ours
TAG_VAR = "SNNBENCH_TEST_TAG"
#: command-line markers of the processes a sweep starts (workers, submitit tasks/controllers,
#: the local executor's reaper, uv building a library environment, a zygote and the workers it
#: forked, which keep its command line)
SWEEP_PROCESSES = ("snnbench.measure.worker", "snnbench.executors.zygote", "submitit.core._submit",
                   "submitit.local._local",
                   "snnbench.host.lifeline", "uv pip compile", "uv pip install", "uv venv")


def tagged_processes(tag: str, markers: tuple[str, ...] = SWEEP_PROCESSES) -> list[str]:
    """Live processes started under ``TAG_VAR=tag`` whose command line has a marker,
    wherever they were re-parented to (a leaked worker's parent is PID 1)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if not any(m in cmdline for m in markers):
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(TAG_VAR, "").startswith(tag):
                found.append(f"pid {proc.pid} (parent {proc.ppid()}): {cmdline[:160]}")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def wait_until_gone(tag: str, timeout: float = 10.0) -> list[str]:
    """``tagged_processes(tag)`` once none is left, or what is left after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        left = tagged_processes(tag)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


# A suite started as a background job of a non-interactive shell (`make test &`, a CI script's
# `cmd &`) inherits SIGINT ignored, and so would every process a test starts: the tests that
# interrupt a sweep or a gpu-check step with SIGINT, as a user's Ctrl-C would, then wait for
# nothing. A handler here (not SIG_IGN) makes every child start with SIGINT at its default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def no_process_outlives_the_tests() -> Iterator[str]:
    """Fail the run when a worker (or a submitit task) it started is still alive at its end:
    no process outlives its sweep, in tests too."""
    tag = f"session-{uuid.uuid4().hex}"
    os.environ[TAG_VAR] = tag
    yield tag
    left = wait_until_gone(tag)
    assert not left, "processes outlived the test run:\n" + "\n".join(left)


@pytest.fixture(autouse=True)
def probe_cache_dir(tmp_path_factory: pytest.TempPathFactory,
                    monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own cache of `list`'s probes (:mod:`snnbench.probe_cache`): never the
    user's, and never an answer another test's plugins gave."""
    folder = tmp_path_factory.mktemp("probe-cache")
    monkeypatch.setenv("SNNBENCH_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def process_tag(no_process_outlives_the_tests: str) -> Iterator[str]:
    """A tag for one test's processes (a prefix of the session's: the session check sees them)."""
    tag = f"{no_process_outlives_the_tests}-{uuid.uuid4().hex[:8]}"
    yield tag


@pytest.fixture
def fake_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Make the fake adapters discoverable here and in every worker process."""
    monkeypatch.syspath_prepend(str(FAKE_PLUGIN_DIR))
    old = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(FAKE_PLUGIN_DIR), old) if p))
    importlib.invalidate_caches()
    yield FAKE_PLUGIN_DIR


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m snnbench ARGS`` in a subprocess, capturing output."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("COLUMNS", "200")
    return subprocess.run(
        [sys.executable, "-m", "snnbench", *args],
        capture_output=True, text=True, env=full_env, cwd=cwd or REPO, timeout=timeout,
    )


def library_installed(distribution: str) -> bool:
    """True when ``distribution`` has installed metadata (it may still fail to import)."""
    import importlib.metadata

    try:
        importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


#: an adapter of either plugin API version
AnyAdapterT = TypeVar("AnyAdapterT", bound=AdapterBase)


def available_or_skip(adapter: AnyAdapterT) -> AnyAdapterT:
    """The adapter; a skip only when its library is not installed at all.

    An installed library that fails to import is a broken install step, so it fails here.
    """
    try:
        adapter.version()
    except AdapterUnavailable as exc:
        if library_installed(adapter.library):
            pytest.fail(f"{adapter.library} is installed but unusable: {exc}")
        pytest.skip(f"{adapter.name} unavailable: {exc}")
    return adapter


def assert_exact(adapter: Adapter, spec: NetworkSpec, variant: str = "default") -> None:
    """``adapter`` builds ``spec`` on the CPU and matches the reference exactly: every spike,
    and weight and bias gradients to cosine 0.9999 and relative error 1e-4."""
    from snnbench.measure.verify import check_adapter

    assert adapter.reason_skipped(spec, "cpu", variant) is None
    eq, _ = check_adapter(adapter, variant, spec, "cpu")
    assert eq.spike_match == 1.0
    assert eq.first_diff_step is None
    assert eq.grad_cosine >= 0.9999
    assert eq.bias_grad_cosine >= 0.9999
    assert eq.grad_max_rel_err < 1e-4
    assert eq.spike_rate > 0.005  # not vacuous: the last layer fires


def assert_repeatable(model: Model, spec: NetworkSpec, steps: int = 3) -> None:
    """Repeated clean steps give identical spikes and gradients: no state leaks between calls."""
    import numpy as np

    results = []
    for _ in range(steps):
        model.zero_grad()
        handle = model.forward()
        model.backward(handle)
        model.synchronize()
        results.append((model.spikes(handle), model.gradients()))
    model.close()
    first_spikes, (first_w, first_b) = results[0]
    assert first_spikes.shape == spec.input_shape()
    for spikes, (grad_w, grad_b) in results[1:]:
        np.testing.assert_array_equal(spikes, first_spikes)
        for a, b in zip(grad_w + grad_b, first_w + first_b, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One local Ray instance for the whole session (a start takes seconds): 2 CPUs and 2
    logical GPUs (Ray counts GPUs, it needs none). Its workers see the fake adapters and a
    probe folder; yields the address (for CLI runs) and that folder."""
    ray = pytest.importorskip("ray")
    probe_dir = tmp_path_factory.mktemp("ray-probe")
    path = os.pathsep.join(p for p in (str(FAKE_PLUGIN_DIR), os.environ.get("PYTHONPATH", ""))
                           if p)
    env = {"PYTHONPATH": path, "SNNBENCH_FAKE_PROBE_DIR": str(probe_dir)}
    # Ray's processes inherit this environment: the fake adapters are found by the workers of
    # every driver (a CLI run too), and the rest of the session keeps its own PYTHONPATH
    mp = pytest.MonkeyPatch()
    mp.setenv("PYTHONPATH", path)
    try:
        context = ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
                           logging_level="WARNING", runtime_env={"env_vars": env},
                           _system_config={"task_oom_retries": 0})
    finally:
        mp.undo()
    try:
        yield {"address": str(context.address_info["gcs_address"]), "probe_dir": str(probe_dir)}
    finally:
        ray.shutdown()

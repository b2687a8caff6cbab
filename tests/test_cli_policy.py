"""The rules the command line used to write itself now live once, in the library, and the CLI
calls them: each is used here without the CLI, said with the names its caller gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from snnbench.executors import ExecutorSettings
from snnbench.gate.compare import CompareError, check_thresholds
from snnbench.host.libenv import BuiltEnvironment, EnvironmentRequest
from snnbench.probe_cache import ProbeCache
from snnbench.records.fileio import StorageError
from snnbench.registry import AdapterEntry
from snnbench.sweep.received import recorded_executor, refuse_recorded_commands


def test_compare_thresholds_are_checked_once_named_as_the_caller_names_them() -> None:
    with pytest.raises(CompareError, match=r"^--time-floor-ms must be a finite number ≥ 0, "
                                           r"got -1.0$"):
        check_thresholds({"time_floor_s": -1.0}, {"time_floor_s": "--time-floor-ms"})
    with pytest.raises(CompareError, match=r"^factor must be a finite number > 1, got nan$"):
        check_thresholds({"factor": float("nan")})
    with pytest.raises(CompareError, match="alpha must be between 0 and 1"):
        check_thresholds({"alpha": 1.0})
    check_thresholds({"factor": 1.1, "alpha": 0.01, "mem_floor_bytes": None})  # all fine


def test_executor_options_the_chosen_executor_would_ignore_are_refused() -> None:
    with pytest.raises(Exception, match="--partition is an option of the slurm executor"):
        ExecutorSettings().refuse_foreign({"slurm.partition": "gpu"})
    with pytest.raises(Exception, match="--bind-cpus pins cases"):
        ExecutorSettings().refuse_foreign({"bind_cpus": True})
    ExecutorSettings(name="slurm").refuse_foreign({"slurm.partition": "gpu"})


def test_a_received_folder_runs_its_setup_only_when_it_is_given_again(tmp_path: Path) -> None:
    recorded = ExecutorSettings(name="slurm").with_overrides(
        {"slurm.setup": ("module load cuda",)})
    with pytest.raises(StorageError, match="a received folder runs no code"):
        refuse_recorded_commands(recorded, tmp_path)
    refuse_recorded_commands(recorded, tmp_path, given=("slurm.setup",))  # given again: theirs


def test_the_recorded_executor_is_read_through_the_run_folder(tmp_path: Path) -> None:
    assert recorded_executor(tmp_path).name == "local"  # no manifest: the default one
    (tmp_path / "manifest.json").write_text("{not json")
    assert recorded_executor(tmp_path).name == "local"  # damaged: resuming says so itself


def test_an_adapter_known_unavailable_needs_no_probe(tmp_path: Path) -> None:
    cache = ProbeCache(root=tmp_path)
    broken = AdapterEntry(name="broken", target="nowhere:Adapter", adapter_class=None,
                          error="ImportError: no module named nowhere")
    answer = cache.known(broken)
    assert answer is not None and answer["available"] is False
    assert "no module named nowhere" in answer["reason"]
    env = BuiltEnvironment(EnvironmentRequest("numpyish@1", ("numpy==1",)), "k", tmp_path,
                           error="uv: no solution")
    from snnbench.adapters.torch_ref import TorchAdapter

    entry = AdapterEntry(name="torch", target="x:Y", adapter_class=TorchAdapter)
    answer = cache.known(entry, env)
    assert answer is not None and answer["available"] is False
    assert "environment could not be built: uv: no solution" in json.dumps(answer)

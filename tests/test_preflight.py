"""The pre-flight noise check, --strict, per-case CPU contention and the thread wait policy.

Every machine reading is faked (a sysfs tree in tmp_path, a load average, a CPU sampler, an
NVML process list), so the findings are known values whatever the test machine is doing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from snnbench.cli import app
from snnbench.errors import UserError
from snnbench.host import preflight
from snnbench.host.preflight import (
    CpuMonitor,
    CpuSample,
    GpuProcess,
    Preflight,
    Probes,
    case_busy_cores,
    check_machine,
    noise_verdict,
    read_turbo,
)
from snnbench.records.contract import CaseRecord, Placement
from snnbench.sweep.config import ConfigError, RunConfig, RunSettings
from snnbench.sweep.planning.jobs import make_job, thread_env
from snnbench.sweep.planning.tasks import Task
from snnbench.sweep.run import start_run
from snnbench.workload import LinearLif
from snnbench.workload.linear_lif.spec import NetworkSpec


def fake_sysfs(root: Path, governors: list[str], no_turbo: str | None = None,
               boost: dict[str, str] | None = None) -> Path:
    """A /sys/devices/system/cpu tree: one governor per CPU, intel_pstate or cpufreq boost."""
    for cpu, governor in enumerate(governors):
        folder = root / f"cpu{cpu}" / "cpufreq"
        folder.mkdir(parents=True)
        (folder / "scaling_governor").write_text(governor + "\n")
    if no_turbo is not None:
        (root / "intel_pstate").mkdir(parents=True)
        (root / "intel_pstate" / "no_turbo").write_text(no_turbo + "\n")
    for policy, value in (boost or {}).items():
        (root / "cpufreq" / policy).mkdir(parents=True)
        (root / "cpufreq" / policy / "boost").write_text(value + "\n")
    return root


def probes(sysfs: Path, load: tuple[float, float, float] = (0.1, 0.1, 0.1),
           others: float = 0.0, steal: float = 0.0, cpus: int = 2,
           gpu: list[GpuProcess] | None = None) -> Probes:
    windows: list[float] = []

    def sample(window_s: float) -> CpuSample:
        windows.append(window_s)
        return CpuSample(window_s, others, steal, 0.0)

    return Probes(sysfs=sysfs, loadavg=lambda: load, cpus=lambda: cpus, sample=sample,
                  gpu_processes=lambda: list(gpu or []), window_s=0.25)


def levels(result: Preflight) -> dict[str, str]:
    return {f.check: f.level for f in result.findings}


def test_a_quiet_tuned_machine_has_no_warning(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path, ["performance", "performance"], no_turbo="1")
    result = check_machine(2, 1, "cpu", probes=probes(sysfs))
    assert levels(result) == {"load": "ok", "steal": "ok", "threads": "ok",
                              "gpu_processes": "ok", "governor": "ok", "turbo": "ok"}
    assert not result.noisy
    assert result.governors == ("performance",)
    assert result.turbo is False


def test_a_busy_machine_warns_with_what_to_do(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path, ["powersave", "performance"], no_turbo="0")
    gpu = [GpuProcess(gpu=0, pid=4242, used_bytes=2**30)]
    result = check_machine(2, 1, "cuda", probes=probes(
        sysfs, load=(1.6, 1.2, 0.4), others=1.2, gpu=gpu))
    assert levels(result) == {"load": "warning", "steal": "ok", "threads": "warning",
                              "gpu_processes": "warning", "governor": "notice",
                              "turbo": "notice"}
    assert result.noisy
    by_check = {f.check: f for f in result.findings}
    # 2 CPUs less 1.2 busy = 0.8 free: 2 threads do not fit, 1 does
    assert by_check["threads"].value == {"threads": 2, "jobs": 1, "cpus": 2, "free_cores": 0.8}
    assert "use --threads 1" in by_check["threads"].message
    assert "1.2 cores busy" in by_check["load"].message
    assert "4242 (GPU 0)" in by_check["gpu_processes"].message
    assert result.governors == ("performance", "powersave")
    assert result.turbo is True


def test_threads_times_jobs_against_free_cores(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path, [])
    # 8 CPUs, nothing else running: 2 jobs × 4 threads fit, 2 × 5 do not
    assert levels(check_machine(4, 2, probes=probes(sysfs, cpus=8)))["threads"] == "ok"
    too_many = check_machine(5, 2, probes=probes(sysfs, cpus=8))
    finding = next(f for f in too_many.findings if f.check == "threads")
    assert finding.level == "warning"
    assert "10 threads (5 per case × 2 at once)" in finding.message
    assert "--threads 4 or fewer --jobs" in finding.message


def test_recent_load_that_is_gone_is_a_notice_and_gpu_use_on_a_cpu_run_too(
        tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path, [])
    result = check_machine(1, 1, "cpu", probes=probes(
        sysfs, load=(1.9, 0.8, 0.3), others=0.1, gpu=[GpuProcess(1, 77)]))
    assert levels(result)["load"] == "notice"
    assert levels(result)["gpu_processes"] == "notice"
    assert not result.noisy


def test_a_busy_hypervisor_is_a_warning(tmp_path: Path) -> None:
    result = check_machine(1, 1, probes=probes(fake_sysfs(tmp_path, []), steal=0.3))
    assert levels(result)["steal"] == "warning"


def test_turbo_from_cpufreq_boost_per_policy(tmp_path: Path) -> None:
    assert read_turbo(fake_sysfs(tmp_path / "a", [], boost={"policy0": "0"})) is False
    assert read_turbo(fake_sysfs(tmp_path / "b", [], boost={"policy0": "0",
                                                           "policy1": "1"})) is True
    assert read_turbo(fake_sysfs(tmp_path / "c", [])) is None


def test_the_record_round_trips_through_json(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path, ["schedutil"], no_turbo="0")
    result = check_machine(2, 1, "cuda", when="end", probes=probes(
        sysfs, load=(0.7, 0.5, 0.25), others=0.7, gpu=[GpuProcess(0, 9, 123)]))
    data = json.loads(json.dumps(result.to_dict()))
    assert data["schema"] == preflight.PREFLIGHT_SCHEMA
    assert data["noisy"] is True and data["when"] == "end"
    assert data["load_avg"] == [0.7, 0.5, 0.25]
    assert data["gpu_processes"] == [{"gpu": 0, "pid": 9, "used_bytes": 123}]
    assert Preflight.from_dict(data) == result
    with pytest.raises(UserError, match=r"not a valid pre-flight check: findings\.0\.level: "):
        Preflight.from_dict({**data, "findings": [{"check": "x", "level": "loud", "message": ""}]})


def test_cpu_monitor_subtracts_its_own_process() -> None:
    # the machine was busy 3.0 CPU-seconds over 2 s of wall time, 1.0 of them this process's,
    # and 0.2 s were stolen: others kept 1.0 core busy, the hypervisor 0.1
    system = iter([(100.0, 5.0), (103.0, 5.2)])
    own = iter([10.0, 11.0])
    clock = iter([50.0, 52.0])
    monitor = CpuMonitor(system=lambda: next(system), own=lambda: next(own),
                         clock=lambda: next(clock)).start()
    sample = monitor.stop()
    assert sample.others_cores == pytest.approx(1.0)
    assert sample.steal_cores == pytest.approx(0.1)
    assert sample.own_cores == pytest.approx(0.5)
    assert sample.wall_s == pytest.approx(2.0)


def _record(others: float | None, concurrency: int = 1, threads: int = 1) -> CaseRecord:
    record = CaseRecord(adapter="a", variant="default", device="cpu", workload=LinearLif(NetworkSpec()),
                        status="ok", placement=Placement(concurrency=concurrency))
    record.settings = {"threads": threads}
    if others is not None:
        record.measurement["cpu"] = {"others_cores": others}
    return record


def test_cases_run_side_by_side_are_not_counted_as_noise() -> None:
    assert case_busy_cores(_record(None)) is None
    assert case_busy_cores(_record(0.9)) == pytest.approx(0.9)
    # --jobs 2 with 1 thread each: the other case is expected to keep one core busy
    assert case_busy_cores(_record(1.1, concurrency=2)) == pytest.approx(0.1)


def test_noise_verdict_names_every_reason() -> None:
    quiet = {"when": "start", "findings": [{"level": "ok", "message": "fine"}]}
    busy_end = {"when": "end", "findings": [{"level": "warning", "message": "busy"}]}
    assert not noise_verdict([quiet], [_record(0.1)]).noisy
    # a case that was not timed (no measurement) is not counted
    verdict = noise_verdict([quiet, busy_end],
                            [_record(0.1), _record(1.3), _record(0.6), _record(None)])
    assert verdict.noisy
    assert verdict.reasons == [
        "at the end: busy",
        "2 of 3 timed cases ran while other processes kept up to 1.3 cores busy "
        "(column busy_cores)",
    ]


# -- the thread wait policy ---------------------------------------------------------------
def test_the_wait_policy_reaches_every_worker_env() -> None:
    assert thread_env(2)["OMP_WAIT_POLICY"] == "PASSIVE"
    assert thread_env(2, "active")["OMP_WAIT_POLICY"] == "ACTIVE"
    assert "OMP_WAIT_POLICY" not in thread_env(2, "library")
    task = Task("fake-ok", "default", LinearLif(NetworkSpec()), "cpu")
    job = make_job(task, RunSettings(threads=1), None)
    assert dict(job.env)["OMP_WAIT_POLICY"] == "PASSIVE"
    job = make_job(task, RunSettings(threads=1, thread_wait="library"), None)
    assert "OMP_WAIT_POLICY" not in dict(job.env)


def test_an_unknown_wait_policy_is_refused() -> None:
    with pytest.raises(ConfigError, match="thread_wait must be one of passive, active"):
        RunSettings(thread_wait="spin")
    with pytest.raises(ConfigError, match="strict must be true or false"):
        RunSettings(strict="yes")  # type: ignore[arg-type]


# -- through a sweep ----------------------------------------------------------------------
FAST = {"repeats": 3, "max_repeats": 5, "min_time_s": 0.0, "warmup": 1, "warmup_s": 0.0,
        "threads": 1, "device": "cpu"}


def _config(**run: object) -> RunConfig:
    return RunConfig.from_dict({
        "run": {**FAST, "adapters": ["fake-ok"], **run},
        "network": {"batch_size": 2, "time_steps": 10},
        "sweep": [{"neurons": [8]}],
    })


@pytest.fixture
def busy_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """Make the pre-flight check read a fake machine with ``others`` cores busy."""
    def make(others: float) -> None:
        sysfs = fake_sysfs(tmp_path / f"sys-{others}", ["performance"])
        monkeypatch.setattr(preflight, "PROBES", probes(
            sysfs, load=(others + 0.2, others, 0.1), others=others, cpus=2))
    return make


def test_the_manifest_records_the_checks_and_the_policy(
        fake_plugins: Path, tmp_path: Path, busy_machine: Callable[[float], None]) -> None:
    busy_machine(1.5)
    lines: list[str] = []
    outcome = start_run(_config(thread_wait="passive"), tmp_path / "run", tmp_path, False,
                        notify=lines.append)
    manifest = json.loads((outcome.run_dir / "manifest.json").read_text())
    start, end = manifest["preflight"]
    assert (start["when"], end["when"]) == ("start", "end")
    assert start["load_avg"] == [1.7, 1.5, 0.1] and start["others_cores"] == 1.5
    assert {f["check"]: f["level"] for f in start["findings"]}["load"] == "warning"
    assert manifest["noise"]["noisy"] is True
    assert manifest["noise"]["reasons"][0].startswith("at the start: other processes keep 1.5")
    assert outcome.noise.noisy
    # the warnings were printed before the sweep, one line each
    assert any(line.startswith("warning: other processes keep 1.5 cores busy")
               for line in lines)
    # the policy: recorded in the manifest and seen by the worker
    assert manifest["settings"]["thread_wait"] == "passive"
    assert manifest["settings"]["thread_env"]["OMP_WAIT_POLICY"] == "PASSIVE"
    (case,) = (outcome.run_dir / "cases").glob("*.json")
    record = json.loads(case.read_text())
    assert record["settings"]["omp_wait_policy"] == "PASSIVE"
    # the worker measured the CPU use of others while it timed the case
    assert record["measurement"]["cpu"]["others_cores"] >= 0.0
    summary = pd.read_csv(outcome.run_dir / "summary.csv")
    assert "busy_cores" in summary.columns and summary["busy_cores"].notna().all()


def test_a_quiet_machine_passes_strict(fake_plugins: Path, tmp_path: Path,
                                       busy_machine: Callable[[float], None]) -> None:
    busy_machine(0.0)
    outcome = start_run(_config(strict=True, thread_wait="library"), tmp_path / "run",
                        tmp_path, False)
    manifest = json.loads((outcome.run_dir / "manifest.json").read_text())
    assert manifest["preflight"][0]["noisy"] is False
    assert "OMP_WAIT_POLICY" not in manifest["settings"]["thread_env"]


def test_strict_refuses_a_busy_machine_in_one_line_and_writes_nothing(
        tmp_path: Path, busy_machine: Callable[[float], None]) -> None:
    busy_machine(1.5)
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "--adapters", "torch", "--neurons", "8",
                                      "--threads", "1", "--strict", "--out", str(out)])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: --strict: the machine is noisy, not running")
    assert "other processes keep 1.5 cores busy" in lines[0]
    assert "Traceback" not in result.stdout + result.stderr
    assert not out.exists()


def test_env_check_prints_the_findings_and_exits_1_when_noisy(
        busy_machine: Callable[[float], None]) -> None:
    busy_machine(1.5)
    result = CliRunner().invoke(app, ["env", "--check", "--json", "--threads", "1"])
    assert result.exit_code == 1, result.stdout
    data = json.loads(result.stdout)
    assert data["noisy"] is True and data["threads"] == 1
    busy_machine(0.0)
    result = CliRunner().invoke(app, ["env", "--check"])
    assert result.exit_code == 0, result.stdout
    assert "load average 0.20" in result.stdout


def test_resuming_a_run_from_before_the_wait_policy_keeps_the_libraries_default(
        fake_plugins: Path, tmp_path: Path, busy_machine: Callable[[float], None]) -> None:
    busy_machine(0.0)
    config = RunConfig.from_dict({
        "run": {**FAST, "adapters": ["fake-ok"]},
        "network": {"batch_size": 2, "time_steps": 10},
        "sweep": [{"neurons": [8, 16]}],
    })
    outcome = start_run(config, tmp_path / "run", tmp_path, False)
    path = outcome.run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["config"]["run"]["thread_wait"]  # as an older snnbench wrote it
    path.write_text(json.dumps(manifest))
    first = sorted((outcome.run_dir / "cases").glob("*.json"))[0]
    first.unlink()
    start_run(RunConfig(), tmp_path / "run", tmp_path, True)
    record = json.loads(first.read_text())
    assert record["settings"]["omp_wait_policy"] == ""
    assert len(json.loads(path.read_text())["preflight"]) == 4  # start and end, twice


def test_a_busy_case_gets_a_note_in_the_table() -> None:
    from snnbench.report.tables import HEADERS, case_rows
    from snnbench.store.storage import summary_frame

    busy, quiet = _record(1.25), _record(0.1)
    quiet.workload = LinearLif(NetworkSpec(neurons=64))
    for record in (busy, quiet):
        record.samples = {"step": {"time_s": [1.0, 1.0, 1.0, 1.0]}}
    frame = summary_frame([busy, quiet], "run")
    assert list(frame["busy_cores"]) == [1.25, 0.1]
    notes = [row[HEADERS.index("note")] for row in case_rows(frame)]
    assert notes == ["busy machine: other processes used 1.2 cores while it was timed", ""]


def test_compare_warns_about_a_noisy_run() -> None:
    from snnbench.gate.compare import manifest_warnings

    noisy = {"noise": {"noisy": True, "reasons": ["at the start: busy", "at the end: busy"]}}
    quiet = {"noise": {"noisy": False, "reasons": []}}
    assert manifest_warnings(quiet, noisy) == [
        "the candidate run was noisy: at the start: busy (+1 more)"]
    assert manifest_warnings(quiet, {}) == []

"""Timers, blocked samples, the choice of k, warm-up until stable, and GPU throttling — all on
fake clocks, fake CUDA events and a fake NVML (no GPU here, and no timed unit tests)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from snnbench.adapter import Adapter, Capabilities, Model
from snnbench.host import gpustate, nvml
from snnbench.host.gpustate import GpuState, open_monitor, throttle_warning
from snnbench.measure import energy
from snnbench.measure.measurement import MeasurementInfo
from snnbench.measure.timing import (
    CudaEventTimer,
    HostTimer,
    MeasureSettings,
    calibrate,
    choose_block_size,
    default_timer_kind,
    is_stable,
    null_region_s,
    sample_phase,
    time_block,
    warm_up,
)
from snnbench.measure.worker import measure
from snnbench.records.contract import CaseRecord, Job
from snnbench.store.storage import summary_frame
from snnbench.workload import LinearLif
from snnbench.workload.linear_lif.spec import CaseData, FloatArray, NetworkSpec

US = 1e-6


@dataclass
class FakeClock:
    """Time that passes only when the fake model or the fake synchronize says so."""

    now: float = 0.0  # near 0, float steps of a microsecond stay exact enough

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeModel(Model):
    """Forward, backward and synchronize advance ``clock`` by known amounts (seconds)."""

    clock: FakeClock
    forward_s: float = 10 * US
    backward_s: float = 30 * US
    sync_s: float = 0.5 * US
    #: step durations to play in order (the last repeats); empty: forward_s + backward_s
    step_series: list[float] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    steps: int = 0

    def forward(self) -> Any:
        self.calls.append("forward")
        self.clock.now += self.forward_s
        return "handle"

    def backward(self, handle: Any) -> None:
        assert handle == "handle"
        self.calls.append("backward")
        self.clock.now += self.backward_s

    def step(self) -> Any:
        if not self.step_series:
            return super().step()
        self.calls.append("step")
        self.clock.now += self.step_series[min(self.steps, len(self.step_series) - 1)]
        self.steps += 1
        return "handle"

    def zero_grad(self) -> None:
        self.calls.append("zero_grad")

    def synchronize(self) -> None:
        self.calls.append("sync")
        self.clock.now += self.sync_s

    def spikes(self, handle: Any) -> FloatArray:
        raise NotImplementedError

    def gradients(self) -> tuple[list[FloatArray], list[FloatArray]]:
        raise NotImplementedError


@dataclass
class FakeEvent:
    """A CUDA event on a fake device whose time is the fake clock (all work is on one stream)."""

    clock: FakeClock
    log: list[str]
    at: float | None = None

    def record(self) -> None:
        self.at = self.clock.now
        self.log.append("record")

    def synchronize(self) -> None:
        self.log.append("event-sync")

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.at is not None and end.at is not None
        return (end.at - self.at) * 1000.0  # milliseconds, as torch returns them


def _events(clock: FakeClock) -> tuple[CudaEventTimer, list[str]]:
    log: list[str] = []
    return CudaEventTimer(lambda: FakeEvent(clock, log)), log


# -- blocked samples: the arithmetic ----------------------------------------------------------
def test_a_host_sample_is_the_iteration_plus_one_synchronize() -> None:
    clock = FakeClock()
    model = FakeModel(clock)
    timer = HostTimer(model.synchronize, clock)
    # region: the end mark's synchronize (0.5 µs) after the forward (10 µs)
    assert time_block(model, "forward", timer) == pytest.approx(10.5 * US)
    assert null_region_s(timer) == pytest.approx(0.5 * US)


def test_a_block_of_k_forwards_spreads_one_synchronize_over_k() -> None:
    clock = FakeClock()
    model = FakeModel(clock)
    timer = HostTimer(model.synchronize, clock)
    # (4 × 10 µs + 0.5 µs) / 4
    assert time_block(model, "forward", timer, 4) == pytest.approx(10.125 * US)
    assert model.calls.count("forward") == 4
    assert model.calls.count("sync") == 2  # one per mark, none inside the block


def test_a_block_of_steps_drops_gradients_before_every_iteration() -> None:
    clock = FakeClock()
    model = FakeModel(clock)
    timer = HostTimer(model.synchronize, clock)
    # (3 × (10 + 30) µs + 0.5 µs) / 3
    assert time_block(model, "step", timer, 3) == pytest.approx((120 + 0.5) / 3 * US)
    assert model.calls.count("zero_grad") == 3


def test_a_blocked_backward_on_events_sums_backward_spans_and_leaves_forwards_out() -> None:
    clock = FakeClock()
    model = FakeModel(clock)
    timer, log = _events(clock)
    # 4 forwards (10 µs each) run between the backward spans; only the backwards count
    assert time_block(model, "backward", timer, 4) == pytest.approx(30 * US)
    assert "sync" not in model.calls  # events never synchronize the model
    assert log.count("record") == 8
    # every event is waited for only after the last one was recorded
    assert log.index("event-sync") == 8


def test_a_host_timer_refuses_a_blocked_backward() -> None:
    clock = FakeClock()
    model = FakeModel(clock)
    with pytest.raises(ValueError, match="blocked backward"):
        time_block(model, "backward", HostTimer(model.synchronize, clock), 2)


def test_the_event_timer_reads_milliseconds_as_seconds() -> None:
    clock = FakeClock()
    model = FakeModel(clock)
    timer, _ = _events(clock)
    assert time_block(model, "step", timer) == pytest.approx(40 * US)
    assert null_region_s(timer) == 0.0


# -- the choice of k ---------------------------------------------------------------------------
@pytest.mark.parametrize(("per_iteration", "null", "max_block", "expected"), [
    (1e-3, 1e-6, 1000, 1),       # 1 ms ≥ 1000 × 1 µs: no block
    (10e-6, 0.5e-6, 1000, 50),   # target 500 µs / 10 µs
    (3e-6, 1e-6, 1000, 334),     # ceil(1000 / 3)
    (1e-9, 1e-6, 1000, 1000),    # capped by max_block
    (10e-6, 0.5e-6, 1, 1),       # max_block = 1: never block
    (50e-6, 1e-3, 10_000, 2000),  # target 1 s, but a block lasts ≤ 0.1 s: 0.1 s / 50 µs
])
def test_block_size_reaches_a_thousand_null_regions_within_its_caps(
    per_iteration: float, null: float, max_block: int, expected: int
) -> None:
    assert choose_block_size(per_iteration, null, max_block) == expected


def test_k_is_chosen_per_phase_from_the_measured_null_region() -> None:
    clock = FakeClock()
    model = FakeModel(clock)
    host = HostTimer(model.synchronize, clock)
    settings = MeasureSettings()
    null = null_region_s(host)  # 0.5 µs: a block must reach 500 µs
    assert calibrate(model, "forward", host, null, settings).size == 50  # 500 / 10
    assert calibrate(model, "step", host, null, settings).size == 13  # ceil(500 / 40)
    backward = calibrate(model, "backward", host, null, settings)
    assert backward.size == 1 and "untimed forward" in backward.note
    events, _ = _events(clock)
    # a null region of 0 on the fake device: everything is resolvable, k = 1
    assert calibrate(model, "backward", events, 0.0, settings).size == 1
    assert calibrate(model, "backward", events, 0.1 * US, settings).size == 4  # ceil(100 / 30)


def test_sample_phase_stores_per_iteration_times_and_counts_every_iteration() -> None:
    clock = FakeClock()
    model = FakeModel(clock)
    host = HostTimer(model.synchronize, clock)
    settings = MeasureSettings(repeats=3, max_repeats=100, min_time_s=0.01)
    timed = sample_phase(model, "forward", settings, host, null_region_s(host))
    assert timed.block.size == 50
    assert timed.times == pytest.approx([(50 * 10 + 0.5) / 50 * US] * len(timed.times))
    # 0.01 s of 50 × 10 µs blocks: 20 samples (not 1000 single ones)
    assert len(timed.times) == 20


def test_a_long_iteration_is_sampled_alone() -> None:
    clock = FakeClock()
    model = FakeModel(clock, forward_s=2e-3, backward_s=3e-3)
    host = HostTimer(model.synchronize, clock)
    settings = MeasureSettings(repeats=5, min_time_s=0.0)
    timed = sample_phase(model, "step", settings, host, null_region_s(host))
    assert timed.block.size == 1
    assert timed.times == pytest.approx([5.0005e-3] * 5)


# -- warm-up -------------------------------------------------------------------------------------
def test_warm_up_stops_once_the_rolling_median_is_stable() -> None:
    clock = FakeClock()
    # the first steps are slow (a clock ramping up), then 1 ms ± 0.5 %
    series = [5e-3, 4e-3, 3e-3, 2e-3, 1.5e-3] + [1e-3, 1.005e-3, 0.995e-3] * 10
    model = FakeModel(clock, sync_s=0.0, step_series=series)
    warm = warm_up(model, MeasureSettings(warmup=2, warmup_s=0.0, warmup_max_s=10.0),
                   clock=clock)
    assert warm.stop == "stable"
    # at 13 steps the earlier window is [2, 1.5, 1, 1.005, 0.995] ms: its median (1.005) is
    # already flat, as is the latest window's (1.0); at 12 it was 1.5 ms
    assert warm.steps == 13


def test_warm_up_stops_at_its_cap_on_an_unstable_series() -> None:
    clock = FakeClock()
    model = FakeModel(clock, sync_s=0.0, step_series=[1e-3 * (1 + i) for i in range(100)])
    warm = warm_up(model, MeasureSettings(warmup=2, warmup_s=0.0, warmup_max_s=0.05),
                   clock=clock)
    assert warm.stop == "cap"
    assert warm.seconds >= 0.05
    assert warm.steps == 10  # 1+2+...+10 ms = 55 ms ≥ 50 ms


def test_warm_up_stops_when_the_gpu_reaches_boost_but_never_before_the_minimum() -> None:
    clock = FakeClock()
    model = FakeModel(clock, sync_s=0.0, step_series=[1e-3 * (1 + i) for i in range(100)])
    warm = warm_up(model, MeasureSettings(warmup=3, warmup_s=0.0), at_boost=lambda: True,
                   clock=clock)
    assert (warm.stop, warm.steps) == ("boost", 3)


def test_no_warm_up_when_every_bound_is_zero() -> None:
    clock = FakeClock()
    model = FakeModel(clock)
    warm = warm_up(model, MeasureSettings(warmup=0, warmup_s=0.0, warmup_max_s=0.0), clock=clock)
    assert (warm.steps, warm.stop) == (0, "cap")


def test_stability_compares_two_disjoint_windows() -> None:
    assert not is_stable([1.0] * 9)
    assert is_stable([1.0] * 10)
    assert not is_stable([1.0] * 5 + [1.03] * 5)
    assert is_stable([1.0] * 5 + [1.01] * 5)


def test_the_default_timer_follows_framework_and_device() -> None:
    assert default_timer_kind("torch", "cuda") == "cuda-event"
    assert default_timer_kind("torch", "cpu") == "host"
    assert default_timer_kind("numpy", "cuda") == "host"
    assert default_timer_kind("jax", "cuda") == "jax-block"


# -- NVML: clocks, throttling ------------------------------------------------------------------
class FakeNVMLError(Exception):
    pass


@dataclass
class FakeNVML:
    """The pynvml surface gpustate uses; the SM clock plays ``clocks`` (the last repeats)."""

    clocks: list[float]
    reads: int = 0
    inits: int = 0
    shutdowns: int = 0
    handles: list[Any] = field(default_factory=list)

    NVMLError = FakeNVMLError
    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        self.handles.append(index)
        return f"gpu{index}"

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        self.handles.append(uuid)
        return uuid

    def nvmlDeviceGetClockInfo(self, handle: str, kind: int) -> int:
        assert kind == self.NVML_CLOCK_SM
        value = self.clocks[min(self.reads, len(self.clocks) - 1)]
        self.reads += 1
        return int(value)

    def nvmlDeviceGetMaxClockInfo(self, handle: str, kind: int) -> int:
        return 1980

    def nvmlDeviceGetTemperature(self, handle: str, kind: int) -> int:
        return 84

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        raise FakeNVMLError("Not Supported")


def test_the_monitor_reads_the_visible_gpu_and_nan_for_what_nvml_cannot(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNVML([345])
    monkeypatch.setattr(nvml, "load", lambda: fake)
    assert open_monitor("cpu") is None
    monitor = open_monitor("cuda", {"CUDA_VISIBLE_DEVICES": "GPU-abc,GPU-def"})
    assert monitor is not None
    state = monitor.read()
    assert (state.sm_clock_mhz, state.max_sm_clock_mhz, state.temperature_c) == (345, 1980, 84)
    assert math.isnan(state.power_w)
    assert not state.at_boost()
    monitor.close()
    assert fake.handles == ["GPU-abc"] and fake.inits == fake.shutdowns == 1
    open_monitor("cuda", {"CUDA_VISIBLE_DEVICES": "2"})
    assert fake.handles[-1] == 2


def test_no_nvml_means_no_monitor(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> Any:
        raise energy.EnergyUnavailable("nvidia-ml-py (pynvml) is not installed")

    monkeypatch.setattr(nvml, "load", missing)
    assert gpustate.open_monitor("cuda") is None


def test_throttle_warning_says_what_fell_and_what_to_do() -> None:
    before = GpuState(1980, 1980, 60, 300)
    assert throttle_warning(before, GpuState(1900, 1980, 70, 310)) == ""  # within 5 %
    text = throttle_warning(before, GpuState(1410, 1980, 87, 695))
    assert "1980 to 1410 MHz" in text and "87 °C" in text and "695 W" in text
    assert "--lock-gpu-clocks" in text
    assert throttle_warning(None, before) == ""


class CountingModel(Model):
    """A tiny NumPy model of the case's shape (spikes all zero), 'on the GPU' for the harness."""

    def __init__(self, spec: NetworkSpec) -> None:
        self.shape = spec.input_shape()
        self.n = spec.neurons

    def forward(self) -> Any:
        return np.zeros(self.shape, np.float32)

    def backward(self, handle: Any) -> None:
        pass

    def zero_grad(self) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def spikes(self, handle: Any) -> FloatArray:
        return handle  # type: ignore[no-any-return]

    def gradients(self) -> tuple[list[FloatArray], list[FloatArray]]:
        return [np.zeros((self.n, self.n), np.float32)], [np.zeros(self.n, np.float32)]


class CountingAdapter(Adapter):
    name = "counting"
    library = "numpy"
    framework = "numpy"

    def capabilities(self, variant: str) -> Capabilities:
        return Capabilities(devices=("cpu", "cuda"))

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        return CountingModel(spec)


FAST = MeasureSettings(repeats=3, max_repeats=3, min_time_s=0.0, warmup=1, warmup_s=0.0,
                       warmup_max_s=0.0)


def _measured(device: str) -> CaseRecord:
    spec = NetworkSpec(neurons=8, batch_size=2, time_steps=5)
    job = Job(adapter="counting", variant="default", device=device, workload=LinearLif(spec), measure=FAST,
              energy=False)
    record = CaseRecord.for_job(job)
    measure(CountingAdapter(), job, record, 0.0)
    record.status = "ok"
    return record


def test_a_clock_drop_during_a_case_is_a_warning_in_its_stored_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # reads: before the warm-up (idle), the warm-up's boost check, before timing, after timing
    fake = FakeNVML([345, 1980, 1980, 1410])
    monkeypatch.setattr(nvml, "load", lambda: fake)
    record = _measured("cuda")
    info = MeasurementInfo.from_dict(record.measurement)
    assert info.warmup_stop == "boost"
    assert info.gpu_idle is not None and info.gpu_idle.sm_clock_mhz == 345
    assert fake.inits == fake.shutdowns == 1
    summary = summary_frame([record], "r1")
    timed = summary[(summary["metric"] == "time_s")]
    assert set(timed["phase"]) == {"forward", "backward", "step"}
    assert timed["warning"].str.contains("throttled: the SM clock fell from 1980 to 1410").all()
    assert (timed["sm_clock_before_mhz"] == 1980).all()
    assert (timed["sm_clock_after_mhz"] == 1410).all()
    assert (timed["temperature_after_c"] == 84).all()
    assert timed["power_after_w"].isna().all()


def test_a_cpu_case_records_the_host_timer_its_blocks_and_no_gpu_state() -> None:
    record = _measured("cpu")
    assert record.measurement["timer"] == "host"
    assert record.measurement["gpu_after"] is None
    assert record.measurement["timer_null_s"] > 0
    summary = summary_frame([record], "r1")
    timed = summary[summary["metric"] == "time_s"].set_index("phase")
    assert (timed["timer"] == "host").all()
    assert timed.at["backward", "block_size"] == 1  # host timer: never a blocked backward
    assert timed.at["forward", "block_size"] >= 1
    assert timed["sm_clock_before_mhz"].isna().all()
    assert not timed["warning"].str.contains("throttled").any()
    back = MeasurementInfo.from_dict(CaseRecord.from_dict(record.to_dict()).measurement)
    assert back.block_size == MeasurementInfo.from_dict(record.measurement).block_size


def test_measurement_info_reads_old_and_foreign_keys_and_names_a_bad_value() -> None:
    from snnbench.records.contract import ContractError

    info = MeasurementInfo(timer="host", warmup_steps=3, block_size={"forward": 4},
                           gpu_before=GpuState(sm_clock_mhz=1980.0))
    data = info.to_dict()
    assert list(data) == ["timer", "timer_null_s", "warmup_steps", "warmup_s", "warmup_stop",
                          "block_size", "block_note", "gpu_idle", "gpu_before", "gpu_after"]
    assert data["gpu_before"]["sm_clock_mhz"] == 1980.0 and data["gpu_after"] is None
    # a record's measurement dict holds other keys (kept, ignored); nulls read as defaults
    back = MeasurementInfo.from_dict({**data, "busy_cores": 0.1, "timer_null_s": None,
                                      "block_note": None,
                                      "gpu_before": {"sm_clock_mhz": 1980.0}})
    assert back.block_size == {"forward": 4} and back.block_note == {}
    assert math.isnan(back.timer_null_s) and back.gpu_before is not None
    assert back.gpu_before.sm_clock_mhz == 1980.0 and math.isnan(back.gpu_before.power_w)
    assert MeasurementInfo.from_dict({}).timer == ""
    with pytest.raises(ContractError, match="not a valid measurement: warmup_steps: "):
        MeasurementInfo.from_dict({"warmup_steps": "many"})


# -- settings ------------------------------------------------------------------------------------
def test_run_config_carries_the_warm_up_cap_and_block_limit_to_the_worker() -> None:
    from snnbench.sweep.config import RunConfig

    cfg = RunConfig.from_dict({"run": {"warmup_max_s": 0.5, "max_block": 1}})
    settings = cfg.run.measure_settings
    assert (settings.warmup_max_s, settings.max_block) == (0.5, 1)
    job = Job(adapter="a", variant="default", device="cpu", workload=LinearLif(NetworkSpec()), measure=settings)
    assert Job.from_dict(job.to_dict()).measure == settings
    old = job.to_dict()
    old["measure"] = {k: v for k, v in old["measure"].items()
                      if k not in ("warmup_max_s", "max_block")}  # a job written before them
    assert Job.from_dict(old).measure.max_block == MeasureSettings().max_block


@pytest.mark.parametrize(("key", "value", "fragment"), [
    ("warmup_max_s", float("nan"), "warmup_max_s must be a finite number"),
    ("warmup_max_s", -1.0, "warmup_max_s must be a finite number ≥ 0"),
    ("max_block", 0, "max_block must be a positive integer"),
    ("max_block", 2.5, "max_block must be a positive integer"),
])
def test_bad_warm_up_cap_or_block_limit_is_one_line(key: str, value: Any, fragment: str) -> None:
    from snnbench.sweep.config import ConfigError, RunSettings

    with pytest.raises(ConfigError, match=fragment):
        RunSettings(**{key: value})


def test_the_case_table_tells_a_throttled_case_from_a_noisy_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from snnbench.report.tables import NOISY_NOTE, THROTTLED_NOTE, case_rows

    fake = FakeNVML([345, 1980, 1980, 1410])
    monkeypatch.setattr(nvml, "load", lambda: fake)
    summary = summary_frame([_measured("cuda")], "r1")
    summary["warning"] = summary["warning"].str.replace(r"^.*?(throttled:)", r"\1", regex=True)
    (row,) = case_rows(summary)
    assert THROTTLED_NOTE in row[-1] and NOISY_NOTE not in row[-1]


def test_a_run_written_before_timers_reads_as_host_timed_one_iteration_per_sample() -> None:
    from snnbench.records.schema import ADDED_COLUMN_DEFAULTS
    from snnbench.store.rundir import with_added_columns

    new = [c for c in ("timer", "timer_null_s", "block_size", "warmup_stop",
                       "sm_clock_before_mhz", "power_after_w") if c in ADDED_COLUMN_DEFAULTS]
    assert len(new) == 6
    summary = summary_frame([_measured("cpu")], "r1").drop(columns=new)
    old = with_added_columns(summary)
    assert (old["timer"] == "host").all() and (old["block_size"] == 1).all()
    assert old["sm_clock_before_mhz"].isna().all()


def test_a_preempted_calibration_sample_does_not_shrink_k() -> None:
    clock = FakeClock()
    # settle, then five singles of which three were preempted (2 ms instead of 40 µs)
    model = FakeModel(clock, step_series=[40 * US, 2e-3, 2e-3, 40 * US, 2e-3, 40 * US])
    host = HostTimer(model.synchronize, clock)
    assert calibrate(model, "step", host, 0.5 * US, MeasureSettings()).size == 13


def test_compare_does_not_set_a_host_timed_baseline_against_device_events(
        tmp_path: Path) -> None:
    from snnbench.gate.compare import compare
    from tests.fixtures.runfolders import timed_case, write_run

    rng = np.random.default_rng(3)
    base = write_run(tmp_path / "b", [timed_case("torch", 64, rng, median_s=1e-3,
                                                 device="cuda", timer="host")])
    same = write_run(tmp_path / "s", [timed_case("torch", 64, rng, median_s=1e-3,
                                                 device="cuda", timer="host")])
    cand = write_run(tmp_path / "c", [timed_case("torch", 64, rng, median_s=0.7e-3,
                                                 device="cuda", timer="cuda-event")])
    changed = compare(base, cand)
    (pair,) = [p for p in changed.pairs if p.mark == "not_comparable"]
    assert "timer host → cuda-event" in pair.note
    assert not [p for p in compare(base, same).pairs
                if p.mark == "not_comparable"]

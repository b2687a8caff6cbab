"""Energy metering (with a fake NVML: no GPU here) and NeuroBench-style SynOps / firing rate."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from snnbench.host import nvml
from snnbench.measure.energy import EnergyMeter, EnergyUnavailable, energy_available, measure_energy
from snnbench.workload.linear_lif.reference import run_reference
from snnbench.workload.linear_lif.spec import NetworkSpec, make_case_data
from snnbench.workload.linear_lif.synops import (
    firing_rate,
    is_spike_input,
    layer_firing_rates,
    layer_synops,
    synops,
    synops_per_step,
)

# ------------------------------------------------------------------------------- energy


class FakeNVMLError(Exception):
    pass


@dataclass
class FakeGPU:
    """A GPU whose energy counter and the host clock advance only when a step runs."""

    step_s: list[float]  # durations of successive steps (the last one repeats)
    watts: float = 240.0
    now: float = 100.0
    counter_mj: int = 5_000_000  # the counter starts wherever the driver left it
    steps: int = 0
    init_error: str | None = None
    counter_error: str | None = None
    frozen: bool = False  # a counter that never advances
    shutdowns: int = 0
    inits: int = 0
    log: list[str] = field(default_factory=list)

    # the pynvml surface EnergyMeter uses
    NVMLError = FakeNVMLError

    def nvmlInit(self) -> None:
        if self.init_error:
            raise FakeNVMLError(self.init_error)
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        if self.counter_error:
            raise FakeNVMLError(self.counter_error)
        return self.counter_mj

    # the workload
    def clock(self) -> float:
        return self.now

    def step(self) -> None:
        dt = self.step_s[min(self.steps, len(self.step_s) - 1)]
        self.steps += 1
        self.now += dt
        if not self.frozen:
            self.counter_mj += round(self.watts * dt * 1000)

    def sync(self) -> None:
        self.log.append("sync")


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> FakeGPU:
    fake = FakeGPU(step_s=[0.125])
    monkeypatch.setattr(nvml, "load", lambda: fake)
    return fake


def test_joules_per_step_arithmetic(gpu: FakeGPU) -> None:
    # 0.125 s per step at 240 W = 30 J per step; 1 s region → 8 steps after 1 calibration step
    result = measure_energy(gpu.step, gpu.sync, 1.0, clock=gpu.clock)
    assert result is not None
    assert result.steps == 8
    assert result.region_s == pytest.approx(1.0)
    assert result.joules == pytest.approx(240.0)
    assert result.joules_per_step == pytest.approx(30.0)
    assert result.average_power_w == pytest.approx(240.0)
    assert gpu.steps == 9  # calibration step + 8 metered
    assert gpu.inits == gpu.shutdowns == 1


def test_region_extends_when_calibration_overestimates(monkeypatch: pytest.MonkeyPatch) -> None:
    # the first (cold) step takes 1 s, later ones 0.125 s: batches of 1 then 7 fill the region
    fake = FakeGPU(step_s=[1.0, 0.125])
    monkeypatch.setattr(nvml, "load", lambda: fake)
    result = measure_energy(fake.step, fake.sync, 1.0, clock=fake.clock)
    assert result is not None
    assert result.steps == 8 and result.region_s == pytest.approx(1.0)
    assert result.joules_per_step == pytest.approx(30.0)


def test_no_nvml_library_gives_none(gpu: FakeGPU) -> None:
    gpu.init_error = "NVML Shared Library Not Found"
    assert not energy_available()
    assert measure_energy(gpu.step, gpu.sync, 1.0, clock=gpu.clock) is None
    assert gpu.steps == 0  # nothing ran


def test_counter_not_supported_gives_none(gpu: FakeGPU) -> None:
    gpu.counter_error = "Not Supported"
    assert not energy_available()
    assert measure_energy(gpu.step, gpu.sync, 1.0, clock=gpu.clock) is None
    assert gpu.inits == gpu.shutdowns  # NVML shut down after each failed open


def test_frozen_counter_gives_none_not_zero(gpu: FakeGPU) -> None:
    gpu.frozen = True
    assert measure_energy(gpu.step, gpu.sync, 1.0, clock=gpu.clock) is None


def test_meter_start_stop(gpu: FakeGPU) -> None:
    assert energy_available()
    with EnergyMeter(clock=gpu.clock) as meter:
        meter.start()
        gpu.step()
        gpu.step()
        reading = meter.stop()
        with pytest.raises(RuntimeError):
            meter.stop()
    assert reading.joules == pytest.approx(60.0)
    assert reading.seconds == pytest.approx(0.25)
    assert reading.average_w == pytest.approx(240.0)
    with pytest.raises(EnergyUnavailable):
        meter.read_mj()  # closed


def test_real_nvml_never_crashes() -> None:
    # here (no GPU) this is False; on a GPU box it may be True — either way no exception
    assert isinstance(energy_available(), bool)


def test_min_time_must_be_positive() -> None:
    with pytest.raises(ValueError):
        measure_energy(lambda: None, lambda: None, 0.0)


# ------------------------------------------------------------------------------- SynOps


def test_dense_input_counts_macs() -> None:
    # T=2, B=1, in=3, out=4; 4 non-zero inputs × fan-out 4 = 16 MACs; dense 2·1·3·4 = 24
    x = np.array([[[0.5, -1.2, 0.0]], [[0.3, 0.0, 2.0]]], dtype=np.float32)
    ops = layer_synops(x, 4)
    assert (ops.effective, ops.dense, ops.spiking_input) == (16, 24, False)


def test_zero_weights_cost_nothing() -> None:
    x = np.array([[[0.5, -1.2, 0.0]], [[0.3, 0.0, 2.0]]], dtype=np.float32)
    w = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]])  # non-zeros per input column: 1, 0, 2
    # active inputs per column: 2, 1, 1 → 2·1 + 1·0 + 1·2 = 4
    assert layer_synops(x, w).effective == 4
    assert layer_synops(x, w).dense == 2 * 1 * 3 * 2


def test_two_layer_network() -> None:
    x = np.array([[[0.5, -1.2, 0.0]], [[0.3, 0.0, 2.0]]], dtype=np.float32)  # (2, 1, 3)
    s1 = np.array([[[1, 0, 0, 1]], [[0, 0, 1, 0]]], dtype=np.float32)  # 3 spikes
    s2 = np.array([[[0, 0, 0, 0, 1]], [[0, 0, 0, 0, 0]]], dtype=np.float32)  # 1 spike
    result = synops(x, [s1, s2], layer_sizes=[4, 5])
    assert result.effective_macs == 16  # layer 1: dense input
    assert result.effective_acs == 3 * 5  # layer 2: 3 spikes × fan-out 5
    assert result.dense == 24 + 2 * 1 * 4 * 5  # 24 + 40
    assert result.per_sample == {"Effective_MACs": 16.0, "Effective_ACs": 15.0, "Dense": 64.0}
    assert result.per_step == pytest.approx((16 + 15) / 2)
    assert result.acs_per_step == 7.5 and result.macs_per_step == 8.0
    # the last layer's spikes feed nothing: leaving them out changes nothing
    assert synops(x, [s1], layer_sizes=[4, 5]) == result
    assert layer_firing_rates([s1, s2]) == [3 / 8, 1 / 10]
    assert firing_rate([s1, s2]) == pytest.approx(4 / 18)


def test_spike_input_counts_acs() -> None:
    x = np.zeros((5, 2, 3), dtype=np.float32)
    x[0, 0, 1] = x[4, 1, 2] = 1.0
    ops = layer_synops(x, 7)
    assert ops.spiking_input and ops.effective == 2 * 7
    assert is_spike_input(np.array([-1.0, 0.0, 1.0])) and not is_spike_input(np.array([0.5]))


def test_canonical_network_against_reference() -> None:
    spec = NetworkSpec(
        neurons=16,
        batch_size=3,
        time_steps=12,
        layers=2,
        input_kind="bernoulli",
        input_rate=0.2,
        seed=3,
    )
    data = make_case_data(spec)
    ref = run_reference(data)
    result = synops(data.inputs, list(ref.spikes), [16, 16], weights=list(data.weights))
    n_input_spikes = int(np.count_nonzero(data.inputs))
    n_layer1_spikes = int(np.count_nonzero(ref.spikes[0]))
    # Gaussian-initialised weights have no zeros: every spike costs the full fan-out of 16
    assert result.effective_macs == 0
    assert result.effective_acs == 16 * (n_input_spikes + n_layer1_spikes)
    assert result.dense == 2 * 12 * 3 * 16 * 16
    assert synops_per_step(data.inputs, list(ref.spikes), spec) == pytest.approx(
        16 * (n_input_spikes + n_layer1_spikes) / (12 * 3)
    )
    total_spikes = sum(float(s.sum()) for s in ref.spikes)
    assert firing_rate(list(ref.spikes)) == pytest.approx(total_spikes / (2 * 12 * 3 * 16))


def test_shape_errors() -> None:
    with pytest.raises(ValueError, match=r"\(T, B, n\)"):
        layer_synops(np.zeros((3, 4)), 2)
    with pytest.raises(ValueError, match="weight"):
        layer_synops(np.zeros((1, 1, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="spikes of"):
        synops(np.zeros((1, 1, 3)), [], layer_sizes=[3, 3, 3])

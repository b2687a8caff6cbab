"""The reference is computed once per network in a sweep, never per case and again per check;
what is kept of it is data (an .npz read without pickle), checked against its spec."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from snnbench.measure import verify
from snnbench.measure.timing import MeasureSettings
from snnbench.measure.worker import run_job
from snnbench.records.contract import Job
from snnbench.records.schema import REFERENCES_DIR
from snnbench.workload import LinearLif
from snnbench.workload.linear_lif.reference import ReferenceResult
from snnbench.workload.linear_lif.spec import CaseData, NetworkSpec, make_case_data

FAST = MeasureSettings(repeats=2, max_repeats=2, min_time_s=0.0, warmup=0, warmup_s=0.0)
SPEC = NetworkSpec(neurons=8, batch_size=2, time_steps=30)


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[NetworkSpec]:
    """The specs whose reference was computed (every computation counted)."""
    calls: list[NetworkSpec] = []
    real: Callable[[LinearLif, CaseData], ReferenceResult] = LinearLif.reference

    def counting(self: LinearLif, data: CaseData) -> ReferenceResult:
        calls.append(data.spec)
        return real(self, data)

    # the workload's own reference, whoever calls it (the cache, a check, the case metrics)
    monkeypatch.setattr(LinearLif, "reference", counting)
    return calls


def _job(work: Path, adapter: str, spec: NetworkSpec = SPEC) -> Job:
    job = Job(adapter=adapter, variant="default", device="cpu", workload=LinearLif(spec),
              measure=FAST,
              verify_time_steps=10)
    folder = work / job.key
    folder.mkdir(parents=True)
    return job.with_result_in(folder)


def test_two_cases_of_one_network_compute_its_reference_once(
        fake_plugins: Path, tmp_path: Path, computed: list[NetworkSpec],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SNNBENCH_FAKE_SLEEP_SCALE", "0.01")
    work = tmp_path / "jobs"
    first = run_job(_job(work, "fake-ok"))
    second = run_job(_job(work, "fake-sleep"))
    assert first.status == second.status == "ok", (first.message, second.message)
    # one computation for both cases, their checks and their case metrics alike
    assert computed == [SPEC.replace(time_steps=10)]
    assert first.spike_match == second.spike_match == 1.0
    assert first.samples["case"] == second.samples["case"]
    assert len(list((work / REFERENCES_DIR).glob("*.npz"))) == 1
    # another network has its own
    run_job(_job(work, "fake-ok", SPEC.replace(neurons=6)))
    assert len(computed) == 2


def test_a_case_alone_computes_it_once_for_its_check_and_its_metrics(
        fake_plugins: Path, tmp_path: Path, computed: list[NetworkSpec]) -> None:
    job = Job(adapter="fake-ok", variant="default", device="cpu", workload=LinearLif(SPEC),
              measure=FAST, result_path="")
    assert run_job(job).status == "ok"
    assert len(computed) == 1


def test_the_kept_reference_equals_the_computed_one(tmp_path: Path) -> None:
    spec = SPEC.replace(layers=2, dtype="bfloat16")
    fresh = LinearLif(spec).reference(make_case_data(spec))
    verify.cached_reference(LinearLif(spec), tmp_path)
    kept = verify.cached_reference(LinearLif(spec), tmp_path)
    for a, b in zip((*fresh.spikes, *fresh.grad_weights, *fresh.grad_biases),
                    (*kept.spikes, *kept.grad_weights, *kept.grad_biases), strict=True):
        np.testing.assert_array_equal(a, b)


class _Boom:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        import os

        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("damage", ["garbage", "other-spec", "pickle", "object-array"])
def test_a_damaged_or_foreign_reference_is_computed_again(
        tmp_path: Path, computed: list[NetworkSpec], damage: str) -> None:
    verify.cached_reference(LinearLif(SPEC), tmp_path)
    (path,) = tmp_path.glob("*.npz")
    marker = tmp_path / "ran"
    if damage == "garbage":
        path.write_bytes(b"not an npz")
    elif damage == "other-spec":
        other = tmp_path / "other"
        verify.cached_reference(LinearLif(SPEC.replace(seed=SPEC.seed + 1)), other)
        (other_path,) = other.glob("*.npz")
        other_path.replace(path)
    elif damage == "pickle":
        path.write_bytes(pickle.dumps(_Boom(marker)))
    else:
        with open(path, "wb") as handle:
            np.savez(handle, spec_json=np.array(SPEC.to_json()),
                     spikes_0=np.array([_Boom(marker)], dtype=object))
    before = len(computed)
    result = verify.cached_reference(LinearLif(SPEC), tmp_path)
    assert len(computed) == before + 1
    assert not marker.exists()
    expected = LinearLif(SPEC).reference(make_case_data(SPEC))
    np.testing.assert_array_equal(result.output_spikes, expected.output_spikes)
    # and replaced: the next read needs no computation
    verify.cached_reference(LinearLif(SPEC), tmp_path)
    assert len(computed) == before + 2  # (the line above computed `expected`)

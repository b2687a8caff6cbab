"""The workload seam: the Linear+LIF kind keeps every stored identity, its registry, its data,
reference, knobs and gradients by name."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from snnbench.adapter import Capabilities
from snnbench.workload import (
    DEFAULT_KIND,
    LinearLif,
    LinearLifKnobs,
    WorkloadError,
    kinds,
    workload_class,
    workload_from_dict,
)
from snnbench.workload.linear_lif.spec import NetworkSpec, make_case_data
from tests.conftest import REPO

COMMITTED = sorted((REPO / "results").glob("**/cases/*.json"))


def test_committed_results_are_there_to_check() -> None:
    assert len(COMMITTED) > 100


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(REPO / "results")))
def test_every_committed_case_keeps_its_id(path: Path) -> None:
    # the case_id written in the file, the one in its name, and the workload's are one
    data = json.loads(path.read_text())
    workload = workload_from_dict(data["spec"], data.get("kind"))
    assert isinstance(workload, LinearLif)
    assert workload.case_id == data["case_id"] == NetworkSpec.from_dict(data["spec"]).case_id
    assert path.stem.split("--")[3] == workload.case_id


def test_every_committed_summary_names_cases_of_its_records() -> None:
    checked = 0
    for summary in sorted((REPO / "results").glob("**/summary.parquet")):
        ids = {json.loads(p.read_text())["case_id"]
               for p in (summary.parent / "cases").glob("*.json")}
        if not ids:
            continue
        assert set(pd.read_parquet(summary, columns=["case_id"])["case_id"]) <= ids, summary
        checked += 1
    assert checked


def test_the_registry_knows_linear_lif_and_reads_untagged_parameters_as_it() -> None:
    assert DEFAULT_KIND == "linear-lif" and "linear-lif" in kinds()
    assert workload_class("linear-lif") is LinearLif
    spec = NetworkSpec(neurons=8, time_steps=3)
    workload = LinearLif(spec)
    assert workload_from_dict(spec.to_dict()) == workload
    assert workload_from_dict(workload.to_dict()) == workload
    assert workload.to_dict()["kind"] == "linear-lif"
    assert workload.case_id == spec.case_id and workload.label == "float32 n=8 B=16 T=3 L=1 subtract"
    assert workload.size == 8 and workload.size_param == "neurons"
    assert {"neurons", "reset", "surrogate", "matmul_precision"} <= set(workload.columns)
    assert set(workload.columns) == set(workload.params())


def test_an_unknown_kind_or_field_is_one_line() -> None:
    with pytest.raises(WorkloadError, match="unknown workload kind 'transformer'"):
        workload_from_dict({"neurons": 8}, "transformer")
    with pytest.raises(ValueError, match="unknown network field"):
        workload_from_dict({"kind": "linear-lif", "nerons": 8})


def test_data_reference_and_operations() -> None:
    spec = NetworkSpec(neurons=6, batch_size=2, time_steps=5, layers=2, dtype="bfloat16")
    workload = LinearLif(spec)
    data = workload.make_data()
    np.testing.assert_array_equal(data.inputs, make_case_data(spec).inputs)
    ours, theirs = workload.reference(data), LinearLif(data.spec).reference(data)
    for a, b in zip(ours.grad_weights + ours.spikes, theirs.grad_weights + theirs.spikes,
                    strict=True):
        np.testing.assert_array_equal(a, b)
    assert workload.operations() == 6 * 6 * 2 * 5 * 2
    assert workload.shortened(3).spec.time_steps == 3
    assert workload.shortened(50).spec.time_steps == 5
    metrics = workload.case_metrics()
    assert set(metrics) == {"firing_rate", "synops_per_step"}


def test_gradients_by_name_round_trip_and_name_what_is_wrong() -> None:
    workload = LinearLif(NetworkSpec(neurons=4, layers=2))
    assert workload.parameter_names() == ("layers.0.weight", "layers.0.bias",
                                          "layers.1.weight", "layers.1.bias")
    w = [np.full((4, 4), i, np.float32) for i in range(2)]
    b = [np.full(4, 10 + i, np.float32) for i in range(2)]
    named = workload.gradients_by_name(w, b)
    back_w, back_b = workload.gradients_in_order(named)
    for x, y in zip(back_w + back_b, w + b, strict=True):
        np.testing.assert_array_equal(x, y)
    del named["layers.1.bias"]
    named["layer1.bias"] = b[1]
    with pytest.raises(ValueError, match=r"missing layers\.1\.bias; unknown layer1\.bias"):
        workload.gradients_in_order(named)


@pytest.mark.parametrize("change", [
    {"dtype": "bfloat16"}, {"reset": "zero"}, {"surrogate": "atan"}, {"detach_reset": False},
    {"bias": False}, {"input_kind": "bernoulli"}, {"matmul_precision": "amp-bf16"},
    {"layers": 3},
])
def test_knobs_say_what_the_old_capabilities_said(change: dict[str, object]) -> None:
    narrow = dict(resets=("subtract",), detach_reset=(True,), bias=(True,),
                  input_kinds=("gaussian",), max_layers=2)
    spec = NetworkSpec(neurons=4).replace(**change)
    old = Capabilities(devices=("cpu",), **narrow).reason_unsupported(spec, "cpu")  # type: ignore[arg-type]
    assert old is not None
    assert LinearLifKnobs(**narrow).reason_unsupported(LinearLif(spec)) == old  # type: ignore[arg-type]


def test_a_case_is_said_in_one_place_the_workloads_words() -> None:
    from snnbench.records import schema

    row = {"device": "cpu", "dtype": "float32", "neurons": 64.0, "batch_size": 4,
           "time_steps": np.int64(20), "layers": 1, "reset": "subtract", "network": ""}
    assert LinearLif.row_label(row) == "cpu float32 n=64 B=4 T=20 L=1 subtract"
    assert schema.case_text(row) == "cpu float32 n=64 B=4 T=20 L=1 subtract"
    assert schema.case_text({**row, "network": "amp-bf16"}) == (
        "cpu float32 n=64 B=4 T=20 L=1 subtract · amp-bf16")
    assert LinearLif.row_label(row, ["neurons", "reset"]) == "n=64 subtract"
    assert LinearLif.row_label({**row, "dtype": ""}, ["dtype", "neurons"]) == "n=64"
    assert schema.group_title(pd.Series(row)) == (
        "cpu, float32, B=4, T=20, layers=1, reset=subtract")
    # a case not yet in a table reads as its row will, less the device
    assert LinearLif(NetworkSpec(neurons=64, batch_size=4, time_steps=20)).label == (
        "float32 n=64 B=4 T=20 L=1 subtract")
    assert LinearLif(NetworkSpec(neurons=64, matmul_precision="amp-bf16")).label == (
        "float32 n=64 B=16 T=500 L=1 subtract · amp-bf16")


def test_a_compared_pair_names_its_network() -> None:
    # two networks of one size are two cases in compare's words too
    from snnbench.gate.verdict import Pair
    from snnbench.records.schema import CASE_KEY

    case = {"adapter": "torch", "variant": "default", "device": "cpu", "dtype": "float32",
            "neurons": 64, "batch_size": 4, "time_steps": 20, "layers": 1,
            "reset": "subtract", "environment": "", "network": "amp-bf16", "case_id": "x"}
    pair = Pair(key=tuple(case.get(k, "") for k in CASE_KEY), phase="step", metric="time_s",
                mark="unchanged")
    assert pair.case_text == "cpu float32 n=64 B=4 T=20 L=1 subtract · amp-bf16"


def test_a_stored_spec_is_wrapped_as_it_is() -> None:
    spec = NetworkSpec(neurons=8)
    assert LinearLif.from_stored(spec).spec is spec
    assert LinearLif.from_stored(spec.to_dict()) == LinearLif(spec)

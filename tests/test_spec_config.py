"""NetworkSpec validation, data generation and sweep configs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from snnbench.sweep.config import ConfigError, RunConfig, load_config
from snnbench.workload.linear_lif.spec import NetworkSpec, SpecError, make_case_data

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("field", "value"),
    [("neurons", 0), ("neurons", -4), ("batch_size", 0), ("time_steps", 0), ("dtype", "float8"),
     ("reset", "soft"), ("surrogate", "relu"), ("beta", 1.5), ("threshold", 0.0),
     ("matmul_precision", "fp8")],
)
def test_spec_rejects_impossible_values(field: str, value: object) -> None:
    with pytest.raises(SpecError, match=field):
        NetworkSpec(**{field: value})  # type: ignore[arg-type]


def test_spec_unknown_field_is_an_error() -> None:
    with pytest.raises(SpecError, match="neuron"):
        NetworkSpec.from_dict({"neuron": 4})


def test_case_id_depends_on_every_field() -> None:
    a = NetworkSpec(neurons=64)
    assert a.case_id == NetworkSpec(neurons=64).case_id
    assert a.case_id != a.replace(seed=1).case_id
    assert a.case_id != a.replace(detach_reset=False).case_id


def test_case_data_is_deterministic_and_framework_neutral() -> None:
    spec = NetworkSpec(neurons=16, batch_size=3, time_steps=5, layers=2)
    d1, d2 = make_case_data(spec), make_case_data(spec)
    assert d1.inputs.shape == (5, 3, 16) and d1.inputs.dtype == np.float32
    assert len(d1.weights) == 2 and d1.weights[0].shape == (16, 16)
    assert all(np.array_equal(a, b) for a, b in zip(d1.weights, d2.weights, strict=True))
    bound = 1 / np.sqrt(16)
    assert np.abs(d1.weights[0]).max() <= bound
    nobias = make_case_data(spec.replace(bias=False))
    assert not nobias.biases[0].any()
    spikes = make_case_data(spec.replace(input_kind="bernoulli", input_rate=0.5))
    assert set(np.unique(spikes.inputs)) <= {0.0, 1.0}


def test_shipped_configs_load() -> None:
    for name in ("default", "opennm-2024", "scaling", "ci-smoke", "fused-gpu"):
        config = load_config(REPO / "configs" / f"{name}.toml")
        assert config.cases()
    opennm = load_config(REPO / "configs" / "opennm-2024.toml")
    assert sorted({s.neurons for s in (w.spec for w in opennm.cases())}) == [512, 4096, 8192, 16384]
    assert {s.reset for s in (w.spec for w in opennm.cases())} == {"subtract", "zero"}
    # precision is an axis of the headline config (issue 31 A2)
    assert {s.matmul_precision for s in (w.spec for w in opennm.cases())} == {"strict", "tf32", "amp-bf16"}
    assert {(s.batch_size, s.time_steps, s.dtype) for s in (w.spec for w in opennm.cases())} == {(16, 500, "float32")}
    fused = load_config(REPO / "configs" / "fused-gpu.toml")
    assert {(s.neurons, s.dtype) for s in (w.spec for w in fused.cases())} == {
        (n, d) for n in (512, 1024, 2048, 4096, 8192, 16384) for d in ("float32", "bfloat16")
    }
    assert {(s.batch_size, s.time_steps, s.matmul_precision) for s in (w.spec for w in fused.cases())} == {
        (16, 500, "strict")
    }
    scaling = load_config(REPO / "configs" / "scaling.toml")
    assert len(scaling.cases()) == 7 + 5  # n sweep, then T sweep (n=4096,T=500 counted once)


def test_config_typos_are_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    for text, named in (("[run]\nrepeets = 3\n", "repeets"),
                        ("[network]\nneuron = 3\n", "neuron"),
                        ("[sweeep]\nneurons = [3]\n", "sweeep"),
                        ("[[sweep]]\nneurons = [0]\n", "neurons"),
                        ("not = [toml", "not valid TOML")):
        bad.write_text(text)
        with pytest.raises(ConfigError, match=named):
            load_config(bad)
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.toml")


def test_overrides_replace_sweep_fields() -> None:
    base = RunConfig.from_dict({"network": {"time_steps": 10},
                                "sweep": [{"neurons": [1, 2]}, {"neurons": [3], "time_steps": [5, 6]}]})
    assert len(base.cases()) == 4
    over = base.with_overrides({"repeats": 3}, {"neurons": [7], "time_steps": [9]})
    assert [(s.neurons, s.time_steps) for s in (w.spec for w in over.cases())] == [(7, 9)]
    assert over.run.repeats == 3
    with pytest.raises(ConfigError):
        base.with_overrides({"repeats": 0}, {})
    with pytest.raises(ConfigError):
        base.with_overrides({}, {"dtype": ["float64"]})


def test_round_trip_through_manifest_form() -> None:
    config = load_config(REPO / "configs" / "scaling.toml")
    again = RunConfig.from_dict(config.to_dict())
    assert [s.case_id for s in again.cases()] == [s.case_id for s in config.cases()]

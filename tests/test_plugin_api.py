"""The plugin API v2 (``snnbench.api``) and the one shim that keeps v1 plugins working: the
README's example adapter, unchanged, verifies through it; a plugin written against v2 (in
``examples/``) verifies natively; gradients come by parameter name."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import snnbench.api as api
from snnbench import plugin
from snnbench.adapter import Capabilities as CapabilitiesV1
from snnbench.adapter_shim import LegacyAdapter, as_v2, capabilities_v2, implementation
from snnbench.measure.verify import check_adapter
from snnbench.workload import LinearLif
from snnbench.workload.linear_lif.spec import NetworkSpec
from tests.conftest import REPO, run_cli

FIXTURE = Path(__file__).parent / "plugin_api"
README_EXAMPLE = REPO / "examples" / "snnbench-example-adapter" / "src" / "snnbench_example"
V2_EXAMPLE = REPO / "examples" / "snnbench-example-adapter-v2" / "src"
ENTRY_POINTS = """[snnbench.adapters]
numpy-loop = snnbench_readme_v1.adapter:NumpyLoopAdapter
numpy-stack = snnbench_example_v2.adapter:NumpyStackAdapter
"""


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Both example plugins discoverable here and in every worker (a dist-info of their entry
    points, and their sources on the path): the PYTHONPATH to give a subprocess."""
    import importlib

    info = tmp_path / "site" / "snnbench_plugin_api_examples-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: snnbench-plugin-api-examples\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    paths = [str(info.parent), str(FIXTURE), str(V2_EXAMPLE)]
    for path in paths:
        monkeypatch.syspath_prepend(path)
    pythonpath = os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", pythonpath)
    importlib.invalidate_caches()
    yield pythonpath


def test_the_fixture_is_the_readme_example_unchanged() -> None:
    # the v1 plugin under test is the README's example, byte for byte
    assert ((FIXTURE / "snnbench_readme_v1" / "adapter.py").read_bytes()
            == (README_EXAMPLE / "adapter.py").read_bytes())


def test_the_public_path_offers_the_v2_interface() -> None:
    assert api.Adapter is plugin.Adapter and api.Model is plugin.Model
    assert api.API_VERSION == 2
    for name in api.__all__:
        assert getattr(api, name) is not None
        obj = getattr(api, name)
        if isinstance(obj, type):
            assert obj.__doc__, f"{name} has no docstring"


def test_the_shim_turns_a_v1_adapter_into_v2(plugins: str) -> None:
    from snnbench_readme_v1.adapter import NumpyLoopAdapter

    legacy = NumpyLoopAdapter()
    adapter = as_v2(legacy)
    assert isinstance(adapter, LegacyAdapter) and adapter.legacy is legacy
    assert as_v2(adapter) is adapter and implementation(adapter) is legacy
    assert (adapter.name, adapter.framework, adapter.variants) == ("numpy-loop", "numpy",
                                                                  ("default",))
    caps = adapter.capabilities("default")
    assert set(caps.workloads) == {"linear-lif"} and caps.devices == ("cpu",)
    workload = LinearLif(NetworkSpec(neurons=8, batch_size=2, time_steps=12, input_std=2.0))
    model = adapter.build(workload, workload.make_data(), "cpu", "default")
    model.backward(model.forward())
    grads = model.gradients()
    assert sorted(grads) == ["layers.0.bias", "layers.0.weight"]
    assert grads["layers.0.weight"].shape == (8, 8)
    # the v1 rule, unchanged, through the shim: a 2-layer case is skipped with its reason
    two = LinearLif(workload.spec.replace(layers=2))
    assert adapter.reason_skipped(two, "cpu", "default") == "layers=2 not supported (at most 1)"
    assert adapter.reason_skipped(workload, "cuda", "default") == (
        "device 'cuda' not supported (supports: cpu)")


def test_converted_capabilities_skip_what_v1_skipped() -> None:
    old = CapabilitiesV1(devices=("cpu",), resets=("zero",), max_layers=2)
    new = capabilities_v2(old)
    for spec in (NetworkSpec(), NetworkSpec(reset="zero", layers=3),
                 NetworkSpec(reset="zero", dtype="bfloat16"), NetworkSpec(reset="zero")):
        for device in ("cpu", "cuda"):
            assert new.reason_unsupported(LinearLif(spec), device) == (
                old.reason_unsupported(spec, device))
    assert new.to_dict()["resets"] == ("zero",)  # list --json keeps v1's keys
    assert new.to_dict()["workloads"]["linear-lif"]["max_layers"] == 2


def test_the_v2_example_matches_the_reference_at_any_depth(plugins: str) -> None:
    from snnbench_example_v2.adapter import NumpyStackAdapter

    adapter = NumpyStackAdapter()
    for layers, reset, detach in ((1, "subtract", True), (3, "zero", False)):
        spec = NetworkSpec(neurons=12, batch_size=2, time_steps=20, layers=layers, reset=reset,
                           detach_reset=detach, surrogate="atan", surrogate_slope=3.0,
                           input_std=3.0)
        assert adapter.reason_skipped(LinearLif(spec), "cpu", "default") is None
        eq, _ = check_adapter(adapter, "default", spec, "cpu")
        assert eq.spike_match == 1.0 and eq.grad_cosine > 0.9999
        assert eq.bias_grad_cosine > 0.9999 and eq.grad_max_rel_err < 1e-4


def test_gradients_under_the_wrong_names_are_the_adapters_error(plugins: str) -> None:
    from snnbench_example_v2.adapter import NumpyStackAdapter, NumpyStackModel

    class Misnamed(NumpyStackModel):
        def gradients(self) -> dict[str, np.ndarray]:
            return {k.replace("layers.", "layer"): v for k, v in super().gradients().items()}

    class MisnamedAdapter(NumpyStackAdapter):
        def build(self, workload, data, device, variant):  # type: ignore[no-untyped-def]
            return Misnamed(workload, data)

    with pytest.raises(ValueError, match=r"missing layers\.0\.weight, layers\.0\.bias"):
        check_adapter(MisnamedAdapter(), "default", NetworkSpec(neurons=4, time_steps=3), "cpu")


def test_both_plugins_verify_through_the_command(plugins: str, tmp_path: Path) -> None:
    # the worker path: `snnbench verify` discovers both, runs each check in a worker process
    # (v1 through the shim, v2 natively) and records ok
    done = run_cli("verify", "--adapters", "numpy-loop,numpy-stack", "--neurons", "16",
                   "--steps", "20", "--batch-size", "2", "--layers", "1",
                   env={"PYTHONPATH": plugins}, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in ("numpy-loop", "numpy-stack"):
        assert name in done.stdout
    assert "mismatch" not in done.stdout and "error" not in done.stdout


def test_both_plugins_run_and_record_their_kind(plugins: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = run_cli("run", "--adapters", "numpy-loop,numpy-stack", "--neurons", "8",
                   "--steps", "6", "--batch-size", "2", "--layers", "2", "--repeats", "2",
                   "--threads", "1", "--out", str(out), env={"PYTHONPATH": plugins}, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = {}
    for path in (out / "cases").glob("*.json"):
        data = json.loads(path.read_text())
        records[data["adapter"]] = data
    assert records["numpy-stack"]["status"] == "ok"
    assert records["numpy-stack"]["grad_cosine"] > 0.9999
    assert records["numpy-loop"]["status"] == "skipped"  # v1's max_layers=1, via the shim
    assert records["numpy-loop"]["message"] == "layers=2 not supported (at most 1)"
    assert {r["kind"] for r in records.values()} == {"linear-lif"}

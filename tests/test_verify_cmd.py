"""`snnbench verify`: the table, exit codes and the dump format round trip."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from snnbench.workload.linear_lif.reference import run_reference
from snnbench.workload.linear_lif.spec import CaseData, NetworkSpec
from tests.conftest import FAKE_PLUGIN_DIR, run_cli


def _env() -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(FAKE_PLUGIN_DIR), os.environ.get("PYTHONPATH", "")])}


def test_verify_table_dump_and_exit_codes(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    ok = run_cli("verify", "--adapters", "torch,fake-subtract-only", "--neurons", "16,32",
                 "--steps", "12", "--dump", str(dump), env=_env())
    assert ok.returncode == 0, ok.stderr + ok.stdout
    assert "torch" in ok.stdout and "skipped" in ok.stdout  # zero reset refused by the fake
    files = sorted(p.name for p in dump.iterdir() if not p.name.startswith("."))
    assert files == ["fake-subtract-only-default-subtract.npz", "torch-default-subtract.npz",
                     "torch-default-zero.npz"]
    with np.load(dump / "torch-default-zero.npz") as z:
        spec = NetworkSpec.from_dict(json.loads(str(z["spec_json"])))
        assert (spec.neurons, spec.time_steps, spec.reset) == (32, 12, "zero")  # largest n
        assert z["input"].shape == (12, 4, 32) and z["spikes"].shape == (12, 4, 32)
        assert z["weight"].shape == (32, 32) and z["bias"].shape == (32,)
        assert z["grad_weight"].shape == (32, 32) and z["grad_bias"].shape == (32,)
        # anyone can re-check the adapter from the dump alone
        data = CaseData(inputs=z["input"], weights=(z["weight"],), biases=(z["bias"],), spec=spec)
        ref = run_reference(data)
        assert np.array_equal(ref.output_spikes, z["spikes"])
        np.testing.assert_allclose(ref.grad_weights[0], z["grad_weight"], rtol=1e-4, atol=1e-4)

    bad = run_cli("verify", "--adapters", "fake-wrong", "--neurons", "16", "--steps", "12",
                  "--reset", "subtract", env=_env())
    assert bad.returncode == 1 and "mismatch" in bad.stdout


def test_verify_bad_input_exits_2() -> None:
    proc = run_cli("verify", "--adapters", "nosuch")
    assert proc.returncode == 2 and "unknown adapter" in proc.stderr
    proc = run_cli("verify", "--reset", "soft")
    assert proc.returncode == 2 and "reset must be" in proc.stderr


def test_verify_uses_the_requested_network(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    proc = run_cli("verify", "--adapters", "torch", "--neurons", "8", "--steps", "6",
                   "--reset", "zero", "--surrogate", "sigmoid", "--surrogate-slope", "4",
                   "--detach-reset", "false", "--dump", str(dump))
    assert proc.returncode == 0, proc.stderr
    with np.load(dump / "torch-default-zero.npz") as z:
        spec = NetworkSpec.from_dict(json.loads(str(z["spec_json"])))
    assert (spec.surrogate, spec.surrogate_slope, spec.detach_reset) == ("sigmoid", 4.0, False)

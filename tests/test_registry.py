"""Entry-point discovery with fake distributions, including broken plugins."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from snnbench import registry
from snnbench.adapter import AdapterUnavailable


def _ep(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=value, group=registry.ENTRY_POINT_GROUP)


def test_broken_plugins_do_not_stop_discovery(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = [
        _ep("torch", "snnbench.adapters.torch_ref:TorchAdapter"),
        _ep("gone", "no_such_module_xyz:Adapter"),
        _ep("notadapter", "snnbench.store.stats:summarize"),
        _ep("misnamed", "snnbench.adapters.torch_ref:TorchAdapter"),
    ]
    monkeypatch.setattr(registry, "_entry_points", lambda: eps)
    found = registry.discover()
    assert list(found) == ["gone", "misnamed", "notadapter", "torch"]
    assert found["torch"].adapter_class is not None
    assert "No module named 'no_such_module_xyz'" in found["gone"].error
    assert "not an snnbench Adapter" in found["notadapter"].error
    assert "declares name 'torch'" in found["misnamed"].error
    with pytest.raises(AdapterUnavailable, match="no_such_module_xyz"):
        found["gone"].create()


def test_real_entry_points_from_a_dist_info(fake_plugins: Path) -> None:
    found = registry.discover()
    assert found["fake-ok"].adapter_class is not None
    assert found["fake-broken"].adapter_class is None
    assert "snnbench_fake_adapters_broken" in found["fake-broken"].error
    assert "torch" in found  # the built-in adapters are still there


def test_importing_the_harness_imports_no_benchmarked_library() -> None:
    import subprocess
    import sys

    code = (
        "import sys, snnbench.cli, snnbench.sweep.run, snnbench.measure.worker, snnbench.registry, "
        "snnbench.sweep.verify_cmd\n"
        "from snnbench.registry import discover\n"
        "discover()\n"
        "bad = [m for m in ('torch', 'jax', 'snntorch', 'norse', 'spikingjelly', 'sinabs', "
        "'lava', 'spyx', 'haiku', 'rockpool', 'triton') if m in sys.modules]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

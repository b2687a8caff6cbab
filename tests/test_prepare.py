"""First-use work in ``check_variant`` (snnbench/adapters/_prepare.py): the tiny warm-up network, how a
backend that cannot run becomes ``unavailable``, lava-dl's ninja and JIT build, and the EXODUS
adapters. The CUDA paths are exercised with fakes on the CPU; they have never run on a GPU."""

from __future__ import annotations

import os
import stat
import sysconfig
import types
from pathlib import Path
from typing import Any

import pytest

from snnbench.adapter import AdapterUnavailable, Capabilities, Model
from snnbench.adapters import _prepare, lava_dl, rockpool, sinabs_exodus, spikingjelly
from snnbench.adapters.torch_ref import TorchAdapter
from snnbench.workload.linear_lif.spec import CaseData, NetworkSpec


def test_warm_up_spec_takes_what_the_adapter_supports() -> None:
    spec = _prepare.warm_up_spec(Capabilities())
    assert (spec.neurons, spec.batch_size, spec.time_steps) == (32, 2, 8)
    assert (spec.dtype, spec.reset, spec.surrogate, spec.surrogate_slope, spec.detach_reset) == (
        "float32", "subtract", "fast_sigmoid", 4.0, False)  # the default surrogate list
    lava = _prepare.warm_up_spec(lava_dl.LavaDlAdapter().capabilities("default"))
    assert (lava.reset, lava.surrogate) == ("zero", "sigmoid")
    sj = _prepare.warm_up_spec(spikingjelly.SpikingJellyAdapter().capabilities("triton"))
    assert (sj.surrogate, sj.dtype) == ("sigmoid", "float32")
    exodus = _prepare.warm_up_spec(sinabs_exodus.SinabsExodusAdapter().capabilities("default"))
    assert (exodus.reset, exodus.detach_reset) == ("subtract", False)
    bf16_only = _prepare.warm_up_spec(Capabilities(dtypes=("bfloat16",), detach_reset=(True,)))
    assert (bf16_only.dtype, bf16_only.detach_reset) == ("bfloat16", True)


class Recording(TorchAdapter):
    """The torch reference adapter, recording builds; optionally failing or skipping."""

    def __init__(self, fail: BaseException | None = None, skip: bool = False) -> None:
        self.fail = fail
        self.skip = skip
        self.built: list[NetworkSpec] = []

    def reason_skipped(self, spec: NetworkSpec, device: str, variant: str) -> str | None:
        return "no" if self.skip else super().reason_skipped(spec, device, variant)

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        self.built.append(spec)
        if self.fail is not None:
            raise self.fail
        return super().build(spec, data, device, variant)


def test_warm_up_runs_a_tiny_network() -> None:
    adapter = Recording()
    _prepare.warm_up(adapter, "default", "cpu", "the torch loop")
    assert [s.neurons for s in adapter.built] == [32]


def test_a_backend_that_cannot_run_is_unavailable_with_its_error() -> None:
    error = RuntimeError("CUDA error: no kernel image is available for execution on the device\n"
                         "CUDA kernel errors might be asynchronously reported")
    with pytest.raises(AdapterUnavailable) as caught:
        _prepare.warm_up(Recording(fail=error), "default", "cuda", "sinabs-exodus")
    assert str(caught.value) == (
        "sinabs-exodus failed a tiny forward/backward on cuda: RuntimeError: CUDA error: no "
        "kernel image is available for execution on the device")
    with pytest.raises(AdapterUnavailable, match=r"^as is$"):  # already a reason: kept as it is
        _prepare.warm_up(Recording(fail=AdapterUnavailable("as is")), "default", "cuda", "x")


def test_a_refused_warm_up_network_is_not_built() -> None:
    adapter = Recording(skip=True)
    _prepare.warm_up(adapter, "default", "cuda", "x")
    assert adapter.built == []


@pytest.mark.parametrize("cls", [sinabs_exodus.SinabsExodusAdapter, rockpool.RockpoolExodusAdapter])
def test_exodus_adapters_warm_up_on_cuda_only(monkeypatch: pytest.MonkeyPatch,
                                              cls: type[Any]) -> None:
    calls: list[tuple[str, str]] = []

    def fake(adapter: Any, variant: str, device: str, what: str) -> None:
        calls.append((device, what))
        raise AdapterUnavailable(f"{what} failed a tiny forward/backward on {device}: boom")

    monkeypatch.setattr(_prepare, "warm_up", fake)
    cls().check_variant("default", "cpu")  # the CPU case is a static skip; nothing to prepare
    assert calls == []
    with pytest.raises(AdapterUnavailable) as caught:
        cls().check_variant("default", "cuda")
    assert calls and calls[0][0] == "cuda"
    if cls is sinabs_exodus.SinabsExodusAdapter:
        assert str(caught.value).endswith(
            "(rebuild it for this GPU: make gpu-setup GPU_ARCHS=<major.minor>)")


def _fake_slayer(build: Any) -> types.SimpleNamespace:
    class Accelerated:
        @property
        def leaky_integrator(self) -> Any:
            return build()

    dynamics = types.SimpleNamespace(leaky_integrator=types.SimpleNamespace(
        Accelerated=Accelerated()))
    return types.SimpleNamespace(neuron=types.SimpleNamespace(dynamics=dynamics))


def test_lava_dl_compiles_its_extension_then_warms_up(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    monkeypatch.setattr(lava_dl, "import_slayer",
                        lambda: _fake_slayer(lambda: events.append("jit")))
    monkeypatch.setattr(_prepare, "ensure_ninja_on_path", lambda: "/env/bin/ninja")
    monkeypatch.setattr(_prepare, "warm_up",
                        lambda adapter, variant, device, what: events.append(f"warm {what}"))
    adapter = lava_dl.LavaDlAdapter()
    adapter.check_variant("default", "cpu")
    assert events == []
    adapter.check_variant("default", "cuda")
    assert events == ["jit", "warm lava-dl's CUDA neuron"]


def test_lava_dl_without_ninja_or_with_a_failed_build_is_unavailable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise RuntimeError("Error building extension 'dynamics'")

    monkeypatch.setattr(lava_dl, "import_slayer", lambda: _fake_slayer(broken))
    monkeypatch.setattr(_prepare, "ensure_ninja_on_path", lambda: None)
    with pytest.raises(AdapterUnavailable, match="ninja, which is not installed"):
        lava_dl.LavaDlAdapter().check_variant("default", "cuda")
    monkeypatch.setattr(_prepare, "ensure_ninja_on_path", lambda: "/usr/bin/ninja")
    with pytest.raises(AdapterUnavailable, match=r"could not JIT-compile.*'dynamics'"):
        lava_dl.LavaDlAdapter().check_variant("default", "cuda")


def test_ninja_from_the_environments_bin_goes_on_path(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"scripts": str(bin_dir)})
    monkeypatch.setattr(_prepare.sys, "executable", str(tmp_path / "python"))
    assert _prepare.ensure_ninja_on_path() is None
    ninja = bin_dir / "ninja"
    ninja.write_text("#!/bin/sh\n")
    ninja.chmod(ninja.stat().st_mode | stat.S_IXUSR)
    assert _prepare.ensure_ninja_on_path() == str(ninja)
    assert os.environ["PATH"] == f"{bin_dir}{os.pathsep}{empty}"
    assert _prepare.ensure_ninja_on_path() == str(ninja)  # found on PATH now: unchanged
    assert os.environ["PATH"] == f"{bin_dir}{os.pathsep}{empty}"

"""snnbench.host.nvml: the one way into NVML, and what each caller makes of a machine without it."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from snnbench.executors.base import ExecutorError
from snnbench.executors.placement import list_gpus
from snnbench.host import environment, nvml, preflight


class _NoDriver:
    """pynvml on a machine whose NVIDIA driver is not loaded."""

    shutdowns = 0

    def nvmlInit(self) -> None:
        raise RuntimeError("Driver Not Loaded")

    def nvmlShutdown(self) -> None:
        type(self).shutdowns += 1


def test_a_missing_package_and_a_missing_driver_are_told_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with pytest.raises(nvml.NvmlUnavailable) as missing:
        nvml.load()
    assert missing.value.missing
    with pytest.raises(nvml.NvmlUnavailable) as no_driver:
        nvml.init(_NoDriver())
    assert not no_driver.value.missing and "Driver Not Loaded" in str(no_driver.value)


def test_a_session_shuts_nvml_down_even_when_the_block_raises() -> None:
    class Fake(_NoDriver):
        def nvmlInit(self) -> None:
            pass

    Fake.shutdowns = 0
    with pytest.raises(ValueError), nvml.session(Fake()):
        raise ValueError("inside")
    assert Fake.shutdowns == 1


def test_each_caller_turns_no_nvml_into_its_own_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml, "load", lambda: _NoDriver())
    assert environment.nvidia_gpus() == []
    assert preflight.nvml_compute_processes() == []
    with pytest.raises(ExecutorError, match="NVML sees no NVIDIA GPU here"):
        list_gpus()

    def not_installed() -> Any:
        raise nvml.NvmlUnavailable("nvidia-ml-py (pynvml) is not installed", missing=True)

    monkeypatch.setattr(nvml, "load", not_installed)
    with pytest.raises(ExecutorError, match="needs NVML"):
        list_gpus()

"""Fault-injecting adapters for the harness tests, registered through a real dist-info.

They compute the canonical network with the NumPy reference (so they pass verification) and
then misbehave in a chosen way while being measured.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from snnbench.adapter import Adapter, AdapterUnavailable, Capabilities, Model
from snnbench.workload.linear_lif.reference import run_reference


class NumpyModel(Model):
    def __init__(self, data: Any, fault: str = "", sleep_fwd: float = 0.0, sleep_bwd: float = 0.0):
        self.result = run_reference(data)
        self.fault = fault
        self.sleep_fwd = sleep_fwd
        self.sleep_bwd = sleep_bwd
        self.grads: tuple[list[Any], list[Any]] | None = None

    def forward(self) -> Any:
        if self.sleep_fwd:
            time.sleep(self.sleep_fwd)
        if self.fault == "raises":
            raise RuntimeError("injected failure in forward")
        if self.fault == "abort":
            os.abort()
        if self.fault == "hang":
            time.sleep(3600)
        if self.fault == "memoryerror":
            raise MemoryError("injected: cannot allocate")
        spikes = self.result.output_spikes
        if self.fault == "shape":
            return spikes[:, :, :-1]
        if self.fault == "nan":
            return np.full_like(spikes, np.nan)
        if self.fault == "wrong":
            return np.roll(spikes, 1, axis=0)
        return spikes

    def backward(self, handle: Any) -> None:
        if self.sleep_bwd:
            time.sleep(self.sleep_bwd)
        weights = list(self.result.grad_weights)
        if self.fault == "wrong-grad":
            # right spikes, wrong gradients: a surrogate planted on purpose (issue 21, item 16)
            weights = [np.random.default_rng(1).standard_normal(w.shape).astype(w.dtype)
                       for w in weights]
        if self.fault == "wrong-deep":
            # the hidden layers' gradients wrong, the last layer's right: only a network of
            # two or more layers shows it (issue 21, item 17)
            weights = [np.random.default_rng(1).standard_normal(w.shape).astype(w.dtype)
                       for w in weights[:-1]] + weights[-1:]
        self.grads = (weights, list(self.result.grad_biases))

    def zero_grad(self) -> None:
        self.grads = None

    def synchronize(self) -> None:
        pass

    def spikes(self, handle: Any) -> Any:
        return np.asarray(handle, dtype=np.float32)

    def gradients(self) -> tuple[list[Any], list[Any]]:
        assert self.grads is not None
        return self.grads


class _Base(Adapter):
    library = "numpy"
    framework = "numpy"
    fault = ""

    def capabilities(self, variant: str) -> Capabilities:
        return Capabilities(devices=("cpu",))

    def build(self, spec: Any, data: Any, device: str, variant: str) -> Model:
        return NumpyModel(data, self.fault)


class OkAdapter(_Base):
    name = "fake-ok"


class LibAdapter(_Base):
    """Its library, ``snnbench-fakelib``, is installed only in library environments that tests
    build from wheels they make (``fake-lib@1.0``)."""

    name = "fake-lib"
    library = "snnbench-fakelib"
    module = "snnbench_fakelib"


class SleepAdapter(_Base):
    """Known cost: forward sleeps 20 ms, backward 30 ms, both times SNNBENCH_FAKE_SLEEP_SCALE
    (default 1: a true slow-down for the regression gate's tests)."""

    name = "fake-sleep"

    def build(self, spec: Any, data: Any, device: str, variant: str) -> Model:
        scale = float(os.environ.get("SNNBENCH_FAKE_SLEEP_SCALE", "1"))
        return NumpyModel(data, sleep_fwd=0.02 * scale, sleep_bwd=0.03 * scale)


class ToyAdapter(_Base):
    """Its library, ``snnbench-toylib`` (wheels made by tests/test_gate.py), does the forward's
    work: ``snnbench_toylib.work()``, whose cost a test can plant a regression in."""

    name = "fake-toy"
    library = "snnbench-toylib"
    module = "snnbench_toylib"

    def build(self, spec: Any, data: Any, device: str, variant: str) -> Model:
        import snnbench_toylib

        model = NumpyModel(data)
        plain = model.forward

        def forward() -> Any:
            snnbench_toylib.work()
            return plain()

        model.forward = forward  # type: ignore[method-assign]
        return model


class TorchWorkAdapter(_Base):
    """A torch adapter (counted by ``run --instructions``) of known work: the reference's
    spikes, plus 20 torch matmuls (B, n) @ (n, n) in forward and 20 in backward, times
    SNNBENCH_FAKE_WORK_SCALE rounded (1.05: 21 of each, 5 % more work to plant)."""

    name = "fake-torch-work"
    library = "torch"
    framework = "torch"

    def capabilities(self, variant: str) -> Capabilities:
        from snnbench.workload.linear_lif.neuron import SURROGATES

        return Capabilities(devices=("cpu",), surrogates=SURROGATES)

    def build(self, spec: Any, data: Any, device: str, variant: str) -> Model:
        import torch

        reps = round(20 * float(os.environ.get("SNNBENCH_FAKE_WORK_SCALE", "1")))
        x = torch.ones(spec.batch_size, spec.neurons)
        w = torch.full((spec.neurons, spec.neurons), 1.0 / spec.neurons)
        model = NumpyModel(data)
        plain_forward, plain_backward = model.forward, model.backward

        def work() -> None:
            y = x
            for _ in range(reps):
                y = y @ w

        def forward() -> Any:
            work()
            return plain_forward()

        def backward(handle: Any) -> None:
            work()
            plain_backward(handle)

        model.forward = forward  # type: ignore[method-assign]
        model.backward = backward  # type: ignore[method-assign]
        return model


class RaisesAdapter(_Base):
    name = "fake-raises"
    fault = "raises"


class AbortAdapter(_Base):
    name = "fake-abort"
    fault = "abort"


class HangAdapter(_Base):
    name = "fake-hang"
    fault = "hang"


class MemoryErrorAdapter(_Base):
    name = "fake-memoryerror"
    fault = "memoryerror"


class WrongShapeAdapter(_Base):
    name = "fake-shape"
    fault = "shape"


class NaNAdapter(_Base):
    name = "fake-nan"
    fault = "nan"


class WrongSpikesAdapter(_Base):
    """Spikes one step late: must be caught as a mismatch before timing."""

    name = "fake-wrong"
    fault = "wrong"


class WrongGradientAdapter(_Base):
    """Exact spikes, unrelated weight gradients, and it declares exact gradients: must be a
    mismatch before timing, as in ``snnbench verify``."""

    name = "fake-wrong-grad"
    fault = "wrong-grad"


class WrongDeepAdapter(_Base):
    """Right on one layer, wrong hidden-layer gradients on more (issue 21, item 17)."""

    name = "fake-wrong-deep"
    fault = "wrong-deep"


class AlwaysBiasAdapter(_Base):
    """Adds a bias even to a bias-free network: right only while the spec has a bias."""

    name = "fake-always-bias"

    def build(self, spec: Any, data: Any, device: str, variant: str) -> Model:
        from snnbench.workload.linear_lif.spec import make_case_data

        return NumpyModel(make_case_data(spec.replace(bias=True)))


class MissingAdapter(_Base):
    name = "fake-missing"
    library = "definitely-not-installed-lib"

    def version(self) -> str:
        raise AdapterUnavailable("definitely-not-installed-lib is not installed")


class SubtractOnlyAdapter(_Base):
    name = "fake-subtract-only"

    def capabilities(self, variant: str) -> Capabilities:
        return Capabilities(devices=("cpu",), resets=("subtract",))


class SlowPrepareAdapter(_Base):
    """First-use work (e.g. an extension build) of ``SNNBENCH_FAKE_PREPARE_S`` seconds."""

    name = "fake-slow-prepare"

    def check_variant(self, variant: str, device: str) -> None:
        time.sleep(float(os.environ.get("SNNBENCH_FAKE_PREPARE_S", "2")))


class SlowAdapter(_Base):
    """Forward sleeps ``SNNBENCH_FAKE_SLOW_S`` seconds (default 0.05): a case to interrupt."""

    name = "fake-slow"

    def build(self, spec: Any, data: Any, device: str, variant: str) -> Model:
        return NumpyModel(data, sleep_fwd=float(os.environ.get("SNNBENCH_FAKE_SLOW_S", "0.05")))


class ProbeAdapter(_Base):
    """Runs on "cpu" and "cuda" (NumPy either way) and writes where its worker was placed
    (CPU affinity, visible GPUs, thread variables) to ``$SNNBENCH_FAKE_PROBE_DIR/<key>.json``."""

    name = "fake-probe"

    def capabilities(self, variant: str) -> Capabilities:
        return Capabilities(devices=("cpu", "cuda"))

    def build(self, spec: Any, data: Any, device: str, variant: str) -> Model:
        import json

        folder = os.environ.get("SNNBENCH_FAKE_PROBE_DIR")
        if folder:
            seen = {
                "pid": os.getpid(),
                "neurons": spec.neurons,
                "device": device,
                "affinity": sorted(os.sched_getaffinity(0)),
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "cuda_device_order": os.environ.get("CUDA_DEVICE_ORDER"),
                "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                "start": time.time(),
            }
            path = os.path.join(folder, f"{device}-{spec.neurons}-{os.getpid()}.json")
            with open(path, "w") as handle:
                json.dump(seen, handle)
        return NumpyModel(data, sleep_fwd=float(os.environ.get("SNNBENCH_FAKE_SLOW_S", "0")))


class KillParentAdapter(_Base):
    """Kills the process that started its worker (a Ray task's process: WorkerCrashedError).
    Never run it under the local executor: its parent is the sweep itself."""

    name = "fake-kill-parent"

    def build(self, spec: Any, data: Any, device: str, variant: str) -> Model:
        import signal

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as handle:
            parent = handle.read().decode(errors="replace")
        if not parent.startswith("ray::"):  # a safety catch: only ever a Ray task's process
            raise RuntimeError(f"fake-kill-parent refuses to kill a non-Ray parent: {parent!r}")
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(30)  # the kernel's parent-death signal ends this worker first
        return NumpyModel(data)


class MutatesAdapter(_Base):
    """Scales the shared weights in place in build() and computes that other network (issue
    33, item 14): its result must never be compared with a reference of the scaled arrays."""

    name = "fake-mutates"

    def build(self, spec: Any, data: Any, device: str, variant: str) -> Model:
        for w in data.weights:
            w *= 3.0
        return NumpyModel(data)


#: builds of CounterAdapter in this process: every case must see it at 0 (issue 38)
BUILDS = 0


class CounterAdapter(_Base):
    """Counts its builds in a module-level variable and writes the count it found (with its
    pid and parent's) to ``$SNNBENCH_FAKE_PROBE_DIR/counter-<pid>-<n>.json``: a case that
    could see what an earlier case left would find it above 0 at its first build."""

    name = "fake-counter"

    def build(self, spec: Any, data: Any, device: str, variant: str) -> Model:
        import json

        global BUILDS
        folder = os.environ.get("SNNBENCH_FAKE_PROBE_DIR")
        if folder:
            seen = {"pid": os.getpid(), "ppid": os.getppid(), "builds": BUILDS,
                    "neurons": spec.neurons}
            path = os.path.join(folder, f"counter-{os.getpid()}-{BUILDS}.json")
            with open(path, "w") as handle:
                json.dump(seen, handle)
        BUILDS += 1
        return NumpyModel(data)


class ThreadAtImportAdapter(_Base):
    """Its library starts a Python thread when imported (in version()), which stays: a
    process that has imported it is not safe to fork."""

    name = "fake-thread-at-import"

    def version(self) -> str:
        import threading

        threading.Thread(target=time.sleep, args=(3600,), daemon=True,
                         name="fake-library-thread").start()
        return super().version()

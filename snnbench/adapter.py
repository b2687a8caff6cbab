"""The adapter plugin interface.

An adapter maps the canonical :class:`~snnbench.workload.linear_lif.spec.NetworkSpec` onto one
library. It is found through the entry-point group ``snnbench.adapters`` (name → :class:`Adapter`
subclass), imports its library lazily (never at module import time), and hands the harness a
:class:`Model` whose methods the harness times. The harness owns clocks, repeats, statistics and
process isolation; an adapter only builds, runs forward and backward, synchronizes its device and,
where only it can, reports peak memory.

A minimal third-party adapter (see docs/adapters.md for the package around it)::

    class MyAdapter(Adapter):
        name = "mylib"
        library = "mylib"                  # distribution whose version is reported

        def capabilities(self, variant: str) -> Capabilities:
            return Capabilities(devices=("cpu",), resets=("subtract",))

        def build(self, spec, data, device, variant) -> Model:
            import mylib                   # lazy: only inside the worker process
            ...
"""

from __future__ import annotations

import importlib
import importlib.metadata
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from snnbench.workload.linear_lif import LinearLif, LinearLifKnobs
from snnbench.workload.linear_lif.spec import (
    FP32_MATMUL_PRECISIONS,
    INPUT_KINDS,
    RESET_MODES,
    CaseData,
    FloatArray,
    NetworkSpec,
)

Framework = Literal["torch", "jax", "numpy"]
Device = Literal["cpu", "cuda"]


class AdapterUnavailable(Exception):
    """The adapter's library cannot be used here; the message says why (shown in ``list``)."""


class CaseSkipped(Exception):
    """The adapter cannot honour this spec (a reset mode, a dtype...); the message says which."""


@dataclass(frozen=True)
class Capabilities:
    """What an adapter can build faithfully. Anything outside these gives a ``skipped`` row."""

    devices: tuple[str, ...] = ("cpu", "cuda")
    dtypes: tuple[str, ...] = ("float32",)
    resets: tuple[str, ...] = RESET_MODES
    surrogates: tuple[str, ...] = ("fast_sigmoid",)
    detach_reset: tuple[bool, ...] = (True, False)
    bias: tuple[bool, ...] = (True, False)
    input_kinds: tuple[str, ...] = INPUT_KINDS
    #: float32 matmuls only by default: an adapter that says nothing about automatic mixed
    #: precision (``amp-bf16``, ``amp-fp16``) is never assumed to honour it
    matmul_precisions: tuple[str, ...] = FP32_MATMUL_PRECISIONS
    max_layers: int | None = None
    #: forward spikes follow the canonical dynamics exactly (verified; mismatch is an error)
    exact_dynamics: bool = True
    #: gradients are exact BPTT of the canonical network with the spec's surrogate
    exact_gradient: bool = True
    #: why dynamics or gradient are approximate, shown next to the verify result
    approximation_note: str = ""
    #: False for pseudo-adapters that compute no LIF (e.g. ``floor``): no equivalence check
    verifiable: bool = True

    def reason_unsupported(self, spec: NetworkSpec, device: str) -> str | None:
        """The first spec field this adapter cannot honour, as a ``skipped`` message, or None:
        the device, then the ``linear-lif`` knobs' own rule (one rule for both API versions)."""
        if device not in self.devices:
            shown = ", ".join(str(a) for a in self.devices) or "none"
            return f"device {device!r} not supported (supports: {shown})"
        return self.knobs().reason_unsupported(LinearLif(spec))

    def knobs(self) -> LinearLifKnobs:
        """These network fields as the plugin API v2's ``linear-lif`` knobs."""
        return LinearLifKnobs(
            dtypes=self.dtypes, resets=self.resets, surrogates=self.surrogates,
            detach_reset=self.detach_reset, bias=self.bias, input_kinds=self.input_kinds,
            matmul_precisions=self.matmul_precisions, max_layers=self.max_layers)


class TimedModel(ABC):
    """What the harness times of a built model, in both plugin API versions (:class:`Model`
    here, :class:`snnbench.plugin.Model` in version 2): one built network on one device.

    The harness calls :meth:`forward`, :meth:`backward` and :meth:`synchronize` inside timed
    regions, and :meth:`zero_grad` between samples, so keep them free of host-side conversions.
    """

    @abstractmethod
    def forward(self) -> Any:
        """Training-mode forward over all T steps, recording what backward needs.

        Returns an opaque handle (e.g. the spike tensor) passed to :meth:`backward` and
        :meth:`spikes`. Must not block on the device: the harness synchronizes.
        """

    @abstractmethod
    def backward(self, handle: Any) -> None:
        """Backward of loss = sum of the last layer's spikes, from a :meth:`forward` handle."""

    def step(self) -> Any:
        """Forward + backward; override only when the library fuses them (e.g. a jitted grad)."""
        handle = self.forward()
        self.backward(handle)
        return handle

    @abstractmethod
    def zero_grad(self) -> None:
        """Drop gradients (set to None), so no sample accumulates into the next."""

    @abstractmethod
    def synchronize(self) -> None:
        """Block until all queued device work is done (CUDA sync, JAX block_until_ready)."""

    @abstractmethod
    def spikes(self, handle: Any) -> FloatArray:
        """The output spikes of a forward handle as float32 NumPy, time-major (``linear-lif``:
        the last layer's, (T, B, n))."""

    def peak_memory_bytes(self) -> int | None:
        """Peak device memory since :meth:`reset_peak_memory`, when only the adapter can read it.

        Return None to let the harness use its own probe (torch CUDA allocator, JAX device
        stats, or process RSS on CPU).
        """
        return None

    def reset_peak_memory(self) -> None:
        """Reset whatever :meth:`peak_memory_bytes` reads; no-op by default."""

    def close(self) -> None:
        """Release resources; called once when the worker is done with the model."""

    def timer_kind(self) -> str | None:
        """The timer the harness should use (``host``, ``cuda-event``, ``jax-block``), or None
        for the framework's default: CUDA events for torch on CUDA, ``jax-block`` for JAX, the
        host clock otherwise (:func:`snnbench.measure.timing.default_timer_kind`).

        Return ``"host"`` when the model runs GPU work on a stream of its own that the current
        stream does not wait for: CUDA events on the current stream would not see it.
        """
        return None


class Model(TimedModel):
    """One built network on one device, ready to be timed (plugin API version 1: its
    gradients as two lists, weights and biases, in layer order)."""

    @abstractmethod
    def gradients(self) -> tuple[list[FloatArray], list[FloatArray]]:
        """After backward: ([dW per layer, (out, in)], [db per layer, (n,)]) as float32 NumPy.

        Bias gradients of a bias-free network are zeros.
        """


class AdapterBase:
    """What an adapter plugin declares and answers in both plugin API versions
    (:class:`Adapter` here, :class:`snnbench.plugin.Adapter` in version 2): its names, its
    library and how its version is read, its variants, and what its worker needs."""

    #: entry-point name, used on the command line (``--adapters name``)
    name: str = ""
    #: distribution name whose version is reported (``importlib.metadata``)
    library: str = ""
    #: importable module proving the library is usable (defaults to ``library``)
    module: str = ""
    #: the framework whose memory probe and device sync the harness uses
    framework: Framework = "torch"
    #: variants run as separate rows (e.g. backends); the first is the default
    variants: tuple[str, ...] = ("default",)
    #: one line shown in ``snnbench list``
    description: str = ""
    #: further distributions whose installed versions change what this adapter can do here
    #: (an optional kernel package): ``list`` probes it again when one changes. Its library,
    #: the plugin's own distribution, the framework and all they require count already
    depends_on: ClassVar[tuple[str, ...]] = ()

    def version(self) -> str:
        """The library's version, or raise :class:`AdapterUnavailable` with the reason.

        The default imports :attr:`module` (so a broken install is caught here, in the worker
        or in ``list``'s probe subprocess) and reads the distribution version.
        """
        import_or_unavailable(self.module or self.library.replace("-", "_"))
        return distribution_version(self.library)

    def worker_env(self, variant: str) -> dict[str, str]:
        """Environment variables the worker process needs before any import (e.g. a backend)."""
        return {}

    def check_variant(self, variant: str, device: str) -> None:
        """Raise :class:`AdapterUnavailable` when this variant cannot run here (e.g. no CUDA
        backend built); called in the worker after :meth:`version`."""


class Adapter(AdapterBase, ABC):
    """Base class for adapter plugins (registered under entry-point group ``snnbench.adapters``).

    Subclasses set the class attributes and implement :meth:`build`. Import the benchmarked
    library only inside methods (lazily), never at module level.
    """

    def capabilities(self, variant: str) -> Capabilities:
        """What this adapter (in this variant) can build faithfully."""
        return Capabilities()

    def reason_skipped(self, spec: NetworkSpec, device: str, variant: str) -> str | None:
        """Why this spec cannot be honoured (→ ``skipped`` row), or None if it can."""
        return self.capabilities(variant).reason_unsupported(spec, device)

    @abstractmethod
    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        """Build the network with exactly ``data``'s weights, biases and input on ``device``.

        Raise :class:`CaseSkipped` for anything the library cannot honour that
        :meth:`capabilities` did not already express.
        """


def import_or_unavailable(module: str) -> Any:
    """Import ``module``; any failure becomes :class:`AdapterUnavailable` naming it."""
    try:
        return importlib.import_module(module)
    except Exception as exc:  # a broken install must read as unavailable, not crash
        raise AdapterUnavailable(f"cannot import {module}: {type(exc).__name__}: {exc}") from exc


def distribution_version(name: str) -> str:
    """Installed version of distribution ``name`` ("unknown" when it has no metadata)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"

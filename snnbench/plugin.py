"""The adapter plugin interface, version 2: an adapter builds a workload.

Plugins import these names from :mod:`snnbench.api`, their one public path. What changed from
version 1 (:mod:`snnbench.adapter`, still read through one shim, :mod:`snnbench.adapter_shim`):

* :meth:`Adapter.build` receives the case's workload (``workload.spec`` for ``linear-lif``)
  instead of a bare ``NetworkSpec``, and :meth:`Adapter.reason_skipped` likewise;
* :class:`Capabilities` names the workload kinds the adapter supports, each with its knobs
  (``{"linear-lif": LinearLifKnobs(resets=..., surrogates=...)}``), beside the devices and what
  it declares exact;
* :meth:`Model.gradients` returns the gradients by parameter name (``{"layers.0.weight": dW,
  "layers.0.bias": db, ...}``, :meth:`~snnbench.workload.LinearLif.parameter_names`) instead of
  two positional lists.

The harness speaks this version only: :meth:`snnbench.registry.AdapterEntry.create` hands it a
version-2 adapter whatever the plugin was written against.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from snnbench import adapter as v1
from snnbench.workload import Knobs, LinearLif, LinearLifKnobs, Workload
from snnbench.workload.linear_lif import KIND as LINEAR_LIF
from snnbench.workload.linear_lif.spec import FloatArray

#: the version of the plugin interface this module defines
API_VERSION = 2


def _linear_lif_only() -> dict[str, Knobs]:
    return {LINEAR_LIF: LinearLifKnobs()}


@dataclass(frozen=True)
class Capabilities:
    """What an adapter (in one variant) builds faithfully; anything outside is ``skipped``.

    ``workloads`` maps each supported workload kind to its knobs (what of that kind it
    honours); the other fields hold for every kind.
    """

    workloads: Mapping[str, Knobs] = field(default_factory=_linear_lif_only)
    devices: tuple[str, ...] = ("cpu", "cuda")
    #: outputs follow the workload's dynamics exactly (verified; a mismatch is an error)
    exact_dynamics: bool = True
    #: gradients are exact BPTT of the workload with its surrogate
    exact_gradient: bool = True
    #: why dynamics or gradient are approximate, shown next to the verify result
    approximation_note: str = ""
    #: False for pseudo-adapters that compute no network (``floor``): no equivalence check
    verifiable: bool = True

    def knobs(self, kind: str) -> Knobs | None:
        """The knobs of workload kind ``kind``, None when it is not supported."""
        return self.workloads.get(kind)

    def reason_unsupported(self, workload: Workload, device: str) -> str | None:
        """Why ``workload`` on ``device`` cannot be built faithfully (a ``skipped`` message),
        or None: the device, then the kind, then the kind's knobs."""
        if device not in self.devices:
            shown = ", ".join(self.devices) or "none"
            return f"device {device!r} not supported (supports: {shown})"
        knobs = self.knobs(workload.kind)
        if knobs is None:
            shown = ", ".join(self.workloads) or "none"
            return f"workload kind {workload.kind!r} not supported (supports: {shown})"
        return knobs.reason_unsupported(workload)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``snnbench list --json``: the fields, each kind's knobs under
        ``workloads``, and (as version 1 wrote them) the ``linear-lif`` knobs at the top."""
        kinds = {kind: _knob_dict(knobs) for kind, knobs in self.workloads.items()}
        return {
            **kinds.get(LINEAR_LIF, {}),
            "devices": self.devices,
            "exact_dynamics": self.exact_dynamics,
            "exact_gradient": self.exact_gradient,
            "approximation_note": self.approximation_note,
            "verifiable": self.verifiable,
            "workloads": kinds,
        }


def _knob_dict(knobs: Knobs) -> dict[str, Any]:
    to_dict = getattr(knobs, "to_dict", None)
    return dict(to_dict()) if callable(to_dict) else {}


class Model(v1.TimedModel):
    """One built workload on one device, ready to be timed: forward, backward, zero_grad,
    synchronize and spikes as in version 1 (:class:`snnbench.adapter.TimedModel`), and its
    gradients by parameter name."""

    @abstractmethod
    def gradients(self) -> Mapping[str, Any]:
        """After backward: every trainable parameter's gradient by name, as float32 arrays
        (``linear-lif``: ``layers.{l}.weight`` (out, in) and ``layers.{l}.bias`` (n,), zeros
        for a bias-free network; see ``workload.parameter_names()``)."""


class V1Model(Model):
    """A model that hands every call to a version-1 model, :attr:`legacy` (a v1 plugin's model
    seen through this API, or a graph timed by a Linear+LIF model's machinery); only
    :meth:`gradients`, named the way the workload names them, is the subclass's."""

    def __init__(self, legacy: v1.Model) -> None:
        self.legacy = legacy

    def forward(self) -> Any:
        return self.legacy.forward()

    def backward(self, handle: Any) -> None:
        self.legacy.backward(handle)

    def step(self) -> Any:
        # the model's own step (it may fuse forward and backward)
        return self.legacy.step()

    def zero_grad(self) -> None:
        self.legacy.zero_grad()

    def synchronize(self) -> None:
        self.legacy.synchronize()

    def spikes(self, handle: Any) -> FloatArray:
        return self.legacy.spikes(handle)

    def peak_memory_bytes(self) -> int | None:
        return self.legacy.peak_memory_bytes()

    def reset_peak_memory(self) -> None:
        self.legacy.reset_peak_memory()

    def close(self) -> None:
        self.legacy.close()

    def timer_kind(self) -> str | None:
        return self.legacy.timer_kind()


class LinearLifModel(V1Model):
    """A version-1 Linear+LIF model whose gradients ``([dW], [db])`` are read by the
    workload's names (``layers.{l}.weight``, ``layers.{l}.bias``): what the v1 shim wraps a v1
    plugin's model in, and what a v2 adapter building ``linear-lif`` with v1 code returns."""

    def __init__(self, model: v1.Model, workload: LinearLif) -> None:
        super().__init__(model)
        self._workload = workload

    def gradients(self) -> Mapping[str, Any]:
        grad_weights, grad_biases = self.legacy.gradients()
        return self._workload.gradients_by_name(grad_weights, grad_biases)


class Adapter(v1.AdapterBase, ABC):
    """Base class of a version-2 adapter plugin (entry-point group ``snnbench.adapters``).

    Set the attributes (:class:`snnbench.adapter.AdapterBase`: name, library, module,
    framework, variants, description) and implement :meth:`build`; import the library only
    inside methods.
    """

    #: the plugin interface this adapter is written against
    api_version: ClassVar[int] = API_VERSION

    def capabilities(self, variant: str) -> Capabilities:
        """What this adapter (in this variant) builds faithfully."""
        return Capabilities()

    def reason_skipped(self, workload: Workload, device: str, variant: str) -> str | None:
        """Why ``workload`` cannot be honoured (→ ``skipped`` row), or None if it can."""
        return self.capabilities(variant).reason_unsupported(workload, device)

    @abstractmethod
    def build(self, workload: Workload, data: Any, device: str, variant: str) -> Model:
        """Build ``workload`` with exactly ``data``'s parameters and input on ``device``
        (``data`` is ``workload.make_data()``; for ``linear-lif`` a
        :class:`~snnbench.workload.linear_lif.spec.CaseData`). Raise :class:`CaseSkipped` for what
        the library cannot honour that :meth:`capabilities` did not already express."""

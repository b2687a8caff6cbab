"""The one shim from the plugin interface version 1 (:mod:`snnbench.adapter`) to version 2
(:mod:`snnbench.plugin`), which the harness speaks.

A version-1 adapter builds from a ``NetworkSpec``, declares one flat :class:`Capabilities`
and returns gradients as ``([dW...], [db...])``. :func:`as_v2` wraps it so that it builds a
``linear-lif`` workload, declares that kind's knobs and returns gradients by name; the
adapter's own code is called unchanged (its ``reason_skipped`` override included), so a
plugin written against version 1 runs, verifies and records exactly as before.
"""

from __future__ import annotations

from typing import Any

from snnbench import adapter as v1, plugin as v2
from snnbench.workload import LinearLif, Workload
from snnbench.workload.linear_lif import KIND as LINEAR_LIF

#: an adapter of either version, and its class
AnyAdapter = v1.Adapter | v2.Adapter
AdapterClass = type[v1.Adapter] | type[v2.Adapter]


def as_v2(adapter: AnyAdapter) -> v2.Adapter:
    """``adapter`` as a version-2 adapter: itself when it is one, else wrapped."""
    if isinstance(adapter, v2.Adapter):
        return adapter
    if isinstance(adapter, v1.Adapter):
        return LegacyAdapter(adapter)
    raise TypeError(f"not an snnbench adapter: {type(adapter).__name__}")


def implementation(adapter: AnyAdapter) -> object:
    """The plugin's own adapter object (the wrapped one of a :class:`LegacyAdapter`): where
    its code lives, for naming its frame in a traceback."""
    return adapter.legacy if isinstance(adapter, LegacyAdapter) else adapter


def capabilities_v2(old: v1.Capabilities) -> v2.Capabilities:
    """Version-1 capabilities as version 2: its network fields are the ``linear-lif`` knobs."""
    return v2.Capabilities(
        workloads={LINEAR_LIF: old.knobs()}, devices=old.devices,
        exact_dynamics=old.exact_dynamics, exact_gradient=old.exact_gradient,
        approximation_note=old.approximation_note, verifiable=old.verifiable)


def _not_linear_lif(workload: Workload) -> str:
    return f"workload kind {workload.kind!r} not supported (supports: {LINEAR_LIF})"


#: a version-1 model whose gradients are read by name (one class with the v2 adapters' own)
LegacyModel = v2.LinearLifModel


class LegacyAdapter(v2.Adapter):
    """A version-1 adapter seen through version 2; :attr:`legacy` is the adapter itself."""

    api_version = 1

    def __init__(self, adapter: v1.Adapter) -> None:
        self.legacy = adapter
        self.name = adapter.name
        self.library = adapter.library
        self.module = adapter.module
        self.framework = adapter.framework
        self.variants = adapter.variants
        self.description = adapter.description

    def version(self) -> str:
        return self.legacy.version()

    def capabilities(self, variant: str) -> v2.Capabilities:
        return capabilities_v2(self.legacy.capabilities(variant))

    def worker_env(self, variant: str) -> dict[str, str]:
        return self.legacy.worker_env(variant)

    def check_variant(self, variant: str, device: str) -> None:
        self.legacy.check_variant(variant, device)

    def reason_skipped(self, workload: Workload, device: str, variant: str) -> str | None:
        if not isinstance(workload, LinearLif):
            return _not_linear_lif(workload)
        return self.legacy.reason_skipped(workload.spec, device, variant)

    def build(self, workload: Workload, data: Any, device: str, variant: str) -> v2.Model:
        if not isinstance(workload, LinearLif):
            raise v1.CaseSkipped(_not_linear_lif(workload))
        return LegacyModel(self.legacy.build(workload.spec, data, device, variant), workload)

    def __repr__(self) -> str:
        return f"LegacyAdapter({type(self.legacy).__name__})"

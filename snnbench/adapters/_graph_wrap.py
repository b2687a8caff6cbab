"""The plugin API v2 adapter of a library whose Linear+LIF build stays its plugin API v1
adapter, unchanged, with a graph build beside it (``fused``, ``lava-dl``).

``linear-lif`` cases go to the v1 adapter (:attr:`SpecAndGraphAdapter.linear_lif`) with
``workload.spec`` exactly as before, as do its capabilities, refusals, worker environment and
variant checks; its model's gradients are named as ``workload.parameter_names()``.
``nir-graph`` cases go to :meth:`SpecAndGraphAdapter.build_graph`, declared per variant by
:meth:`SpecAndGraphAdapter.graph_knobs`. (Branch ``graph-adapters`` has the same idea as
``_workloads.WorkloadsAdapter``; one of the two is to go when both are merged.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from snnbench import adapter as v1, plugin
from snnbench.workload import GraphKnobs, LinearLif, NirGraph, Workload
from snnbench.workload.graph import GraphData
from snnbench.workload.graph.workload import KIND as NIR_GRAPH
from snnbench.workload.linear_lif import KIND as LINEAR_LIF

#: the attributes the v2 adapter takes from its v1 Linear+LIF adapter
_NAMES = ("name", "library", "module", "framework", "variants", "description", "depends_on")


class NamedGradients(plugin.V1Model):
    """A Linear+LIF model of the plugin API v1 whose gradients are read by name."""

    def __init__(self, model: v1.Model, workload: LinearLif) -> None:
        super().__init__(model)
        self._workload = workload

    def gradients(self) -> Mapping[str, Any]:
        grad_weights, grad_biases = self.legacy.gradients()
        return self._workload.gradients_by_name(grad_weights, grad_biases)


class SpecAndGraphAdapter(plugin.Adapter):
    """``linear-lif`` through :attr:`linear_lif`, ``nir-graph`` through :meth:`build_graph`."""

    #: the library's Linear+LIF adapter of the plugin API v1
    linear_lif: ClassVar[type[v1.Adapter]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        base = cls.__dict__.get("linear_lif")
        if base is not None:
            for attr in _NAMES:
                if attr not in cls.__dict__:
                    setattr(cls, attr, getattr(base, attr))

    def __init__(self) -> None:
        #: the v1 adapter the ``linear-lif`` cases are built by
        self.spec_adapter = self.linear_lif()

    def version(self) -> str:
        return self.spec_adapter.version()

    def worker_env(self, variant: str) -> dict[str, str]:
        return self.spec_adapter.worker_env(variant)

    def check_variant(self, variant: str, device: str) -> None:
        self.spec_adapter.check_variant(variant, device)

    def graph_knobs(self, variant: str) -> GraphKnobs | None:
        """What this variant honours of a ``nir-graph`` case; None: it builds no graph."""
        return None

    def build_graph(self, workload: NirGraph, data: GraphData, device: str,
                    variant: str) -> plugin.Model:
        """The graph built natively; :class:`~snnbench.adapter.CaseSkipped` for what is not
        built as declared."""
        raise v1.CaseSkipped(f"{self.name} builds no {NIR_GRAPH} workload")

    def capabilities(self, variant: str) -> plugin.Capabilities:
        old = self.spec_adapter.capabilities(variant)
        workloads: dict[str, Any] = {LINEAR_LIF: old.knobs()}
        knobs = self.graph_knobs(variant)
        if knobs is not None:
            workloads[NIR_GRAPH] = knobs
        return plugin.Capabilities(
            workloads=workloads, devices=old.devices, exact_dynamics=old.exact_dynamics,
            exact_gradient=old.exact_gradient, approximation_note=old.approximation_note,
            verifiable=old.verifiable)

    def reason_skipped(self, workload: Workload, device: str, variant: str) -> str | None:
        if isinstance(workload, LinearLif):
            return self.spec_adapter.reason_skipped(workload.spec, device, variant)
        return self.capabilities(variant).reason_unsupported(workload, device)

    def build(self, workload: Workload, data: Any, device: str, variant: str) -> plugin.Model:
        if isinstance(workload, LinearLif):
            return NamedGradients(self.spec_adapter.build(workload.spec, data, device,
                                                          variant), workload)
        reason = self.reason_skipped(workload, device, variant)
        if reason is not None:
            raise v1.CaseSkipped(reason)
        assert isinstance(workload, NirGraph)  # the only other kind the knobs accept
        self.check_variant(variant, device)  # no-op once prepared; makes build() usable alone
        return self.build_graph(workload, data, device, variant)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

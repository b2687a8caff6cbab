"""What the shipped adapters that build graph workloads share: the plugin API v2 adapter of a
library whose Linear+LIF build is its plugin API v1 adapter, unchanged.

Such an adapter (``torch``, ``torch-compile``, ``snntorch``, ``norse``, ``spikingjelly``,
``sinabs``, ``rockpool``, ``haiku``, ``brainstate``, ``spyx``, ``fused``) is a
:class:`snnbench.plugin.Adapter` with two builds:

* ``linear-lif``: the library's Linear+LIF adapter of the plugin API v1 (:attr:`linear_lif`,
  e.g. :class:`~snnbench.adapters.snntorch.SnnTorchAdapter`), called with ``workload.spec``
  exactly as before, as are its capabilities, its refusals, its worker environment and its
  variant checks; its model's gradients are named as ``workload.parameter_names()``;
* ``nir-graph``: the library's native graph builder (``snnbench/adapters/*_graph.py``),
  declared per variant by :meth:`graph_knobs` (None: the variant builds no graph). What the
  knobs cannot say and the builder cannot build exactly (a per-neuron time constant where the
  library takes one per layer, a leak it has no term for) is refused at build time with
  :class:`~snnbench.adapter.CaseSkipped` and the reason: a ``skipped`` row.

The names (``name``, ``library``, ``module``, ``framework``, ``variants``, ``description``,
``depends_on``) are the v1 adapter's, so the registered adapter reads as it always did.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from snnbench import adapter as v1, plugin
from snnbench.workload import GraphKnobs, LinearLif, NirGraph, Workload
from snnbench.workload.graph import GraphData
from snnbench.workload.graph.workload import KIND as NIR_GRAPH
from snnbench.workload.linear_lif import KIND as LINEAR_LIF

#: a graph model's constructor: (workload, data, device) → the model
GraphModelClass = Callable[[NirGraph, GraphData, str], plugin.Model]

if TYPE_CHECKING:  # torch is imported lazily, inside the worker
    from .torch_graph import NeuronBuilder

#: the attributes the v2 adapter takes from its v1 Linear+LIF adapter
_NAMES = ("name", "library", "module", "framework", "variants", "description", "depends_on")


class WorkloadsAdapter(plugin.Adapter):
    """A library's adapter building ``linear-lif`` through :attr:`linear_lif` and
    ``nir-graph`` through :meth:`build_graph` (see the module docstring)."""

    #: the library's Linear+LIF adapter of the plugin API v1, whose code builds that kind
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

    # -- what both kinds share: the v1 adapter's answers ------------------------------------
    def version(self) -> str:
        return self.spec_adapter.version()

    def worker_env(self, variant: str) -> dict[str, str]:
        return self.spec_adapter.worker_env(variant)

    def check_variant(self, variant: str, device: str) -> None:
        self.spec_adapter.check_variant(variant, device)

    # -- the graph kind ---------------------------------------------------------------------
    def graph_knobs(self, variant: str) -> GraphKnobs | None:
        """What this variant honours of a ``nir-graph`` case; None: it builds no graph."""
        return None

    def graph_reason_skipped(self, workload: NirGraph, device: str,
                             variant: str) -> str | None:
        """Why this graph case cannot be built faithfully beyond what the knobs say (a device
        on which the graph build is not exact), or None."""
        return None

    def build_graph(self, workload: NirGraph, data: GraphData, device: str,
                    variant: str) -> plugin.Model:
        """The graph built natively; :class:`CaseSkipped` for what is not built exactly."""
        raise v1.CaseSkipped(f"{self.name} builds no {NIR_GRAPH} workload")

    # -- the plugin API v2 ------------------------------------------------------------------
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
            # the v1 adapter's own rule, its library-specific reasons included
            return self.spec_adapter.reason_skipped(workload.spec, device, variant)
        reason = self.capabilities(variant).reason_unsupported(workload, device)
        if reason is None and isinstance(workload, NirGraph):
            reason = self.graph_reason_skipped(workload, device, variant)
        return reason

    def build(self, workload: Workload, data: Any, device: str, variant: str) -> plugin.Model:
        if isinstance(workload, LinearLif):
            model = self.spec_adapter.build(workload.spec, data, device, variant)
            return plugin.LinearLifModel(model, workload)
        reason = self.reason_skipped(workload, device, variant)
        if reason is not None:
            raise v1.CaseSkipped(reason)
        assert isinstance(workload, NirGraph)  # the only other kind the knobs accept
        return self.build_graph(workload, data, device, variant)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class TorchNeuronsAdapter(WorkloadsAdapter):
    """A PyTorch library's adapter whose ``nir-graph`` build is the plain PyTorch graph
    (:class:`~.torch_graph.TorchGraphModel`) with the library's own neurons,
    :meth:`neuron_op`."""

    #: what the graph build honours of a ``nir-graph`` case
    torch_graph_knobs: ClassVar[GraphKnobs]

    def graph_knobs(self, variant: str) -> GraphKnobs | None:
        return self.torch_graph_knobs

    @abstractmethod
    def neuron_op(self) -> NeuronBuilder:
        """The library's loop over time of a neuron node (it imports the library)."""

    def build_graph(self, workload: NirGraph, data: GraphData, device: str,
                    variant: str) -> plugin.Model:
        from .torch_graph import TorchGraphModel

        return TorchGraphModel(workload, data, device, self.neuron_op())


class Fp32GraphAdapter(WorkloadsAdapter):
    """An adapter (the JAX libraries') whose ``nir-graph`` build, :meth:`graph_model`, runs
    in the ``fp32`` variant only (a graph case is float32)."""

    #: what the ``fp32`` variant honours of a ``nir-graph`` case
    fp32_graph_knobs: ClassVar[GraphKnobs]

    def graph_knobs(self, variant: str) -> GraphKnobs | None:
        return self.fp32_graph_knobs if variant == "fp32" else None

    @abstractmethod
    def graph_model(self) -> GraphModelClass:
        """The graph model's class (its module imports the library)."""

    def build_graph(self, workload: NirGraph, data: GraphData, device: str,
                    variant: str) -> plugin.Model:
        return self.graph_model()(workload, data, device)

"""The public plugin API: the one path an adapter plugin imports (``from snnbench.api import
...``). Everything else in ``snnbench`` is the harness and may move between releases.

An adapter (version 2 of the interface, :data:`API_VERSION`) is a class registered under the
entry-point group ``snnbench.adapters``:

* :class:`Adapter`: its attributes (``name``, ``library``, ``module``, ``framework``,
  ``variants``, ``description``) and ``build(workload, data, device, variant) -> Model``;
* :class:`Capabilities`: the workload kinds it supports, each with its knobs
  (``{"linear-lif": LinearLifKnobs(...)}``), its devices, what it declares exact;
* :class:`Model`: ``forward``, ``backward``, ``zero_grad``, ``synchronize``, ``spikes`` and
  ``gradients() -> {parameter name: array}``;
* :class:`Workload` and its first kind :class:`LinearLif` (``workload.spec`` is the
  :class:`NetworkSpec`; ``workload.make_data()`` the :class:`CaseData` an adapter receives;
  ``workload.parameter_names()`` the names its gradients are keyed by);
* the second kind, :class:`NirGraph` (a network read from a NIR file; ``make_data()`` gives a
  :class:`GraphData`, the graph's typed nodes, their float32 arrays and the input), whose knobs
  :class:`GraphKnobs` name the node kinds an adapter builds (``docs/nir.md``);
* :class:`AdapterUnavailable` (the library cannot be used here) and :class:`CaseSkipped`
  (this case cannot be honoured), with the message shown;
* :func:`surrogate_grad`, the surrogate derivatives of the reference, for exact BPTT.

An adapter written against version 1 (``snnbench.adapter``) keeps working through one shim
(:mod:`snnbench.adapter_shim`); ``docs/adapters-api.md`` says what changed.
"""

from snnbench.adapter import (
    AdapterUnavailable,
    CaseSkipped,
    Framework,
    distribution_version,
    import_or_unavailable,
)
from snnbench.plugin import API_VERSION, Adapter, Capabilities, Model
from snnbench.workload import GraphKnobs, Knobs, LinearLif, LinearLifKnobs, NirGraph, Workload
from snnbench.workload.graph import GraphData
from snnbench.workload.linear_lif.reference import surrogate_grad
from snnbench.workload.linear_lif.spec import (
    DTYPES,
    INPUT_KINDS,
    MATMUL_PRECISIONS,
    RESET_MODES,
    SURROGATES,
    CaseData,
    FloatArray,
    NetworkSpec,
)

__all__ = [
    "API_VERSION",
    "DTYPES",
    "INPUT_KINDS",
    "MATMUL_PRECISIONS",
    "RESET_MODES",
    "SURROGATES",
    "Adapter",
    "AdapterUnavailable",
    "Capabilities",
    "CaseData",
    "CaseSkipped",
    "FloatArray",
    "Framework",
    "GraphData",
    "GraphKnobs",
    "Knobs",
    "LinearLif",
    "LinearLifKnobs",
    "Model",
    "NetworkSpec",
    "NirGraph",
    "Workload",
    "distribution_version",
    "import_or_unavailable",
    "surrogate_grad",
]

"""snnbench: honest benchmarks of spiking neural network training libraries."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

__version__ = "0.1.0"

#: The plugin API v1's import paths (docs/adapters.md, and every plugin written against it)
#: name the Linear+LIF workload's modules at the package's top. They live in the workload's own
#: package since the house was regrouped into tiers; these two paths keep answering, as the same
#: module objects, so a v1 plugin keeps working unchanged. Nothing inside snnbench uses them.
V1_PATHS: dict[str, str] = {
    "snnbench.spec": "snnbench.workload.linear_lif.spec",
    "snnbench.reference": "snnbench.workload.linear_lif.reference",
}


class _V1PathFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves a v1 path to its module's home, loading nothing until a plugin asks for it."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in V1_PATHS:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        # the real module, so `snnbench.spec.NetworkSpec is snnbench.workload...NetworkSpec`
        return importlib.import_module(V1_PATHS[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the real module ran when it was imported."""


if not any(isinstance(finder, _V1PathFinder) for finder in sys.meta_path):
    sys.meta_path.append(_V1PathFinder())

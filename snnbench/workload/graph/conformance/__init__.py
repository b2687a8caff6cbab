"""Importer conformance (``snnbench nir-check``): each library's own NIR importer, run in a
process of its own on a graph's input, classified against snnbench's float64 reference.

:mod:`.result` the typed result, :mod:`.guard` what keeps an importer from installing
anything, one module per library's import and run (``*_import``), :mod:`.worker` the process
that runs one, :mod:`.probes` the classification, :mod:`.check` the whole check and
:mod:`.render` its table.
"""

from snnbench.workload.graph.conformance.result import (
    VERDICTS,
    ConformanceReport,
    LibraryCheck,
)

__all__ = ["VERDICTS", "ConformanceReport", "LibraryCheck"]

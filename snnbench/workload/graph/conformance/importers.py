"""The libraries with a NIR importer: how each is named, installed and called.

Each has a module of its own here (``snntorch_import``, ...) with ``run(graph, inputs, dt)``:
it imports ``graph`` (a ``nir.NIRGraph``) with the library's own importer, runs what that built
on ``inputs`` (T, B, *shape, float32) from a zero state and returns its output (T, B, *shape).
Those modules import their library; they run only in the importer's own process
(:mod:`.worker`), never in snnbench's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Importer:
    """One library's NIR importer."""

    #: how tables name it
    library: str
    #: its distribution's name (what ``importlib.metadata.version`` reads)
    dist: str
    #: the module (in this package) that imports and runs it
    module: str
    #: how it is called: whether it is given the user's dt or fixes its own
    called: str


#: by the name ``--libraries`` takes, in the table's order
IMPORTERS: dict[str, Importer] = {
    "snntorch": Importer("snnTorch", "snntorch", "snntorch_import",
                         "snntorch.import_nir.import_from_nir(graph): dt fixed at 1e-4"),
    "norse": Importer("Norse", "norse", "norse_import", "norse.torch.from_nir(graph, dt=dt)"),
    "sinabs": Importer("Sinabs", "sinabs", "sinabs_import",
                       "sinabs.from_nir(graph, batch_size=B): no dt (τ in steps)"),
    "rockpool": Importer("Rockpool", "rockpool", "rockpool_import",
                         "rockpool.nn.modules.torch.nir.from_nir(graph): no dt"),
    "spyx": Importer("Spyx", "spyx", "spyx_import", "spyx.nir.from_nir(graph, x, dt=dt)"),
    "spikingjelly": Importer("SpikingJelly", "spikingjelly", "spikingjelly_import",
                             "import_from_nir(graph, dt=dt, step_mode='m')"),
}

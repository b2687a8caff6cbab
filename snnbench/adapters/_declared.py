"""What the shipped adapters declare of the ``nir-graph`` kind, stated without importing any
library (``list``, planning and ``reason_skipped`` read it in the parent process), and what an
adapter's Linear+LIF and graph builds share (a refusal, a library's surrogate names).

Each library's :class:`~snnbench.workload.graph.GraphKnobs` name the node kinds its native
builder (``snnbench/adapters/<library>_graph.py``) builds and the choices it follows exactly;
``docs/nir.md``'s support table is these knobs (``tests/test_graph_adapters.py`` holds it).
What the knobs cannot express (one time constant per layer, a CubaLIF leak, a surrogate slope)
the builder refuses at build time, with the reason.
"""

from __future__ import annotations

import sys

from snnbench.workload.graph import GraphKnobs
from snnbench.workload.graph.nodes import NODE_TYPES
from snnbench.workload.linear_lif.neuron import SURROGATES

#: every node kind snnbench reads
ALL_NODE_KINDS: tuple[str, ...] = tuple(NODE_TYPES)

#: why snnTorch refuses reset "subtract", in both kinds (shown in the skipped row)
SNNTORCH_SUBTRACT_REASON = (
    "reset mode 'subtract' not supported: snnTorch 1.0's Leaky subtracts θ one step late without "
    "decay (reset_delay=True) or subtracts it again at the next step if v_pre >= 2θ "
    "(reset_delay=False); both change spikes (supports: zero)"
)

def hide_samna() -> None:
    """Make ``import samna`` fail fast instead of running its self-installing stub (Rockpool
    imports SynSense's hardware SDK when installed; its PyPI stub pip-installs itself).

    Called inside a worker right before importing rockpool; an imported samna is left alone.
    """
    sys.modules.setdefault("samna", None)  # type: ignore[arg-type]


#: brainstate: the spec's surrogate → the braintools.surrogate class with the same derivative
BRAINSTATE_SURROGATE_CLASSES: dict[str, str] = {
    "fast_sigmoid": "InvSquareGrad",
    "atan": "Arctan",
    "sigmoid": "Sigmoid",
}

#: plain PyTorch (:mod:`.torch_graph`): every node kind, surrogate, reset, detach rule and
#: discretisation
TORCH_GRAPH_KNOBS = GraphKnobs(node_kinds=ALL_NODE_KINDS, surrogates=SURROGATES)

#: snnTorch (:mod:`.snntorch_graph`): reset "zero" only (:data:`SNNTORCH_SUBTRACT_REASON`); a
#: CubaLIF with a leak or a detached reset is refused at build
SNNTORCH_GRAPH_KNOBS = GraphKnobs(node_kinds=ALL_NODE_KINDS, resets=("zero",),
                                  surrogates=SURROGATES)

#: Norse (:mod:`.norse_graph`): no IF (its leak scales the input by 1 − a), never a detached
#: reset; its surrogate menu is exact for fast_sigmoid of slope 1 and sigmoid of slope 4 only
#: (another slope, a neuron without leak and a subtract-reset CubaLIF are refused at build)
NORSE_GRAPH_KNOBS = GraphKnobs(
    node_kinds=tuple(k for k in ALL_NODE_KINDS if k != "IF"), detach_reset=(False,),
    surrogates=("fast_sigmoid", "sigmoid"))

#: SpikingJelly's ``torch`` backend (:mod:`.spikingjelly_graph`): every node kind; one time
#: constant and threshold per node, and a CubaLIF without leak (refused at build otherwise)
SPIKINGJELLY_GRAPH_KNOBS = GraphKnobs(node_kinds=ALL_NODE_KINDS, surrogates=SURROGATES)

#: sinabs (:mod:`.sinabs_graph`): every node kind, per-neuron parameters too
SINABS_GRAPH_KNOBS = GraphKnobs(node_kinds=ALL_NODE_KINDS, surrogates=SURROGATES)

#: sinabs-exodus (:func:`.sinabs_graph.exodus_neuron_op`, CUDA only): sinabs' build with the
#: EXODUS layers, whose kernels take a subtract reset carrying the spike's gradient only
SINABS_EXODUS_GRAPH_KNOBS = GraphKnobs(node_kinds=ALL_NODE_KINDS, resets=("subtract",),
                                       detach_reset=(False,), surrogates=SURROGATES)

#: haiku's ``fp32`` variant (:mod:`.haiku_graph`): every node kind (a graph case is float32)
HAIKU_GRAPH_KNOBS = GraphKnobs(node_kinds=ALL_NODE_KINDS, surrogates=SURROGATES)

#: brainstate's ``fp32`` variant (:mod:`.brainstate_graph`): every node kind (a graph case is
#: float32)
BRAINSTATE_GRAPH_KNOBS = GraphKnobs(node_kinds=ALL_NODE_KINDS, surrogates=SURROGATES)

#: Rockpool (:mod:`.rockpool_graph`): ``LIFNeuronTorch`` is a membrane-only LIF resetting by
#: subtraction through the spike: the synaptic kinds, LIF and IF; reset subtract, not detached
ROCKPOOL_GRAPH_KNOBS = GraphKnobs(
    node_kinds=tuple(k for k in ALL_NODE_KINDS if k not in ("LI", "CubaLIF")),
    resets=("subtract",), detach_reset=(False,), surrogates=SURROGATES)

#: spyx's ``fp32`` variant (:mod:`.spyx_graph`): every node kind (a graph case is float32)
SPYX_GRAPH_KNOBS = GraphKnobs(node_kinds=ALL_NODE_KINDS, surrogates=SURROGATES)

#: snnbench's fused Linear + LIF, ``default`` variant (:mod:`.fused_graph`): a chain of Affine
#: (or Linear) → LIF layers (a branch, a gain not exact in float32, a leak or per-neuron
#: β or θ is refused at build)
FUSED_GRAPH_KNOBS = GraphKnobs(node_kinds=("Input", "Output", "Affine", "Linear", "LIF"),
                               surrogates=SURROGATES)

#: lava-dl (:mod:`.lava_dl_graph`): chains of Affine → LIF or CubaLIF with SLAYER's CUBA
#: neuron, reset to zero (its CUBA resets to zero), declared approximate as its Linear+LIF
#: rows are; the chain and the per-layer parameters are checked at build time
LAVA_DL_GRAPH_KNOBS = GraphKnobs(
    node_kinds=("Input", "Output", "Affine", "Linear", "LIF", "CubaLIF"), resets=("zero",),
    surrogates=SURROGATES)

"""snnbench's own typed, frozen reading of a NIR graph: one small dataclass per node kind.

A NIR file is read once (:mod:`snnbench.workload.graph.load`) into these nodes; everything
after (the reference, the builders, the hash) reads them, never the ``nir`` package, so what a
graph means is fixed here whatever ``nir`` version is installed. Shapes are per sample (no
batch, no time axis), as NIR states them. Parameter arrays are float64 and read-only.

What a graph does not say (the time step, the reset, the discretisation, the surrogate) is not
here: it is the workload's (:class:`~snnbench.workload.graph.workload.NirGraph`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
Shape = tuple[int, ...]


def frozen_array(value: object) -> Array:
    """``value`` as a read-only float64 array (a copy: the caller's array stays writable)."""
    out = np.array(value, dtype=np.float64)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class Node:
    """One node: its input and output shapes per sample, and its arrays (:meth:`arrays`)."""

    #: the node kind as NIR names it (``Affine``, ``LIF``...)
    kind: ClassVar[str] = ""
    #: the arrays that are trained (a gradient is computed for each), by field name
    trainable: ClassVar[tuple[str, ...]] = ()
    #: True for a node with state over time (a neuron)
    stateful: ClassVar[bool] = False
    #: the array field whose shape is each sample's input shape (element-wise nodes)
    shape_of: ClassVar[str] = ""

    @property
    def in_shape(self) -> Shape:
        """The shape each sample's input has."""
        if not self.shape_of:
            raise NotImplementedError
        return tuple(int(d) for d in getattr(self, self.shape_of).shape)

    @property
    def out_shape(self) -> Shape:
        """The shape each sample's output has."""
        return self.in_shape

    def arrays(self) -> dict[str, Array]:
        """Every array field by name, in field order."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if isinstance(getattr(self, f.name), np.ndarray)}

    def digest(self) -> bytes:
        """The node's content as bytes: its kind, shapes, scalar fields and arrays."""
        h = hashlib.sha256(self.kind.encode())
        for f in fields(self):
            value = getattr(self, f.name)
            h.update(f.name.encode())
            if isinstance(value, np.ndarray):
                h.update(repr(value.shape).encode())
                h.update(np.ascontiguousarray(value, dtype="<f8").tobytes())
            else:
                h.update(repr(value).encode())
        return h.digest()


@dataclass(frozen=True, eq=False)
class _Shaped(Node):
    """A node whose input shape per sample is its first field, ``shape``."""

    shape: Shape

    @property
    def in_shape(self) -> Shape:
        return self.shape


@dataclass(frozen=True, eq=False)
class Input(_Shaped):
    """The graph's input, of ``shape`` per sample."""

    kind: ClassVar[str] = "Input"


@dataclass(frozen=True, eq=False)
class Output(_Shaped):
    """The graph's output: the sum of what reaches it."""

    kind: ClassVar[str] = "Output"


@dataclass(frozen=True, eq=False)
class _Dense(Node):
    """A node with a weight matrix ``weight`` (out, in) over a flat feature vector."""

    weight: Array

    @property
    def in_shape(self) -> Shape:
        return (int(self.weight.shape[1]),)

    @property
    def out_shape(self) -> Shape:
        return (int(self.weight.shape[0]),)


@dataclass(frozen=True, eq=False)
class Affine(_Dense):
    """y = W x + b over a flat feature vector; ``weight`` is (out, in)."""

    bias: Array
    kind: ClassVar[str] = "Affine"
    trainable: ClassVar[tuple[str, ...]] = ("weight", "bias")


@dataclass(frozen=True, eq=False)
class Linear(_Dense):
    """y = W x; ``weight`` is (out, in)."""

    kind: ClassVar[str] = "Linear"
    trainable: ClassVar[tuple[str, ...]] = ("weight",)


@dataclass(frozen=True, eq=False)
class Scale(Node):
    """y = s ⊙ x, element-wise."""

    scale: Array
    kind: ClassVar[str] = "Scale"
    trainable: ClassVar[tuple[str, ...]] = ("scale",)
    shape_of: ClassVar[str] = "scale"


@dataclass(frozen=True, eq=False)
class Flatten(_Shaped):
    """Dimensions ``start_dim..end_dim`` of each sample merged into one (the batch axis is
    never part of it, as in NIR); both indices are normalised to be ≥ 0."""

    start_dim: int
    end_dim: int
    kind: ClassVar[str] = "Flatten"

    @property
    def out_shape(self) -> Shape:
        s = self.shape
        merged = int(np.prod(s[self.start_dim:self.end_dim + 1], dtype=np.int64))
        return (*s[:self.start_dim], merged, *s[self.end_dim + 1:])


@dataclass(frozen=True, eq=False)
class Conv1d(_Shaped):
    """1-d cross-correlation of a (C, L) sample; ``weight`` is (C_out, C_in, k)."""

    weight: Array
    bias: Array
    stride: int
    padding: int
    kind: ClassVar[str] = "Conv1d"
    trainable: ClassVar[tuple[str, ...]] = ("weight", "bias")

    @property
    def out_shape(self) -> Shape:
        _, length = self.shape
        k = int(self.weight.shape[2])
        return (int(self.weight.shape[0]), (length + 2 * self.padding - k) // self.stride + 1)


@dataclass(frozen=True, eq=False)
class Conv2d(_Shaped):
    """2-d cross-correlation of a (C, H, W) sample; ``weight`` is (C_out, C_in, kH, kW)."""

    weight: Array
    bias: Array
    stride: tuple[int, int]
    padding: tuple[int, int]
    kind: ClassVar[str] = "Conv2d"
    trainable: ClassVar[tuple[str, ...]] = ("weight", "bias")

    @property
    def out_shape(self) -> Shape:
        _, h, w = self.shape
        kh, kw = int(self.weight.shape[2]), int(self.weight.shape[3])
        return (int(self.weight.shape[0]),
                (h + 2 * self.padding[0] - kh) // self.stride[0] + 1,
                (w + 2 * self.padding[1] - kw) // self.stride[1] + 1)


@dataclass(frozen=True, eq=False)
class SumPool2d(_Shaped):
    """Sum over non-overlapping ``kernel`` windows of a (C, H, W) sample (stride = kernel,
    no padding: the only pooling built so far)."""

    kernel: tuple[int, int]
    kind: ClassVar[str] = "SumPool2d"

    @property
    def out_shape(self) -> Shape:
        c, h, w = self.shape
        return (c, h // self.kernel[0], w // self.kernel[1])


@dataclass(frozen=True, eq=False)
class AvgPool2d(SumPool2d):
    """The mean over non-overlapping ``kernel`` windows (a :class:`SumPool2d` divided by the
    window's size)."""

    kind: ClassVar[str] = "AvgPool2d"


@dataclass(frozen=True, eq=False)
class _Neuron(Node):
    """A node with state over time; its parameters are one value per neuron (the reader
    broadcasts them to one shape), so ``r``, which every neuron model has, gives the shape."""

    stateful: ClassVar[bool] = True
    shape_of: ClassVar[str] = "r"


@dataclass(frozen=True, eq=False)
class _Leaky(_Neuron):
    """A membrane that leaks: τ dv/dt = (v_leak − v) + r·I (:class:`LI`, and :class:`LIF`,
    which spikes)."""

    tau: Array
    r: Array
    v_leak: Array


@dataclass(frozen=True, eq=False)
class LIF(_Leaky):
    """Leaky integrate-and-fire: τ dv/dt = (v_leak − v) + r·I; a spike when v ≥ v_threshold."""

    v_threshold: Array
    kind: ClassVar[str] = "LIF"


@dataclass(frozen=True, eq=False)
class IF(_Neuron):
    """Integrate-and-fire: dv/dt = r·I; a spike when v ≥ v_threshold."""

    r: Array
    v_threshold: Array
    kind: ClassVar[str] = "IF"


@dataclass(frozen=True, eq=False)
class LI(_Leaky):
    """Leaky integrator (a read-out without spikes): τ dv/dt = (v_leak − v) + r·I; its
    output is v."""

    kind: ClassVar[str] = "LI"


@dataclass(frozen=True, eq=False)
class CubaLIF(_Neuron):
    """Current-based LIF: τ_syn dI/dt = −I + w_in·x; τ_mem dv/dt = (v_leak − v) + r·I; a spike
    when v ≥ v_threshold."""

    tau_syn: Array
    tau_mem: Array
    r: Array
    v_leak: Array
    v_threshold: Array
    w_in: Array
    kind: ClassVar[str] = "CubaLIF"


#: every node kind snnbench reads, by its NIR name
NODE_TYPES: dict[str, type[Node]] = {
    cls.kind: cls for cls in (Input, Output, Affine, Linear, Scale, Flatten, Conv1d, Conv2d,
                              SumPool2d, AvgPool2d, LIF, IF, LI, CubaLIF)
}
#: the node kinds that spike (their output is 0/1)
SPIKING: frozenset[str] = frozenset({"LIF", "IF", "CubaLIF"})


@dataclass(frozen=True, eq=False)
class Graph:
    """A checked feed-forward graph: nodes in a topological order (the input first), the
    edges between them, one input and one output. A node's input is the sum of what its
    incoming edges carry."""

    nodes: tuple[tuple[str, Node], ...]
    edges: tuple[tuple[str, str], ...]
    input: str
    output: str

    def node(self, name: str) -> Node:
        """The node called ``name``."""
        return dict(self.nodes)[name]

    def predecessors(self, name: str) -> tuple[str, ...]:
        """The nodes with an edge into ``name``, in edge order."""
        return tuple(src for src, dst in self.edges if dst == name)

    def feed_forward(self, apply: Callable[[str, Any], Any]) -> Callable[[Any], Any]:
        """The graph as a function of its input (arrays of any library that add with ``+``):
        each node after the input is given the sum of what its incoming edges carry and gives
        ``apply(name, that sum)``; the function returns the Output node's value. The order is
        worked out here, once, not on each call (a timed forward calls the function)."""
        order = [(name, self.predecessors(name)) for name, _ in self.nodes if name != self.input]

        def run(x: Any) -> Any:
            values = {self.input: x}
            for name, preds in order:
                h = values[preds[0]]
                for src in preds[1:]:
                    h = h + values[src]
                values[name] = apply(name, h)
            return values[self.output]

        return run

    def node_kinds(self) -> tuple[str, ...]:
        """The kinds of node the graph uses, sorted."""
        return tuple(sorted({node.kind for _, node in self.nodes}))

    def spiking_output(self) -> bool:
        """True when everything reaching the Output node spikes (its value is 0/1)."""
        return all(self.node(src).kind in SPIKING for src in self.predecessors(self.output))

    def neurons(self) -> int:
        """How many neurons (the units of stateful nodes) the graph has: its size."""
        return sum(int(np.prod(node.in_shape, dtype=np.int64))
                   for _, node in self.nodes if node.stateful)

    def parameter_names(self) -> tuple[str, ...]:
        """The trainable arrays as ``node.field`` (``fc1.weight``), in node order."""
        return tuple(f"{name}.{what}" for name, node in self.nodes for what in node.trainable)

    def parameters(self) -> dict[str, Array]:
        """The trainable arrays by :meth:`parameter_names`."""
        return {f"{name}.{what}": getattr(node, what)
                for name, node in self.nodes for what in node.trainable}

    @property
    def content_hash(self) -> str:
        """sha256 of the graph's content (node names, kinds, shapes, parameters and edges):
        equal for the same network whatever file it was read from."""
        h = hashlib.sha256()
        for name, node in self.nodes:
            h.update(name.encode() + b"\0" + node.digest())
        for src, dst in sorted(self.edges):
            h.update(f"{src}->{dst};".encode())
        h.update(f"in={self.input};out={self.output}".encode())
        return h.hexdigest()

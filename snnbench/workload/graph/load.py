"""Reading a ``.nir`` file into snnbench's checked :class:`~snnbench.workload.graph.nodes.Graph`.

Every way a file can be unusable is found here, before anything is written, and said in one
line (:class:`GraphError`): not a NIR file, a node kind snnbench does not read, a cycle, a node
not reached from the input, shapes that do not fit, parameters that are not finite or a time
constant that is not positive. ``nir`` is imported only here, and only when a file is read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from snnbench.workload.base import WorkloadError
from snnbench.workload.graph.nodes import (
    IF,
    LI,
    LIF,
    NODE_TYPES,
    Affine,
    AvgPool2d,
    Conv1d,
    Conv2d,
    CubaLIF,
    Flatten,
    Graph,
    Input,
    Linear,
    Node,
    Output,
    Scale,
    Shape,
    SumPool2d,
    frozen_array,
)


class GraphError(WorkloadError):
    """A graph file snnbench cannot use as a workload; the message is one line."""


def read_graph(path: str | Path) -> Graph:
    """The checked graph of the NIR file at ``path``; any defect raises :class:`GraphError`."""
    return from_nir(read_nir(path), str(path))


def read_nir(path: str | Path) -> Any:
    """The ``nir.NIRGraph`` in the file at ``path``."""
    p = Path(path)
    if not p.is_file():
        raise GraphError(f"graph {str(path)!r}: no such file")
    try:
        import nir
    except ImportError:
        raise GraphError("reading a NIR graph needs the nir package "
                         "(pip install 'snnbench[nir]')") from None
    try:
        graph = nir.read(str(p))
    except Exception as exc:  # h5py and nir raise many kinds for a file that is not NIR
        raise GraphError(f"graph {str(path)!r} is not a NIR file "
                         f"({type(exc).__name__}: {_first_line(exc)})") from None
    if type(graph).__name__ != "NIRGraph":
        raise GraphError(f"graph {str(path)!r} holds a single {type(graph).__name__} node, "
                         "not a NIR graph")
    return graph


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:120] if text else "no message"


def from_nir(graph: Any, where: str = "graph") -> Graph:
    """snnbench's graph of a ``nir.NIRGraph`` (in memory): kinds, order, shapes and values
    checked."""
    raw: Mapping[str, Any] = dict(graph.nodes)
    edges = tuple((str(a), str(b)) for a, b in graph.edges)
    for name, node in raw.items():
        kind = type(node).__name__
        if kind not in _CONVERTERS:
            known = ", ".join(NODE_TYPES)
            raise GraphError(f"{where}: node {name!r} is a {kind}, a node kind snnbench does "
                             f"not read (supported: {known})")
    for src, dst in edges:
        for end in (src, dst):
            if end not in raw:
                raise GraphError(f"{where}: edge {src!r} -> {dst!r} names no node {end!r}")
    inputs = [n for n, node in raw.items() if type(node).__name__ == "Input"]
    outputs = [n for n, node in raw.items() if type(node).__name__ == "Output"]
    if len(inputs) != 1 or len(outputs) != 1:
        raise GraphError(f"{where}: a graph needs exactly one Input and one Output node, "
                         f"has {len(inputs)} and {len(outputs)}")
    order = _topological(list(raw), edges, where)
    reached = _reached(inputs[0], edges)
    for name in order:
        if name not in reached:
            raise GraphError(f"{where}: node {name!r} is not reached from the input "
                             f"{inputs[0]!r}")
    nodes: dict[str, Node] = {}
    for name in order:
        preds = [src for src, dst in edges if dst == name]
        if name != inputs[0] and not preds:
            raise GraphError(f"{where}: node {name!r} has no input edge")
        incoming = nodes[preds[0]].out_shape if preds else None
        node = _convert(name, raw[name], incoming, where)
        for src in preds:
            given = nodes[src]
            if (isinstance(given, Input) and given.shape != node.in_shape
                    and _squeezed(given.shape) == node.in_shape):
                nodes[src] = given = Input(shape=node.in_shape)
            if given.out_shape != node.in_shape:
                raise GraphError(
                    f"{where}: edge {src!r} -> {name!r}: {src!r} gives shape "
                    f"{_shape(nodes[src].out_shape)}, {name!r} takes {_shape(node.in_shape)}")
        nodes[name] = node
    if any(src == outputs[0] for src, _ in edges):
        raise GraphError(f"{where}: the Output node {outputs[0]!r} has an outgoing edge")
    return Graph(nodes=tuple((n, nodes[n]) for n in order), edges=edges, input=inputs[0],
                 output=outputs[0])


def _shape(shape: Shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


def _topological(names: list[str], edges: tuple[tuple[str, str], ...], where: str) -> list[str]:
    """Kahn's order (ties kept in file order); a cycle raises :class:`GraphError`."""
    indegree = {n: 0 for n in names}
    for _, dst in edges:
        indegree[dst] += 1
    ready = [n for n in names if indegree[n] == 0]
    order: list[str] = []
    while ready:
        name = ready.pop(0)
        order.append(name)
        for src, dst in edges:
            if src == name:
                indegree[dst] -= 1
                if indegree[dst] == 0:
                    ready.append(dst)
    if len(order) != len(names):
        cycle = " -> ".join(repr(n) for n in _a_cycle(set(names) - set(order), edges))
        raise GraphError(f"{where}: recurrent connections (the cycle {cycle}) are not "
                         "supported: only feed-forward graphs are")
    return order


def _a_cycle(left: set[str], edges: tuple[tuple[str, str], ...]) -> list[str]:
    """One cycle among ``left``, the nodes Kahn's order could not place (each has a
    predecessor among them), as its nodes in edge direction, the first repeated at the end."""
    pred = {dst: src for src, dst in edges if src in left and dst in left}
    path = [min(left)]
    while path[-1] not in path[:-1]:
        path.append(pred[path[-1]])
    path = path[path.index(path[-1]):]  # walked against the edges: from the repeat on
    return path[::-1]


def _reached(start: str, edges: tuple[tuple[str, str], ...]) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        name = todo.pop()
        for src, dst in edges:
            if src == name and dst not in seen:
                seen.add(dst)
                todo.append(dst)
    return seen


# -- one converter per node kind ----------------------------------------------------------------

class _Reader:
    """Reads one NIR node's fields, each error naming the node and the field."""

    def __init__(self, name: str, node: Any, where: str) -> None:
        self.name, self.node, self.where = name, node, where

    def fail(self, what: str) -> GraphError:
        return GraphError(f"{self.where}: node {self.name!r} ({type(self.node).__name__}): "
                          f"{what}")

    def array(self, field: str, positive: bool = False) -> np.ndarray:
        value = getattr(self.node, field, None)
        if value is None:
            raise self.fail(f"has no {field}")
        try:
            out = frozen_array(value)
        except (TypeError, ValueError):
            raise self.fail(f"{field} is not numeric") from None
        if not np.all(np.isfinite(out)):
            raise self.fail(f"{field} is not finite")
        if positive and not np.all(out > 0):
            raise self.fail(f"{field} must be > 0")
        return out

    def shape(self, value: Any, field: str) -> Shape:
        try:
            shape = tuple(int(d) for d in np.asarray(value).reshape(-1))
        except (TypeError, ValueError):
            raise self.fail(f"{field} is not a shape") from None
        if not shape or any(d <= 0 for d in shape):
            raise self.fail(f"{field} {list(shape)} is not a shape of positive sizes")
        return shape

    def type_shape(self, attr: str, key: str) -> Shape | None:
        types = getattr(self.node, attr, None) or {}
        value = types.get(key) if isinstance(types, Mapping) else None
        return None if value is None else self.shape(value, f"{attr}[{key!r}]")

    def pair(self, field: str, default: int | None = None) -> tuple[int, int]:
        value = getattr(self.node, field, default)
        try:
            flat = np.asarray(value, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            flat = np.array([])
        if flat.size == 1:
            flat = np.repeat(flat, 2)
        if flat.size != 2 or not all(math.isfinite(v) and v.is_integer() for v in flat):
            raise self.fail(f"{field} {value!r} is not one or two integers")
        return int(flat[0]), int(flat[1])

    def single(self, field: str, default: int) -> int:
        """An integer given as a number or a one-element array (NIR's Conv1d fields)."""
        value = getattr(self.node, field, default)
        try:
            flat = np.asarray(value, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            flat = np.array([])
        if flat.size != 1 or not (math.isfinite(flat[0]) and float(flat[0]).is_integer()):
            raise self.fail(f"{field} {value!r} is not one integer")
        return int(flat[0])

    def integer(self, field: str, default: int) -> int:
        value = getattr(self.node, field, default)
        try:
            number = float(np.asarray(value, dtype=np.float64).reshape(-1)[0])
        except (TypeError, ValueError, IndexError):
            raise self.fail(f"{field} {value!r} is not an integer") from None
        if not (math.isfinite(number) and number.is_integer()):
            raise self.fail(f"{field} {value!r} is not an integer")
        return int(number)

    def per_neuron(self, arrays: Mapping[str, np.ndarray], incoming: Shape | None
                   ) -> dict[str, np.ndarray]:
        """The neuron parameters, each one value per neuron: a scalar (or any shape that
        broadcasts, as exporters write one value for a whole layer) is broadcast to the shape
        the node receives."""
        shapes = {a.shape for a in arrays.values()}
        target = incoming
        if target is None:
            if len(shapes) != 1 or not next(iter(shapes)):
                raise self.fail("its parameters do not say how many neurons it has")
            target = next(iter(shapes))
        out = {}
        for name, value in arrays.items():
            try:
                out[name] = frozen_array(np.broadcast_to(value, target))
            except ValueError:
                raise self.fail(f"{name} of shape {_shape(tuple(value.shape))} does not fit "
                                f"the {_shape(target)} neurons it receives") from None
        return out


def _squeezed(shape: Shape) -> Shape:
    """``shape`` without leading 1s: an exporter that wrote the batch axis of its sample
    into an Input or Output type (Norse) means the shape after it."""
    i = 0
    while i < len(shape) - 1 and shape[i] == 1:
        i += 1
    return shape[i:]


def _input(r: _Reader, incoming: Shape | None) -> Node:
    shape = r.type_shape("input_type", "input")
    if shape is None:
        raise r.fail("states no input shape")
    return Input(shape=shape)


def _output(r: _Reader, incoming: Shape | None) -> Node:
    shape = r.type_shape("output_type", "output") or incoming
    assert shape is not None  # an Output always has a predecessor (checked before)
    if incoming is not None and shape != incoming and _squeezed(shape) == _squeezed(incoming):
        shape = incoming
    return Output(shape=shape)


def _affine(r: _Reader, incoming: Shape | None) -> Node:
    weight, bias = r.array("weight"), r.array("bias")
    if weight.ndim != 2 or bias.shape != (weight.shape[0],):
        raise r.fail(f"weight {_shape(weight.shape)} and bias {_shape(bias.shape)} do not "
                     "form an affine map (weight (out, in), bias (out,))")
    return Affine(weight=weight, bias=bias)


def _linear(r: _Reader, incoming: Shape | None) -> Node:
    weight = r.array("weight")
    if weight.ndim != 2:
        raise r.fail(f"weight {_shape(weight.shape)} is not (out, in)")
    return Linear(weight=weight)


def _scale(r: _Reader, incoming: Shape | None) -> Node:
    scale = r.array("scale")
    if scale.ndim == 0 and incoming is not None:  # one factor for every element
        scale = frozen_array(np.full(incoming, float(scale)))
    return Scale(scale=scale)


def _flatten(r: _Reader, incoming: Shape | None) -> Node:
    shape = r.type_shape("input_type", "input") or incoming
    assert shape is not None
    rank = len(shape)
    # NIR's own default start_dim is 1 (its Flatten keeps a sample's first axis)
    start, end = r.integer("start_dim", 1), r.integer("end_dim", -1)
    start, end = start + rank if start < 0 else start, end + rank if end < 0 else end
    if not 0 <= start <= end < rank:
        raise r.fail(f"start_dim..end_dim does not fit a sample of shape {_shape(shape)}")
    return Flatten(shape=shape, start_dim=start, end_dim=end)


def _conv(dims: int) -> Callable[[_Reader, Shape | None], Node]:
    """The reader of a ``dims``-d convolution (Conv1d: (C, L) samples, its fields single
    integers; Conv2d: (C, H, W), each field one or two integers)."""
    weight_axes = "(C_out, C_in, k)" if dims == 1 else "(C_out, C_in, kH, kW)"
    sample_axes = "(C, L)" if dims == 1 else "(C, H, W)"

    def sizes(r: _Reader, field: str, default: int) -> tuple[int, ...]:
        return (r.single(field, default),) if dims == 1 else r.pair(field, default)

    def shown(values: tuple[int, ...]) -> object:
        return values[0] if dims == 1 else values

    def convert(r: _Reader, incoming: Shape | None) -> Node:
        weight, bias = r.array("weight"), r.array("bias")
        if weight.ndim != dims + 2 or bias.shape != (weight.shape[0],):
            raise r.fail(f"weight {_shape(weight.shape)} and bias {_shape(bias.shape)} are not "
                         f"{weight_axes} and (C_out,)")
        groups = r.single("groups", 1) if dims == 1 else r.integer("groups", 1)
        if groups != 1 or sizes(r, "dilation", 1) != (1,) * dims:
            raise r.fail("groups and dilation other than 1 are not supported")
        stride = sizes(r, "stride", 1)
        if min(stride) < 1:
            raise r.fail(f"stride {shown(stride)} must be ≥ 1")
        padding_raw = getattr(r.node, "padding", 0)
        kernel = tuple(int(k) for k in weight.shape[2:])
        padding: tuple[int, ...]
        if isinstance(padding_raw, str):
            if padding_raw == "valid":
                padding = (0,) * dims
            elif (padding_raw == "same" and stride == (1,) * dims
                  and all(k % 2 for k in kernel)):
                padding = tuple(k // 2 for k in kernel)
            else:
                raise r.fail(f"padding {padding_raw!r} is not supported with stride "
                             f"{shown(stride)} and kernel {'×'.join(map(str, kernel))}")
        else:
            padding = sizes(r, "padding", 0)
            if min(padding) < 0:
                raise r.fail(f"padding {shown(padding)} must be ≥ 0")
        spatial = getattr(r.node, "input_shape", None)
        if spatial is not None:
            shape: Shape = (int(weight.shape[1]), *r.shape(spatial, "input_shape"))
        elif incoming is not None:
            shape = incoming
        else:
            raise r.fail("states no input shape")
        if len(shape) != dims + 1:
            raise r.fail(f"takes a {sample_axes} sample, not {_shape(shape)}")
        if shape[0] != weight.shape[1]:
            raise r.fail(f"weight {_shape(weight.shape)} takes {weight.shape[1]} channels, "
                         f"not the {shape[0]} of a sample of shape {_shape(shape)}")
        node: Conv1d | Conv2d
        if dims == 1:
            node = Conv1d(shape=shape, weight=weight, bias=bias, stride=stride[0],
                          padding=padding[0])
        else:
            node = Conv2d(shape=shape, weight=weight, bias=bias, stride=(stride[0], stride[1]),
                          padding=(padding[0], padding[1]))
        if min(node.out_shape) < 1:
            raise r.fail(f"its kernel does not fit a sample of shape {_shape(shape)}")
        return node
    return convert


def _pool(cls: type[SumPool2d]) -> Callable[[_Reader, Shape | None], Node]:
    def convert(r: _Reader, incoming: Shape | None) -> Node:
        kernel = r.pair("kernel_size")
        if r.pair("stride", kernel[0]) != kernel or r.pair("padding", 0) != (0, 0):
            raise r.fail("only pooling with stride = kernel_size and no padding is supported")
        shape = r.type_shape("input_type", "input") or incoming
        if shape is None or len(shape) != 3:
            raise r.fail(f"takes a (C, H, W) sample, not {shape}")
        if shape[1] % kernel[0] or shape[2] % kernel[1]:
            raise r.fail(f"kernel {kernel} does not tile a sample of shape {_shape(shape)}")
        return cls(shape=shape, kernel=kernel)
    return convert


def _lif(r: _Reader, incoming: Shape | None) -> Node:
    arrays = {"tau": r.array("tau", positive=True), "r": r.array("r"),
              "v_leak": r.array("v_leak"), "v_threshold": r.array("v_threshold")}
    return LIF(**r.per_neuron(arrays, incoming))


def _if(r: _Reader, incoming: Shape | None) -> Node:
    arrays = {"r": r.array("r"), "v_threshold": r.array("v_threshold")}
    return IF(**r.per_neuron(arrays, incoming))


def _li(r: _Reader, incoming: Shape | None) -> Node:
    arrays = {"tau": r.array("tau", positive=True), "r": r.array("r"),
              "v_leak": r.array("v_leak")}
    return LI(**r.per_neuron(arrays, incoming))


def _cubalif(r: _Reader, incoming: Shape | None) -> Node:
    arrays = {"tau_syn": r.array("tau_syn", positive=True),
              "tau_mem": r.array("tau_mem", positive=True), "r": r.array("r"),
              "v_leak": r.array("v_leak"), "v_threshold": r.array("v_threshold"),
              "w_in": r.array("w_in")}
    return CubaLIF(**r.per_neuron(arrays, incoming))


_CONVERTERS: dict[str, Callable[[_Reader, Shape | None], Node]] = {
    "Input": _input, "Output": _output, "Affine": _affine, "Linear": _linear,
    "Scale": _scale, "Flatten": _flatten, "Conv1d": _conv(1), "Conv2d": _conv(2),
    "SumPool2d": _pool(SumPool2d), "AvgPool2d": _pool(AvgPool2d),
    "LIF": _lif, "IF": _if, "LI": _li, "CubaLIF": _cubalif,
}
assert set(_CONVERTERS) == set(NODE_TYPES)


def _convert(name: str, node: Any, incoming: Shape | None, where: str) -> Node:
    reader = _Reader(name, node, where)
    return _CONVERTERS[type(node).__name__](reader, incoming)


def check_time_step(graph: Graph, dt: float, discretisation: str) -> None:
    """``dt`` must be a positive finite number, and forward Euler must not flip a membrane's
    sign each step (dt ≤ τ for every time constant)."""
    if not isinstance(dt, float | int) or isinstance(dt, bool) or not math.isfinite(dt) \
            or dt <= 0:
        raise GraphError(f"dt must be a positive number of seconds, got {dt!r}")
    if discretisation != "euler":
        return
    for name, node in graph.nodes:
        for field in ("tau", "tau_mem", "tau_syn"):
            tau = getattr(node, field, None)
            if isinstance(tau, np.ndarray) and float(tau.min()) < dt:
                raise GraphError(f"node {name!r}: dt = {dt:g} exceeds {field} = "
                                 f"{float(tau.min()):g}; forward Euler is unstable there "
                                 "(use a smaller dt or discretisation = \"exponential\")")

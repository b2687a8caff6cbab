"""The ``nir-graph`` workload kind: a user's network, read from a ``.nir`` file.

A graph states its layers and their parameters; it does not state the time step, the reset,
how a continuous neuron becomes a step, the surrogate, T, B, the input or the seed. Those are
this workload's fields, given by the config or the flags and recorded with every row. The
:attr:`NirGraph.case_id` covers the graph's content hash (not its path: the same network in
another file is the same case) and every choice.

The file is read when the workload is made (:meth:`NirGraph.from_file`, where every defect is
found before anything is written) and again, lazily, when a worker needs the network; a file
that changed in between is refused.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from snnbench.errors import shown
from snnbench.workload.base import (
    Agreement,
    FrameworkSettings,
    Knobs,
    RunOnce,
    Workload,
    WorkloadError,
    first_unsupported,
    json_float,
    register,
    typed_network,
)
from snnbench.workload.graph.compare import compare_graph
from snnbench.workload.graph.load import GraphError, check_time_step, read_graph
from snnbench.workload.graph.nodes import (
    NODE_TYPES,
    SPIKING,
    Affine,
    Conv1d,
    Conv2d,
    Graph,
    Linear,
)
from snnbench.workload.graph.reference import (
    DISCRETISATIONS,
    Dynamics,
    GraphResult,
    run_graph_reference,
)
from snnbench.workload.linear_lif import neuron
from snnbench.workload.linear_lif.spec import INPUT_KINDS, FloatArray

KIND = "nir-graph"
#: the dtypes a graph case computes in (the reference is float64 of the float32 values)
GRAPH_DTYPES: tuple[str, ...] = ("float32",)

#: the fields a graph file determines (recorded so that a row is read without the file)
_FROM_FILE = ("graph", "network", "graph_hash", "neurons", "node_kinds")
#: the fields that name the file, not the network: left out of the case_id
_WHERE = ("graph", "network")


@functools.lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int) -> Graph:
    return read_graph(path)


def load_graph(path: str) -> Graph:
    """The graph at ``path``, read once per process while the file is unchanged."""
    try:
        mtime = Path(path).stat().st_mtime_ns
    except OSError:
        raise GraphError(f"graph {path!r}: no such file") from None
    return _load(path, mtime)


@dataclass(frozen=True)
class GraphData:
    """A graph case's data: the graph, its trainable arrays as float32 (what every adapter
    builds with, by ``node.field``) and the input (T, B, *input shape), float32."""

    graph: Graph
    params: Mapping[str, FloatArray]
    inputs: FloatArray


@register
@dataclass(frozen=True)
class NirGraph(Workload):
    """A NIR graph with the choices it leaves open."""

    graph: str
    #: the file's name without its suffix (``shd-mlp``): how tables and labels name it
    network: str
    graph_hash: str
    neurons: int
    node_kinds: str
    dt: float
    time_steps: int = 100
    batch_size: int = 16
    reset: str = neuron.RESET
    discretisation: str = "euler"
    surrogate: str = neuron.SURROGATE
    surrogate_slope: float = neuron.SURROGATE_SLOPE
    detach_reset: bool = neuron.DETACH_RESET
    input_kind: str = "gaussian"
    input_std: float = 1.0
    input_rate: float = 0.1
    seed: int = 0
    dtype: str = "float32"

    kind: ClassVar[str] = KIND
    version: ClassVar[int] = 1
    size_param: ClassVar[str] = "neurons"
    size_axis: ClassVar[str] = "neurons (n)"
    size_symbol: ClassVar[str] = "n"
    #: the file's name is the table column ``graph_name``: a run folder's tables derive a
    #: column ``network`` of their own (the network fields that vary), which it must not shadow
    columns: ClassVar[tuple[str, ...]] = (
        "dtype", "graph_name", "neurons", "batch_size", "time_steps", "dt", "reset",
        "discretisation", "surrogate", "surrogate_slope", "detach_reset", "input_kind",
        "input_std", "input_rate", "seed", "graph", "graph_hash", "node_kinds",
    )
    key_columns: ClassVar[tuple[str, ...]] = columns[:8]
    int_columns: ClassVar[tuple[str, ...]] = ("neurons", "batch_size", "time_steps")
    float_columns: ClassVar[tuple[str, ...]] = ("dt", "surrogate_slope", "input_std",
                                                "input_rate")
    network_formats: ClassVar[tuple[tuple[str, str], ...]] = (
        ("surrogate", "surrogate={}"), ("surrogate_slope", "slope={}"),
        ("detach_reset", "detach_reset={}"), ("input_kind", "input={}"),
        ("input_std", "input_std={}"), ("input_rate", "input_rate={}"), ("seed", "seed={}"),
        ("graph_hash", "graph={:.8}"),
    )
    #: two graphs of one name and size are told apart by their content in words
    tied_columns: ClassVar[tuple[str, ...]] = ("graph_hash",)
    shown_columns: ClassVar[tuple[tuple[str, str], ...]] = (
        ("graph_name", "graph"), ("neurons", "n"), ("batch_size", "B"), ("time_steps", "T"),
        ("dt", "dt"), ("reset", "reset"), ("discretisation", "step"),
        ("surrogate", "surrogate"), ("surrogate_slope", "slope"),
        ("detach_reset", "detach reset"), ("input_kind", "input"),
    )
    label_parts: ClassVar[tuple[tuple[str, str], ...]] = (
        ("device", "{}"), ("graph_name", "{}"), ("neurons", "n={}"), ("batch_size", "B={}"),
        ("time_steps", "T={}"), ("dt", "dt={}"), ("reset", "{}"), ("discretisation", "{}"),
        ("dtype", "{}"),
    )
    #: a group is one graph: two graphs of one neuron count never share a plot's panel
    group_parts: ClassVar[tuple[tuple[str, str], ...]] = (
        ("device", "{}"), ("dtype", "{}"), ("graph_name", "{}"), ("batch_size", "B={}"),
        ("time_steps", "T={}"), ("dt", "dt={}"), ("reset", "reset={}"),
        ("discretisation", "{}"),
    )
    verify_columns: ClassVar[tuple[tuple[str, str], ...]] = (
        ("network", "network"), ("reset", "reset"), ("detach_reset", "detach"),
        ("neurons", "n"), ("time_steps", "T"), ("batch_size", "B"), ("dt", "dt"),
        ("discretisation", "step"), ("dtype", "dtype"), ("surrogate", "surrogate"),
        ("surrogate_slope", "slope"), ("input_kind", "input"),
    )

    config_key: ClassVar[str] = "graph"
    config_paths: ClassVar[tuple[str, ...]] = ("graph",)

    def __post_init__(self) -> None:
        from snnbench.workload.linear_lif.spec import (
            SURROGATES,  # the same surrogate names as linear-lif
        )

        for name in ("graph", "network", "graph_hash", "node_kinds"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise WorkloadError(f"{name} must be a non-empty string, "
                                    f"got {shown(getattr(self, name))}")
        for name in ("neurons", "time_steps", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise WorkloadError(f"{name} must be a positive integer, got {shown(value)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise WorkloadError(f"seed must be an integer ≥ 0, got {shown(self.seed)}")
        for name in ("dt", "surrogate_slope", "input_std", "input_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value):
                raise WorkloadError(f"{name} must be a finite number, got {shown(value)}")
            object.__setattr__(self, name, float(value))
        if self.dt <= 0:
            raise WorkloadError(f"dt must be a positive number of seconds, got {self.dt!r}")
        choices: dict[str, tuple[str, ...]] = {
            "reset": neuron.RESET_MODES, "discretisation": DISCRETISATIONS,
            "surrogate": SURROGATES, "input_kind": INPUT_KINDS, "dtype": GRAPH_DTYPES,
        }
        for name, allowed in choices.items():
            value = getattr(self, name)
            if value not in allowed:
                raise WorkloadError(f"{name} must be one of {', '.join(allowed)}, "
                                    f"got {shown(value)}")
        if not isinstance(self.detach_reset, bool):
            raise WorkloadError(f"detach_reset must be true or false, "
                                f"got {shown(self.detach_reset)}")
        unknown = [k for k in self.node_kinds.split(",") if k not in NODE_TYPES]
        if unknown:
            raise WorkloadError(f"node kind {unknown[0]!r} is not one snnbench reads")

    # -- made from a file ------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: str | Path, **choices: Any) -> NirGraph:
        """The workload of the graph at ``path`` with ``choices`` (``dt`` required): the file
        is read and every defect raised as a one-line :class:`GraphError` here."""
        if choices.get("dt") is None:
            raise GraphError("dt is missing: a NIR graph states no time step; give one "
                             "(seconds, e.g. dt = 1e-3)")
        known = {f.name for f in fields(cls)} - set(_FROM_FILE)
        unknown = sorted(set(choices) - known)
        if unknown:
            raise GraphError(f"unknown graph setting {unknown[0]!r} "
                             f"(known: {', '.join(sorted(known))})")
        # absolute: a worker reads the file again, from whatever folder it runs in
        text = str(Path(path).absolute())
        graph = load_graph(text)
        if not graph.neurons():
            raise GraphError(f"graph {text!r} has no neuron (LIF, IF, LI or CubaLIF node): "
                             "nothing of it is a spiking network")
        workload = cls(graph=text, network=Path(text).stem, graph_hash=graph.content_hash,
                       neurons=graph.neurons(), node_kinds=",".join(graph.node_kinds()),
                       **choices)
        check_time_step(graph, workload.dt, workload.discretisation)
        return workload

    # -- made from a config -----------------------------------------------------------------
    @classmethod
    def config_fields(cls) -> tuple[str, ...]:
        """``graph`` (the file) and every choice the file leaves open."""
        return ("graph", *(f.name for f in fields(cls) if f.name not in _FROM_FILE))

    @classmethod
    def config_defaults(cls) -> dict[str, Any]:
        """The choices' defaults (``graph`` and ``dt`` have none)."""
        return {f.name: f.default for f in fields(cls)
                if f.name not in _FROM_FILE and f.default is not MISSING}

    @classmethod
    def config_choices(cls) -> dict[str, tuple[Any, ...]]:
        """The menus of the text choices."""
        from snnbench.workload.linear_lif.spec import SURROGATES

        return {"reset": neuron.RESET_MODES, "discretisation": DISCRETISATIONS,
                "surrogate": SURROGATES, "input_kind": INPUT_KINDS, "dtype": GRAPH_DTYPES}

    @classmethod
    def config_value(cls, key: str, value: Any, folder: str | None) -> Any:
        """A graph's path made absolute; ``example:NAME`` (a shipped example) kept as it is."""
        from snnbench.workload.graph.examples import example_name

        if key == "graph" and isinstance(value, str) and example_name(value) is not None:
            return value
        return super().config_value(key, value, folder)

    @classmethod
    def from_config(cls, fields: Mapping[str, Any]) -> NirGraph:
        """The graph file of ``graph`` (or the shipped example of ``example:NAME``, written
        once into the cache folder) read with the other fields as its choices
        (:meth:`from_file`: every defect one :class:`GraphError` line)."""
        from snnbench.workload.graph.examples import example_file, example_name

        choices = dict(fields)
        path = choices.pop("graph", None)
        if path is None:
            raise GraphError("graph is missing: name the NIR file (graph = \"net.nir\")")
        cls.check_config_value("graph", path)
        example = example_name(path)
        if example is not None:
            if choices.get("dt") is None:  # before a file is written
                raise GraphError("dt is missing: a NIR graph states no time step; give one "
                                 "(seconds, e.g. dt = 1e-3)")
            path = str(example_file(example))
        return cls.from_file(path, **choices)

    @classmethod
    def check_config_value(cls, key: str, value: Any) -> None:
        """``graph`` must be a path (text); any other choice is checked as the workload
        checks it, on a stand-in for a file."""
        if key == "graph":
            if not isinstance(value, str) or not value.strip():
                raise GraphError(f"graph must be the path of a NIR file, got {shown(value)}")
            return
        known = set(cls.config_fields())
        if key not in known:
            raise GraphError(f"unknown graph setting {key!r} (known: {', '.join(sorted(known))})")
        stand_in: dict[str, Any] = {"graph": "-", "network": "-", "graph_hash": "-",
                                    "neurons": 1, "node_kinds": "LIF", "dt": 1.0}
        cls(**{**stand_in, key: value})

    def verify_tag(self, varied: Iterable[str]) -> str:
        """The network's name and reset, and ``-nodetach`` for a check without the detached
        reset when verify checks both rules (``shd-mlp-zero-nodetach``)."""
        detach = "-nodetach" if "detach_reset" in set(varied) and not self.detach_reset else ""
        return f"{self.network}-{self.reset}{detach}"

    # -- identity and words ----------------------------------------------------------------
    @property
    def case_id(self) -> str:
        """sha1 of the kind, its version and every field but the file's path and name."""
        body = {k: v for k, v in self.params().items() if k not in _WHERE}
        text = json.dumps({"kind": KIND, "version": self.version, **body}, sort_keys=True)
        return hashlib.sha1(text.encode()).hexdigest()[:12]

    @classmethod
    def cells(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        """The table cells of ``params``: the file's name (``network``) under the column
        ``graph_name``."""
        return super().cells({**params, "graph_name": params["network"]})

    @classmethod
    def typed_params(cls, row: Any) -> dict[str, Any]:
        """The graph of a summary row as ``show --format json`` writes it
        (``snnbench/schemas/show.schema.json``): the fields a ``linear-lif`` row has under the
        same names (``n``: the graph's neurons; ``layers`` and ``bias`` null: a graph states
        them per node), then the graph's own (``kind``, ``graph_name``, ``graph_hash``,
        ``dt``, ``discretisation``)."""
        return {
            **typed_network(row, layers=None, bias=None), "kind": KIND,
            "graph_name": str(row["graph_name"]), "graph_hash": str(row["graph_hash"]),
            "dt": json_float(row["dt"]), "discretisation": str(row["discretisation"]),
        }

    def params(self) -> dict[str, Any]:
        """Every field, as plain data."""
        return asdict(self)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> NirGraph:
        """The workload of stored fields (no file is read); a missing ``dt`` or an unknown
        field is refused."""
        body = dict(params)
        if body.get("dt") is None:
            raise WorkloadError("dt is missing: a NIR graph states no time step")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(body) - known)
        if unknown:
            raise WorkloadError(f"unknown {KIND} parameter {unknown[0]!r}")
        missing = [k for k in _FROM_FILE if k not in body]
        if missing:
            raise WorkloadError(f"a {KIND} workload needs {missing[0]!r}")
        return cls(**body)

    @property
    def dynamics(self) -> Dynamics:
        """The choices the graph leaves open, as the reference reads them."""
        return Dynamics(dt=self.dt, reset=self.reset, discretisation=self.discretisation,
                        surrogate=self.surrogate, surrogate_slope=self.surrogate_slope,
                        detach_reset=self.detach_reset)

    # -- what it computes ------------------------------------------------------------------
    def load(self) -> Graph:
        """The graph, read from :attr:`graph`; a file whose content changed is refused."""
        graph = load_graph(self.graph)
        if graph.content_hash != self.graph_hash:
            raise GraphError(f"graph {self.graph!r} changed since this case was made "
                             f"(content {graph.content_hash[:12]}, "
                             f"expected {self.graph_hash[:12]})")
        return graph

    def input_shape(self) -> tuple[int, ...]:
        """(T, B, *the Input node's shape)."""
        graph = self.load()
        return (self.time_steps, self.batch_size, *graph.node(graph.input).in_shape)

    def make_data(self) -> GraphData:
        """The graph's arrays as float32 and the input from the seed (Gaussian current
        N(0, input_std²) or Bernoulli spikes of ``input_rate``)."""
        graph = self.load()
        rng = np.random.Generator(np.random.PCG64(self.seed))
        shape = (self.time_steps, self.batch_size, *graph.node(graph.input).in_shape)
        if self.input_kind == "gaussian":
            inputs = (rng.standard_normal(size=shape) * self.input_std).astype(np.float32)
        else:
            inputs = (rng.random(size=shape) < self.input_rate).astype(np.float32)
        params = {k: v.astype(np.float32) for k, v in graph.parameters().items()}
        return GraphData(graph=graph, params=params, inputs=inputs)

    def reference(self, data: Any) -> GraphResult:
        """The float64 reference (:func:`run_graph_reference`) of ``data``'s float32 values."""
        assert isinstance(data, GraphData)
        return run_graph_reference(data.graph, data.inputs, self.dynamics, data.params)

    def operations(self) -> float:
        """Multiply-accumulates of the synaptic nodes in one forward pass, times B·T."""
        macs = 0
        for _, node in self.load().nodes:
            if isinstance(node, Affine | Linear):
                macs += int(node.weight.size)
            elif isinstance(node, Conv2d):
                _, ho, wo = node.out_shape
                macs += int(node.weight.size) * ho * wo
            elif isinstance(node, Conv1d):
                macs += int(node.weight.size) * node.out_shape[1]
        return float(macs) * self.batch_size * self.time_steps

    def shortened(self, time_steps: int) -> NirGraph:
        """This case with T cut to at most ``time_steps``."""
        return replace(self, time_steps=min(self.time_steps, time_steps))

    # -- what a worker asks of it ------------------------------------------------------------
    def framework_settings(self) -> FrameworkSettings:
        """Strict float32 (no TF32, no AMP: the reference is float64 of float32 values) and
        the case's seed."""
        return FrameworkSettings(seed=self.seed)

    def output_shape(self) -> tuple[int, ...]:
        """(T, B, *the Output node's shape)."""
        graph = self.load()
        return (self.time_steps, self.batch_size, *graph.node(graph.output).in_shape)

    def check(self, run: RunOnce, reference: Any | None = None
              ) -> tuple[Agreement, dict[str, Any]]:
        """Run a build on copies of the case data and compare its output and gradients by
        name with the float64 reference (:func:`~snnbench.workload.graph.compare.compare_graph`:
        ``spike_match`` is the output's match, ``grad_cosine`` the worst parameter's). The
        dump holds the input, the build's output and its gradients (``grad:<node.field>``)."""
        data = self.make_data()
        given = GraphData(graph=data.graph,
                          params={k: v.copy() for k, v in data.params.items()},
                          inputs=data.inputs.copy())
        output, grads = run(given)
        named = self.gradients_by_name(grads)
        if reference is None:
            reference = self.reference(data)
        out = np.asarray(output, dtype=np.float32)
        equivalence = replace(compare_graph(out, named, reference, data.graph.spiking_output()),
                              changed=_changed(data, given))
        dump = {"input": data.inputs, "output": out,
                **{f"grad:{name}": grad for name, grad in named.items()}}
        return equivalence, dump

    def case_metrics(self, reference: Any) -> dict[str, list[float]]:
        """The firing rate: spikes per neuron per step over every spiking node (LIF, IF,
        CubaLIF) of the reference at the check's size; none without such a node."""
        graph = self.load()
        spiking = [np.asarray(reference.values[name], dtype=np.float64)
                   for name, node in graph.nodes if node.kind in SPIKING]
        if not spiking:
            return {}
        total = sum(float(s.sum()) for s in spiking)
        return {"firing_rate": [total / sum(s.size for s in spiking)]}

    def reference_key(self) -> str:
        """The tagged fields as JSON, the file's path left out (as the case_id leaves it)."""
        body = {k: v for k, v in self.params().items() if k not in _WHERE}
        return json.dumps({"kind": KIND, "version": self.version, **body}, sort_keys=True)

    def reference_arrays(self, reference: Any) -> dict[str, Any]:
        """Every node's value (``value:<node>``), membrane (``membrane:<node>``) and gradient
        (``grad:<node.field>``), and the output node's name (``output_name``)."""
        assert isinstance(reference, GraphResult)
        return {"output_name": np.array(reference.output_name),
                **{f"value:{k}": v for k, v in reference.values.items()},
                **{f"membrane:{k}": v for k, v in reference.membranes.items()},
                **{f"grad:{k}": v for k, v in reference.grads.items()}}

    def reference_from_arrays(self, arrays: Mapping[str, Any]) -> GraphResult | None:
        """Inverse of :meth:`reference_arrays`; None when a gradient is missing or of another
        shape than this graph's parameter, or the output is not of :meth:`output_shape`."""
        groups: dict[str, dict[str, Any]] = {"value": {}, "membrane": {}, "grad": {}}
        for key in arrays:
            group, _, name = str(key).partition(":")
            if group in groups and name:
                groups[group][name] = np.asarray(arrays[key], dtype=np.float64)
        result = GraphResult(values=groups["value"], membranes=groups["membrane"],
                             grads=groups["grad"], output_name=str(arrays["output_name"]))
        params = self.load().parameters()
        if (set(result.grads) != set(params)
                or any(result.grads[k].shape != v.shape for k, v in params.items())
                or result.output_name not in result.values
                or result.output.shape != self.output_shape()):
            return None
        return result

    def parameter_names(self) -> tuple[str, ...]:
        """The names gradients are keyed by: ``node.field`` of every trainable array."""
        return self.load().parameter_names()

    def gradients_by_name(self, grads: Mapping[str, Any]) -> dict[str, FloatArray]:
        """``grads`` checked against :meth:`parameter_names`, as float32; a missing or
        unknown name raises ``ValueError`` (the adapter's fault)."""
        names = self.parameter_names()
        missing = [n for n in names if n not in grads]
        unknown = sorted(str(n) for n in grads if n not in names)
        if missing or unknown:
            raise ValueError("gradients by name do not match the graph's parameters: "
                             f"missing {missing}, unknown {unknown}")
        return {n: np.asarray(grads[n], dtype=np.float32) for n in names}


def _changed(data: GraphData, given: GraphData) -> tuple[str, ...]:
    """What of ``given`` (copies of ``data``) a build changed in place."""
    out = []
    if set(given.params) != set(data.params) or any(
            not np.array_equal(v, given.params[k], equal_nan=True)
            for k, v in data.params.items()):
        out.append("parameters")
    if not np.array_equal(data.inputs, given.inputs, equal_nan=True):
        out.append("input")
    return tuple(out)


@dataclass(frozen=True)
class GraphKnobs(Knobs):
    """What an adapter honours of a ``nir-graph`` case: the node kinds it builds and the
    choices it can follow."""

    node_kinds: tuple[str, ...] = ("Input", "Output", "Affine", "Linear", "LIF")
    resets: tuple[str, ...] = neuron.RESET_MODES
    discretisations: tuple[str, ...] = DISCRETISATIONS
    surrogates: tuple[str, ...] = ("fast_sigmoid",)
    detach_reset: tuple[bool, ...] = (True, False)
    input_kinds: tuple[str, ...] = INPUT_KINDS
    dtypes: tuple[str, ...] = GRAPH_DTYPES

    def reason_unsupported(self, workload: Workload) -> str | None:
        """The first node kind or choice these knobs cannot honour, or None."""
        if not isinstance(workload, NirGraph):
            return f"workload kind {workload.kind!r} not supported (supports: {KIND})"
        missing = [k for k in workload.node_kinds.split(",") if k not in self.node_kinds]
        if missing:
            return (f"node kind {missing[0]} not built (builds: "
                    f"{', '.join(self.node_kinds)})")
        return first_unsupported((
            ("reset mode", workload.reset, self.resets),
            ("discretisation", workload.discretisation, self.discretisations),
            ("surrogate", workload.surrogate, self.surrogates),
            ("detach_reset", workload.detach_reset, self.detach_reset),
            ("input kind", workload.input_kind, self.input_kinds),
            ("dtype", workload.dtype, self.dtypes),
        ))


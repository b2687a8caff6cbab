"""What a case computes, as one typed object: the :class:`Workload` every kind implements.

A workload is frozen and hashable. Its :attr:`~Workload.case_id` is the case's one identity
(tables, comparisons and history series are keyed by adapter, variant, device, environment and
it); its :attr:`~Workload.label` is the one way a case is written out as text; its
:meth:`~Workload.params` are the columns it shows; :attr:`~Workload.size_param` names the
parameter on the x axis of a scaling plot. It also makes its own data, computes its own
reference and counts its own operations, so that the harness never needs to know which network
it is timing.

Each kind registers itself (:func:`register`) under a short name (``linear-lif``; later
``nir-graph``). A job or a case record carries ``kind`` beside the parameters, and
:func:`workload_from_dict` reads one back; a record written before kinds existed has none and
is ``linear-lif`` (:data:`DEFAULT_KIND`).
"""

from __future__ import annotations

import json
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from numbers import Integral
from typing import Any, ClassVar, Protocol

from snnbench.errors import UserError, shown

#: the kind of a job or record that names none (everything written before kinds existed)
DEFAULT_KIND = "linear-lif"



@dataclass(frozen=True)
class Work:
    """The least work one iteration of a phase must do."""

    flops: float
    bytes: float


class WorkloadError(UserError, ValueError):
    """A workload's kind or parameters are not ones this snnbench knows; one line naming it."""


@dataclass(frozen=True)
class FrameworkSettings:
    """What a workload asks every framework to set before it is built (the worker applies it
    alike for every adapter: :func:`snnbench.measure.worker.apply_framework_settings`)."""

    #: float32 matrix products: ``strict`` (full float32), ``tf32``, or an AMP mode
    #: (``amp-bf16``, ``amp-fp16``) whose Linear layers run under ``torch.autocast``
    matmul_precision: str = "strict"
    #: the 16-bit dtype of an AMP mode (``bfloat16``), None otherwise
    autocast_dtype: str | None = None
    #: the frameworks' own random seed
    seed: int = 0


class Declared(Protocol):
    """What an adapter declares of its build (its capabilities, API v1 or v2): what a check
    holds it to."""

    @property
    def exact_dynamics(self) -> bool: ...

    @property
    def exact_gradient(self) -> bool: ...


class Agreement(ABC):
    """How closely one build reproduced its workload's reference (:meth:`Workload.check`):
    the two numbers a record keeps (``spike_match``, ``grad_cosine``), the whole comparison
    (:meth:`to_dict`, the record's ``equivalence``) and the verdict against the kind's bars.

    The rule is :meth:`problems`, the same for every kind: a comparison that shows nothing is
    never a match; else an adapter that declares exact dynamics is held to the output bar and
    one that declares exact gradients to the gradient bar. Each kind words its own problems.
    """

    #: the fraction of equal output values (spikes); a kind without one says 1.0
    spike_match: float
    #: the gradient cosine with the reference (NaN: zero on both sides, none)
    grad_cosine: float

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """The whole comparison as plain data (a record's ``equivalence``)."""

    @abstractmethod
    def unproven(self, declared: Declared) -> str:
        """Why this comparison shows nothing of what ``declared`` says ("" when it shows
        something): both sides silent, the adapter changed what it was given..."""

    @abstractmethod
    def dynamics_problem(self, detailed: bool = False) -> str:
        """The output's failure of its bar in words, "" within it; ``detailed``: as ``run``
        says it (why the case is not timed), else as ``verify``'s table does."""

    @abstractmethod
    def gradient_problem(self, detailed: bool = False) -> str:
        """The gradient's failure of its bar in words, "" within it (``detailed`` as in
        :meth:`dynamics_problem`)."""

    @abstractmethod
    def gradient_below_bar(self) -> bool:
        """The gradient cosine is below the bar (False when there is none): an adapter that
        declares an approximate gradient gets its note."""

    def problems(self, declared: Declared, detailed: bool = False) -> list[str]:
        """What fails the bars of what ``declared`` says, in words (empty: a match)."""
        unproven = self.unproven(declared)
        if unproven:
            return [unproven]
        out = []
        if declared.exact_dynamics:
            out.append(self.dynamics_problem(detailed))
        if declared.exact_gradient:
            out.append(self.gradient_problem(detailed))
        return [p for p in out if p]


#: ``run(data) -> (output, gradients by name)``: one build run once on ``data`` (forward,
#: backward), what :meth:`Workload.check` compares
RunOnce = Callable[[Any], tuple[Any, Mapping[str, Any]]]


class Workload(ABC):
    """One case's computation: its identity, its parameters, its data, reference and cost.

    Subclasses are frozen dataclasses; they set the class attributes and implement the
    abstract members. Equal parameters must give an equal :attr:`case_id`, forever: every
    stored result is keyed by it.
    """

    #: the registry name, written as ``kind`` beside the parameters (``linear-lif``)
    kind: ClassVar[str] = ""
    #: the version of this kind's parameter format: bump when a parameter changes meaning
    version: ClassVar[int] = 1
    #: the parameter on the x axis of a scaling plot (``neurons``)
    size_param: ClassVar[str] = ""
    #: the words under that axis (``neurons (n)``)
    size_axis: ClassVar[str] = ""
    #: the size's short name, a table's column header (``n``)
    size_symbol: ClassVar[str] = ""
    #: the parameter that stacks the network deeper (``layers``; "" for a kind without one):
    #: the x axis of the time-per-layer plot
    depth_param: ClassVar[str] = ""
    #: the parameters shown as table columns, in their order
    columns: ClassVar[tuple[str, ...]] = ()
    #: the first of :attr:`columns`, that the summary's key lists beside the device (the
    #: case's size in words); the others are the network beyond it
    key_columns: ClassVar[tuple[str, ...]] = ()
    #: the columns holding integers, and those holding floats; the others hold text
    int_columns: ClassVar[tuple[str, ...]] = ()
    float_columns: ClassVar[tuple[str, ...]] = ()
    #: how a column beyond :attr:`key_columns` reads in a label when it varies between the
    #: cases read together (``surrogate={}``), in :attr:`columns` order
    network_formats: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: network columns said in a label only where two cases of equal :attr:`key_columns`
    #: differ in them (a graph's content hash: two files of one name), not where the key
    #: already tells the cases apart
    tied_columns: ClassVar[tuple[str, ...]] = ()
    #: the parameters the wide table of a run (``show``) lists after the dtype, with their
    #: headers: ``(("neurons", "n"), ("batch_size", "B"), ...)``
    shown_columns: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: the parameters ``verify``'s table lists, with their headers (``reset``, ``n``...)
    verify_columns: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: how a case reads in words, from its table row: (column, format) in order, joined by
    #: spaces (:meth:`row_label`); the device, a column of every row, is one of them
    label_parts: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: how a group of cases that differ only in :attr:`size_param` reads (:meth:`group_label`),
    #: joined by ", "
    group_parts: ClassVar[tuple[tuple[str, str], ...]] = ()

    #: the key whose presence in a config's ``[network]`` or ``[[sweep]]`` tables makes its
    #: cases this kind (``graph`` for ``nir-graph``); "" for the default kind, which a config
    #: naming no such key plans
    config_key: ClassVar[str] = ""
    #: the config keys that are file paths: a relative one is relative to the config file's
    #: folder (made absolute when the config is read, so the manifest holds where it was)
    config_paths: ClassVar[tuple[str, ...]] = ()

    @property
    @abstractmethod
    def case_id(self) -> str:
        """Short stable hash of the parameters: two rows with equal case_id ran the same case."""

    @property
    def label(self) -> str:
        """The case in words, as a table row of it reads less its device (:meth:`row_label`
        of its parameters), e.g. ``float32 n=512 B=16 T=500 L=1 subtract``."""
        return self.row_label(self.cells(self.params()))

    @abstractmethod
    def params(self) -> dict[str, Any]:
        """Every parameter as plain JSON-able data (what a job and a record store)."""

    @classmethod
    @abstractmethod
    def from_params(cls, params: Mapping[str, Any]) -> Workload:
        """Inverse of :meth:`params`; impossible values raise a :class:`UserError`."""

    @classmethod
    def from_stored(cls, stored: Any) -> Workload:
        """The workload of the parameters object a job or a record holds (already checked
        when it was read): by default through :meth:`from_params` of its ``to_dict()``."""
        return cls.from_params(stored.to_dict())

    @classmethod
    def config_fields(cls) -> tuple[str, ...]:
        """The keys a config's ``[network]`` and ``[[sweep]]`` tables may hold for this kind,
        in the order an error message lists them (default: none)."""
        return ()

    @classmethod
    def config_defaults(cls) -> dict[str, Any]:
        """The value each of :meth:`config_fields` takes when a config does not give it (a
        field without one, such as a graph's ``dt``, is left out)."""
        return {}

    @classmethod
    def config_choices(cls) -> dict[str, tuple[Any, ...]]:
        """The values each field with a fixed menu (``reset``...) may take."""
        return {}

    @classmethod
    def from_config(cls, fields: Mapping[str, Any]) -> Workload:
        """The workload of one case of a config: its ``[network]`` fields overlaid with one
        combination of its ``[[sweep]]`` values; a bad value raises a one-line
        :class:`UserError` (default: :meth:`from_params`)."""
        return cls.from_params(fields)

    @classmethod
    def config_value(cls, key: str, value: Any, folder: str | None) -> Any:
        """``value`` of the config key ``key`` as the config keeps it: a path of
        :attr:`config_paths` made absolute against ``folder`` (the config file's; None: the
        current folder), so that a worker finds the file from wherever it runs and a resumed
        run from wherever it is resumed."""
        if key not in cls.config_paths or not isinstance(value, str) or not value.strip():
            return value
        path = os.path.expanduser(value)
        return os.path.abspath(path if folder is None else os.path.join(folder, path))

    @classmethod
    def check_config_value(cls, key: str, value: Any) -> None:
        """Refuse ``value`` for the config key ``key`` on its own (a :class:`UserError`
        naming it): a ``[network]`` value every ``[[sweep]]`` table overrides is still
        recorded, so it must be valid (default: no check)."""

    def with_supported(self, knobs: Knobs | None, fields: Iterable[str]) -> Workload:
        """This case with each of ``fields`` that ``knobs`` cannot honour set to the first
        value they can (``verify --detach-reset auto``: the rule an adapter supports); the
        knobs' attribute of the field's name lists the values (none listed: unchanged)."""
        params = self.params()
        changes: dict[str, Any] = {}
        for name in fields:
            allowed = tuple(getattr(knobs, name, ()) or ())
            if allowed and params.get(name) not in allowed:
                changes[name] = allowed[0]
        return type(self).from_params({**params, **changes}) if changes else self

    def verify_tag(self, varied: Iterable[str]) -> str:
        """How ``verify --dump`` names this case's file after its adapter and variant, among
        checks that vary ``varied`` (default: its case id)."""
        return self.case_id

    @abstractmethod
    def make_data(self) -> Any:
        """The case's data (parameters, inputs), generated from its seed: identical for every
        adapter and every process."""

    @abstractmethod
    def reference(self, data: Any) -> Any:
        """The ground truth for ``data`` (outputs and gradients) that adapters are checked
        against."""

    @abstractmethod
    def operations(self) -> float:
        """Dense operations of one forward pass over the whole case (every time step and
        sample): the size by which a sweep orders and weighs its cases."""

    # -- what a worker asks of it (snnbench.measure): build, check, time -----------------------
    # Not abstract: a kind that only describes stored rows (a reader's test) needs none of
    # these; every kind that runs implements them all.
    @property
    def batch_size(self) -> int:
        """Samples per step (a throughput's numerator)."""
        raise self._cannot_run("batch_size")

    def shortened(self, time_steps: int) -> Workload:
        """This case with T cut to at most ``time_steps``: the size of the check before
        timing, and of the case metrics."""
        raise self._cannot_run("shortened")

    def framework_settings(self) -> FrameworkSettings:
        """The precision and seed every framework is set to before a build (by default
        strict float32 and seed 0)."""
        return FrameworkSettings()

    def output_shape(self) -> tuple[int, ...]:
        """The shape of what a built model's ``spikes(handle)`` returns: (T, B, *output)."""
        raise self._cannot_run("output_shape")

    def check(self, run: RunOnce, reference: Any | None = None
              ) -> tuple[Agreement, dict[str, Any]]:
        """Run a build once on copies of this case's data (``run``) and compare its output and
        gradients with ``reference`` (None: computed here). Returns the agreement and the
        arrays ``verify --dump`` writes. A build whose output or gradients are not of this
        case's shape or names raises ``ValueError`` (the adapter's fault)."""
        raise self._cannot_run("check")

    def _cannot_run(self, what: str) -> NotImplementedError:
        return NotImplementedError(f"workload kind {self.kind!r} has no {what}: it cannot run")

    def case_metrics(self, reference: Any) -> dict[str, list[float]]:
        """One-value metrics of the case from its reference at the check's size (firing rate,
        synaptic operations...): a record's ``case`` samples. None by default."""
        return {}

    def reference_key(self) -> str:
        """The text a kept reference (:func:`snnbench.measure.verify.cached_reference`) is
        filed under and checked against: by default the tagged parameters as JSON."""
        return json.dumps(self.to_dict(), sort_keys=True)

    def reference_arrays(self, reference: Any) -> dict[str, Any]:
        """The reference as named arrays, for a file that keeps it; empty (the default): this
        kind's references are not kept, each case computes its own."""
        return {}

    def reference_from_arrays(self, arrays: Mapping[str, Any]) -> Any | None:
        """Inverse of :meth:`reference_arrays`; None when the arrays are not this case's."""
        return None

    @classmethod
    def row_label(cls, row: Any, columns: Iterable[str] | None = None) -> str:
        """The case of a table row (a mapping, or a pandas row) in words, e.g. ``cpu float32
        n=64 B=4 T=20 L=1 subtract``: every part of :attr:`label_parts`, or those of
        ``columns`` only; a column the row lacks or leaves empty is left out."""
        return " ".join(_parts(row, cls.label_parts, columns))

    @classmethod
    def group_label(cls, row: Any, without: Iterable[str] = ()) -> str:
        """The group of cases of ``row`` bar their size, e.g. ``cpu, float32, B=16, T=100,
        layers=1, reset=zero`` (less the parameters ``without``)."""
        left = set(without)
        return ", ".join(_parts(row, tuple(p for p in cls.group_parts if p[0] not in left),
                                None))

    @classmethod
    def group_slug(cls, row: Any, without: Iterable[str] = ()) -> str:
        """The group of ``row`` as a file-name part: :attr:`label_parts` bar the size (and
        ``without``), without their ``=``, joined by ``-`` (``cpu-float32-B16-T100-L1-zero``)."""
        left = {cls.size_param, *without}
        parts = tuple((column, fmt.replace("=", "")) for column, fmt in cls.label_parts
                      if column not in left)
        return "-".join(_parts(row, parts, None))

    @classmethod
    def size_text(cls, value: Any) -> str:
        """A size in words, as the label writes it (``n=64`` for 64 or 64.0): the format
        :attr:`label_parts` gives :attr:`size_param`, else ``<size_param>=<value>``."""
        fmt = dict(cls.label_parts).get(cls.size_param, f"{cls.size_param}={{}}")
        return fmt.format(_value_text(value))

    @classmethod
    def network_columns(cls) -> tuple[str, ...]:
        """:attr:`columns` beyond :attr:`key_columns`: the rest of the network."""
        return tuple(c for c in cls.columns if c not in cls.key_columns)

    @classmethod
    def cells(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        """The table cells of ``params``, one per :attr:`columns`: a number of
        :attr:`int_columns` or :attr:`float_columns` as it is, a flag as "true"/"false",
        anything else as text ("" is how a run that did not say reads)."""
        out: dict[str, Any] = {}
        for column in cls.columns:
            value = params[column]
            if column in cls.int_columns or column in cls.float_columns:
                out[column] = value
            elif isinstance(value, bool):
                out[column] = str(value).lower()
            else:
                out[column] = str(value)
        return out

    @staticmethod
    def cell_text(value: Any) -> str:
        """A table cell as the tables write it: ``64`` for 64.0, ``0.5``, "" for a missing
        value."""
        return _value_text(value)

    @classmethod
    def row_work(cls, row: Mapping[str, object]) -> Work | None:
        """The least work one iteration of a timed summary row's phase must do (dense FLOPs,
        bytes moved), against which a GPU row's time is judged possible
        (:mod:`snnbench.records.roofline`); None: this kind has no model (no roofline)."""
        return None

    @classmethod
    def typed_params(cls, row: Any) -> dict[str, Any]:
        """The parameters of a summary row as typed JSON (``show --format json``): by
        default every column, a number as a number and None where absent."""
        out: dict[str, Any] = {}
        for column in cls.columns:
            value = row[column]
            if column in cls.int_columns:
                out[column] = json_int(value)
            elif column in cls.float_columns:
                out[column] = json_float(value)
            else:
                out[column] = str(value)
        return out

    def verify_cells(self) -> tuple[str, ...]:
        """This case's cells under :attr:`verify_columns`: a flag as yes/no, a float as
        ``4`` or ``0.5``, anything else as text."""
        params = self.params()
        return tuple(_check_text(params[column]) for column, _ in self.verify_columns)

    @property
    def size(self) -> Any:
        """The value of :attr:`size_param`."""
        return self.params()[self.size_param]

    @property
    def size_label(self) -> str:
        """This case's size in words (``n=64``): what a progress line names it by."""
        return self.size_text(self.size)

    def to_dict(self) -> dict[str, Any]:
        """``{"kind": ..., **params}``: the tagged form a job or a record could hold whole."""
        return {"kind": self.kind, **self.params()}


def _value_text(value: Any) -> str:
    """A table cell as a label shows it: ``64`` for 64.0, "" for a missing value."""
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return str(int(value)) if value.is_integer() else f"{value:g}"
    if isinstance(value, Integral) and not isinstance(value, bool):
        return str(int(value))
    return str(value)


def _check_text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def json_float(value: Any) -> float | None:
    """A finite float, else None (JSON's null)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def json_int(value: Any) -> int | None:
    """A whole number, else None (JSON's null)."""
    number = json_float(value)
    return int(number) if number is not None else None


def json_flag(value: Any) -> bool | None:
    """"true"/"false" (as a summary keeps a flag) → a bool; "" → None."""
    return {"true": True, "false": False}.get(str(value).strip().lower())


def typed_network(row: Any, *, layers: int | None, bias: bool | None) -> dict[str, Any]:
    """The network fields every spiking kind's :meth:`Workload.typed_params` starts with, in
    the order of ``snnbench/schemas/show.schema.json``: the neuron count as ``n``, the numbers
    as numbers, the flags as booleans; ``layers`` and ``bias`` as the kind reads them."""
    return {
        "n": json_int(row["neurons"]), "batch_size": json_int(row["batch_size"]),
        "time_steps": json_int(row["time_steps"]), "layers": layers,
        "reset": str(row["reset"]), "surrogate": str(row["surrogate"]),
        "surrogate_slope": json_float(row["surrogate_slope"]),
        "detach_reset": json_flag(row["detach_reset"]), "bias": bias,
        "input_kind": str(row["input_kind"]),
    }


def _parts(row: Any, parts: tuple[tuple[str, str], ...],
           columns: Iterable[str] | None) -> list[str]:
    wanted = None if columns is None else set(columns)
    out = []
    for column, fmt in parts:
        if wanted is not None and column not in wanted:
            continue
        try:
            value = row[column]
        except (KeyError, IndexError):
            continue
        text = _value_text(value)
        if text:
            out.append(fmt.format(text))
    return out


class Knobs(ABC):
    """What an adapter can honour of one workload kind (its reset modes, dtypes...): the
    per-kind part of an adapter's capabilities. A case outside them is a ``skipped`` row."""

    @abstractmethod
    def reason_unsupported(self, workload: Workload) -> str | None:
        """The first parameter of ``workload`` these knobs cannot honour, as a ``skipped``
        message, or None."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``snnbench list --json``): the fields of knobs that are a dataclass,
        else nothing."""
        if not is_dataclass(self):
            return {}
        return {f.name: getattr(self, f.name) for f in fields(self)}


def first_unsupported(checks: Iterable[tuple[str, Any, tuple[Any, ...]]]) -> str | None:
    """For knobs' :meth:`~Knobs.reason_unsupported`: the first ``(what, value, allowed)`` whose
    value is not allowed, as a ``skipped`` message, or None."""
    for what, value, allowed in checks:
        if value not in allowed:
            shown = ", ".join(str(a) for a in allowed) or "none"
            return f"{what} {value!r} not supported (supports: {shown})"
    return None


_KINDS: dict[str, type[Workload]] = {}


def register(cls: type[Workload]) -> type[Workload]:
    """Register a workload class under its :attr:`~Workload.kind` (a class decorator)."""
    if not cls.kind:
        raise ValueError(f"{cls.__name__} has no kind")
    if _KINDS.get(cls.kind, cls) is not cls:
        raise ValueError(f"workload kind {cls.kind!r} is registered twice")
    _KINDS[cls.kind] = cls
    return cls


def kinds() -> tuple[str, ...]:
    """The registered workload kinds, in registration order."""
    return tuple(_KINDS)


def workload_class(kind: str) -> type[Workload]:
    """The class registered as ``kind``; an unknown kind raises :class:`WorkloadError`."""
    try:
        return _KINDS[kind]
    except (KeyError, TypeError):
        raise WorkloadError(f"unknown workload kind {shown(kind)} "
                            f"(known: {', '.join(_KINDS)})") from None


def config_kind(keys: Iterable[str]) -> type[Workload]:
    """The kind a config's network tables make, from the keys they hold: the registered kind
    whose :attr:`~Workload.config_key` is among them, else :data:`DEFAULT_KIND`."""
    return marked_kind(keys) or workload_class(DEFAULT_KIND)


def marked_kind(keys: Iterable[str]) -> type[Workload] | None:
    """The registered kind whose :attr:`~Workload.config_key` is among ``keys``, else None."""
    given = set(keys)
    for cls in _KINDS.values():
        if cls.config_key and cls.config_key in given:
            return cls
    return None


def row_workload_class(row: Any) -> type[Workload]:
    """The workload class of a table row: its ``kind`` column, else :data:`DEFAULT_KIND`
    (tables written before kinds existed have no such column)."""
    try:
        kind = row["kind"]
    except (KeyError, IndexError):
        kind = None
    return workload_class(kind if isinstance(kind, str) and kind else DEFAULT_KIND)


def as_workload(value: Any) -> Workload:
    """``value`` if it is a workload, else the stored parameters object of the default kind it
    is (a bare ``NetworkSpec``, as plugin API v1 code and older callers pass one)."""
    if isinstance(value, Workload):
        return value
    return workload_class(DEFAULT_KIND).from_stored(value)


def workload_from_dict(params: Mapping[str, Any], kind: str | None = None) -> Workload:
    """The workload of ``params`` read as ``kind`` (default: the ``kind`` key of ``params``,
    else :data:`DEFAULT_KIND`), the ``kind`` key itself not being a parameter."""
    if not isinstance(params, Mapping):
        raise WorkloadError(f"a workload must be a table of parameters, got {shown(params)}")
    body = dict(params)
    tagged = body.pop("kind", None)
    return workload_class(kind or tagged or DEFAULT_KIND).from_params(body)

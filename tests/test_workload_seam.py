"""The workload seam (issue 34): the readers take a case's words, its size and its columns from
the workload, never from Linear+LIF's fields.

A toy kind whose size is ``width`` goes through the scaling plot and the report's tables: if
a reader still said ``neurons`` it would fail on these rows, which have no such column. And a
scan of the package's source (its syntax trees) lists every module outside the workload that
still names a Linear+LIF field, against an explicit list of what may stay.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest

import snnbench
from snnbench.records import schema
from snnbench.report import pages as report, plots, speedups
from snnbench.workload import Workload, base


@dataclass(frozen=True)
class Toy(Workload):
    """A workload kind that is not Linear+LIF: its size is ``width``, its depth ``stages``."""

    width: int = 4
    stages: int = 1

    kind: ClassVar[str] = "toy-seam"
    size_param: ClassVar[str] = "width"
    size_axis: ClassVar[str] = "width (w)"
    size_symbol: ClassVar[str] = "w"
    depth_param: ClassVar[str] = "stages"
    columns: ClassVar[tuple[str, ...]] = ("width", "stages")
    key_columns: ClassVar[tuple[str, ...]] = ("width", "stages")
    label_parts: ClassVar[tuple[tuple[str, str], ...]] = (
        ("device", "{}"), ("width", "w={}"), ("stages", "S={}"))
    group_parts: ClassVar[tuple[tuple[str, str], ...]] = (
        ("device", "{}"), ("stages", "stages={}"))

    @property
    def case_id(self) -> str:
        return f"toy{self.width}x{self.stages}"

    @property
    def label(self) -> str:
        return f"w={self.width} S={self.stages}"

    def params(self) -> dict[str, Any]:
        return {"width": self.width, "stages": self.stages}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Toy:
        return cls(**params)

    def make_data(self) -> Any:
        return None

    def reference(self, data: Any) -> Any:
        return None

    def operations(self) -> float:
        return float(self.width * self.stages)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[Toy]]:
    """The toy kind, registered for one test only."""
    monkeypatch.setitem(base._KINDS, Toy.kind, Toy)
    yield Toy


def _rows(stages: tuple[int, ...] = (1,)) -> pd.DataFrame:
    """Ok step rows of torch and fused at widths 8 and 16 (fused 4× faster), no neurons."""
    rows = []
    for depth in stages:
        for width in (8, 16):
            for adapter, seconds in (("torch", 4e-3), ("fused", 1e-3)):
                t = seconds * width / 8 * depth
                rows.append({
                    "kind": "toy-seam", "adapter": adapter, "variant": "default",
                    "environment": "", "device": "cpu", "width": width, "stages": depth,
                    "phase": "step", "metric": "time_s", "status": "ok", "median": t,
                    "q1": t * 0.99, "q3": t * 1.01, "warning": "", "case_id": f"toy{width}",
                    "network": "", "library": adapter,
                })
    return pd.DataFrame(rows)


def _captured(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    figures: list[Any] = []

    def keep(fig: Any, out: Path) -> Path:
        figures.append(fig)
        return out

    monkeypatch.setattr(plots, "_save", keep)
    return figures


def test_the_scaling_plot_puts_the_workloads_size_on_its_x_axis(
        toy: type[Toy], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = _captured(monkeypatch)
    assert plots.plot_scaling(_rows(), tmp_path / "s.png", "t", {}) is not None
    ax = figures[0].axes[0]
    assert ax.get_xlabel() == "width (w)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "16"]
    assert {float(x) for line in ax.get_lines() for x in line.get_xdata()} == {8.0, 16.0}


def test_the_panels_and_tables_name_a_size_in_the_workloads_words(
        toy: type[Toy], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = _captured(monkeypatch)
    rows = _rows()
    assert plots.plot_phase_bars(rows, tmp_path / "p.png", "t", {}) is not None
    assert [ax.get_title(loc="left") for ax in figures[0].axes] == ["w=8", "w=16"]
    assert report.step_pivot_table(rows).headers == ["adapter", "w=8", "w=16"]
    found = speedups.headline(rows, None)
    assert [(f.size, f.label) for f in found] == [(8, "fused"), (16, "fused")]
    assert report.headline_table([("t", rows)], None).headers[0] == "w"


def test_the_depth_plot_and_group_words_come_from_the_workload(
        toy: type[Toy], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = _captured(monkeypatch)
    rows = _rows(stages=(1, 2))
    assert plots.plot_time_per_layer(rows, tmp_path / "l.png", "t", {}) is not None
    assert figures[0].axes[0].get_xlabel() == "stages"
    assert schema.rows_workload(rows) is Toy
    assert schema.group_title(rows.iloc[0]) == "cpu, stages=1"
    assert Toy.group_slug(rows.iloc[0]) == "cpu-S1"
    assert schema.case_text(rows.iloc[0]) == "cpu w=8 S=1"
    assert Toy(width=8).size_label == "w=8"


# -- no module outside the workload names a Linear+LIF field (issue 34, "Done when") ---------

PACKAGE = Path(snnbench.__file__).parent

#: the Linear+LIF network's own fields. Not in it, on purpose: ``batch_size``, ``time_steps``,
#: ``dtype``, ``matmul_precision`` and ``seed``, which any spiking workload is run with (B
#: samples over T steps, in a dtype and a matmul precision, from a seed): a NIR graph has them
#: too, and the harness may name them.
LINEAR_LIF_FIELDS = frozenset({
    "neurons", "layers", "reset", "surrogate", "surrogate_slope", "detach_reset", "bias",
    "input_kind", "input_std", "input_rate", "beta", "threshold",
})

#: where the fields belong: the workload, the adapters that build it, the fused kernel (any
#: module under a package of these names), the adapter API (which hands the spec to plugins),
#: and the Linear+LIF internals that move into ``snnbench/workload/linear_lif/`` with the
#: regrouping (spec, neuron, reference, synops). Modules are named without their folder, so
#: that the list holds wherever the regrouping puts them.
HOME_PACKAGES = frozenset({"workload", "adapters", "fused"})
HOME_MODULES = frozenset({"adapter", "adapter_shim", "plugin", "api", "spec", "neuron",
                          "reference", "synops"})

_FLAGS = ("neurons", "layers", "reset", "detach_reset", "surrogate", "surrogate_slope", "bias",
          "input_kind")

#: (module, field) → why it stays. A module is named without its folder (``verify_cmd``); one
#: of the CLI is ``cli`` whether it is ``cli.py`` or a module of a ``cli/`` package.
ALLOWED: dict[tuple[str, str], str] = {
    # the CLI's network flags: run's --neurons/--layers/--reset/--detach-reset become the
    # config's network overrides, verify's flags its request (the CLI names the network's
    # knobs; the library takes them as plain overrides)
    **{("cli", f): "the CLI's network flags" for f in _FLAGS},
    # nir-check's --input-std: the graph workload's field of that name, which it checks at
    ("cli", "input_std"): "nir-check's --input-std (a nir-graph field)",
    # verify's network flags, checked and held as one request, and turned into the sweep
    # verify runs (its --reset/--detach-reset/--neurons choose cases; --dump names a file by
    # its reset): the CLI's network flags, one step down
    **{("verify_request", f): "verify's network flags, validated"
       for f in ("layers", "reset", "detach_reset", "surrogate", "surrogate_slope", "bias",
                 "input_kind")},
    **{("verify_cmd", f): "verify's --neurons/--reset/--detach-reset applied"
       for f in ("neurons", "reset", "detach_reset")},
    # the gate's rule is called "threshold" (memory against mem_threshold): not the neuron's
    ("metrics", "threshold"): "the gate's threshold rule",
    ("compare", "threshold"): "the gate's threshold rule",
    ("compare_output", "threshold"): "the gate's threshold rule",
}


def _module_key(path: Path) -> str:
    """``verify_cmd`` for ``snnbench/sweep/verify_cmd.py`` or ``snnbench/sweep/verify_cmd.py``; a
    package's ``__init__`` by its package; any module of the CLI ``cli``."""
    folders = path.relative_to(PACKAGE).parts[:-1]
    if path.stem == "cli" or "cli" in folders:
        return "cli"
    return folders[-1] if path.stem == "__init__" and folders else path.stem


def _at_home(path: Path) -> bool:
    folders = path.relative_to(PACKAGE).parts[:-1]
    return bool(HOME_PACKAGES.intersection(folders)) or path.stem in HOME_MODULES


def _names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, field) of every Linear+LIF field ``tree`` names: an attribute read (``spec.bias``;
    a method call such as ``meter.reset()`` is not a field), a string constant
    (``row["neurons"]``) or a keyword argument (``replace(layers=2)``)."""
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in LINEAR_LIF_FIELDS
                and id(node) not in called):
            found.append((node.lineno, node.attr))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and node.value in LINEAR_LIF_FIELDS):
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.keyword) and node.arg in LINEAR_LIF_FIELDS:
            found.append((node.lineno, node.arg))
    return found


def _outside_home() -> dict[tuple[str, str], list[str]]:
    """(module, field) → the places it is named, for every module away from home
    (:data:`HOME_PACKAGES`, :data:`HOME_MODULES`)."""
    out: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if _at_home(path):
            continue
        for line, name in _names(ast.parse(path.read_text(encoding="utf-8"))):
            out.setdefault((_module_key(path), name), []).append(f"snnbench/{rel}:{line}")
    return out


def test_the_scanner_finds_each_way_of_naming_a_field() -> None:
    code = ("row['neurons']; spec.bias; x.replace(layers=2); probe.reset(); row['batch_size']; "
            "f'n={n}'")
    assert sorted(name for _, name in _names(ast.parse(code))) == ["bias", "layers", "neurons"]


def test_no_module_outside_the_workload_names_a_linear_lif_field() -> None:
    found = _outside_home()
    offenders = sorted(f"{name} in {', '.join(places)}"
                       for key, places in found.items() if key not in ALLOWED
                       for name in [key[1]])
    assert not offenders, ("Linear+LIF fields named outside the workload (take them from the "
                           "workload's columns, label, size or cells instead):\n  "
                           + "\n  ".join(offenders))


def test_every_allowed_exception_is_still_needed() -> None:
    """An entry of :data:`ALLOWED` that no module needs any more is removed, so the list says
    what is left to move, and no more."""
    found = _outside_home()
    stale = sorted(f"{module}: {name}" for module, name in ALLOWED
                   if (module, name) not in found)
    assert not stale, "allowed but no longer named; remove from ALLOWED: " + ", ".join(stale)


# -- show titles its cases with the workload's words: each network of a sweep its own ---------

@pytest.mark.parametrize(("field", "values"), [("matmul_precision", ("strict", "amp-bf16")),
                                               ("surrogate", ("fast_sigmoid", "atan"))])
def test_show_titles_each_network_of_a_sweep_apart(tmp_path: Path, field: str,
                                                   values: tuple[str, ...]) -> None:
    import numpy as np

    from snnbench.report.tables import typed_rows
    from snnbench.report.views import run_document
    from snnbench.store.rundir import load_run
    from tests.fixtures.runfolders import timed_case, write_run

    rng = np.random.default_rng(0)
    cases = [timed_case(adapter, 64, rng, median_s=1e-3, case_id=f"{field}={value}",
                        network={field: value})
             for value in values for adapter in ("torch", "fused")]
    run = load_run(write_run(tmp_path / "run", cases))
    records = typed_rows(run.summary)
    words = {"matmul_precision": "{}", "surrogate": "surrogate={}"}[field]
    assert sorted({r["case"] for r in records}) == sorted(
        f"cpu float32 n=64 B=4 T=20 L=1 subtract · {words.format(v)}" for v in values)
    titles = [t.title.split(" — ")[0] for t in run_document("r", records).tables]
    assert sorted(titles) == sorted({r["case"] for r in records})

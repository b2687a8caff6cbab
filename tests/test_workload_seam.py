"""The workload seam (issue 34): the readers take a case's words, its size and its columns from
the workload, never from Linear+LIF's fields.

A toy kind whose size is ``width`` goes through the scaling plot and the report's tables: if
a reader still said ``neurons`` it would fail on these rows, which have no such column.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest

from snnbench import plots, report, schema, speedups
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

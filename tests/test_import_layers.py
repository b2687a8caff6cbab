"""The import layers of pyproject's [tool.importlinter] hold (make check runs them too)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def test_import_contracts_are_kept() -> None:
    pytest.importorskip("importlinter")
    exe = Path(sys.executable).with_name("lint-imports")
    command = [str(exe)] if exe.exists() else [shutil.which("lint-imports") or "lint-imports"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_importing_the_config_starts_no_executor() -> None:
    # the [executor] table is data: reading a config loads no engine, process or lifeline
    code = ("import sys, snnbench.config; "
            "print(sorted(m for m in sys.modules if m.startswith('snnbench.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    for heavy in ("snnbench.executors.local", "snnbench.launch", "snnbench.lifeline"):
        assert heavy not in out


def _room(module: str) -> str:
    """The part of the house ``module`` belongs to: a subpackage is one room, as in the layers
    contract (``snnbench.sweep.run`` → ``snnbench.sweep``)."""
    return ".".join(module.split(".")[:2])


def test_no_chain_of_imports_is_longer_than_thirteen_floors() -> None:
    # the layers contract allows imports within a layer, so it alone cannot stop the house from
    # growing taller: this counts the floors as the longest chain of imports between rooms
    # (function-level imports included, as they are edges all the same). Eleven since the
    # workload seam (issue 34) put named tiers under the adapters: the plugin API v1 → v2 shim,
    # the API v2, the workload and what Linear+LIF stands on (reference). Thirteen since one
    # exporter registry (issue 34, item 5) draws every format of show, report and compare:
    # report writes its pages through it, and its formats draw the show views (report → export
    # → views), two flat rooms that the report tier of the regrouping makes one
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("snnbench")
    arrows: dict[str, set[str]] = {}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.startswith("snnbench") and _room(imported) != _room(module):
                arrows.setdefault(_room(module), set()).add(_room(imported))
    floors: dict[str, int] = {}

    def floor(room: str, seen: tuple[str, ...] = ()) -> int:
        assert room not in seen, f"import cycle: {' -> '.join((*seen, room))}"
        if room not in floors:
            floors[room] = 1 + max((floor(r, (*seen, room)) for r in arrows.get(room, ())),
                                   default=0)
        return floors[room]

    top = max(arrows, key=floor)
    chain = [top]
    while arrows.get(chain[-1]):
        chain.append(max(arrows[chain[-1]], key=floor))
    assert floor(top) <= 13, " -> ".join(chain)
    assert floors["snnbench.__main__"] == floor(top)  # the entry point stands on top

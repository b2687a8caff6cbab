"""The import layers of pyproject's [tool.importlinter] hold (make check runs them too)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
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
    code = ("import sys, snnbench.sweep.config; "
            "print(sorted(m for m in sys.modules if m.startswith('snnbench.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    for heavy in ("snnbench.executors.local", "snnbench.executors.launch", "snnbench.host.lifeline"):
        assert heavy not in out


PACKAGE = REPO / "snnbench"


def _tiers() -> list[list[str]]:
    """The tiers contract's layers, top first, each as the rooms it names."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (tiers,) = [c for c in contracts if c["type"] == "layers"]
    return [[room.strip() for room in re.split(r"[:|]", layer)] for layer in tiers["layers"]]


def test_the_package_has_at_most_twelve_top_level_modules() -> None:
    # issue 34: the house is read through its named tiers (subpackages), not a flat list
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(modules) <= 12, modules


def test_every_room_of_the_house_stands_in_one_tier() -> None:
    # a module or subpackage the tiers contract does not name escapes it: import-linter checks
    # only what a layer names, so a new room must be given its tier
    rooms = {f"snnbench.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    rooms |= {f"snnbench.{p.parent.name}" for p in PACKAGE.glob("*/__init__.py")}
    named = [room for layer in _tiers() for room in layer]
    assert len(named) == len(set(named)), "a room stands in two tiers"
    # data packages hold no code that imports anything
    data = {"snnbench.configs", "snnbench.locks", "snnbench.schemas"}
    assert sorted(rooms - set(named) - data) == []
    assert sorted(set(named) - rooms) == []

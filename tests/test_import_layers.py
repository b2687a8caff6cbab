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

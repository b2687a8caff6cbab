"""snnbench as users install it: what the wheel holds, the Python it claims, and processes that
import the installed package whatever folder they start in (issue 19).

The full proof is ``make dist-check`` (scripts/dist_check.py), run by ``make test``: it builds the
sdist and wheel, installs the wheel into a fresh venv and uses it from another folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import dist_check

SNNBENCH = Path(sys.executable).parent / "snnbench"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                    str(out), str(REPO)], check=True, capture_output=True, timeout=300)
    (built,) = out.glob("*.whl")
    return built


def test_the_wheel_holds_every_tracked_module_and_data_file(wheel: Path) -> None:
    # snnbench.executors was left out of a hand-written package list: discovery cannot forget it
    tracked = dist_check.tracked_package_files()
    assert "snnbench/executors/slurm.py" in tracked
    assert "snnbench/adapters/torch_ref.py" in tracked
    assert "snnbench/configs/default.toml" in tracked
    assert "snnbench/locks/requirements-gpu.txt" in tracked
    assert dist_check.check_contents(wheel) == ">=3.11"


def test_a_wheel_missing_a_module_is_caught(tmp_path: Path, wheel: Path) -> None:
    import zipfile

    cut = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(cut, "w") as dst:
        for item in src.infolist():
            if not item.filename.startswith("snnbench/executors/"):
                dst.writestr(item, src.read(item))
    with pytest.raises(dist_check.CheckFailed, match="snnbench/executors/"):
        dist_check.check_contents(cut)


def test_requires_python_is_the_version_mypy_and_ruff_check_against() -> None:
    # config.py imports tomllib (3.11): mypy checks the code against requires-python's lowest
    # version, so an import newer than what is declared fails `make check`
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    spec = SpecifierSet(project["project"]["requires-python"])
    lowest = min(s.version for s in spec if s.operator == ">=")
    assert lowest == project["tool"]["mypy"]["python_version"] == "3.11"
    assert project["tool"]["ruff"]["target-version"] == "py" + lowest.replace(".", "")
    assert sys.version_info[:2] >= (3, 11)


def test_gpu_setup_reads_its_lock_as_package_data() -> None:
    from snnbench import gpu_setup

    shipped = Path(str(files("snnbench.locks").joinpath("requirements-gpu.txt")))
    assert shipped == gpu_setup.DEFAULT_LOCK and shipped.is_file()
    assert gpu_setup.parse_lock(shipped.read_text()).pins["torch"]


def test_workers_import_the_installed_snnbench_not_the_working_folders(tmp_path: Path) -> None:
    # An image's work folder held the source tree, and `python -m snnbench.measure.worker` imported it
    # instead of the installed package. A broken snnbench/ in the folder a user runs from must
    # not be imported by the probe or the worker.
    shadow = tmp_path / "snnbench"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('the shadow tree was imported')\n")
    listed = subprocess.run([str(SNNBENCH), "list", "--json"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=600)
    assert listed.returncode == 0, listed.stderr
    torch = next(a for a in json.loads(listed.stdout) if a["name"] == "torch")
    assert torch["available"], torch
    out = tmp_path / "run"
    ran = subprocess.run([str(SNNBENCH), "run", "--config", "ci-smoke", "--adapters", "torch",
                          "--neurons", "16", "--steps", "5", "--batch-size", "2", "--out",
                          str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    records = [json.loads(p.read_text()) for p in (out / "cases").glob("*.json")]
    torch_rows = [r for r in records if r["adapter"] == "torch"]
    assert torch_rows and all(r["status"] == "ok" for r in torch_rows), torch_rows


def test_core_metadata_is_validated(tmp_path: Path, wheel: Path) -> None:
    import zipfile

    dist_check.check_metadata(wheel)
    broken = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(broken, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith(".dist-info/METADATA"):
                data = data.replace(b"Metadata-Version: ", b"Metadata-Version: 9.9 ", 1)
            dst.writestr(item, data)
    with pytest.raises(dist_check.CheckFailed, match="invalid core metadata"):
        dist_check.check_metadata(broken)

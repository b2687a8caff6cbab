"""``list`` probes each adapter once per environment: its answer is kept until what it depends
on changes (snnbench.probe_cache), and a cache file is data, never code."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from snnbench import probe as probes
from snnbench.adapter import Adapter, Model
from snnbench.cli import app
from snnbench.probe_cache import FORMAT, Installed, ProbeCache
from snnbench.registry import AdapterEntry
from snnbench.workload.linear_lif.spec import CaseData, NetworkSpec


class _Counting:
    """Stands in for the probe process: counts the adapters it is asked about."""

    def __init__(self, answered: bool = True) -> None:
        self.calls: list[str] = []
        self.answered = answered

    def __call__(self, name: str, timeout_s: float,
                 python: str = "") -> tuple[dict[str, Any], bool]:
        self.calls.append(name)
        return {"name": name, "available": True, "version": "9.9", "reason": "",
                "variants": ["default"], "library": "numpy"}, self.answered


def _list(*args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(app, ["list", "--json", "--adapters", "fake-ok,fake-toy", *args])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def test_the_second_list_answers_from_the_cache_without_a_probe(
        fake_plugins: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probe = _Counting()
    monkeypatch.setattr(probes, "run_probe", probe)
    first = _list()
    assert sorted(probe.calls) == ["fake-ok", "fake-toy"]
    second = _list()
    assert sorted(probe.calls) == ["fake-ok", "fake-toy"]  # no probe ran again
    assert second == first
    _list("--refresh")
    assert sorted(probe.calls) == ["fake-ok", "fake-ok", "fake-toy", "fake-toy"]


def test_a_probe_that_hung_or_crashed_is_not_kept(
        fake_plugins: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probe = _Counting(answered=False)
    monkeypatch.setattr(probes, "run_probe", probe)
    _list()
    _list()
    assert sorted(probe.calls) == ["fake-ok", "fake-ok", "fake-toy", "fake-toy"]


def test_an_unwritable_cache_never_fails_list(fake_plugins: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder goes")
    monkeypatch.setenv("SNNBENCH_CACHE_DIR", str(blocker))
    probe = _Counting()
    monkeypatch.setattr(probes, "run_probe", probe)
    assert {r["name"] for r in _list()} == {"fake-ok", "fake-toy"}
    assert _list() and len(probe.calls) == 4  # probed again each time, and no error


# -- the key -------------------------------------------------------------------------------
class _Lib(Adapter):
    name = "cached-lib"
    library = "cachelib"

    def build(self, spec: NetworkSpec, data: CaseData, device: str, variant: str) -> Model:
        raise NotImplementedError


def _site(root: Path, version: str, requires: str = "") -> Path:
    """A site folder where distribution ``cachelib`` (and ``cachedep``) is installed."""
    for name, ver, extra in (("cachelib", version, requires), ("cachedep", "1.0", "")):
        for old in root.glob(f"{name}-*.dist-info"):
            for f in old.iterdir():
                f.unlink()
            old.rmdir()
        info = root / f"{name}-{ver}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n"
                                       + extra)
    return root


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = _site(tmp_path / "site", "1.0", "Requires-Dist: cachedep\n")
    monkeypatch.setattr(Installed, "of", classmethod(lambda cls, python: cls([str(root)])))
    return root


def _entry() -> AdapterEntry:
    return AdapterEntry("cached-lib", "tests:_Lib", adapter_class=_Lib, distribution="")


ANSWER = {"name": "cached-lib", "available": True, "version": "1.0", "reason": ""}


def test_a_version_change_invalidates_the_answer(site: Path, tmp_path: Path) -> None:
    ProbeCache(tmp_path / "c").put(_entry(), "", ANSWER)
    assert ProbeCache(tmp_path / "c").get(_entry()) == ANSWER
    _site(site, "2.0", "Requires-Dist: cachedep\n")
    assert ProbeCache(tmp_path / "c").get(_entry()) is None


def test_a_requirement_of_the_library_is_part_of_the_key(site: Path, tmp_path: Path) -> None:
    key = ProbeCache(tmp_path / "c").key(_entry())
    assert key is not None and key["packages"]["cachedep"] == "1.0"
    assert key["packages"]["cachelib"] == "1.0"
    ProbeCache(tmp_path / "c").put(_entry(), "", ANSWER)
    info = site / "cachedep-1.0.dist-info"
    info.rename(site / "cachedep-1.1.dist-info")
    (site / "cachedep-1.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: cachedep\nVersion: 1.1\n")
    assert ProbeCache(tmp_path / "c").get(_entry()) is None


def test_another_interpreter_has_its_own_answer(site: Path, tmp_path: Path) -> None:
    ProbeCache(tmp_path / "c").put(_entry(), "", ANSWER)
    assert ProbeCache(tmp_path / "c").get(_entry(), "/elsewhere/bin/python") is None


def _entry_file(cache: Path) -> Path:
    files = list((cache / "probes").glob("*.json"))
    assert len(files) == 1
    return files[0]


@pytest.mark.parametrize("content", [
    b"{not json", b"", b"[]", b'{"format": "something-else/1"}', b"\xff\xfe{}",
    b"[" * 100_000,
])
def test_a_damaged_or_foreign_entry_is_ignored_and_replaced(
        site: Path, tmp_path: Path, content: bytes) -> None:
    cache = tmp_path / "c"
    ProbeCache(cache).put(_entry(), "", ANSWER)
    path = _entry_file(cache)
    path.write_bytes(content)
    assert ProbeCache(cache).get(_entry()) is None
    assert ProbeCache(cache).put(_entry(), "", ANSWER)
    assert ProbeCache(cache).get(_entry()) == ANSWER


def test_an_entry_for_another_key_or_adapter_is_ignored(site: Path, tmp_path: Path) -> None:
    cache = tmp_path / "c"
    ProbeCache(cache).put(_entry(), "", ANSWER)
    path = _entry_file(cache)
    data = json.loads(path.read_text())
    data["key"]["packages"]["cachelib"] = "0.1"
    path.write_text(json.dumps(data))
    assert ProbeCache(cache).get(_entry()) is None
    ProbeCache(cache).put(_entry(), "", ANSWER)
    data = json.loads(path.read_text())
    data["result"] = json.dumps({**ANSWER, "name": "someone-else"})
    path.write_text(json.dumps(data))
    assert ProbeCache(cache).get(_entry()) is None


class _Boom:
    """Unpickling this runs code: it would create the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_in_the_cache_is_never_unpickled(site: Path, tmp_path: Path) -> None:
    cache = tmp_path / "c"
    ProbeCache(cache).put(_entry(), "", ANSWER)
    marker = tmp_path / "ran"
    _entry_file(cache).write_bytes(pickle.dumps(_Boom(marker)))
    assert ProbeCache(cache).get(_entry()) is None
    assert not marker.exists()


def test_entries_are_plain_json_with_their_format(site: Path, tmp_path: Path) -> None:
    cache = tmp_path / "c"
    ProbeCache(cache).put(_entry(), "", ANSWER)
    data = json.loads(_entry_file(cache).read_text())
    assert data["format"] == FORMAT and json.loads(data["result"]) == ANSWER
    assert data["key"]["adapter"] == "cached-lib"


_LIST_IN_A_FRESH_PROCESS = """
import sys
from snnbench import probe as probes

def answer(name, timeout_s, python=""):
    return {"name": name, "available": True, "version": "9.9", "reason": "",
            "variants": ["default"], "library": "numpy"}, True

probes.run_probe = answer
sys.argv = ["snnbench", "list", "--adapters", "fake-ok,fake-toy"]
from snnbench.cli import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
heavy = sorted(m for m in ("scipy", "scipy.stats", "pandas", "matplotlib") if m in sys.modules)
print("HEAVY=" + ",".join(heavy))
"""


def test_list_never_imports_what_only_results_need(fake_plugins: Path, tmp_path: Path) -> None:
    """A warm ``list`` answers in about a second (issue 38): the table it prints must not pull
    in SciPy or pandas (about 1.7 s of imports here), which only ranking results needs."""
    import subprocess
    import sys

    env = {**os.environ, "SNNBENCH_CACHE_DIR": str(tmp_path), "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-c", _LIST_IN_A_FRESH_PROCESS], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "fake-ok" in done.stdout  # the table was printed
    assert "HEAVY=\n" in done.stdout, done.stdout

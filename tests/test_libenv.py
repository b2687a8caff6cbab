"""Library environments: ``adapter@VERSION`` and ``[environments]`` tables run a library version
in a uv-built overlay over the base environment.

Most tests build overlays offline from a wheelhouse of tiny wheels made here (a fake library,
``snnbench-fakelib`` 1.0 and 2.0, and a package that does not build); the tests marked for real
libraries fetch snnTorch and SpikingJelly wheels from PyPI once (uv caches them).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import subprocess
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from snnbench.host import libenv
from snnbench.host.libenv import (
    Base,
    BuildSettings,
    EnvironmentRequest,
    EnvironmentSpecError,
    version_request,
)
from snnbench.records.contract import case_key, environment_tag
from snnbench.registry import discover
from snnbench.store.rundir import adapter_label, load_run
from snnbench.sweep.config import ConfigError, RunConfig
from snnbench.sweep.planning.selection import SelectionError, select_adapters
from snnbench.sweep.planning.tasks import build_requests
from tests.conftest import library_installed, run_cli

# ------------------------------------------------------------------------------- fixtures


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def make_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = (),
               source: str = "") -> Path:
    """A pure-Python wheel of ``name`` whose module reports ``version`` (and holds ``source``)."""
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f"__version__ = {version!r}\n{source}".encode(),
        f"{info}/METADATA": (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                             + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: snnbench-tests\n"
                         b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    path = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for name_, data in files.items():
            whl.writestr(name_, data)
    return path


BROKEN_BACKEND = '''
import os

def get_requires_for_build_wheel(config_settings=None):
    return []

def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, "broken_pkg-1.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\\nName: broken-pkg\\nVersion: 1.0\\n")
    return "broken_pkg-1.0.dist-info"

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise RuntimeError("snnbench test: broken-pkg does not build")
'''


def make_broken_sdist(folder: Path) -> Path:
    """An sdist whose metadata is fine and whose wheel build fails (no build requirements)."""
    files = {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                          'backend-path = ["."]\n',
        "backend.py": BROKEN_BACKEND,
        "PKG-INFO": "Metadata-Version: 2.1\nName: broken-pkg\nVersion: 1.0\n",
    }
    path = folder / "broken_pkg-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"broken_pkg-1.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """snnbench-fakelib 1.0, and 2.0 (which declares it needs numpy<1, which the base lacks),
    and an sdist that does not build."""
    folder = tmp_path_factory.mktemp("wheelhouse")
    make_wheel(folder, "snnbench-fakelib", "1.0")
    make_wheel(folder, "snnbench-fakelib", "2.0", requires=("numpy<1.0",))
    make_broken_sdist(folder)
    return folder


@pytest.fixture
def env_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh environment cache for this test (here and in every CLI subprocess)."""
    cache = tmp_path / "envs"
    monkeypatch.setenv(libenv.CACHE_ENV_VAR, str(cache))
    yield cache


def fake_config(folder: Path, adapters: list[str], environments: str = "") -> Path:
    """A tiny sweep the fake adapters honour (fast sigmoid surrogate), as a TOML file."""
    path = folder / "sweep.toml"
    path.write_text(f"[run]\nadapters = {json.dumps(adapters)}\nrepeats = 5\nmin_time_s = 0.01\n"
                    "[network]\nneurons = 8\ntime_steps = 4\nbatch_size = 2\n"
                    'surrogate = "fast_sigmoid"\n' + environments)
    return path


def _summary(run_dir: Path) -> pd.DataFrame:
    return load_run(run_dir).summary


def _rows(run_dir: Path) -> dict[str, pd.Series]:
    """One summary row of each adapter label in a run (an ok one when there is one)."""
    summary = _summary(run_dir)
    summary = summary.sort_values("status", key=lambda s: s != "ok", kind="stable")
    return {adapter_label(r["adapter"], r["variant"], r["environment"]): r
            for _, r in summary.drop_duplicates(["adapter", "variant", "environment"]).iterrows()}


# ------------------------------------------------------------------------------ selection


def test_select_adapters_reads_versions_and_named_environments(fake_plugins: Path) -> None:
    entries = discover()
    chosen = select_adapters(("fake-lib@1.0", "fake-ok:default@legacy", "fake-lib@2.0:default",
                              "fake-ok"), entries, {"legacy": ("snnbench-fakelib==1.0",)})
    assert [(s.adapter, s.variant, s.environment) for s in chosen] == [
        ("fake-lib", None, EnvironmentRequest("fake-lib@1.0", ("snnbench-fakelib==1.0",))),
        ("fake-ok", "default", EnvironmentRequest("legacy", ("snnbench-fakelib==1.0",))),
        ("fake-lib", "default", EnvironmentRequest("fake-lib@2.0", ("snnbench-fakelib==2.0",))),
        ("fake-ok", None, None),
    ]


@pytest.mark.parametrize(("item", "message"), [
    ("fake-lib@", "nothing after '@'"),
    ("fake-lib@latest", "neither a version nor a configured environment"),
    ("fake-lib:default@1.0:default", "give the variant once"),
    ("torch@2.0.0", "always comes from the base environment"),
])
def test_select_adapters_refuses_bad_environments(fake_plugins: Path, item: str,
                                                  message: str) -> None:
    with pytest.raises(SelectionError, match=message):
        select_adapters((item,), discover())


def test_environment_names_in_keys_and_labels() -> None:
    assert environment_tag("snntorch", "snntorch@0.9.4") == "0.9.4"
    assert environment_tag("spikingjelly", "legacy") == "legacy"
    assert case_key("snntorch", "default", "cpu", "abc", "snntorch@0.9.4") == (
        "snntorch@0.9.4--default--cpu--abc")
    assert adapter_label("spikingjelly", "torch", "spikingjelly@0.0.0.0.14") == (
        "spikingjelly:torch@0.0.0.0.14")
    assert adapter_label("spikingjelly", "torch", "legacy") == "spikingjelly:torch@legacy"
    assert adapter_label("torch", "default") == "torch"


def test_config_environment_tables() -> None:
    config = RunConfig.from_dict({
        "run": {"adapters": ["spikingjelly:torch@legacy"]},
        "environments": {"legacy": {"requirements": ["spikingjelly==0.0.0.0.14"]}},
    })
    assert config.environments == {"legacy": ("spikingjelly==0.0.0.0.14",)}
    # the manifest's copy reloads to the same config (run --resume)
    assert RunConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(("table", "message"), [
    ({"legacy": {"requirements": ["spikingjelly=>0.0.0.0.14"]}}, "malformed requirement"),
    ({"legacy": {"requirements": ["snntorch"], "python": "3.10"}}, "unknown key"),
    ({"legacy": {}}, "lacks 'requirements'"),
    ({"legacy": {"requirements": "snntorch"}}, "must be a list"),
    ({"legacy": {"requirements": []}}, "non-empty list"),
    ({"v1.0": {"requirements": ["snntorch"]}}, "reads as a version"),
    ({"1.0": {"requirements": ["snntorch"]}}, "must start with a letter"),
    ({"base": {"requirements": ["snntorch"]}}, "must start with a letter"),
    ({"legacy": {"requirements": ["torch==2.0"]}}, "always comes from the base"),
])
def test_config_environment_errors(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RunConfig.from_dict({"environments": table})


def test_version_request_pins_the_adapters_library() -> None:
    assert version_request("haiku", "dm-haiku", "0.0.12") == EnvironmentRequest(
        "haiku@0.0.12", ("dm-haiku==0.0.12",))
    with pytest.raises(EnvironmentSpecError, match="not a version"):
        version_request("haiku", "dm-haiku", "newest")


# ---------------------------------------------------------------------- building, offline


def test_environment_from_a_wheelhouse_is_layered_over_the_base(
        wheelhouse: Path, env_cache: Path) -> None:
    settings = BuildSettings(cache_dir=env_cache, wheelhouse=wheelhouse)
    built = build_requests([EnvironmentRequest("fake-lib@1.0", ("snnbench-fakelib==1.0",))],
                           settings)["fake-lib@1.0"]
    assert built.error == "" and not built.reused
    assert built.resolved == ("snnbench-fakelib==1.0",)
    # the overlay's interpreter sees its own package, and torch/numpy/snnbench from the base
    code = ("import importlib.metadata as m, numpy, snnbench, snnbench_fakelib, sys; "
            "print(m.version('snnbench-fakelib'), snnbench_fakelib.__file__.startswith(sys.prefix),"
            " numpy.__file__.startswith(sys.prefix))")
    out = subprocess.run([built.python, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1.0", "True", "False"]


def test_a_built_environment_is_reused_without_uv(
        wheelhouse: Path, env_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = EnvironmentRequest("fake-lib@1.0", ("snnbench-fakelib==1.0",))
    first = build_requests([request], BuildSettings(env_cache, wheelhouse))["fake-lib@1.0"]

    def no_uv(*args: object, **kwargs: object) -> None:
        raise AssertionError("uv was called for a cached environment")

    monkeypatch.setattr(libenv, "_run_uv", no_uv)
    # no wheelhouse and no uv now: the cache alone must do
    again = build_requests([request], BuildSettings(env_cache))["fake-lib@1.0"]
    assert again.reused and again.path == first.path and again.resolved == first.resolved
    # the key is the requirements' (and the base's), not the name's
    other = build_requests([EnvironmentRequest("mine", ("snnbench-fakelib==1.0",))],
                           BuildSettings(env_cache))["mine"]
    assert other.reused and other.path == first.path


def test_unknown_version_in_the_wheelhouse_is_exit_2_before_any_case(
        wheelhouse: Path, env_cache: Path, tmp_path: Path, fake_plugins: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", "--adapters", "fake-ok,fake-lib@9.9", "--neurons", "8", "--steps", "4",
                   "--wheelhouse", str(wheelhouse), "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "fake-lib@9.9: cannot be resolved" in lines[0], proc.stderr
    assert "snnbench-fakelib==9.9" in lines[0]
    assert not out.exists()


def test_malformed_requirement_is_exit_2_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[run]\nadapters = ["snntorch@legacy"]\n'
                      '[environments.legacy]\nrequirements = ["snntorch=>0.9"]\n')
    proc = run_cli("run", "--config", str(config), "--out", str(tmp_path / "run"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "malformed requirement 'snntorch=>0.9'" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()


def test_two_versions_in_one_run_then_show_compare_and_resume(
        wheelhouse: Path, env_cache: Path, tmp_path: Path, fake_plugins: Path) -> None:
    out = tmp_path / "run"
    config = fake_config(tmp_path, ["fake-lib@1.0", "fake-lib@2.0", "fake-ok"])
    proc = run_cli("run", "--config", str(config), "--wheelhouse", str(wheelhouse),
                   "--out", str(out))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    rows = _rows(out)
    assert set(rows) == {"fake-lib@1.0", "fake-lib@2.0", "fake-ok"}
    assert rows["fake-lib@1.0"]["library_version"] == "1.0"
    assert rows["fake-lib@2.0"]["library_version"] == "2.0"
    assert rows["fake-lib@2.0"]["status"] == "ok"
    assert rows["fake-lib@1.0"]["requirements"] == "snnbench-fakelib==1.0"
    # the version the worker found inside its overlay
    assert rows["fake-lib@2.0"]["packages"] == "snnbench-fakelib==2.0"
    assert rows["fake-ok"]["environment"] == "" and rows["fake-ok"]["packages"] == ""
    record = json.loads((out / "cases" / f"{case_key('fake-lib', 'default', 'cpu', rows['fake-lib@1.0']['case_id'], 'fake-lib@1.0')}.json").read_text())
    assert record["environment"]["name"] == "fake-lib@1.0"
    assert record["packages"]["snnbench-fakelib"] == "1.0"
    manifest = json.loads((out / "manifest.json").read_text())
    envs = {e["name"]: e for e in manifest["environments"]}
    # 2.0 declares numpy<1: the base's numpy is used all the same, and the run says so
    assert any("requires numpy<1.0, the base has" in w for w in envs["fake-lib@2.0"]["warnings"])
    assert envs["fake-lib@1.0"]["warnings"] == []

    shown = run_cli("show", str(out))
    assert "fake-lib@1.0" in shown.stdout and "fake-lib@2.0" in shown.stdout
    report = run_cli("report", str(out), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| fake-lib@1.0 |" in text and "| fake-lib@2.0 |" in text
    assert "library environment fake-lib@2.0 | snnbench-fakelib==2.0; warning:" in text

    # the maintainer's gate: one environment against the other, in the same run
    gate = run_cli("compare", str(out), "--envs", "fake-lib@1.0,fake-lib@2.0", "-f", "json")
    assert gate.returncode in (0, 1, 3), gate.stderr
    result = json.loads(gate.stdout)
    assert result["environments"] == ["fake-lib@1.0", "fake-lib@2.0"]
    # the versions differ by design: the cases are compared, not "not comparable"
    # (a zero memory peak of the fake adapter is not comparable, whatever the environments)
    odd = [p for p in result["pairs"] if p["mark"] == "not_comparable" and p["metric"] != "peak_mem_bytes"]
    assert odd == []
    assert result["compared_time_pairs"] == 3
    assert {p["baseline_status"] for p in result["pairs"] if not p["metric"]} <= {"ok"}
    assert {p["environment"] for p in result["pairs"]} == {""}
    # without --envs each environment is matched with itself
    same = json.loads(run_cli("compare", str(out), str(out), "-f", "json").stdout)
    assert {p["environment"] for p in same["pairs"]} == {"fake-lib@1.0", "fake-lib@2.0", ""}
    missing = run_cli("compare", str(out), "--envs", "fake-lib@1.0,fake-lib@3.0")
    assert missing.returncode == 2 and "no environment 'fake-lib@3.0'" in missing.stderr
    assert "base, fake-lib@1.0" in missing.stderr or "fake-lib@1.0" in missing.stderr

    # resume: a lost case of an environment runs again in it, from the cache (no wheelhouse)
    lost = next((out / "cases").glob("fake-lib@2.0--*.json"))
    lost.unlink()
    again = run_cli("run", "--resume", "--out", str(out),
                    env={"UV_OFFLINE": "1", "UV_DEFAULT_INDEX": "http://127.0.0.1:9/simple"})
    assert again.returncode == 0, again.stderr
    assert "environment fake-lib@2.0: reused from the cache" in again.stderr
    assert lost.exists()
    assert json.loads(lost.read_text())["library_version"] == "2.0"
    resumed = json.loads((out / "manifest.json").read_text())["environments"]
    assert {e["name"]: e["reused"] for e in resumed} == {"fake-lib@1.0": True, "fake-lib@2.0": True}


def test_a_failing_build_gives_unavailable_rows_and_the_rest_runs(
        wheelhouse: Path, env_cache: Path, tmp_path: Path, fake_plugins: Path) -> None:
    config = fake_config(tmp_path, ["fake-ok", "fake-ok@broken"],
                         '[environments.broken]\nrequirements = ["broken-pkg==1.0"]\n')
    out = tmp_path / "run"
    proc = run_cli("run", "--config", str(config), "--wheelhouse", str(wheelhouse),
                   "--out", str(out))
    assert proc.returncode == 0, proc.stderr  # unavailable is not a failure of the run
    rows = _rows(out)
    assert rows["fake-ok"]["status"] == "ok"
    broken = rows["fake-ok@broken"]
    assert broken["status"] == "unavailable"
    assert broken["message"].startswith("environment broken could not be built: ")
    assert "broken-pkg does not build" in broken["message"]  # the installer's own error
    assert "environment broken: build failed" in proc.stderr
    assert not list(env_cache.glob("*/bin/python"))  # nothing half-built is kept


def test_no_network_is_a_build_failure_not_bad_input(
        env_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # an index that cannot be reached is not the user's input: the environment's rows say why
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    for proxy in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(proxy, "http://127.0.0.1:9")
    built = build_requests([EnvironmentRequest("snntorch@0.9.4", ("snntorch==0.9.4",))],
                           BuildSettings(env_cache))["snntorch@0.9.4"]
    assert built.error.startswith("resolving failed: ")
    assert "Failed to fetch" in built.error or "error sending request" in built.error
    assert built.python == ""


def test_list_probes_inside_the_environment(wheelhouse: Path, env_cache: Path,
                                            fake_plugins: Path) -> None:
    proc = run_cli("list", "--adapters", "fake-lib@2.0,fake-lib", "--wheelhouse", str(wheelhouse),
                   "--json")
    assert proc.returncode == 0, proc.stderr
    results = {r["name"]: r for r in json.loads(proc.stdout)}
    assert results["fake-lib@2.0"]["available"] and results["fake-lib@2.0"]["version"] == "2.0"
    assert not results["fake-lib"]["available"]  # the base has no snnbench-fakelib


def test_old_runs_without_environment_columns_still_load() -> None:
    baseline = Path(__file__).resolve().parent.parent / "results" / "baselines" / "cpu-smoke"
    run = load_run(baseline)
    assert set(run.summary["environment"]) == {""}


# ------------------------------------------------------------------ real libraries, PyPI


def _needs(*distributions: str) -> None:
    missing = [d for d in distributions if not library_installed(d)]
    if missing:
        pytest.skip(f"not installed in the base: {', '.join(missing)}")


@pytest.mark.slow
def test_environment_built_offline_from_uvs_cache(env_cache: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _needs("torch")
    request = EnvironmentRequest("snntorch@0.9.4", ("snntorch==0.9.4",))
    first = build_requests([request], BuildSettings(env_cache))["snntorch@0.9.4"]
    assert first.error == ""
    # a second cache folder, with the network unusable (uv offline, and any connection it
    # tried would go to a proxy that is not there): uv's own cache must be enough
    monkeypatch.setenv("UV_OFFLINE", "1")
    for proxy in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(proxy, "http://127.0.0.1:9")
    second = build_requests([request], BuildSettings(tmp_path / "other"))["snntorch@0.9.4"]
    assert second.error == "" and not second.reused
    assert second.resolved == ("snntorch==0.9.4",)
    out = subprocess.run([second.python, "-c", "import snntorch; print(snntorch.__version__)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0.9.4"


@pytest.mark.slow
def test_two_snntorch_versions_in_one_run(env_cache: Path, tmp_path: Path) -> None:
    _needs("torch", "snntorch")
    out = tmp_path / "run"
    proc = run_cli("run", "--adapters", "snntorch@0.9.4,snntorch@1.0.0", "--neurons", "16",
                   "--steps", "10", "--repeats", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    rows = _rows(out)
    # beside the default config's null probe
    assert set(rows) == {"snntorch@0.9.4", "snntorch@1.0.0", "null"}
    for version in ("0.9.4", "1.0.0"):
        row = rows[f"snntorch@{version}"]
        assert row["status"] == "ok"
        assert row["library_version"] == version
        assert row["packages"] == f"snntorch=={version}"
        assert row["spike_match"] == 1.0


@pytest.mark.slow
def test_spikingjelly_legacy_release_verified_exact(env_cache: Path) -> None:
    _needs("torch")
    from snnbench.sweep.verify_cmd import VerifyRequest, run_verification

    records = run_verification(VerifyRequest(
        adapters=("spikingjelly@0.0.0.0.14",), neurons=(32,), time_steps=30))
    by_variant: dict[str, list[object]] = {}
    for record in records:
        by_variant.setdefault(record.variant, []).append(record)
    torch_checks = [r for r in records if r.variant == "torch"]
    assert len(torch_checks) == 2  # subtract and zero reset
    for record in torch_checks:
        assert record.status == "ok", record.message
        assert record.library_version == "0.0.0.0.14"
        assert record.packages["spikingjelly"] == "0.0.0.0.14"
        assert record.spike_match == 1.0
        assert record.equivalence is not None and record.equivalence["grad_cosine"] >= 0.9999
    # the CUDA backends (CuPy among them) are not expanded on the CPU: nobody asked for them,
    # so no row (issue 36); never an error
    assert not [r for r in records if r.variant != "torch"]


def test_base_identity_names_this_interpreter() -> None:
    base = Base.current()
    assert base.python and base.site_dirs
    assert "numpy" in base.packages and "snnbench" in base.packages

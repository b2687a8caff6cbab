"""A sweep of NIR graphs: ``[network] graph = "net.nir"`` and ``run``/``verify --network G.nir``
make ``nir-graph`` workloads, a relative path is the config file's folder's, the config
round-trips through the manifest, and every bad graph is one line and exit 2 before anything
is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

nir = pytest.importorskip("nir")

from snnbench.sweep.config import (  # noqa: E402
    ConfigError,
    RunConfig,
    build_config,
    config_path,
    load_config,
)
from snnbench.workload import LinearLif, NirGraph  # noqa: E402
from snnbench.workload.graph.examples import write_example, write_graph  # noqa: E402


def _config(tmp_path: Path, text: str, name: str = "sweep.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _graphs(folder: Path, *names: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [write_example(name, folder / f"{name}.nir") for name in names]


def test_a_network_table_with_a_graph_makes_graph_workloads(tmp_path: Path) -> None:
    _graphs(tmp_path / "nets", "cuba-mlp")
    path = _config(tmp_path, '[network]\ngraph = "nets/cuba-mlp.nir"\ndt = 1e-3\n'
                             'time_steps = 7\nbatch_size = 2\nreset = "zero"\n'
                             '[[sweep]]\ndetach_reset = [true, false]\n')
    config = load_config(path)
    cases = config.cases()
    assert [type(c) for c in cases] == [NirGraph, NirGraph]
    graph = cases[0]
    assert isinstance(graph, NirGraph)
    # relative to the config file's folder, not to where the command runs
    assert graph.graph == str((tmp_path / "nets" / "cuba-mlp.nir").absolute())
    assert (graph.network, graph.dt, graph.time_steps, graph.batch_size, graph.reset) == (
        "cuba-mlp", 1e-3, 7, 2, "zero")
    assert {c.params()["detach_reset"] for c in cases} == {True, False}
    assert config.to_dict()["network"]["graph"] == graph.graph


def test_a_sweep_over_graphs(tmp_path: Path) -> None:
    _graphs(tmp_path, "cuba-mlp", "conv")
    path = _config(tmp_path, '[network]\ndt = 1e-3\n[[sweep]]\n'
                             'graph = ["cuba-mlp.nir", "conv.nir"]\nreset = ["zero", "subtract"]\n')
    cases = load_config(path).cases()
    assert [(c.params()["network"], c.params()["reset"]) for c in cases] == [
        ("cuba-mlp", "zero"), ("cuba-mlp", "subtract"), ("conv", "zero"), ("conv", "subtract")]
    assert len({c.case_id for c in cases}) == 4


def test_the_config_round_trips_through_the_manifest_from_another_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _graphs(tmp_path / "cfg", "cuba-mlp")
    config = load_config(_config(tmp_path / "cfg", '[network]\ngraph = "cuba-mlp.nir"\n'
                                                   'dt = 1e-3\n[[sweep]]\ntime_steps = [3, 5]\n'))
    stored = json.loads(json.dumps(config.to_dict()))
    monkeypatch.chdir(tmp_path)  # --resume from elsewhere finds the same file
    again = RunConfig.from_dict(stored, source="manifest.json")
    assert [c.case_id for c in again.cases()] == [c.case_id for c in config.cases()]
    assert again.kind is NirGraph


def test_a_shipped_example_is_written_once_into_the_cache(tmp_path: Path,
                                                          probe_cache_dir: Path) -> None:
    config = RunConfig.from_dict({"network": {"graph": "example:cuba-mlp", "dt": 1e-3}})
    (case,) = config.cases()
    assert isinstance(case, NirGraph)
    written = probe_cache_dir / "graphs" / "cuba-mlp.nir"
    assert case.graph == str(written) and written.is_file()
    mine = NirGraph.from_file(write_example("cuba-mlp", tmp_path / "mine.nir"), dt=1e-3)
    assert case.case_id == mine.case_id  # the same network as export-nir writes
    stamp = written.stat().st_mtime_ns
    assert config.cases()[0].case_id == case.case_id and written.stat().st_mtime_ns == stamp
    # a config keeps the name, not the cache's path
    assert config.to_dict()["network"]["graph"] == "example:cuba-mlp"


def test_the_shipped_graph_config_sweeps_the_four_examples() -> None:
    config = load_config(config_path("graphs"))
    cases = config.cases()
    assert [c.params()["network"] for c in cases] == ["linear-lif", "shd-mlp", "cuba-mlp",
                                                      "conv"]
    assert all(isinstance(c, NirGraph) and c.time_steps <= 20 and c.batch_size <= 4
               for c in cases)


def test_network_over_a_linear_lif_config_keeps_what_a_graph_shares(tmp_path: Path) -> None:
    (path,) = _graphs(tmp_path, "cuba-mlp")
    config = build_config("default", {}, {"graph": [str(path)], "dt": [1e-3]})
    default = load_config(config_path("default"))
    assert all(isinstance(c, LinearLif) for c in default.cases())
    (case,) = config.cases()  # the default's n sweep is the Linear+LIF network's: left out
    assert isinstance(case, NirGraph)
    shared = {k: v for k, v in default.network.items() if k != "layers"}
    assert {k: case.params()[k] for k in shared} == shared
    with pytest.raises(ConfigError, match="unknown network field 'neurons' of a nir-graph"):
        build_config("default", {}, {"graph": [str(path)], "dt": [1e-3], "neurons": [4]})


def test_a_graph_config_refuses_linear_lif_fields(tmp_path: Path) -> None:
    for text, named in (('[network]\ngraph = "g.nir"\ndt = 1e-3\nneurons = 4\n',
                         r"unknown key\(s\) in \[network\]: neurons \(known: graph, dt, "),
                        ('[network]\ndt = 1e-3\n[[sweep]]\ngraph = ["g.nir"]\nlayers = [2]\n',
                         r"unknown key\(s\) in \[\[sweep\]\]: layers"),
                        ('[network]\ngraph = 3\ndt = 1e-3\n', "graph must be the path"),
                        ('[network]\ngraph = "g.nir"\ndt = -1.0\n', "dt must be a positive"),
                        ('[network]\ngraph = "g.nir"\ndt = 1e-3\nreset = "half"\n',
                         "reset must be one of")):
        with pytest.raises(ConfigError, match=named):
            load_config(_config(tmp_path, text))


# -- every bad input: one line on stderr, exit 2, nothing written ---------------------------

def _io(n: int) -> tuple[Any, Any]:
    return nir.Input({"input": np.array([n])}), nir.Output({"output": np.array([n])})


def _lif(n: int) -> Any:
    return nir.LIF(tau=np.full(n, 0.01), r=np.ones(n), v_leak=np.zeros(n),
                   v_threshold=np.ones(n))


def _affine(n_out: int, n_in: int, value: float = 0.1) -> Any:
    return nir.Affine(weight=np.full((n_out, n_in), value), bias=np.zeros(n_out))


def _bad_graph(tmp_path: Path, what: str) -> Path:
    path = tmp_path / f"{what}.nir"
    i, o = _io(2)
    if what == "not-nir":
        path.write_bytes(b"not a graph\n")
        return path
    graph = {
        "unknown-node": lambda: nir.NIRGraph.from_list(
            i, nir.Threshold(threshold=np.ones(2)), o),
        "cycle": lambda: nir.NIRGraph(
            nodes={"input": i, "a": _affine(2, 2), "lif": _lif(2), "output": o},
            edges=[("input", "a"), ("a", "lif"), ("lif", "a"), ("lif", "output")]),
        # an affine from a layer back to its own input: a recurrent weight
        "recurrent": lambda: nir.NIRGraph(
            nodes={"input": i, "a": _affine(2, 2), "rec": _affine(2, 2), "lif": _lif(2),
                   "output": o},
            edges=[("input", "a"), ("a", "lif"), ("lif", "rec"), ("rec", "lif"),
                   ("lif", "output")]),
        "conv1d-dilation": lambda: nir.NIRGraph.from_list(
            nir.Input({"input": np.array([1, 8])}),
            nir.Conv1d(input_shape=8, weight=np.ones((1, 1, 3)), stride=1, padding=0,
                       dilation=2, groups=1, bias=np.zeros(1)),
            _lif(4), _io(4)[1]),
        "shapes": lambda: nir.NIRGraph.from_list(_io(3)[0], _affine(4, 3), _lif(5),
                                                 _io(5)[1]),
        "not-finite": lambda: nir.NIRGraph.from_list(
            i, nir.Affine(weight=np.array([[1.0, np.nan]]), bias=np.zeros(1)), _lif(1),
            _io(1)[1]),
    }[what]()
    return write_graph(graph, path)


BAD = [("not-nir", "is not a NIR file"), ("unknown-node", "a node kind snnbench does not read"),
       ("cycle", "recurrent connections (the cycle 'a' -> 'lif' -> 'a') are not supported"),
       ("recurrent", "recurrent connections (the cycle 'lif' -> 'rec' -> 'lif') are not "
                     "supported"),
       ("conv1d-dilation", "groups and dilation other than 1 are not supported"),
       ("shapes", "does not fit"), ("not-finite", "is not finite"),
       ("no-dt", "dt is missing"), ("missing", "no such file")]


def _invoke(args: list[str]) -> Any:
    from typer.testing import CliRunner

    from snnbench.cli import app

    return CliRunner().invoke(app, args)


@pytest.mark.parametrize("command", ["run", "verify"])
@pytest.mark.parametrize(("what", "said"), BAD)
def test_a_bad_graph_is_one_line_and_exit_2_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, what: str,
        said: str) -> None:
    monkeypatch.chdir(tmp_path)
    if what == "no-dt":
        path, dt = tmp_path / "g.nir", []
        write_example("cuba-mlp", path)
    elif what == "missing":
        path, dt = tmp_path / "absent.nir", ["--dt", "1e-3"]
    else:
        path, dt = _bad_graph(tmp_path, what), ["--dt", "1e-3"]
    before = sorted(p.name for p in tmp_path.iterdir())
    out = ["--out", str(tmp_path / "run")] if command == "run" else ["--dump",
                                                                    str(tmp_path / "dumps")]
    result = _invoke([command, "--network", str(path), *dt, "--adapters", "torch", *out])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no run folder, no dumps


@pytest.mark.parametrize(("command", "flag"), [
    ("run", ["--neurons", "64"]), ("run", ["--layers", "2"]), ("run", ["--precision", "tf32"]),
    ("verify", ["--neurons", "64"]), ("verify", ["--layers", "2"]), ("verify", ["--no-bias"]),
    ("verify", ["--precision", "tf32"])])
def test_linear_lif_flags_are_refused_with_a_graph(tmp_path: Path, command: str,
                                                   flag: list[str]) -> None:
    result = _invoke([command, "--network", "example:cuba-mlp", "--dt", "1e-3", *flag])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "a graph (--network) is its own network" in lines[0]
    assert flag[0].split("/")[0] in lines[0]


def test_dt_is_a_graphs(tmp_path: Path) -> None:
    result = _invoke(["verify", "--dt", "1e-3"])
    assert result.exit_code == 2 and "--dt is a graph's time step" in result.stderr
    result = _invoke(["run", "--dt", "1e-3", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "unknown network field 'dt'" in result.stderr
    result = _invoke(["run", "--network", "example:cuba-mlp", "--dt", "0",
                      "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "--dt must be a finite number > 0" in result.stderr
    assert not (tmp_path / "r").exists()


def test_verify_a_graph_end_to_end(tmp_path: Path) -> None:
    """``verify --network G.nir --dt 1e-3 --adapters torch``: torch builds the graph natively
    and its check matches the graph's reference; the table has the graph's columns, and the
    Linear+LIF columns a graph check leaves empty do not appear in its title."""
    path = write_example("cuba-mlp", tmp_path / "cuba.nir")
    result = _invoke(["verify", "--network", str(path), "--dt", "1e-3", "--adapters", "torch",
                      "--steps", "10", "--batch-size", "2", "--reset", "zero"])
    assert "Traceback" not in result.stdout + result.stderr
    assert "torch cuba n=138 B=2 T=10 dt=0.001 zero euler float32" in result.stderr
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "OK: 1 of 1 checks matched the reference" in result.stdout
    words = " ".join(result.stdout.split())
    assert "network=cuba" in words and "dt=0.001" in words
    assert "rel err dW=" not in words and "cos db=" not in words

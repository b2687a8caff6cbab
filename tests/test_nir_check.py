"""``snnbench nir-check``: each library's own NIR importer classified against the reference.

The probes find what differs on synthetic outputs (the reference at another dt, one step late,
with r ignored, a dropped node, a read-out off by a factor); the importer's process cannot
install anything; bad input is one line and exit 2; and snnTorch's real importer is classified
as the design note found it (its dt is fixed at 1e-4)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

nir = pytest.importorskip("nir")

from snnbench.workload import NirGraph  # noqa: E402
from snnbench.workload.graph.conformance import check as check_module  # noqa: E402
from snnbench.workload.graph.conformance.guard import (  # noqa: E402
    NO_INSTALL_ENV,
    runs_installer,
)
from snnbench.workload.graph.conformance.probes import (  # noqa: E402
    Hypothesis,
    classify,
    probe_output,
)
from snnbench.workload.graph.conformance.render import terminal  # noqa: E402
from snnbench.workload.graph.conformance.result import (  # noqa: E402
    DIFFERENT,
    EXACT,
    SCALED,
    UNAVAILABLE,
    UNSUPPORTED,
    ConformanceReport,
    LibraryCheck,
)
from snnbench.workload.graph.examples import write_example, write_graph  # noqa: E402
from snnbench.workload.graph.reference import Dynamics, run_graph_reference  # noqa: E402
from tests.conftest import library_installed, run_cli  # noqa: E402

DT = 1e-3


def _graph_file(tmp_path: Path, neuron: str) -> Path:
    """Input(16) → Affine → ``neuron`` → Output, parameters such that it spikes both at
    dt = 1e-3 and at 1e-4 (τ = 10 ms, r = 50)."""
    rng = np.random.default_rng(3)
    n = 16
    full = lambda v: np.full(n, v)  # noqa: E731
    neurons = {
        "LIF": nir.LIF(tau=full(0.01), r=full(50.0), v_leak=full(0.0), v_threshold=full(1.0)),
        "LI": nir.LI(tau=full(0.01), r=full(50.0), v_leak=full(0.0)),
        "CubaLIF": nir.CubaLIF(tau_syn=full(0.005), tau_mem=full(0.01), r=full(50.0),
                               v_leak=full(0.0), v_threshold=full(1.0), w_in=full(1.0)),
    }
    graph = nir.NIRGraph(
        nodes={"input": nir.Input({"input": np.array([n])}),
               "fc": nir.Affine(weight=rng.uniform(-0.5, 0.5, (n, n)),
                                bias=rng.uniform(-0.1, 0.1, n)),
               "neuron": neurons[neuron], "output": nir.Output({"output": np.array([n])})},
        edges=[("input", "fc"), ("fc", "neuron"), ("neuron", "output")])
    return write_graph(graph, tmp_path / f"{neuron}.nir")


def _case(path: Path, **choices: Any) -> tuple[Any, Any, Dynamics]:
    workload = NirGraph.from_file(path, dt=DT, time_steps=60, batch_size=3, reset="zero",
                                  **choices)
    return workload, workload.make_data(), workload.dynamics


def _classify(path: Path, output: np.ndarray) -> Any:
    workload, data, dyn = _case(path)
    reference = workload.reference(data).output
    return classify(data.graph, data.inputs, output, dyn, reference, data.params)


@pytest.mark.parametrize("neuron", ["LIF", "LI", "CubaLIF"])
def test_a_probe_with_no_difference_is_the_reference(tmp_path: Path, neuron: str) -> None:
    workload, data, _ = _case(_graph_file(tmp_path, neuron))
    hyp = Hypothesis(dt=DT, discretisation="euler", reset="zero")
    got = probe_output(data.graph, data.inputs, hyp, data.params)
    np.testing.assert_array_equal(got, workload.reference(data).output)


def test_the_reference_is_exact(tmp_path: Path) -> None:
    path = _graph_file(tmp_path, "LIF")
    workload, data, _ = _case(path)
    out = workload.reference(data).output.astype(np.float32)
    assert out.mean() > 0.01  # it spikes: the probe is not a silent match
    verdict = _classify(path, out)
    assert (verdict.verdict, verdict.findings) == (EXACT, ())


def test_the_reference_at_another_dt_is_exact_up_to_a_scale(tmp_path: Path) -> None:
    path = _graph_file(tmp_path, "LIF")
    _, data, dyn = _case(path)
    other = run_graph_reference(data.graph, data.inputs, replace(dyn, dt=1e-4), data.params)
    assert other.output.mean() > 0.01
    verdict = _classify(path, other.output)
    assert verdict.verdict == SCALED
    assert verdict.findings == ("behaves as dt = 0.0001 s",)


def test_a_shifted_output_is_found_one_step_late(tmp_path: Path) -> None:
    path = _graph_file(tmp_path, "LIF")
    workload, data, _ = _case(path)
    ref = workload.reference(data).output
    late = np.zeros_like(ref)
    late[1:] = ref[:-1]
    verdict = _classify(path, late)
    assert verdict.verdict == DIFFERENT
    assert verdict.findings == ("output 1 step late (the reference shifted by 1)",)


def test_a_subtract_reset_is_found(tmp_path: Path) -> None:
    path = _graph_file(tmp_path, "LIF")
    _, data, dyn = _case(path)
    out = run_graph_reference(data.graph, data.inputs, replace(dyn, reset="subtract"),
                              data.params).output
    verdict = _classify(path, out)
    assert (verdict.verdict, verdict.findings) == (DIFFERENT, ("subtract reset",))


def test_r_ignored_is_found(tmp_path: Path) -> None:
    path = _graph_file(tmp_path, "LIF")
    _, data, dyn = _case(path)
    g = data.graph
    r_one = replace(g, nodes=tuple(
        (name, replace(node, r=np.ones_like(node.r)) if name == "neuron" else node)
        for name, node in g.nodes))
    # fed 20× the input, so that it spikes with r = 1 as well
    inputs = data.inputs * np.float32(20.0)
    out = run_graph_reference(r_one, inputs, dyn, data.params).output
    assert out.mean() > 0.01
    reference = run_graph_reference(g, inputs, dyn, data.params).output
    verdict = classify(g, inputs, out, dyn, reference, data.params)
    assert verdict.verdict == DIFFERENT
    assert verdict.findings == ("r ignored (equal to the reference with r = 1)",)


def test_the_raw_current_is_found_a_dropped_node(tmp_path: Path) -> None:
    path = _graph_file(tmp_path, "CubaLIF")
    workload, data, _ = _case(path)
    raw = workload.reference(data).values["fc"]
    verdict = _classify(path, raw.astype(np.float32))
    assert verdict.verdict == DIFFERENT
    assert verdict.findings[0] == "CubaLIF nodes dropped (the output is their raw input)"


def test_a_read_out_off_by_a_factor_is_exact_up_to_a_scale(tmp_path: Path) -> None:
    path = _graph_file(tmp_path, "LI")
    workload, data, _ = _case(path)
    verdict = _classify(path, 2.5 * workload.reference(data).output)
    assert verdict.verdict == SCALED
    assert verdict.findings == ("read-out = 2.5 × the reference's",)


def test_noise_matches_no_probe(tmp_path: Path) -> None:
    path = _graph_file(tmp_path, "LIF")
    workload, data, _ = _case(path)
    rng = np.random.default_rng(0)
    noise = (rng.random(workload.reference(data).output.shape) < 0.2).astype(np.float32)
    verdict = _classify(path, noise)
    assert verdict.verdict == DIFFERENT
    assert verdict.findings[-1].startswith("no probe matched")


def test_features_flattened_channels_last_are_found(tmp_path: Path) -> None:
    path = write_example("conv", tmp_path / "conv.nir")
    workload = NirGraph.from_file(path, dt=DT, time_steps=30, batch_size=2, reset="zero",
                                  input_std=3.0)
    data, dyn = workload.make_data(), workload.dynamics
    # the affine layer's columns reordered so that it reads (C, H, W) features as if they
    # were flattened (H, W, C): the network a channels-last library builds from the file
    cols = np.moveaxis(np.arange(16 * 7 * 7).reshape(7, 7, 16), -1, 0).ravel()
    params = {**data.params, "fc.weight": data.params["fc.weight"][:, cols]}
    out = run_graph_reference(data.graph, data.inputs, dyn, params).output
    assert out.mean() > 0.01
    reference = workload.reference(data).output
    verdict = classify(data.graph, data.inputs, out, dyn, reference, data.params)
    assert (verdict.verdict, verdict.findings) == (DIFFERENT, (
        "features flattened channels-last (H, W, C) where the next layer's weights expect "
        "(C, H, W)",))


# -- the importer's process cannot install anything --------------------------------------------

@pytest.mark.parametrize(("args", "installs"), [
    ([sys.executable, "-m", "pip", "install", "samna"], True),
    (["pip", "install", "x"], True),
    ("/usr/bin/pip3 install x", True),
    (["uv", "pip", "install", "x"], True),
    ([sys.executable, "-c", "print(1)"], False),
    (["git", "status"], False),
])
def test_installers_are_recognised(args: Any, installs: bool) -> None:
    assert runs_installer(args) is installs


def test_the_guarded_process_runs_no_pip_and_imports_no_samna() -> None:
    # the samna stub's own call, aimed at a port nothing listens on: if the guard failed,
    # pip would still find nothing to install
    script = textwrap.dedent("""
        import subprocess, sys
        from snnbench.workload.graph.conformance.guard import InstallBlocked, forbid_installs
        forbid_installs()
        try:
            import samna
        except ImportError:
            print("samna blocked")
        try:
            subprocess.check_call([sys.executable, "-m", "pip", "install", "--force-reinstall",
                                   "samna==0.0", "--index-url=http://127.0.0.1:9/simple"])
        except InstallBlocked:
            print("pip blocked")
        import os
        print(os.environ["PIP_NO_INDEX"])
        print(subprocess.run([sys.executable, "-c", "print(7)"], capture_output=True,
                             text=True).stdout.strip())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["samna", "blocked", "pip", "blocked", "1", "7"]


@pytest.mark.skipif(not library_installed("rockpool"), reason="rockpool is not installed")
def test_rockpool_is_imported_with_its_samna_stub_kept_out(tmp_path: Path) -> None:
    # where the stub ran, its pip call would be refused (InstallBlocked) or, unguarded,
    # reach for the network; here Rockpool imports and its importer fails on its own
    graph = write_example("linear-lif", tmp_path / "g.nir")
    got = check_module.run_importer("rockpool", str(graph),
                                    np.zeros((3, 1, 512), np.float32), DT, timeout=300)
    # rockpool 3.1.0 raises "AttributeError: 'LIF' object has no attribute 'tau_mem'"
    assert isinstance(got, np.ndarray) or "Install" not in got


def test_each_importer_runs_in_a_process_told_not_to_install(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def fake_run(cmd: list[str], **kwargs: Any) -> Any:
        seen.update(cmd=cmd, env=kwargs["env"], timeout=kwargs["timeout"])
        out = Path(cmd[-2])
        (out / "result.json").write_text(json.dumps({"status": "raised",
                                                     "reason": "KeyError: 'x'"}))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(check_module.subprocess, "run", fake_run)
    got = check_module.run_importer("rockpool", "g.nir", np.zeros((2, 1, 3), np.float32),
                                    DT, timeout=9.0)
    assert got == "KeyError: 'x'"
    assert seen["cmd"][1:4] == ["-m", "snnbench.workload.graph.conformance.worker",
                                "rockpool"]
    assert all(seen["env"][k] == v for k, v in NO_INSTALL_ENV.items())
    assert seen["timeout"] == 9.0


def _fake_python(tmp_path: Path, body: str) -> str:
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_a_hung_or_dying_importer_is_unsupported_with_its_reason(tmp_path: Path) -> None:
    x = np.zeros((2, 1, 3), np.float32)
    hung = check_module.run_importer("norse", "g.nir", x, DT, timeout=0.5,
                                     python=_fake_python(tmp_path, "exec sleep 30"))
    assert hung == "timed out after 0.5 s"
    died = check_module.run_importer("norse", "g.nir", x, DT, timeout=30,
                                     python=_fake_python(tmp_path, "echo boom >&2; exit 3"))
    assert died == "its process died (exit status 3): boom"


def test_a_library_not_installed_is_unavailable(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.setattr(check_module, "installed_version", lambda dist: None)
    report = check_module.check_graph(_graph_file(tmp_path, "LIF"), DT, ["spyx"],
                                      time_steps=5, batch_size=1)
    (only,) = report.checks
    assert (only.library, only.verdict, only.reason) == ("Spyx", UNAVAILABLE,
                                                         "spyx is not installed")


def test_the_terminal_table_fits_80_columns() -> None:
    long = "AttributeError: 'LIF' object has no attribute 'tau_mem' " * 3
    report = ConformanceReport(
        graph="/a/very/long/path/" * 6 + "g.nir", network="g" * 90, graph_hash="0" * 64,
        dt=1e-3, time_steps=100, batch_size=4, seed=0, input_std=1.0, reset="zero", discretisation="euler",
        versions={"nir": "1.0.4"},
        checks=(LibraryCheck("SpikingJelly", "2.0.0", UNSUPPORTED, reason=long),
                LibraryCheck("Spyx", "1.0.0", DIFFERENT, findings=("a " * 60,))))
    text = terminal(report)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "SpikingJelly" in text and "tau_mem" in text


# -- the command ------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "message"), [
    (["--dt", "1e-3"], "is not a NIR file"),
    ([], "--dt is missing"),
    (["--dt", "1e-3", "--libraries", "nosuch"], "unknown library 'nosuch'"),
    (["--dt", "1e-3", "--format", "html"], "--format must be"),
    (["--dt", "1e-3", "--reset", "half"], "reset must be one of"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str],
                                          message: str) -> None:
    target = tmp_path / "g.nir"
    if "is not a NIR file" in message:
        target.write_text("not a graph")
    else:
        write_example("linear-lif", target)
    proc = run_cli("nir-check", str(target), *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(not library_installed("snntorch"), reason="snntorch is not installed")
def test_snntorch_on_the_linear_lif_example_behaves_as_dt_1e_4(tmp_path: Path) -> None:
    graph = write_example("linear-lif", tmp_path / "linear-lif.nir")
    proc = run_cli("nir-check", str(graph), "--dt", "1e-3", "--libraries", "snntorch",
                   "--format", "json")
    assert proc.returncode == 0, proc.stderr
    (check,) = json.loads(proc.stdout)["checks"]
    assert check["verdict"] == SCALED
    assert check["findings"] == ["behaves as dt = 0.0001 s"]
    report = check_module.check_graph(graph, 1e-4, ["snntorch"])
    assert report.checks[0].verdict == EXACT


def test_a_silent_match_is_said_to_be_weak(tmp_path: Path) -> None:
    path = _graph_file(tmp_path, "LIF")
    workload, data, dyn = _case(path)
    # no input and no bias: nothing spikes, so every silent output "matches"
    inputs = np.zeros_like(data.inputs)
    params = {**data.params, "fc.bias": np.zeros_like(data.params["fc.bias"])}
    silent = np.zeros_like(workload.reference(data).output)
    reference = run_graph_reference(data.graph, inputs, dyn, params).output
    verdict = classify(data.graph, inputs, silent, dyn, reference, params)
    assert (verdict.verdict, verdict.findings) == (
        EXACT, ("both silent: no output spike, so a weak probe",))


def test_help_lists_the_command_and_its_help_fills_80_columns() -> None:
    from typer.testing import CliRunner

    from snnbench.cli import app
    from tests.test_help_wrap import test_help_paragraphs_fill_an_80_column_terminal

    listed = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100"}, terminal_width=100)
    assert "nir-check" in listed.stdout
    test_help_paragraphs_fill_an_80_column_terminal("nir-check")

"""The shipped adapters that build graphs offer the ``nir-graph`` kind through the plugin API
v2: made from the real entry points, they declare the kind's knobs, build every shipped example
graph their knobs accept natively (forward, backward, the float64 reference reproduced), refuse
what they cannot build with the reason, state it all without importing their library, and
docs/nir.md's support table is what their knobs declare."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("nir")

from snnbench.adapter import CaseSkipped
from snnbench.plugin import Adapter as AdapterV2
from snnbench.registry import discover
from snnbench.workload import GraphKnobs, LinearLif, NirGraph
from snnbench.workload.graph.compare import compare_graph
from snnbench.workload.graph.examples import EXAMPLES, write_example, write_graph
from snnbench.workload.graph.nodes import NODE_TYPES
from tests.conftest import available_or_skip, run_cli
from tests.fixtures.graphs import conv1d_nir, run_against_reference

ROOT = Path(__file__).resolve().parents[1]

#: adapter → (the variant that builds graphs, the choices of the cases it is checked on)
GRAPH_ADAPTERS: dict[str, tuple[str, dict[str, Any]]] = {
    # the defaults: subtract reset, detached, forward Euler, fast_sigmoid
    "torch": ("default", {}),
    "snntorch": ("default", {"reset": "zero", "detach_reset": False, "surrogate": "atan",
                             "surrogate_slope": 2.0}),
    # its exact surrogates: fast_sigmoid of slope 1, sigmoid of slope 4
    "norse": ("default", {"reset": "zero", "detach_reset": False, "surrogate_slope": 1.0}),
    "spikingjelly": ("torch", {"discretisation": "exponential", "surrogate": "sigmoid",
                               "surrogate_slope": 4.0}),
    "sinabs": ("default", {"reset": "zero"}),
    "haiku": ("fp32", {"detach_reset": False, "discretisation": "exponential"}),
    "torch-compile": ("default", {"reset": "zero", "detach_reset": False}),
    "brainstate": ("fp32", {"surrogate": "atan", "surrogate_slope": 2.0}),
    "spyx": ("fp32", {"reset": "zero", "discretisation": "exponential"}),
    # the canonical step v ← β·v + (W x + b): forward Euler (the default) of the linear-lif graph
    "fused": ("default", {"surrogate": "sigmoid", "surrogate_slope": 4.0}),
    # its only reset: subtract through the spike
    "rockpool": ("default", {"detach_reset": False, "surrogate": "sigmoid",
                             "surrogate_slope": 4.0}),
}
#: (adapter, example) whose node kinds the adapter's knobs refuse, and the reason's words
REFUSED = {
    ("rockpool", "shd-mlp"): "node kind LI not built",
    ("rockpool", "cuba-mlp"): "node kind CubaLIF not built",
    ("fused", "shd-mlp"): "node kind LI not built",
    ("fused", "cuba-mlp"): "node kind CubaLIF not built",
    ("fused", "conv"): "node kind Conv2d not built",
}
#: time steps per compiled chunk of ``torch-compile`` here: 40 steps cross chunk boundaries and
#: end with a shorter chunk, and a short chunk compiles in seconds
COMPILE_CHUNK = 16


def _adapter(name: str) -> AdapterV2:
    """The adapter as the harness makes it: the real entry point, through ``create()``."""
    adapter = discover()[name].create()
    assert isinstance(adapter, AdapterV2) and type(adapter).api_version == 2, type(adapter)
    if name == "torch-compile":
        adapter.spec_adapter.chunk_steps = COMPILE_CHUNK  # type: ignore[attr-defined]
    return available_or_skip(adapter)


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("graphs")
    return {name: write_example(name, folder / f"{name}.nir") for name in EXAMPLES}


def _workload(path: Path, **choices: Any) -> NirGraph:
    return NirGraph.from_file(path, dt=1e-3, time_steps=40, batch_size=3, **choices)


@pytest.mark.slow
@pytest.mark.parametrize("example", sorted(EXAMPLES))
@pytest.mark.parametrize("name", sorted(GRAPH_ADAPTERS))
def test_adapter_builds_each_example_exactly(graphs: dict[str, Path], name: str,
                                             example: str) -> None:
    adapter = _adapter(name)
    variant, choices = GRAPH_ADAPTERS[name]
    knobs = adapter.capabilities(variant).knobs("nir-graph")
    assert isinstance(knobs, GraphKnobs)
    workload = _workload(graphs[example], **choices)
    if (name, example) in REFUSED:  # a skipped row, with the reason
        reason = adapter.reason_skipped(workload, "cpu", variant)
        assert reason is not None and REFUSED[name, example] in reason
        return
    assert knobs.reason_unsupported(workload) is None
    assert adapter.reason_skipped(workload, "cpu", variant) is None
    data = workload.make_data()
    model = adapter.build(workload, data, "cpu", variant)
    try:
        model.zero_grad()
        handle = model.forward()
        model.backward(handle)
        model.synchronize()
        eq = compare_graph(model.spikes(handle), model.gradients(), workload.reference(data),
                           data.graph.spiking_output())
    finally:
        model.close()
    assert eq.problems() == []
    assert eq.reference_rate != 0  # not vacuous: the output fires (or the read-out moves)
    if eq.spiking_output:
        assert eq.output_match == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GRAPH_ADAPTERS))
def test_the_linear_lif_build_is_unchanged(name: str) -> None:
    """The ``linear-lif`` kind through the v2 adapter: the v1 build, gradients by name."""
    from snnbench.measure.verify import check_adapter
    from snnbench.workload.linear_lif.spec import NetworkSpec

    adapter = _adapter(name)
    variant, _ = GRAPH_ADAPTERS[name]
    # a spec every one of them builds exactly (Rockpool resets by subtraction only, snnTorch
    # to zero only)
    spec = NetworkSpec(neurons=32, batch_size=2, time_steps=20, seed=3,
                       reset="subtract" if name == "rockpool" else "zero",
                       detach_reset=False, surrogate="sigmoid", surrogate_slope=4.0)
    assert adapter.reason_skipped(LinearLif(spec), "cpu", variant) is None
    eq, _ = check_adapter(adapter, variant, spec, "cpu")
    assert eq.spike_match == 1.0 and eq.grad_cosine >= 0.9999 and eq.spike_rate > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GRAPH_ADAPTERS))
def test_adapter_builds_a_conv1d_graph_exactly(tmp_path: Path, name: str) -> None:
    """2×32 → conv1d k=3 (stride 2, padding 1) → LIF → flatten → affine → LIF, T = 10, B = 2:
    spike for spike and every gradient against the reference (fused skips it, with the
    reason)."""
    adapter = _adapter(name)
    variant, choices = GRAPH_ADAPTERS[name]
    path = write_graph(conv1d_nir(), tmp_path / "conv1d.nir")
    workload = NirGraph.from_file(path, dt=1e-3, time_steps=10, batch_size=2, **choices)
    if name == "fused":
        reason = adapter.reason_skipped(workload, "cpu", variant)
        assert reason is not None and "node kind Conv1d not built" in reason
        return
    eq = run_against_reference(adapter, workload, variant)
    assert eq.problems() == [] and eq.output_match == 1.0 and eq.reference_rate > 0


def _if_graph(tmp_path: Path) -> Path:
    import nir

    graph = nir.NIRGraph.from_list(
        nir.Input({"input": np.array([4])}),
        nir.Affine(weight=np.ones((3, 4)), bias=np.zeros(3)),
        nir.IF(r=np.ones(3), v_threshold=np.ones(3)),
        nir.Output({"output": np.array([3])}))
    return write_graph(graph, tmp_path / "if.nir")


def _affine_branches(tmp_path: Path) -> Path:
    """Two Affine nodes summed into one LIF: Affine and LIF only, but no chain."""
    import nir

    rng = np.random.default_rng(5)
    nodes = {
        "input": nir.Input({"input": np.array([4])}),
        "fc_a": nir.Affine(weight=rng.normal(size=(3, 4)), bias=np.zeros(3)),
        "fc_b": nir.Affine(weight=rng.normal(size=(3, 4)), bias=np.zeros(3)),
        "lif": nir.LIF(tau=np.full(3, 0.02), r=np.full(3, 20.0), v_leak=np.zeros(3),
                       v_threshold=np.ones(3)),
        "output": nir.Output({"output": np.array([3])}),
    }
    edges = [("input", "fc_a"), ("input", "fc_b"), ("fc_a", "lif"), ("fc_b", "lif"),
             ("lif", "output")]
    return write_graph(nir.NIRGraph(nodes=nodes, edges=edges), tmp_path / "branches.nir")


def _per_neuron_tau(tmp_path: Path) -> Path:
    import nir

    graph = nir.NIRGraph.from_list(
        nir.Input({"input": np.array([2])}),
        nir.LIF(tau=np.array([0.01, 0.02]), r=np.ones(2), v_leak=np.zeros(2),
                v_threshold=np.ones(2)),
        nir.Output({"output": np.array([2])}))
    return write_graph(graph, tmp_path / "tau.nir")


@pytest.mark.slow
def test_rockpool_builds_an_if_node(tmp_path: Path) -> None:
    """IF (a = 1: tau_mem = inf) and Linear, which the examples do not use."""
    adapter = _adapter("rockpool")
    import nir

    rng = np.random.default_rng(4)
    graph = nir.NIRGraph.from_list(
        nir.Input({"input": np.array([6])}),
        nir.Linear(weight=rng.normal(size=(5, 6))),
        nir.IF(r=np.full(5, 300.0), v_threshold=np.linspace(0.8, 1.2, 5)),
        nir.Output({"output": np.array([5])}))
    workload = _workload(write_graph(graph, tmp_path / "if.nir"), detach_reset=False)
    data = workload.make_data()
    model = adapter.build(workload, data, "cpu", "default")
    handle = model.forward()
    model.backward(handle)
    eq = compare_graph(model.spikes(handle), model.gradients(), workload.reference(data), True)
    model.close()
    assert eq.problems() == [] and eq.reference_rate > 0


def test_what_an_adapter_cannot_build_is_refused_with_the_reason(
        graphs: dict[str, Path], tmp_path: Path) -> None:
    """Each one refuses something, before build (its knobs) or at build (``CaseSkipped``)."""
    mlp = graphs["shd-mlp"]
    declared = [
        # (adapter, variant, workload, device, words of the reason)
        ("torch", "default", _workload(mlp), "tpu", "device 'tpu' not supported"),
        ("snntorch", "default", _workload(mlp), "cpu", "one step late"),
        ("norse", "default", _workload(_if_graph(tmp_path), detach_reset=False), "cpu",
         "node kind IF not built"),
        ("norse", "default", _workload(mlp), "cpu",
         "detach_reset True not supported (supports: False)"),
        ("spikingjelly", "triton", _workload(mlp), "cuda",
         "workload kind 'nir-graph' not supported"),
        ("spikingjelly", "torch", _workload(mlp), "cuda", "Python surrogate"),
        ("sinabs", "default", _workload(mlp), "tpu", "device 'tpu' not supported"),
        ("haiku", "bf16", _workload(mlp), "cpu", "workload kind 'nir-graph' not supported"),
        ("torch-compile", "default", _workload(mlp), "cuda", "verified on the CPU only"),
        ("brainstate", "bf16", _workload(mlp), "cpu", "workload kind 'nir-graph' not supported"),
        ("spyx", "bf16", _workload(mlp), "cpu", "workload kind 'nir-graph' not supported"),
        ("rockpool", "default", _workload(graphs["conv"], reset="zero", detach_reset=False),
         "cpu", "reset mode 'zero' not supported"),
    ]
    entries = discover()
    for name, variant, workload, device, words in declared:
        adapter = entries[name].create()  # reason_skipped imports no library: no skip
        reason = adapter.reason_skipped(workload, device, variant)
        assert reason is not None and words in reason, (name, reason)
    at_build = [
        ("norse", "default", _workload(mlp, detach_reset=False, surrogate_slope=5.0),
         "surrogate fast_sigmoid of slope 5 not built"),
        ("spikingjelly", "torch", _workload(_per_neuron_tau(tmp_path)),
         "per-neuron time constants not built"),
        ("snntorch", "default", _workload(graphs["cuba-mlp"], reset="zero"),
         "CubaLIF with detach_reset not built"),
        ("norse", "default", _workload(graphs["cuba-mlp"], detach_reset=False,
                                       surrogate_slope=1.0),
         "CubaLIF with reset 'subtract' not built"),
        ("fused", "default", _workload(graphs["linear-lif"], discretisation="exponential"),
         "does not fold into fc0.s float32 weights exactly"),
        ("fused", "default", _workload(_affine_branches(tmp_path)), "is not a chain"),
    ]
    for name, variant, workload, words in at_build:
        adapter = entries[name].create()
        try:
            adapter.version()
        except Exception:
            continue  # the library is not installed: the declared refusals above still hold
        assert adapter.reason_skipped(workload, "cpu", variant) is None
        with pytest.raises(CaseSkipped, match=words):
            adapter.build(workload, workload.make_data(), "cpu", variant)


def test_a_variant_without_a_graph_build_does_not_declare_the_kind() -> None:
    entries = discover()
    declared = {name: [v for v in entries[name].create().variants
                       if entries[name].create().capabilities(v).knobs("nir-graph")]
                for name in GRAPH_ADAPTERS}
    assert declared["spikingjelly"] == ["torch"]
    assert declared["haiku"] == ["fp32"]
    assert declared["brainstate"] == ["fp32"]
    assert declared["spyx"] == ["fp32"]
    assert declared["fused"] == ["default"]
    # lava-dl declares the kind (an approximate build: tests/test_lava_dl_graph.py)
    assert entries["lava-dl"].create().capabilities("default").knobs("nir-graph") is not None
    for name in ("norse-compile", "torch-cudagraph", "floor"):
        caps = entries[name].create().capabilities("default")
        assert caps.knobs("nir-graph") is None


def test_graph_knobs_and_refusals_import_no_library(graphs: dict[str, Path]) -> None:
    """``list``, planning and ``reason_skipped`` read the knobs in the parent process."""
    code = (
        "import json, sys\n"
        "from snnbench.registry import discover\n"
        "from snnbench.workload import NirGraph\n"
        f"w = NirGraph.from_file({str(graphs['conv'])!r}, dt=1e-3)\n"
        "entries = discover()\n"
        f"for name in {sorted(GRAPH_ADAPTERS)!r}:\n"
        "    a = entries[name].create()\n"
        "    for v in a.variants:\n"
        "        a.capabilities(v).to_dict()\n"
        "        for device in ('cpu', 'cuda'):\n"
        "            a.reason_skipped(w, device, v)\n"
        "libs = ['torch', 'jax', 'snntorch', 'norse', 'spikingjelly', 'sinabs', 'haiku',\n"
        "        'brainstate', 'braintools', 'rockpool', 'spyx', 'flax']\n"
        "print(json.dumps([m for m in libs if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


@pytest.mark.slow
def test_list_shows_the_kinds(tmp_path: Path) -> None:
    """``list`` names the kinds each adapter builds; ``list --json`` carries each variant's
    knobs under ``workloads``."""
    env = {"SNNBENCH_CACHE_DIR": str(tmp_path / "cache")}
    proc = run_cli("list", "--json", "--adapters", "torch,spikingjelly,lava-dl", env=env)
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    torch_kinds = rows["torch"]["capabilities"]["default"]["workloads"]
    assert list(torch_kinds) == ["linear-lif", "nir-graph"]
    assert torch_kinds["nir-graph"]["node_kinds"] == list(NODE_TYPES)
    jelly = rows["spikingjelly"]["capabilities"]
    assert "nir-graph" in jelly["torch"]["workloads"]
    assert list(jelly["triton"]["workloads"]) == ["linear-lif"]
    text = run_cli("list", "--adapters", "torch,floor", env={**env, "COLUMNS": "250"})
    assert text.returncode == 0, text.stderr
    lines = {line.split("│")[1].strip(): line for line in text.stdout.splitlines()
             if line.count("│") > 2}
    assert "linear-lif, nir-graph" in lines["torch"]
    assert "nir-graph" not in lines["floor"] and "linear-lif" in lines["floor"]


# -- docs/nir.md's support table is the knobs -------------------------------------------------
TABLE_START = "<!-- support-table: generated from the adapters' knobs -->"
TABLE_END = "<!-- end support-table -->"


def support_table() -> str:
    """docs/nir.md's "Support table (library × node kind)": one row per shipped adapter, the
    node kinds its graph-building variant's knobs declare (✓), its resets, detach rules and
    surrogates; "–" throughout for an adapter that builds no graph."""
    kinds = list(NODE_TYPES)
    head = ["adapter (variant)", *kinds, "resets", "detach_reset", "surrogates"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    entries = discover()
    for name in sorted(entries):
        entry = entries[name]
        if not entry.target.startswith("snnbench.adapters."):
            continue  # a plugin installed beside snnbench, not a shipped adapter
        adapter = entry.create()
        found = [(v, adapter.capabilities(v).knobs("nir-graph")) for v in adapter.variants]
        graphs = [(v, k) for v, k in found if isinstance(k, GraphKnobs)]
        if not graphs:
            cells = ["–"] * (len(kinds) + 2) + ["no graph build"]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
            continue
        variant, knobs = graphs[0]
        assert isinstance(knobs, GraphKnobs)
        label = name if len(adapter.variants) == 1 else f"{name} ({variant})"
        cells = ["✓" if kind in knobs.node_kinds else "–" for kind in kinds]
        cells += [", ".join(knobs.resets), ", ".join(str(d).lower() for d in knobs.detach_reset),
                  ", ".join(knobs.surrogates)]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_the_support_table_in_the_docs_is_the_knobs() -> None:
    text = (ROOT / "docs" / "nir.md").read_text()
    found = re.search(re.escape(TABLE_START) + r"\n(.*?)\n" + re.escape(TABLE_END), text,
                      re.DOTALL)
    assert found, f"docs/nir.md has no {TABLE_START} block"
    expected = support_table()
    assert found.group(1).strip() == expected, f"docs/nir.md's support table should be:\n" \
        f"{expected}"

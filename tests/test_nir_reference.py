"""The float64 graph reference: it agrees with the Linear+LIF reference on the Linear+LIF graph,
and its gradients are the derivatives of its forward (checked by finite differences on graphs
without spikes, where the loss is smooth)."""

from __future__ import annotations

import numpy as np
import pytest

nir = pytest.importorskip("nir")

from snnbench.workload.graph.examples import linear_lif_graph  # noqa: E402
from snnbench.workload.graph.load import from_nir  # noqa: E402
from snnbench.workload.graph.reference import Dynamics, run_graph_reference  # noqa: E402
from snnbench.workload.linear_lif.reference import run_reference  # noqa: E402
from snnbench.workload.linear_lif.spec import NetworkSpec, make_case_data  # noqa: E402
from tests.fixtures.graphs import assert_matches_finite_differences  # noqa: E402

DT = 1e-3


@pytest.mark.parametrize(("reset", "surrogate", "detach"), [
    ("subtract", "fast_sigmoid", True),
    ("zero", "atan", False),
    ("subtract", "sigmoid", False),
])
def test_linear_lif_graph_agrees_with_the_linear_lif_reference(reset: str, surrogate: str,
                                                               detach: bool) -> None:
    spec = NetworkSpec(neurons=24, batch_size=3, time_steps=40, layers=2, reset=reset,
                       surrogate=surrogate, detach_reset=detach, surrogate_slope=5.0)
    data = make_case_data(spec)
    want = run_reference(data)
    graph = from_nir(linear_lif_graph(spec, DT))
    got = run_graph_reference(graph, data.inputs,
                              Dynamics(dt=DT, reset=reset, discretisation="euler",
                                       surrogate=surrogate, surrogate_slope=5.0,
                                       detach_reset=detach))
    assert want.output_spikes.sum() > 0
    for layer in range(spec.layers):
        np.testing.assert_array_equal(got.values[f"lif{layer}"], want.spikes[layer])
        np.testing.assert_allclose(got.grads[f"fc{layer}.weight"], want.grad_weights[layer],
                                   rtol=2e-3, atol=2e-4)
        np.testing.assert_allclose(got.grads[f"fc{layer}.bias"], want.grad_biases[layer],
                                   rtol=2e-3, atol=2e-4)


def _smooth_graph(rng: np.random.Generator) -> object:
    """Every stateless node kind, a DAG (two branches summed) and LI neurons: no spikes, so
    the loss is a smooth function of every parameter."""
    def w(*shape: int) -> np.ndarray:
        return rng.normal(size=shape) * 0.3

    def li(shape: tuple[int, ...], tau: float) -> object:
        return nir.LI(tau=np.full(shape, tau), r=np.full(shape, 2.0),
                      v_leak=np.full(shape, 0.1))

    nodes = {
        "input": nir.Input({"input": np.array([2, 6, 6])}),
        "conv": nir.Conv2d(input_shape=(6, 6), weight=w(3, 2, 3, 3), stride=1, padding=1,
                           dilation=1, groups=1, bias=w(3)),
        "li1": li((3, 6, 6), 0.004),
        "pool": nir.SumPool2d(kernel_size=np.array([2, 2]), stride=np.array([2, 2]),
                              padding=np.array([0, 0])),
        "avg": nir.AvgPool2d(kernel_size=np.array([3, 3]), stride=np.array([3, 3]),
                             padding=np.array([0, 0])),
        "flat": nir.Flatten(input_type={"input": np.array([3, 3, 3])}, start_dim=0),
        "flat2": nir.Flatten(input_type={"input": np.array([3, 2, 2])}, start_dim=0),
        "aff": nir.Affine(weight=w(5, 27), bias=w(5)),
        "lin": nir.Linear(weight=w(5, 12)),
        "scale": nir.Scale(scale=w(5)),
        "li2": li((5,), 0.003),
        "output": nir.Output({"output": np.array([5])}),
    }
    edges = [("input", "conv"), ("conv", "li1"), ("li1", "pool"), ("li1", "avg"),
             ("pool", "flat"), ("avg", "flat2"), ("flat", "aff"), ("flat2", "lin"),
             ("aff", "scale"), ("lin", "li2"), ("scale", "li2"), ("li2", "output")]
    return nir.NIRGraph(nodes=nodes, edges=edges)


@pytest.mark.parametrize("discretisation", ["euler", "exponential"])
def test_gradients_match_finite_differences(discretisation: str) -> None:
    rng = np.random.default_rng(3)
    graph = from_nir(_smooth_graph(rng))
    inputs = rng.normal(size=(6, 2, 2, 6, 6))
    dyn = Dynamics(dt=DT, discretisation=discretisation)
    params = {k: np.array(v) for k, v in graph.parameters().items()}
    result = run_graph_reference(graph, inputs, dyn, params)
    assert set(result.grads) == set(params)

    def loss(p: dict[str, np.ndarray]) -> float:
        return float(run_graph_reference(graph, inputs, dyn, p).output.sum())

    assert_matches_finite_differences(loss, params, result.grads,
                                      every=lambda v: max(1, v.size // 4))


def test_exponential_and_euler_differ_and_exponential_is_exact_for_a_constant_input() -> None:
    # τ dv/dt = −v + r·x with x constant: v(t) = r·x·(1 − e^{−t/τ}), which the exponential
    # step reproduces exactly and forward Euler only approximately
    tau, r, x = 0.01, 1.0, 0.5
    graph = from_nir(nir.NIRGraph.from_list(
        nir.Input({"input": np.array([1])}),
        nir.LI(tau=np.array([tau]), r=np.array([r]), v_leak=np.array([0.0])),
        nir.Output({"output": np.array([1])})))
    inputs = np.full((30, 1, 1), x)
    t = np.arange(1, 31) * DT
    exact = r * x * (1 - np.exp(-t / tau))
    got = run_graph_reference(graph, inputs, Dynamics(dt=DT, discretisation="exponential"))
    np.testing.assert_allclose(got.output[:, 0, 0], exact, rtol=1e-12)
    euler = run_graph_reference(graph, inputs, Dynamics(dt=DT, discretisation="euler"))
    assert not np.allclose(euler.output[:, 0, 0], exact, rtol=1e-6)


def test_if_and_cubalif_step_as_documented() -> None:
    # IF: v ← v + dt·r·x; a spike at v ≥ θ, a subtract reset
    graph = from_nir(nir.NIRGraph.from_list(
        nir.Input({"input": np.array([1])}),
        nir.IF(r=np.array([250.0]), v_threshold=np.array([1.0])),
        nir.Output({"output": np.array([1])})))
    got = run_graph_reference(graph, np.ones((8, 1, 1)), Dynamics(dt=DT, reset="subtract"))
    np.testing.assert_array_equal(got.output[:, 0, 0], [0, 0, 0, 1, 0, 0, 0, 1])
    # CubaLIF: I ← (1 − dt/τ_syn)·I + dt/τ_syn·w_in·x, then v ← (1 − dt/τ_mem)·v + dt/τ_mem·r·I
    node = nir.CubaLIF(tau_syn=np.array([0.002]), tau_mem=np.array([0.004]), r=np.array([1.0]),
                       v_leak=np.array([0.0]), v_threshold=np.array([100.0]),
                       w_in=np.array([3.0]))
    graph = from_nir(nir.NIRGraph.from_list(nir.Input({"input": np.array([1])}), node,
                                            nir.Output({"output": np.array([1])})))
    got = run_graph_reference(graph, np.ones((3, 1, 1)), Dynamics(dt=DT))
    current, v, want = 0.0, 0.0, []
    for _ in range(3):
        current = 0.5 * current + 0.5 * 3.0
        v = 0.75 * v + 0.25 * current
        want.append(v)
    np.testing.assert_allclose(got.membranes[graph.nodes[1][0]][:, 0, 0], want)

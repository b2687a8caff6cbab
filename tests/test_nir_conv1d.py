"""The Conv1d node: read from a NIR file with its refusals, its float64 forward against a direct
sum, its gradients against finite differences, a Flatten after it and its operation count."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

nir = pytest.importorskip("nir")

from snnbench.workload import NirGraph  # noqa: E402
from snnbench.workload.graph.examples import write_graph  # noqa: E402
from snnbench.workload.graph.load import GraphError, from_nir, read_graph  # noqa: E402
from snnbench.workload.graph.nodes import Conv1d, Flatten  # noqa: E402
from snnbench.workload.graph.reference import Dynamics, run_graph_reference  # noqa: E402
from tests.fixtures.graphs import assert_matches_finite_differences, conv1d_nir  # noqa: E402

DT = 1e-3


def _conv(length: int = 8, **fields: Any) -> Any:
    """A Conv1d of 1 → 2 channels, k = 3, over ``length``, then ``fields`` set on it as a file
    could hold them (nir 1.0.4's own constructor cannot make some: padding 'same' with an
    input_shape, stride 0)."""
    conv = nir.Conv1d(input_shape=length, weight=np.ones((2, 1, 3)), stride=1, padding=0,
                      dilation=1, groups=1, bias=np.zeros(2))
    for name, value in fields.items():
        setattr(conv, name, value)
    return conv


def _graph_of(conv: Any, out_shape: tuple[int, ...] = (1,), channels: int = 1,
              length: int = 8) -> Any:
    """Input (channels, length) → conv → Output of ``out_shape`` (a refused conv is refused
    before the Output is read)."""
    return nir.NIRGraph(
        nodes={"input": nir.Input({"input": np.array([channels, length])}), "conv": conv,
               "output": nir.Output({"output": np.array(out_shape)})},
        edges=[("input", "conv"), ("conv", "output")])


def test_a_conv1d_graph_is_read_with_its_shapes_and_flatten_channels_first(
        tmp_path: Path) -> None:
    graph = read_graph(write_graph(conv1d_nir(), tmp_path / "c.nir"))
    conv, flat = graph.node("conv1d"), graph.node("flatten")
    assert isinstance(conv, Conv1d) and isinstance(flat, Flatten)
    assert (conv.in_shape, conv.out_shape, conv.stride, conv.padding) == ((2, 32), (4, 16), 2, 1)
    assert flat.in_shape == (4, 16) and flat.out_shape == (64,)
    assert graph.node_kinds() == ("Affine", "Conv1d", "Flatten", "Input", "LIF", "Output")
    # the flattened features are channel-major (NIR's layout): feature c·L + l is (c, l)
    x = np.arange(2 * 1 * 4 * 16, dtype=np.float64).reshape(1, 2, 4, 16)
    out = run_graph_reference(
        from_nir(nir.NIRGraph.from_list(
            nir.Input({"input": np.array([4, 16])}),
            nir.Flatten(input_type={"input": np.array([4, 16])}, start_dim=0),
            nir.Output({"output": np.array([64])}))), x, Dynamics(dt=DT)).output
    assert out[0, 1, 16 * 3 + 5] == x[0, 1, 3, 5]


@pytest.mark.parametrize(("padding", "stride", "want"), [
    ("valid", 1, 6), ("same", 1, 8), (2, 1, 10), (1, 3, 3), (np.array([1]), 2, 4)])
def test_padding_and_stride_give_the_length(padding: Any, stride: int, want: int) -> None:
    graph = from_nir(_graph_of(_conv(padding=padding, stride=stride), (2, want)))
    assert graph.node("conv").out_shape == (2, want)


@pytest.mark.parametrize(("fields", "said"), [
    ({"groups": 2}, "groups and dilation other than 1 are not supported"),
    ({"dilation": 2}, "groups and dilation other than 1 are not supported"),
    ({"padding": "same", "weight": np.ones((2, 1, 4))},
     "padding 'same' is not supported with stride 1 and kernel 4"),
    ({"padding": "same", "stride": 2}, "padding 'same' is not supported with stride 2"),
    ({"padding": -1}, "padding -1 must be ≥ 0"),
    ({"stride": 0}, "stride 0 must be ≥ 1"),
    ({"stride": np.array([1, 2])}, "stride array([1, 2]) is not one integer"),
    ({"weight": np.ones((2, 1, 3, 3))}, "are not (C_out, C_in, k) and (C_out,)"),
    ({"bias": np.zeros(3)}, "are not (C_out, C_in, k) and (C_out,)"),
    ({"weight": np.ones((2, 1, 9))}, "its kernel does not fit a sample of shape (1, 8)"),
    ({"input_shape": None, "weight": np.ones((2, 3, 3))},
     "weight (2, 3, 3) takes 3 channels, not the 1 of a sample of shape (1, 8)"),
    ({"bias": np.array([0.0, np.inf])}, "bias is not finite"),
])
def test_what_a_conv1d_reader_refuses(fields: dict[str, Any], said: str) -> None:
    with pytest.raises(GraphError) as caught:
        from_nir(_graph_of(_conv(**fields)))
    message = str(caught.value)
    assert said in message and "\n" not in message and "node 'conv' (Conv1d)" in message


def test_a_conv1d_that_does_not_fit_the_edge_is_refused() -> None:
    # input_shape says 2 channels of 8 (the weight's C_in), the input gives 1 of 8
    with pytest.raises(GraphError, match=r"'input' gives shape \(1, 8\), 'conv' takes \(2, 8\)"):
        from_nir(_graph_of(_conv(weight=np.ones((2, 2, 3)))))


def test_a_conv2d_whose_weight_takes_other_channels_is_refused() -> None:
    # no input_shape: the sample's shape is what the edge brings, (1, 4, 4), not 3 channels
    conv = nir.Conv2d(input_shape=None, weight=np.ones((2, 3, 3, 3)), stride=1, padding=1,
                      dilation=1, groups=1, bias=np.zeros(2))
    graph = nir.NIRGraph(
        nodes={"input": nir.Input({"input": np.array([1, 4, 4])}), "conv": conv,
               "output": nir.Output({"output": np.array([2, 4, 4])})},
        edges=[("input", "conv"), ("conv", "output")])
    with pytest.raises(GraphError, match=r"weight \(2, 3, 3, 3\) takes 3 channels, not the 1 "
                                         r"of a sample of shape \(1, 4, 4\)"):
        from_nir(graph)


def test_a_conv2d_with_a_negative_padding_is_refused() -> None:
    # one reader for both convolutions: Conv2d refuses what Conv1d refuses (it let a negative
    # padding through when a large enough sample still gave an output)
    conv = nir.Conv2d(input_shape=(8, 8), weight=np.ones((2, 1, 3, 3)), stride=1,
                      padding=(-1, 0), dilation=1, groups=1, bias=np.zeros(2))
    graph = nir.NIRGraph(
        nodes={"input": nir.Input({"input": np.array([1, 8, 8])}), "conv": conv,
               "output": nir.Output({"output": np.array([2, 4, 6])})},
        edges=[("input", "conv"), ("conv", "output")])
    with pytest.raises(GraphError, match=r"padding \(-1, 0\) must be ≥ 0"):
        from_nir(graph)


def _direct_conv1d(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, stride: int,
                   padding: int) -> np.ndarray:
    """y[n, o, l] = b[o] + Σ_c Σ_j w[o, c, j]·x_padded[n, c, l·stride + j], by loops."""
    n, c_in, length = x.shape
    c_out, _, k = weight.shape
    xp = np.zeros((n, c_in, length + 2 * padding))
    xp[:, :, padding:padding + length] = x
    l_out = (length + 2 * padding - k) // stride + 1
    y = np.empty((n, c_out, l_out))
    for s, o, pos in itertools.product(range(n), range(c_out), range(l_out)):
        y[s, o, pos] = bias[o] + sum(weight[o, c, j] * xp[s, c, pos * stride + j]
                                     for c in range(c_in) for j in range(k))
    return y


@pytest.mark.parametrize(("stride", "padding"), [(1, 0), (2, 1), (3, 2)])
def test_the_reference_forward_is_the_cross_correlation(stride: int, padding: int) -> None:
    rng = np.random.default_rng(stride)
    weight, bias = rng.normal(size=(3, 2, 3)), rng.normal(size=3)
    conv = nir.Conv1d(input_shape=11, weight=weight, stride=stride, padding=padding,
                      dilation=1, groups=1, bias=bias)
    graph = from_nir(nir.NIRGraph.from_list(
        nir.Input({"input": np.array([2, 11])}), conv,
        nir.Output({"output": conv.output_type["output"]})))
    x = rng.normal(size=(4, 3, 2, 11))
    got = run_graph_reference(graph, x, Dynamics(dt=DT)).output
    want = _direct_conv1d(x.reshape(-1, 2, 11), weight, bias, stride, padding)
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-12, atol=1e-12)


def _smooth_conv1d_graph(rng: np.random.Generator) -> Any:
    """Two Conv1d nodes (stride 2 with padding 1, then 'same'), a Flatten, a Linear and LI
    neurons: no spikes, so the loss is a smooth function of every parameter."""
    def w(*shape: int) -> np.ndarray:
        return rng.normal(size=shape) * 0.3

    def li(shape: tuple[int, ...], tau: float) -> Any:
        return nir.LI(tau=np.full(shape, tau), r=np.full(shape, 2.0),
                      v_leak=np.full(shape, 0.1))

    return nir.NIRGraph.from_list(
        nir.Input({"input": np.array([2, 9])}),
        nir.Conv1d(input_shape=9, weight=w(3, 2, 3), stride=2, padding=1, dilation=1,
                   groups=1, bias=w(3)),
        li((3, 5), 0.004),
        # no input_shape: nir 1.0.4 cannot make a 'same' Conv1d with one
        nir.Conv1d(input_shape=None, weight=w(2, 3, 3), stride=1, padding="same", dilation=1,
                   groups=1, bias=w(2)),
        li((2, 5), 0.003),
        nir.Flatten(input_type={"input": np.array([2, 5])}, start_dim=0),
        nir.Linear(weight=w(4, 10)),
        li((4,), 0.005),
        nir.Output({"output": np.array([4])}))


@pytest.mark.parametrize("discretisation", ["euler", "exponential"])
def test_conv1d_gradients_match_finite_differences(discretisation: str) -> None:
    rng = np.random.default_rng(7)
    graph = from_nir(_smooth_conv1d_graph(rng))
    inputs = rng.normal(size=(5, 2, 2, 9))
    dyn = Dynamics(dt=DT, discretisation=discretisation)
    params = {k: np.array(v) for k, v in graph.parameters().items()}
    result = run_graph_reference(graph, inputs, dyn, params)
    assert {k for k in params if ".weight" in k or ".bias" in k} == set(result.grads)
    assert result.grads["conv1d.weight"].shape == (3, 2, 3)

    def loss(p: dict[str, np.ndarray]) -> float:
        return float(run_graph_reference(graph, inputs, dyn, p).output.sum())

    assert_matches_finite_differences(loss, params, result.grads)


def test_the_operation_count_covers_the_conv1d(tmp_path: Path) -> None:
    workload = NirGraph.from_file(write_graph(conv1d_nir(), tmp_path / "c.nir"), dt=DT,
                                  time_steps=10, batch_size=2)
    # conv1d: 4·2·3 weights at each of 16 positions; affine: 5·64
    assert workload.operations() == (4 * 2 * 3 * 16 + 5 * 64) * 10 * 2


"""The adapters ``snntorch``, ``norse``, ``norse-compile``, ``spikingjelly``, ``torch-compile``
and ``torch-cudagraph``.

Equivalence with the NumPy reference on the CPU (small sizes) for every reset mode and detach
rule each one supports, threshold ties, hand-computed spike trains, the refusals of what a
library cannot build, the CUDA-only variants' unavailability here, and lazy imports.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from snnbench.adapter import Adapter, AdapterUnavailable, CaseSkipped
from snnbench.adapters.norse import NorseAdapter, NorseCompileAdapter
from snnbench.adapters.snntorch import SnnTorchAdapter
from snnbench.adapters.spikingjelly import ENV_VAR, SpikingJellyAdapter
from snnbench.adapters.torch_variants import TorchCompileAdapter, TorchCudaGraphAdapter
from snnbench.measure.verify import check_adapter
from snnbench.workload.linear_lif.spec import CaseData, NetworkSpec, make_case_data
from tests.conftest import (
    assert_exact as _exact,
    assert_repeatable,
    available_or_skip as _available,
)

SMALL = NetworkSpec(neurons=48, batch_size=3, time_steps=25, seed=5)




# -- snntorch: reset "zero", both detach rules (through reset_delay), every surrogate -----------
@pytest.mark.slow
@pytest.mark.parametrize("detach", [True, False])
@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"surrogate": "atan", "surrogate_slope": 2.0},
        {"surrogate": "sigmoid", "surrogate_slope": 5.0, "layers": 2, "neurons": 32},
    ],
)
def test_snntorch_matches_reference(detach: bool, changes: dict[str, Any]) -> None:
    spec = SMALL.replace(reset="zero", detach_reset=detach, **changes)
    _exact(_available(SnnTorchAdapter()), spec)


# -- norse: never detached; exact where its fixed surrogate menu equals the spec's --------------
@pytest.mark.slow
@pytest.mark.parametrize("reset", ["subtract", "zero"])
@pytest.mark.parametrize(
    ("surrogate", "slope"), [("fast_sigmoid", 1.0), ("sigmoid", 4.0)]
)
def test_norse_matches_reference_where_its_surrogate_is_exact(
    reset: str, surrogate: str, slope: float
) -> None:
    spec = SMALL.replace(
        reset=reset, detach_reset=False, surrogate=surrogate, surrogate_slope=slope
    )
    _exact(_available(NorseAdapter()), spec)


@pytest.mark.slow
def test_norse_two_layers_bernoulli_match() -> None:
    spec = SMALL.replace(
        layers=2, neurons=32, input_kind="bernoulli", input_rate=0.3, detach_reset=False,
        surrogate_slope=1.0, beta=0.75, threshold=0.5,
    )
    _exact(_available(NorseAdapter()), spec)


@pytest.mark.slow
def test_norse_other_slopes_are_approximate_gradients() -> None:
    # Norse's SuperSpike has slope 1 whatever alpha says: at the default slope 25 the spikes are
    # still exact but the gradient is not (measured cosine ~0.6 at this size).
    adapter = _available(NorseAdapter())
    assert adapter.capabilities("default").exact_gradient is False
    eq, _ = check_adapter(adapter, "default", SMALL.replace(detach_reset=False), "cpu")
    assert eq.spike_match == 1.0
    assert 0.0 < eq.grad_cosine < 0.99


# -- spikingjelly (torch backend: the only one on CPU) -------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("reset", ["subtract", "zero"])
@pytest.mark.parametrize("detach", [True, False])
def test_spikingjelly_matches_reference(reset: str, detach: bool) -> None:
    spec = SMALL.replace(reset=reset, detach_reset=detach)
    _exact(_available(SpikingJellyAdapter()), spec, "torch")


@pytest.mark.slow
@pytest.mark.parametrize(
    "changes",
    [
        {"surrogate": "atan", "surrogate_slope": 2.0, "bias": False},  # SJ's built-in ATan
        {"surrogate": "sigmoid", "surrogate_slope": 5.0, "detach_reset": False},  # built-in
        {"layers": 2, "neurons": 32, "input_kind": "bernoulli", "input_rate": 0.3},
    ],
)
def test_spikingjelly_other_settings_match(changes: dict[str, Any]) -> None:
    _exact(_available(SpikingJellyAdapter()), SMALL.replace(**changes), "torch")


# -- torch.compile: the original small cases (T=10: one chunk) ------------------------------------
@pytest.mark.slow
def test_torch_compile_matches_reference() -> None:
    adapter = _available(TorchCompileAdapter())
    adapter.check_variant("default", "cpu")  # a C++ compiler is needed; gcc is here
    _exact(adapter, NetworkSpec(neurons=32, batch_size=2, time_steps=10, seed=2))


@pytest.mark.slow
def test_norse_compile_matches_reference() -> None:
    adapter = _available(NorseCompileAdapter())
    adapter.check_variant("default", "cpu")
    spec = NetworkSpec(
        neurons=32, batch_size=2, time_steps=10, seed=2, reset="zero", detach_reset=False,
        surrogate_slope=1.0,
    )
    _exact(adapter, spec)


# -- torch.compile, in chunks of time steps ------------------------------------------------------
# The compiled adapters run T steps as ceil(T / chunk) calls of one compiled chunk, the membrane
# carried between calls. With chunks of 4 and T=11 the membrane crosses two chunk boundaries and
# the shorter last chunk (3 steps) has a graph of its own: every piece a chunked loop can get
# wrong, at a compile cost of seconds. The cases above run the shipped chunk size (one chunk).
def _chunked(adapter: Adapter, chunk: int) -> Adapter:
    adapter = _available(adapter)
    adapter.check_variant("default", "cpu")  # a C++ compiler is needed; gcc is here
    adapter.chunk_steps = chunk  # type: ignore[attr-defined]
    return adapter


@pytest.mark.slow
@pytest.mark.parametrize("reset", ["subtract", "zero"])
@pytest.mark.parametrize("detach", [True, False])
def test_torch_compile_matches_reference_across_chunks(reset: str, detach: bool) -> None:
    spec = NetworkSpec(
        neurons=32, batch_size=2, time_steps=11, seed=2, reset=reset,  # type: ignore[arg-type]
        detach_reset=detach,
    )
    _exact(_chunked(TorchCompileAdapter(), 4), spec)


@pytest.mark.slow
def test_torch_compile_two_layers_bernoulli_across_chunks() -> None:
    # both layers share one compiled chunk; a layer must never see the other's membrane
    spec = NetworkSpec(
        neurons=32, batch_size=2, time_steps=9, layers=2, seed=4, input_kind="bernoulli",
        input_rate=0.3, beta=0.75, threshold=0.5, surrogate="atan", surrogate_slope=2.0,
    )
    _exact(_chunked(TorchCompileAdapter(), 4), spec)


@pytest.mark.slow
@pytest.mark.parametrize("reset", ["subtract", "zero"])
def test_norse_compile_matches_reference_across_chunks(reset: str) -> None:
    spec = NetworkSpec(
        neurons=32, batch_size=2, time_steps=11, seed=2, reset=reset,  # type: ignore[arg-type]
        detach_reset=False, surrogate="sigmoid", surrogate_slope=4.0,
    )
    _exact(_chunked(NorseCompileAdapter(), 4), spec)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("make", "reset", "detach"),
    [
        (TorchCompileAdapter, "subtract", True),
        (NorseCompileAdapter, "zero", False),
    ],
)
def test_compiled_chunks_carry_the_membrane(make: type[Adapter], reset: str, detach: bool) -> None:
    # TIE_INPUTS in chunks of 3: neuron 0 reaches 0.9375 at t=2, in the first chunk, and spikes
    # at t=3 (0.875 * 0.9375 + 0.5 = 1.3203125) only if the second chunk starts from it.
    spec = NetworkSpec(
        neurons=2, batch_size=1, time_steps=4, reset=reset,  # type: ignore[arg-type]
        detach_reset=detach,
    )
    model = _chunked(make(), 3).build(spec, _identity_case(spec, TIE_INPUTS), "cpu", "default")
    spikes = model.spikes(model.forward())
    model.close()
    np.testing.assert_array_equal(spikes[:, 0, 0], [1.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(spikes[:, 0, 1], [0.0, 0.0, 0.0, 0.0])


@pytest.mark.slow
@pytest.mark.parametrize(("steps", "graphs"), [(7, 2), (6, 1), (2, 1)])
def test_compiled_time_loop_compiles_at_most_two_graphs(steps: int, graphs: int) -> None:
    # one graph for the full chunks, one for a shorter last chunk; the first chunk must not get
    # a graph of its own (its initial membrane requires grad like every later one)
    torch = pytest.importorskip("torch")
    from torch._dynamo.utils import counters

    from snnbench.adapters._torch_common import compiled_time_loop, eager_time_loop

    def step(v: Any, x_t: Any) -> tuple[Any, Any]:
        v = 0.5 * v + x_t
        return v, v * 2.0

    torch._dynamo.reset()
    counters.clear()
    x = torch.randn(steps, 2, 3, requires_grad=True)
    out = compiled_time_loop(step, 3)(x * 1.0)
    out.sum().backward()
    assert counters["stats"]["unique_graphs"] == graphs
    assert x.grad is not None
    got = x.grad.clone()
    x.grad = None
    expected = eager_time_loop(step)(x * 1.0)
    expected.sum().backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(got, x.grad)
    with pytest.raises(ValueError, match="chunk"):
        compiled_time_loop(step, 0)


# -- hand-computed spike trains and threshold ties -----------------------------------------------
def _identity_case(spec: NetworkSpec, inputs: list[list[float]]) -> CaseData:
    """n=2, W = I, b = 0, batch 1: the currents are the inputs themselves."""
    x = np.asarray(inputs, dtype=np.float32).reshape(spec.time_steps, 1, 2)
    eye = np.eye(2, dtype=np.float32)
    zeros = np.zeros(2, dtype=np.float32)
    return CaseData(inputs=x, weights=(eye,), biases=(zeros,), spec=spec)


TIE_INPUTS = [[1.0, 0.0], [0.5, 0.0], [0.5, 0.0], [0.5, 0.0]]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("make", "variant", "reset", "detach"),
    [
        (SnnTorchAdapter, "default", "zero", True),
        (SnnTorchAdapter, "default", "zero", False),
        (NorseAdapter, "default", "subtract", False),
        (NorseAdapter, "default", "zero", False),
        (SpikingJellyAdapter, "torch", "subtract", True),
        (SpikingJellyAdapter, "torch", "zero", False),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_threshold_tie_spikes_and_known_train(
    make: type[Adapter], variant: str, reset: str, detach: bool, dtype: str
) -> None:
    # neuron 0: v_pre = 1.0 exactly at t=0 (a tie: spikes, as v >= threshold), reset to 0 by
    # either rule; then 0.5, 0.875*0.5+0.5 = 0.9375, 0.875*0.9375+0.5 = 1.3203125 (spike).
    # Exact in bfloat16 too. snnTorch's and Norse's own spike tests (u > 0) miss the tie.
    spec = NetworkSpec(
        neurons=2, batch_size=1, time_steps=4, dtype=dtype,  # type: ignore[arg-type]
        reset=reset, detach_reset=detach,  # type: ignore[arg-type]
    )
    adapter = _available(make())
    model = adapter.build(spec, _identity_case(spec, TIE_INPUTS), "cpu", variant)
    spikes = model.spikes(model.forward())
    model.close()
    np.testing.assert_array_equal(spikes[:, 0, 0], [1.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(spikes[:, 0, 1], [0.0, 0.0, 0.0, 0.0])


@pytest.mark.slow
def test_libraries_own_spike_tests_miss_the_tie() -> None:
    # Why the adapters pass their own threshold: snnTorch's built-in surrogate and Norse's
    # plain v_th both compute u > 0, so v_pre == threshold gives no spike.
    pytest.importorskip("snntorch")
    pytest.importorskip("norse")
    import snntorch as snn
    import torch
    from norse.torch import LIFBoxCell, LIFBoxParameters
    from norse.torch.functional.lif_box import LIFBoxFeedForwardState

    x = torch.tensor([[1.0]])
    lif = snn.Leaky(beta=0.875, threshold=1.0, reset_mechanism="zero",
                    spike_grad=snn.surrogate.fast_sigmoid(slope=25))
    spk, _ = lif(x, torch.zeros_like(x))
    snn.SpikingNeuron.instances.remove(lif)
    assert spk.item() == 0.0
    cell = LIFBoxCell(LIFBoxParameters(tau_mem_inv=torch.tensor(0.125), v_th=torch.tensor(1.0)),
                      dt=1.0)
    z, _ = cell(x * 8.0, LIFBoxFeedForwardState(v=torch.zeros_like(x)))
    assert z.item() == 0.0


def test_strict_threshold_gives_the_canonical_tie_rule() -> None:
    torch = pytest.importorskip("torch")
    from snnbench.adapters._torch_common import strict_threshold

    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for theta in (1.0, 0.5, 0.3):
            t = strict_threshold(theta, dtype)
            at = torch.tensor(theta, dtype=dtype)
            below = torch.nextafter(at, torch.tensor(-1.0, dtype=dtype))
            assert t < float(at)
            assert ((at - t) > 0).item()  # v == theta spikes
            assert not ((below - t) > 0).item()  # the value just below does not


# -- the timed model's protocol ------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    ("make", "variant", "spec"),
    [
        (SnnTorchAdapter, "default", SMALL.replace(layers=2, neurons=32, reset="zero")),
        (NorseAdapter, "default", SMALL.replace(layers=2, neurons=32, detach_reset=False)),
        (SpikingJellyAdapter, "torch", SMALL.replace(layers=2, neurons=32)),
    ],
)
def test_repeated_steps_are_identical(make: type[Adapter], variant: str, spec: NetworkSpec) -> None:
    # Stateful neurons (snnTorch's mem, SpikingJelly's node memory) must not leak between calls.
    model = _available(make()).build(spec, make_case_data(spec), "cpu", variant)
    assert_repeatable(model, spec)


@pytest.mark.slow
def test_snntorch_close_releases_its_global_neuron_list() -> None:
    adapter = _available(SnnTorchAdapter())
    import snntorch as snn

    before = len(snn.SpikingNeuron.instances)
    spec = SMALL.replace(reset="zero", layers=2)
    model = adapter.build(spec, make_case_data(spec), "cpu", "default")
    assert len(snn.SpikingNeuron.instances) == before + 2
    model.close()
    assert len(snn.SpikingNeuron.instances) == before


# -- refusals ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("adapter", "variant", "spec", "device", "words"),
    [
        (SnnTorchAdapter(), "default", SMALL, "cpu", ("subtract", "reset_delay")),
        (SnnTorchAdapter(), "default", SMALL.replace(detach_reset=False), "cpu", ("subtract",)),
        (NorseAdapter(), "default", SMALL.replace(detach_reset=True), "cpu", ("detach_reset",)),
        (
            NorseAdapter(), "default",
            SMALL.replace(detach_reset=False, surrogate="atan"), "cpu", ("atan",),
        ),
        (NorseAdapter(), "default", SMALL.replace(detach_reset=False, beta=1.0), "cpu", ("beta",)),
        (SpikingJellyAdapter(), "torch", SMALL.replace(beta=0.0), "cpu", ("beta", "tau")),
        (SpikingJellyAdapter(), "triton", SMALL, "cpu", ("device",)),
        (SpikingJellyAdapter(), "cuda", SMALL, "cpu", ("device",)),
        (SpikingJellyAdapter(), "torch", SMALL, "cuda", ("fast_sigmoid", ENV_VAR)),
        (
            SpikingJellyAdapter(), "triton",
            SMALL.replace(surrogate="atan", dtype="bfloat16"), "cuda", ("bfloat16",),
        ),
        (
            SpikingJellyAdapter(), "torch",
            SMALL.replace(surrogate="atan", dtype="float16"), "cuda", ("float16",),
        ),
        (TorchCudaGraphAdapter(), "default", SMALL, "cpu", ("device", "cpu")),
    ],
)
def test_refuses_what_it_cannot_build(
    adapter: Adapter, variant: str, spec: NetworkSpec, device: str, words: tuple[str, ...]
) -> None:
    reason = adapter.reason_skipped(spec, device, variant)
    assert reason is not None
    for word in words:
        assert word in reason


def test_accepts_what_it_can_build() -> None:
    assert SnnTorchAdapter().reason_skipped(SMALL.replace(reset="zero"), "cpu", "default") is None
    norse_ok = SMALL.replace(detach_reset=False, surrogate="sigmoid", dtype="bfloat16")
    assert NorseAdapter().reason_skipped(norse_ok, "cpu", "default") is None
    sj = SpikingJellyAdapter()
    assert sj.reason_skipped(SMALL.replace(dtype="float16"), "cpu", "torch") is None
    for variant in ("torch", "triton", "cuda"):
        assert sj.reason_skipped(SMALL.replace(surrogate="atan"), "cuda", variant) is None
    assert TorchCudaGraphAdapter().reason_skipped(SMALL, "cuda", "default") is None
    assert TorchCompileAdapter().reason_skipped(SMALL.replace(dtype="bfloat16"), "cpu",
                                                "default") is None


@pytest.mark.slow
def test_snntorch_build_refuses_subtract() -> None:
    adapter = _available(SnnTorchAdapter())
    with pytest.raises(CaseSkipped, match="subtract"):
        adapter.build(SMALL, make_case_data(SMALL), "cpu", "default")


# -- variants that need CUDA -----------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("variant", ["triton", "cuda", "cupy"])
def test_spikingjelly_gpu_variants_unavailable_on_cpu(variant: str) -> None:
    adapter = _available(SpikingJellyAdapter())
    with pytest.raises(AdapterUnavailable, match=r"CUDA-only|removed in SpikingJelly 2\.0"):
        adapter.check_variant(variant, "cpu")
    adapter.check_variant("torch", "cpu")  # the torch backend is fine


def test_cuda_variants_unavailable_without_a_gpu() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible")
    with pytest.raises(AdapterUnavailable, match="CUDA"):
        TorchCudaGraphAdapter().check_variant("default", "cuda")
    with pytest.raises(AdapterUnavailable, match="CUDA graphs need a CUDA device"):
        TorchCudaGraphAdapter().check_variant("default", "cpu")
    with pytest.raises(AdapterUnavailable):
        TorchCompileAdapter().check_variant("default", "cuda")  # no Triton GPU here
    if importlib.util.find_spec("spikingjelly") is not None:
        with pytest.raises(AdapterUnavailable, match="no CUDA device"):
            SpikingJellyAdapter().check_variant("triton", "cuda")


def test_spikingjelly_worker_env_selects_the_backend() -> None:
    sj = SpikingJellyAdapter()
    assert sj.variants[0] == "torch"
    for variant in ("torch", "triton", "cuda"):
        assert sj.worker_env(variant) == {ENV_VAR: variant}
    assert sj.worker_env("cupy") == {}


def test_compiled_adapters_compile_cold() -> None:
    # first_call_s must not depend on an earlier run's on-disk Inductor cache
    for adapter in (TorchCompileAdapter(), NorseCompileAdapter()):
        env = adapter.worker_env("default")
        assert env["TORCHINDUCTOR_FX_GRAPH_CACHE"] == "0"
        assert env["TORCHINDUCTOR_AUTOGRAD_CACHE"] == "0"
    assert NorseAdapter().worker_env("default") == {}


@pytest.mark.slow
def test_spikingjelly_reads_the_variable_at_import() -> None:
    # The mechanism worker_env relies on: SpikingJelly's LIF dispatcher takes the backend from
    # the environment when its ops module is imported.
    pytest.importorskip("spikingjelly")
    code = (
        "import spikingjelly.activation_based.neuron\n"
        "from spikingjelly._ops.lif import _selection\n"
        "print(_selection._requested)\n"
    )
    env = dict(os.environ, **SpikingJellyAdapter().worker_env("triton"))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "triton"


# -- lazy imports ----------------------------------------------------------------------------------
def test_adapter_modules_import_no_library() -> None:
    code = """
import json, sys
from snnbench.workload.linear_lif.spec import NetworkSpec
from snnbench.adapters import norse, snntorch, spikingjelly, torch_variants
adapters = [(snntorch.SnnTorchAdapter(), "default"), (norse.NorseAdapter(), "default"),
            (norse.NorseCompileAdapter(), "default"), (torch_variants.TorchCompileAdapter(),
            "default"), (torch_variants.TorchCudaGraphAdapter(), "default")]
adapters += [(spikingjelly.SpikingJellyAdapter(), v) for v in spikingjelly.SpikingJellyAdapter.variants]
for a, variant in adapters:
    a.capabilities(variant)
    a.worker_env(variant)
    for device in ("cpu", "cuda"):
        a.reason_skipped(NetworkSpec(), device, variant)
roots = {m.split(".")[0] for m in sys.modules}
print(json.dumps(sorted(roots & {"torch", "snntorch", "norse", "spikingjelly", "triton"})))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []

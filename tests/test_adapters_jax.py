"""The JAX adapters ``haiku`` and ``spyx``: equivalence with the NumPy reference, the variant
rule, the forward/backward split against ``step``, lazy imports, and hand-computed values."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from snnbench.adapter import Adapter, AdapterUnavailable, CaseSkipped
from snnbench.adapters._jax_common import JaxModel
from snnbench.adapters.brainstate import BrainstateAdapter
from snnbench.adapters.haiku import HaikuAdapter
from snnbench.adapters.spyx import SpyxAdapter
from snnbench.measure.verify import check_adapter
from snnbench.workload.linear_lif.equivalence import MIN_SPIKE_MATCH
from snnbench.workload.linear_lif.spec import CaseData, NetworkSpec, make_case_data

SMALL = NetworkSpec(neurons=48, batch_size=3, time_steps=25, seed=3)
ADAPTERS: dict[str, type[Adapter]] = {"haiku": HaikuAdapter, "spyx": SpyxAdapter,
                                       "brainstate": BrainstateAdapter}
LIBRARY_MODULE = {"haiku": "haiku", "spyx": "spyx", "brainstate": "brainstate"}


def _adapter(name: str) -> Adapter:
    pytest.importorskip("jax", reason="jax is not installed")
    pytest.importorskip(LIBRARY_MODULE[name], reason=f"{LIBRARY_MODULE[name]} is not installed")
    return ADAPTERS[name]()


def _build(name: str, spec: NetworkSpec, data: CaseData | None = None) -> JaxModel:
    variant = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}[spec.dtype]
    model = _adapter(name).build(spec, data or make_case_data(spec), "cpu", variant)
    assert isinstance(model, JaxModel)
    return model


# -- equivalence with the reference (fp32: exact spikes, gradients to fp32 rounding) ----------
@pytest.mark.slow
@pytest.mark.parametrize("name", ["haiku", "spyx", "brainstate"])
@pytest.mark.parametrize("reset", ["subtract", "zero"])
@pytest.mark.parametrize("detach", [True, False])
def test_fp32_matches_reference(name: str, reset: str, detach: bool) -> None:
    spec = SMALL.replace(reset=reset, detach_reset=detach)
    eq, _ = check_adapter(_adapter(name), "fp32", spec, "cpu")
    assert eq.spike_match == 1.0
    assert eq.first_diff_step is None
    assert eq.grad_cosine >= 0.9999
    assert eq.bias_grad_cosine >= 0.9999
    assert eq.grad_max_rel_err < 1e-4
    assert eq.spike_rate > 0.02  # the check is not vacuous: the layer does fire


@pytest.mark.slow
@pytest.mark.parametrize("name", ["haiku", "spyx", "brainstate"])
@pytest.mark.parametrize(
    "changes",
    [
        {"surrogate": "atan", "surrogate_slope": 2.0},
        {"surrogate": "sigmoid", "surrogate_slope": 5.0, "bias": False},
        {"layers": 2, "neurons": 32, "reset": "zero", "input_kind": "bernoulli",
         "input_rate": 0.4, "matmul_precision": "tf32"},
    ],
    ids=["atan", "sigmoid-nobias", "2layers-bernoulli"],
)
def test_fp32_other_settings_match_reference(name: str, changes: dict[str, object]) -> None:
    eq, _ = check_adapter(_adapter(name), "fp32", SMALL.replace(**changes), "cpu")
    assert eq.spike_match == 1.0
    assert eq.grad_cosine >= 0.9999
    assert eq.spike_rate > 0.0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["haiku", "spyx", "brainstate"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_passes_the_bar(name: str, dtype: str) -> None:
    variant = {"bfloat16": "bf16", "float16": "fp16"}[dtype]
    spec = NetworkSpec(neurons=64, batch_size=4, time_steps=30, dtype=dtype)  # type: ignore[arg-type]
    eq, _ = check_adapter(_adapter(name), variant, spec, "cpu")
    assert eq.spike_match >= MIN_SPIKE_MATCH[dtype]
    assert eq.grad_cosine >= 0.95  # 16-bit state and surrogate: close, not equal
    model = _build(name, spec)
    spikes = model.forward().spikes
    assert str(spikes.dtype) == dtype  # the network really computes in the spec's dtype


# -- hand-computed values -------------------------------------------------------------------
def _identity_case(spec: NetworkSpec, inputs: list[list[float]]) -> CaseData:
    """n=2, W = I, b = 0, batch 1: the currents are the inputs themselves."""
    x = np.asarray(inputs, dtype=np.float32).reshape(spec.time_steps, 1, 2)
    eye = np.eye(2, dtype=np.float32)
    zeros = np.zeros(2, dtype=np.float32)
    return CaseData(inputs=x, weights=(eye,), biases=(zeros,), spec=spec)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["haiku", "spyx", "brainstate"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_threshold_tie_spikes_and_known_train(name: str, dtype: str) -> None:
    # neuron 0: v_pre = 1.0 exactly at t=0 (tie: spikes, as v >= threshold), reset to 0;
    # then 0.5, 0.875*0.5+0.5 = 0.9375, 0.875*0.9375+0.5 = 1.3203125 (spike). All values are
    # exact in bfloat16 too. spyx's own heaviside (x > 0) would miss the tie at t=0.
    spec = NetworkSpec(neurons=2, batch_size=1, time_steps=4, dtype=dtype)  # type: ignore[arg-type]
    data = _identity_case(spec, [[1.0, 0.0], [0.5, 0.0], [0.5, 0.0], [0.5, 0.0]])
    model = _build(name, spec, data)
    spikes = model.spikes(model.forward())
    np.testing.assert_array_equal(spikes[:, 0, 0], [1.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(spikes[:, 0, 1], [0.0, 0.0, 0.0, 0.0])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["haiku", "spyx", "brainstate"])
def test_one_step_gradient_by_hand(name: str) -> None:
    # T=1: dW[i, j] = sg(u_i) * in_j, db[i] = sg(u_i), u = in - 1 with W = I, b = 0.
    # in = (1, 0.5): u = (0, -0.5); fast_sigmoid k=25: sg = (1, 1 / 13.5^2).
    spec = NetworkSpec(neurons=2, batch_size=1, time_steps=1, surrogate_slope=25.0)
    model = _build(name, spec, _identity_case(spec, [[1.0, 0.5]]))
    model.backward(model.forward())
    model.synchronize()
    (dw,), (db,) = model.gradients()
    sg = np.float32(1.0 / 13.5**2)
    np.testing.assert_allclose(dw, [[1.0, 0.5], [sg, 0.5 * sg]], rtol=1e-6)
    np.testing.assert_allclose(db, [1.0, sg], rtol=1e-6)


# -- the timed model's protocol --------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", ["haiku", "spyx", "brainstate"])
def test_forward_backward_equals_step(name: str) -> None:
    spec = SMALL.replace(layers=2, detach_reset=False)
    model = _build(name, spec)
    model.zero_grad()
    handle = model.forward()
    model.synchronize()
    model.backward(handle)
    model.synchronize()
    assert handle.residuals is None  # freed after use, like a torch graph
    split_w, split_b = model.gradients()
    split_spikes = model.spikes(handle)
    with pytest.raises(ValueError):
        model.backward(handle)  # a used handle cannot be pulled back twice

    model.zero_grad()
    zero_w, _ = model.gradients()
    assert all(not g.any() for g in zero_w)  # zero_grad really drops the previous gradients
    step_handle = model.step()
    model.synchronize()
    step_w, step_b = model.gradients()
    np.testing.assert_array_equal(model.spikes(step_handle), split_spikes)
    for a, b in zip(split_w + split_b, step_w + step_b, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert any(g.any() for g in step_w)
    assert model.peak_memory_bytes() is None  # CPU: JAX has no memory stats, harness uses RSS
    model.close()


# -- the variant rule and capabilities (no JAX needed) ---------------------------------------
@pytest.mark.parametrize("name", ["haiku", "spyx", "brainstate"])
def test_variant_runs_only_its_dtype(name: str) -> None:
    adapter = ADAPTERS[name]()
    assert adapter.framework == "jax"
    assert adapter.variants == ("fp32", "bf16", "fp16")
    fp32, bf16 = SMALL, SMALL.replace(dtype="bfloat16")
    assert adapter.reason_skipped(fp32, "cpu", "fp32") is None
    assert adapter.reason_skipped(bf16, "cpu", "bf16") is None
    assert adapter.reason_skipped(SMALL.replace(dtype="float16"), "cuda", "fp16") is None
    assert (
        adapter.reason_skipped(fp32, "cpu", "bf16")
        == "variant bf16 runs only dtype=bfloat16 (case is float32)"
    )
    assert (
        adapter.reason_skipped(bf16, "cpu", "fp32")
        == "variant fp32 runs only dtype=float32 (case is bfloat16)"
    )
    assert "unknown variant" in str(adapter.reason_skipped(fp32, "cpu", "tf32"))
    # every other spec field is supported
    other = SMALL.replace(reset="zero", surrogate="atan", detach_reset=False, bias=False,
                          input_kind="bernoulli", matmul_precision="tf32", layers=3)
    assert adapter.reason_skipped(other, "cuda", "fp32") is None


@pytest.mark.slow
@pytest.mark.parametrize("name", ["haiku", "spyx", "brainstate"])
def test_build_refuses_the_wrong_variant(name: str) -> None:
    with pytest.raises(CaseSkipped, match="variant bf16 runs only dtype=bfloat16"):
        _adapter(name).build(SMALL, make_case_data(SMALL), "cpu", "bf16")


def test_adapter_modules_do_not_import_jax() -> None:
    code = (
        "import sys\n"
        "from snnbench.adapters import haiku, spyx, brainstate, _jax_common\n"
        "from snnbench.workload.linear_lif.spec import NetworkSpec\n"
        "for cls in (haiku.HaikuAdapter, spyx.SpyxAdapter, brainstate.BrainstateAdapter):\n"
        "    a = cls()\n"
        "    a.capabilities('fp32')\n"
        "    a.reason_skipped(NetworkSpec(), 'cuda', 'bf16')\n"
        "names = ('jax', 'jaxlib', 'haiku', 'spyx', 'flax', 'brainstate', 'braintools')\n"
        "print(','.join(sorted(m for m in names if m in sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


@pytest.mark.slow
@pytest.mark.parametrize("name", ["haiku", "spyx", "brainstate"])
def test_version_reads_the_library(name: str) -> None:
    import importlib.metadata

    adapter = _adapter(name)
    assert adapter.version() == importlib.metadata.version(adapter.library)


@pytest.mark.slow
def test_cuda_without_a_jax_gpu_backend_is_unavailable() -> None:
    jax = pytest.importorskip("jax", reason="jax is not installed")
    try:
        jax.devices("gpu")
    except RuntimeError:
        pass
    else:
        pytest.skip("this JAX has a GPU backend")
    adapter = HaikuAdapter()
    adapter.check_variant("fp32", "cpu")
    with pytest.raises(AdapterUnavailable, match="no gpu backend"):
        adapter.check_variant("fp32", "cuda")
    with pytest.raises(AdapterUnavailable, match="unknown variant"):
        adapter.check_variant("tf32", "cpu")


# -- the CUDA path, on the CPU: JAX's GPU backend stood in for by fakes (never run on a GPU) --
class FakeGpu:
    """A JAX GPU device as the adapters see it: platform, kind, allocator statistics."""

    platform = "gpu"
    device_kind = "NVIDIA H100 80GB HBM3"

    def __init__(self, stats: dict[str, int] | None) -> None:
        self.stats = stats

    def memory_stats(self) -> dict[str, int] | None:
        return self.stats


def _fake_devices(monkeypatch: pytest.MonkeyPatch, gpus: list[object] | Exception) -> None:
    jax = pytest.importorskip("jax", reason="jax is not installed")
    real = jax.devices

    def devices(backend: str | None = None) -> list[object]:
        if backend in ("gpu", "cuda"):
            if isinstance(gpus, Exception):
                raise gpus
            return gpus
        if backend is None and not isinstance(gpus, Exception) and gpus:
            return gpus  # the default backend is the GPU when there is one
        return list(real(backend))

    monkeypatch.setattr(jax, "devices", devices)


def test_cuda_maps_to_jaxs_first_gpu_device(monkeypatch: pytest.MonkeyPatch) -> None:
    from snnbench.adapters._jax_common import jax_device

    first, second = FakeGpu(None), FakeGpu(None)
    _fake_devices(monkeypatch, [first, second])
    assert jax_device("cuda") is first
    assert jax_device("cpu").platform == "cpu"
    SpyxAdapter().check_variant("bf16", "cuda")  # a GPU backend: available
    with pytest.raises(AdapterUnavailable, match="not supported by the JAX adapters"):
        jax_device("tpu")


@pytest.mark.parametrize("gpus", [
    RuntimeError("Unknown backend: 'gpu' requested, but no platforms that are instances of gpu "
                 "are present. Platforms present are: cpu"),
    [],
])
def test_no_jax_gpu_backend_is_unavailable_with_the_fix(
        monkeypatch: pytest.MonkeyPatch, gpus: list[object] | Exception) -> None:
    _fake_devices(monkeypatch, gpus)
    with pytest.raises(AdapterUnavailable) as caught:
        SpyxAdapter().check_variant("fp32", "cuda")
    text = str(caught.value)
    assert ("CUDA plugin" in text and "make gpu-setup" in text) or text == "JAX found no gpu device"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["haiku", "spyx", "brainstate"])
def test_gpu_peak_memory_is_the_devices_allocator_peak(name: str) -> None:
    model = _build(name, SMALL)
    try:
        model.device = FakeGpu({"bytes_in_use": 10, "peak_bytes_in_use": 123_456})  # type: ignore[assignment]
        assert model.peak_memory_bytes() == 123_456
        model.device = FakeGpu({"bytes_in_use": 10})  # type: ignore[assignment]
        assert model.peak_memory_bytes() is None  # no peak: the harness' probe decides
        model.device = FakeGpu(None)  # type: ignore[assignment]
        assert model.peak_memory_bytes() is None
    finally:
        model.close()


def test_jax_probe_reads_the_default_devices_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    from snnbench.measure.memory import JaxProbe, probe_for

    _fake_devices(monkeypatch, [FakeGpu({"peak_bytes_in_use": 4096})])
    probe = probe_for("jax", "cuda")
    assert isinstance(probe, JaxProbe)
    probe.reset()  # a no-op: JAX cannot reset its peak (one process per case)
    assert probe.peak_bytes() == 4096


@pytest.mark.slow
@pytest.mark.parametrize("name", ["haiku", "spyx", "brainstate"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_cuda_code_path_is_exact_where_jax_places_it(
        monkeypatch: pytest.MonkeyPatch, name: str, dtype: str) -> None:
    """``device="cuda"`` goes through ``jax_device`` only: with it answering the CPU device,
    the adapter's whole CUDA path (placement, ahead-of-time compilation, gradients) builds and
    matches the reference. What runs on a real GPU is XLA's GPU code, which this cannot test."""
    import jax

    from snnbench.adapters import _jax_common

    seen: list[str] = []

    def cpu_for_cuda(device: str) -> object:
        seen.append(device)
        return jax.devices("cpu")[0]

    monkeypatch.setattr(_jax_common, "jax_device", cpu_for_cuda)
    variant = {"float32": "fp32", "bfloat16": "bf16"}[dtype]
    spec = SMALL.replace(dtype=dtype, surrogate="sigmoid", surrogate_slope=4.0,  # type: ignore[arg-type]
                         detach_reset=False)
    eq, _ = check_adapter(_adapter(name), variant, spec, "cuda")
    assert seen == ["cuda"]
    assert eq.spike_match >= MIN_SPIKE_MATCH[dtype]
    if dtype == "float32":
        assert eq.spike_match == 1.0 and eq.grad_cosine >= 0.9999


# -- brainstate: the surrogate mapping onto braintools ---------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("surrogate", ["fast_sigmoid", "atan", "sigmoid"])
def test_brainstate_surrogates_are_the_specs(surrogate: str) -> None:
    # each braintools surrogate named in SURROGATE_CLASSES has the spec's derivative, and its
    # forward is the canonical Heaviside (>= 0, ties spike)
    _adapter("brainstate")
    import braintools
    import jax
    import jax.numpy as jnp

    from snnbench.adapters._jax_common import surrogate_derivative
    from snnbench.adapters.brainstate import SURROGATE_CLASSES

    fn = getattr(braintools.surrogate, SURROGATE_CLASSES[surrogate])(alpha=3.0)
    u = jnp.linspace(-1.0, 1.0, 41)
    np.testing.assert_allclose(np.asarray(jax.vmap(jax.grad(fn))(u)),
                               np.asarray(surrogate_derivative(u, surrogate, 3.0)), rtol=1e-5)
    assert np.asarray(fn(jnp.array([-1e-7, 0.0, 1e-7]))).tolist() == [0.0, 1.0, 1.0]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["amp-bf16", "amp-fp16"])
def test_brainstate_amp_matches_reference(mode: str) -> None:
    spec = SMALL.replace(matmul_precision=mode, input_std=2.0)
    eq, _ = check_adapter(_adapter("brainstate"), "fp32", spec, "cpu")
    assert eq.passes(mode) and eq.grad_cosine > 0.999, eq

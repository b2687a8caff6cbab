"""The regression gate: fixture run folders built in tmp_path, samples from a seeded RNG."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from snnbench import schema
from snnbench.compare import MIN_SAMPLES, compare, format_comparison
from snnbench.rundir import RunDirError
from tests.fixtures.runfolders import FakeCase, timed_case, write_run


def _pair(cmp, adapter="torch", neurons=64, phase="step", metric="time_s"):
    found = [
        p
        for p in cmp.pairs
        if p.key[0] == adapter
        and p.case["neurons"] == neurons
        and p.phase == phase
        and p.metric == metric
    ]
    assert len(found) == 1, found
    return found[0]


def _runs(tmp_path: Path, base: list[FakeCase], cand: list[FakeCase], **kw):
    b = write_run(tmp_path / "base", base, **kw.get("base_kw", {}))
    c = write_run(tmp_path / "cand", cand, **kw.get("cand_kw", {}))
    return b, c


def test_real_slowdown_fails(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    base = [timed_case("torch", n, rng, median_s=1e-3 * n / 64) for n in (64, 128)]
    cand = [
        timed_case("torch", 64, rng, median_s=1.5e-3),  # ×1.5, 1 % noise
        timed_case("torch", 128, rng, median_s=2e-3),
    ]
    cmp = compare(*_runs(tmp_path, base, cand))
    slow = _pair(cmp)
    assert slow.mark == "regression"
    assert slow.test == "mann-whitney" and slow.p_value < 1e-6
    assert slow.ratio == pytest.approx(1.5, rel=0.02)
    assert _pair(cmp, neurons=128).mark == "same"
    assert cmp.exit_code == 1
    assert cmp.verdict.startswith("REGRESSION")
    # geometric mean over the 6 compared time pairs: 3 at ×1.5, 3 at ×1.0
    assert len(cmp.time_pairs()) == 6
    assert cmp.geomean_ratio() == pytest.approx(1.5**0.5, rel=0.02)


def test_noise_inside_factor_passes(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    base = [timed_case("torch", 64, rng, median_s=1e-3, rel_noise=0.05)]
    cand = [timed_case("torch", 64, rng, median_s=1.05e-3, rel_noise=0.05)]
    cmp = compare(*_runs(tmp_path, base, cand))
    assert {p.mark for p in cmp.time_pairs()} == {"same"}
    assert cmp.exit_code == 0
    assert cmp.verdict.startswith("OK")


def test_past_factor_but_not_significant_is_noise(tmp_path: Path) -> None:
    # six very noisy samples per side: medians 1.05 vs 1.25 (×1.19 > 1.10) but the
    # distributions overlap: Mann–Whitney cannot reject at alpha = 0.01
    b_samples = np.array([0.6, 0.9, 1.0, 1.1, 1.5, 2.0])
    c_samples = np.array([0.7, 1.0, 1.2, 1.3, 1.8, 2.4])
    base = FakeCase("torch", 64, samples={("step", "time_s"): b_samples})
    cand = FakeCase("torch", 64, samples={("step", "time_s"): c_samples})
    cmp = compare(*_runs(tmp_path, [base], [cand]))
    pair = _pair(cmp)
    assert pair.ratio == pytest.approx(1.25 / 1.05)
    expected_p = stats.mannwhitneyu(b_samples, c_samples, alternative="two-sided").pvalue
    assert pair.p_value == pytest.approx(expected_p)
    assert pair.p_value > 0.01
    assert pair.mark == "noise"
    assert cmp.exit_code == 0


def test_too_few_samples_cannot_be_significant(tmp_path: Path) -> None:
    # 3 samples, ×2 slower: no test applies (no MWU below 5 samples, no 99 % CI) → noise
    base = FakeCase("torch", 64, samples={("step", "time_s"): np.array([1.0, 1.01, 0.99])})
    cand = FakeCase("torch", 64, samples={("step", "time_s"): np.array([2.0, 2.02, 1.98])})
    cmp = compare(*_runs(tmp_path, [base], [cand]))
    pair = _pair(cmp)
    assert pair.test == "none" and pair.mark == "noise"
    assert any("fewer than 5 samples" in w for w in cmp.warnings)
    assert cmp.exit_code == 0


def test_ci_rule_without_raw_samples(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    base = [timed_case("torch", 64, rng, median_s=1e-3, n=30)]
    cand = [timed_case("torch", 64, rng, median_s=1.5e-3, n=30)]
    b, c = _runs(tmp_path, base, cand)
    (c / schema.SAMPLES_PARQUET).unlink()  # no raw samples: fall back to the 99 % CIs
    cmp = compare(b, c)
    pair = _pair(cmp)
    assert pair.test == "ci99" and pair.mark == "regression"
    assert cmp.exit_code == 1


def test_improvement_is_reported_not_failed(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    base = [timed_case("torch", 64, rng, median_s=2e-3)]
    cand = [timed_case("torch", 64, rng, median_s=1e-3)]
    cmp = compare(*_runs(tmp_path, base, cand))
    assert _pair(cmp).mark == "improved"
    assert cmp.exit_code == 0


def test_memory_threshold(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    base = [
        timed_case("torch", 64, rng, median_s=1e-3, mem_bytes=1e8),
        timed_case("torch", 128, rng, median_s=1e-3, mem_bytes=1e8),
    ]
    cand = [
        timed_case("torch", 64, rng, median_s=1e-3, mem_bytes=1.10e8),  # +10 % > 5 %
        timed_case("torch", 128, rng, median_s=1e-3, mem_bytes=1.02e8),
    ]  # +2 %
    cmp = compare(*_runs(tmp_path, base, cand))
    assert _pair(cmp, neurons=64, metric="peak_mem_bytes").mark == "regression"
    assert _pair(cmp, neurons=128, metric="peak_mem_bytes").mark == "same"
    assert cmp.exit_code == 1
    assert compare(tmp_path / "base", tmp_path / "cand", mem_threshold=0.2).exit_code == 0


def test_memory_floor_ignores_small_absolute_changes(tmp_path: Path) -> None:
    # CPU peaks are resident-set growth of a few hundred KiB: +20 % of 200 KiB is noise
    rng = np.random.default_rng(14)
    base = [timed_case("torch", 64, rng, median_s=1e-3, mem_bytes=200 * 1024)]
    cand = [timed_case("torch", 64, rng, median_s=1e-3, mem_bytes=240 * 1024)]
    b, c = _runs(tmp_path, base, cand)
    assert _pair(compare(b, c), metric="peak_mem_bytes").mark == "same"
    strict = compare(b, c, mem_floor_bytes=0)
    assert _pair(strict, metric="peak_mem_bytes").mark == "regression"


def test_new_failure_fails_and_fixed_is_reported(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    base = [
        timed_case("torch", 64, rng, median_s=1e-3),
        FakeCase("norse", 64, status="error", message="TypeError: old API"),
    ]
    cand = [
        FakeCase("torch", 64, status="error", message="RuntimeError: boom"),
        timed_case("norse", 64, rng, median_s=1e-3),
    ]
    cmp = compare(*_runs(tmp_path, base, cand))
    broken = _pair(cmp, "torch", phase="", metric="")
    assert broken.mark == "new_failure"
    assert (broken.baseline_status, broken.candidate_status) == ("ok", "error")
    assert "boom" in broken.note
    fixed = _pair(cmp, "norse", phase="", metric="")
    assert fixed.mark == "fixed" and "old API" in fixed.note
    assert cmp.exit_code == 1


def test_fixed_alone_passes(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    base = [
        timed_case("torch", 64, rng, median_s=1e-3),
        FakeCase("norse", 64, status="timeout", message="timed out after 600 s"),
    ]
    cand = [
        timed_case("torch", 64, rng, median_s=1e-3),
        timed_case("norse", 64, rng, median_s=1e-3),
    ]
    cmp = compare(*_runs(tmp_path, base, cand))
    assert _pair(cmp, "norse", phase="", metric="").mark == "fixed"
    assert cmp.exit_code == 0


def test_added_removed_and_not_run(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    base = [
        timed_case("torch", 64, rng, median_s=1e-3),
        timed_case("torch", 128, rng, median_s=1e-3),
        FakeCase("lava-dl", 64, status="unavailable", message="lava not installed"),
    ]
    cand = [
        timed_case("torch", 64, rng, median_s=1e-3),
        timed_case("torch", 256, rng, median_s=1e-3),
        FakeCase("lava-dl", 64, status="unavailable", message="lava not installed"),
    ]
    cmp = compare(*_runs(tmp_path, base, cand))
    assert _pair(cmp, neurons=128, phase="", metric="").mark == "removed"
    assert _pair(cmp, neurons=256, phase="", metric="").mark == "added"
    assert _pair(cmp, "lava-dl", phase="", metric="").mark == "not_run"
    assert cmp.exit_code == 0


def test_version_change_is_not_comparable(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    base = [timed_case("torch", 64, rng, median_s=1e-3, library_version="2.12.0")]
    cand = [timed_case("torch", 64, rng, median_s=3e-3, library_version="2.13.0")]
    cmp = compare(
        *_runs(tmp_path, base, cand, cand_kw={"manifest": {"packages": {"torch": "2.14"}}})
    )
    pair = _pair(cmp, phase="", metric="")
    assert pair.mark == "not_comparable" and "2.12.0 → 2.13.0" in pair.note
    assert cmp.exit_code == 2  # nothing comparable, and a 3× slowdown is not blamed
    assert any("torch version differs" in w for w in cmp.warnings)


def test_spec_change_is_not_comparable(tmp_path: Path) -> None:
    rng = np.random.default_rng(10)
    base = [timed_case("torch", 64, rng, median_s=1e-3, case_id="aaaa")]
    cand = [timed_case("torch", 64, rng, median_s=1e-3, case_id="bbbb")]
    cmp = compare(*_runs(tmp_path, base, cand))
    assert _pair(cmp, phase="", metric="").mark == "not_comparable"
    assert cmp.exit_code == 2


def test_manifest_differences_warn(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    gpu = {"name": "NVIDIA H200", "driver": "550.54", "cuda": "12.4", "memory_bytes": 1}
    other = {**gpu, "name": "NVIDIA A100", "driver": "535.1"}
    base = [timed_case("torch", 64, rng, median_s=1e-3)]
    cand = [timed_case("torch", 64, rng, median_s=1e-3)]
    cmp = compare(
        *_runs(
            tmp_path,
            base,
            cand,
            base_kw={"manifest": {"gpus": [gpu]}},
            cand_kw={"manifest": {"gpus": [other]}},
        )
    )
    text = "\n".join(cmp.warnings)
    assert "GPU differs: NVIDIA H200 → NVIDIA A100" in text
    assert "GPU driver differs: 550.54 → 535.1" in text
    assert cmp.exit_code == 0


def test_environment_variable_differences_warn(tmp_path: Path) -> None:
    rng = np.random.default_rng(13)
    base = [timed_case("torch", 64, rng, median_s=1e-3)]
    cand = [timed_case("torch", 64, rng, median_s=1e-3)]
    b_env = {"OMP_NUM_THREADS": "2", "SNNBENCH_FUSED_CPU_GEMM": "blas"}
    c_env = {"OMP_NUM_THREADS": "1"}
    cmp = compare(*_runs(tmp_path, base, cand, base_kw={"manifest": {"env_vars": b_env}},
                         cand_kw={"manifest": {"env_vars": c_env}}))
    assert "environment variable OMP_NUM_THREADS differs: 2 → 1" in cmp.warnings
    assert "environment variable SNNBENCH_FUSED_CPU_GEMM differs: blas → unset" in cmp.warnings
    assert cmp.exit_code == 0
    # a manifest from before env_vars were recorded: nothing to compare, no warning
    old = compare(*_runs(tmp_path / "old", base, cand, cand_kw={"manifest": {"env_vars": c_env}}))
    assert not any("environment variable" in w for w in old.warnings)


def test_schema_version_mismatch_is_refused(tmp_path: Path) -> None:
    rng = np.random.default_rng(12)
    base = [timed_case("torch", 64, rng, median_s=1e-3)]
    b, c = _runs(tmp_path, base, base, cand_kw={"schema_version": schema.SCHEMA_VERSION + 1})
    with pytest.raises(RunDirError, match="schema_version 2"):
        compare(b, c)


def test_bad_thresholds_raise(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="factor"):
        compare(tmp_path, tmp_path, factor=0.9)


def test_renderers(tmp_path: Path) -> None:
    rng = np.random.default_rng(13)
    base = [
        timed_case("torch", 64, rng, median_s=1e-3),
        timed_case("torch", 128, rng, median_s=1e-3),
    ]
    cand = [
        timed_case("torch", 64, rng, median_s=1.5e-3),
        timed_case("torch", 128, rng, median_s=1e-3),
    ]
    cmp = compare(*_runs(tmp_path, base, cand))

    md = format_comparison(cmp, "md")
    assert "❌ **REGRESSION" in md
    assert "| regression | torch | cpu float32 n=64 B=4 T=20 L=1 subtract | step/time_s |" in md
    assert "<details>" in md  # unchanged pairs are folded
    assert "Geometric mean time ratio" in md

    doc = json.loads(format_comparison(cmp, "json"))
    assert doc["exit_code"] == 1
    assert doc["rule"] == {
        "factor": 1.1,
        "mem_threshold": 0.05,
        "alpha": 0.01,
        "mem_floor_bytes": 2**20,
        "min_samples": MIN_SAMPLES,
    }
    marks = {(p["neurons"], p["phase"], p["metric"]): p["mark"] for p in doc["pairs"]}
    assert marks[(64, "step", "time_s")] == "regression"
    assert marks[(128, "step", "time_s")] == "same"

    text = format_comparison(cmp, "text")
    assert "REGRESSION" in text and "regression" in text and "torch" in text
    with pytest.raises(ValueError):
        format_comparison(cmp, "xml")  # type: ignore[arg-type]

"""The fused backend's targets (snnbench.report.targets) judged from run summaries with known values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from snnbench.report.pages import report
from snnbench.report.targets import TargetCheck, check_fused_targets
from snnbench.store.rundir import load_run
from tests.conftest import run_cli
from tests.fixtures.runfolders import FakeCase, timed_case, write_run

REFERENCE = Path(__file__).resolve().parent.parent / "results" / "reference" / "cpu-default"
GIB = 2**30


def _gpu_run(path: Path, step_ms: dict[str, dict[int, float]],
             mem_gib: dict[str, float] | None = None) -> list[TargetCheck]:
    rng = np.random.default_rng(1)
    cases: list[FakeCase] = []
    for label, per_n in step_ms.items():
        adapter, _, variant = label.partition(":")
        for n, ms in per_n.items():
            mem = (mem_gib or {}).get(label, 1.0) * GIB
            cases.append(timed_case(adapter, n, rng, median_s=ms * 1e-3, rel_noise=0.0,
                                    mem_bytes=mem, device="cuda", batch_size=16,
                                    time_steps=500, variant=variant or "default"))
    # a third-party library that broke at one size must not count as the best one there
    cases.append(FakeCase("norse", 512, device="cuda", batch_size=16, time_steps=500,
                          status="oom", message="CUDA out of memory"))
    return check_fused_targets(load_run(write_run(path, cases), samples=False).summary)


def _verdicts(checks: list[TargetCheck]) -> dict[tuple[int, str], tuple[float, bool]]:
    return {(c.size, c.target): (round(c.value, 3), c.met) for c in checks}


def test_every_gpu_target_met(tmp_path: Path) -> None:
    checks = _gpu_run(tmp_path / "run", {
        "floor": {512: 0.2, 4096: 10.0, 16384: 190.0},
        "fused": {512: 0.5, 4096: 12.0, 16384: 200.0},
        "fused:cudagraph": {512: 0.3, 4096: 12.1, 16384: 200.5},
        "torch": {512: 40.0, 4096: 60.0, 16384: 400.0},
        "snntorch": {512: 1.0, 4096: 70.0, 16384: 500.0},
        "norse": {4096: 50.0, 16384: 450.0},
    }, mem_gib={"fused": 3.7, "fused:cudagraph": 4.0, "torch": 8.0})
    v = _verdicts(checks)
    # the cudagraph variant is the fastest fused one at n=512
    assert v[(512, "fastest adapter")] == (0.3, True)
    assert v[(512, "step ≤ 2× floor")] == (1.5, True)
    assert v[(512, "≥ 3× faster than every third-party library")] == (3.333, True)
    assert v[(4096, "step ≤ 1.25× floor")] == (1.2, True)
    assert v[(16384, "peak memory ≤ 0.5× torch")] == (round(3.7 / 8.0, 3), True)
    # no 3× target above 2048, no memory target below 16384
    assert (4096, "≥ 3× faster than every third-party library") not in v
    assert (512, "peak memory ≤ 0.5× torch") not in v
    assert all(c.met for c in checks) and len(checks) == 8
    detail = next(c.detail for c in checks if c.target == "fastest adapter" and c.size == 512)
    assert detail == "fused:cudagraph 0.3 ms vs snntorch 1 ms"


def test_missed_targets_are_reported(tmp_path: Path) -> None:
    checks = _gpu_run(tmp_path / "run", {
        "floor": {1024: 0.4, 16384: 190.0},
        "fused": {1024: 1.0, 16384: 250.0},
        "torch": {1024: 30.0, 16384: 240.0},
        "spikingjelly": {1024: 2.0, 16384: 300.0},
    }, mem_gib={"fused": 5.0, "torch": 8.0})
    v = _verdicts(checks)
    assert v[(1024, "step ≤ 2× floor")] == (2.5, False)
    assert v[(1024, "≥ 3× faster than every third-party library")] == (2.0, False)
    assert v[(16384, "fastest adapter")] == (round(250 / 240, 3), False)
    assert v[(16384, "step ≤ 1.25× floor")] == (round(250 / 190, 3), False)
    assert v[(16384, "peak memory ≤ 0.5× torch")] == (0.625, False)


def test_no_fused_rows_no_targets(tmp_path: Path) -> None:
    assert _gpu_run(tmp_path / "run", {"torch": {512: 1.0}, "floor": {512: 0.1}}) == []


def test_committed_cpu_reference_meets_the_cpu_target() -> None:
    """The CPU target (fastest adapter at every n, JAX included) on the committed run."""
    if not (REFERENCE / "summary.parquet").is_file():
        pytest.fail(f"the committed reference run is missing: {REFERENCE}")
    checks = check_fused_targets(load_run(REFERENCE, samples=False).summary)
    assert [(c.size, c.target) for c in checks] == [
        (128, "fastest adapter"), (512, "fastest adapter"), (1024, "fastest adapter")]
    assert all(c.met for c in checks)
    assert all("haiku:fp32" in c.detail for c in checks)


def test_report_lists_the_targets(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    cases = [timed_case(a, 1024, rng, median_s=s, device="cuda", rel_noise=0.0)
             for a, s in (("fused", 1e-3), ("floor", 2e-4), ("torch", 9e-3))]
    run = write_run(tmp_path / "run", cases)
    # a user's report does not grade snnbench's own kernel: the section is opt-in
    report(run, tmp_path / "plain")
    assert "against its targets" not in (tmp_path / "plain" / "report.md").read_text()
    assert "against its targets" not in (tmp_path / "plain" / "report.html").read_text()
    proc = run_cli("report", str(run), "--out", str(tmp_path / "out"), "--targets")
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Fused backend against its targets" in md
    # after the results and the environment: a developer's appendix
    assert md.index("## Environment") < md.index("## Fused backend against its targets")
    assert "| 1024 | step ≤ 2× floor | 5 | MISSED | fused 1 ms vs floor 0.2 ms |" in md
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Fused backend against its targets" in html and "MISSED" in html

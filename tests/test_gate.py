"""The release gate's statistics (snnbench.gate.interval), and the planted-regression scenario of
issue 23 end to end: a wheelhouse of a toy library built here, a slow-down planted in one
version, an identical control, and the false-verdict rate of the identical pair."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from snnbench.gate import interval as gate
from snnbench.gate.interval import RatioInterval, judge, ratio_interval, replicates_needed
from tests.conftest import run_cli
from tests.test_libenv import make_wheel

# ------------------------------------------------------------------------------ statistics


def _interval(ratio: float, low: float, high: float, processes: int = 3) -> RatioInterval:
    return RatioInterval(ratio, low, high, (processes, processes), (60, 60), 0.99)


def test_judge_is_three_states_around_the_factor() -> None:
    assert judge(_interval(1.5, 1.2, 1.8), 1.1) == "regression"
    assert judge(_interval(1.1, 1.0, 1.2), 1.1) == "inconclusive"
    assert judge(_interval(1.2, 1.05, 1.3), 1.1) == "inconclusive"
    assert judge(_interval(1.0, 0.95, 1.05), 1.1) == "same"
    assert judge(_interval(0.7, 0.6, 0.8), 1.1) == "improved"
    # below 1/factor only in part: a pass, not an improvement
    assert judge(_interval(0.85, 0.7, 1.0), 1.1) == "same"


def test_replicates_needed_scales_the_width_by_root_processes_and_student() -> None:
    # log half-width 0.2 towards the factor at 3 a side (t 4.60 at 4 degrees of freedom),
    # distance 0.15 from it: at 4 a side t is 3.71, and 0.2 · (3.71/4.60) · √(3/4) = 0.140
    # < 0.15 → 4 (the width alone, (0.2/0.15)² × 3 = 5.3, would say 6)
    ratio = 1.1 * np.exp(0.15)
    needed = replicates_needed(_interval(ratio, ratio * np.exp(-0.2), ratio * 1.1), 1.1)
    assert needed == 4
    # the same below the factor: the upper edge counts
    ratio = 1.1 * np.exp(-0.15)
    assert replicates_needed(_interval(ratio, ratio / 1.1, ratio * np.exp(0.2)), 1.1) == 4
    # twice the width: 0.4 · (t_n/4.60) · √(3/n) < 0.15 first at n = 9
    ratio = 1.1 * np.exp(0.15)
    assert replicates_needed(_interval(ratio, ratio * np.exp(-0.4), ratio * 1.1), 1.1) == 9
    # one process a side: at least MIN_SUGGESTED, whatever the within-process width says
    one = RatioInterval(1.3, 1.05, 1.35, (1, 1), (20, 20), 0.99)
    assert replicates_needed(one, 1.1) == max(gate.MIN_SUGGESTED, 2)
    # on the factor: more processes do not settle it
    assert replicates_needed(_interval(1.1, 1.0, 1.2), 1.1) is None


def test_bootstrap_medians_keep_each_process_sample_count() -> None:
    rng = np.random.default_rng(0)
    # a one-sample process at 100 beside a 9-sample one at 1: a draw of both pools 10 values,
    # so its median is 1; only a draw of the single sample twice reaches 100
    medians = gate.bootstrap_medians([np.array([100.0]), np.ones(9)], 4000, rng)
    assert set(np.unique(medians)) <= {1.0, 100.0}
    assert np.mean(medians == 100.0) == pytest.approx(0.25, abs=0.03)


def test_interval_is_seeded_and_honest_about_processes() -> None:
    rng = np.random.default_rng(1)
    levels = (1.0, 1.2, 0.9)
    base = [lvl * rng.normal(1, 0.01, 30) for lvl in levels]
    cand = [lvl * rng.normal(1, 0.01, 30) for lvl in levels]
    first = ratio_interval(base, cand, seed=5)
    assert first == ratio_interval(base, cand, seed=5)
    # the between-process spread (±10 %) shows in the interval; the samples alone (1 %) would
    # give a few per cent
    assert first.high / first.low > 1.2
    pooled = ratio_interval([np.concatenate(base)], [np.concatenate(cand)], seed=5)
    assert pooled.high / pooled.low < first.high / first.low
    with pytest.raises(ValueError):
        ratio_interval([np.array([np.nan])], cand)


def test_pair_seed_is_stable_across_processes() -> None:
    # a CRC, not Python's salted hash: the value is fixed
    assert gate.pair_seed(0, "torch", 64, "step") == gate.pair_seed(0, "torch", 64, "step")
    assert gate.pair_seed(0, "torch", 64, "step") != gate.pair_seed(1, "torch", 64, "step")


# ------------------------------------------------------------------- planted regression

#: the toy library: ``work()`` runs PASSES passes of a NumPy loop (about 1-2 ms at 200)
TOY_SOURCE = '''
import numpy as _np

PASSES = {passes}
_x = _np.linspace(1.0, 2.0, 4096)


def work():
    y = _x
    for _ in range(PASSES):
        y = _np.sqrt(y + 1.0)
    return y
'''
#: 1.0 the release; 1.0.post1 the planted regression (× 2 the work: large against the noise
#: between processes of a loaded 2-core machine, where one process's median moved from 1.7 to
#: 3.7 ms for the same code); 1.0.post2 identical to 1.0
TOY_VERSIONS = {"1.0": 200, "1.0.post1": 400, "1.0.post2": 200}
SWEEP = ("[run]\nrepeats = 20\nmin_time_s = 0.0\nwarmup = 2\nthreads = 1\n"
         "[network]\nneurons = 8\ntime_steps = 4\nbatch_size = 2\n"
         'surrogate = "fast_sigmoid"\n')
#: comparisons of the identical pair in CI (10 keeps the suite within its budget; the false-verdict
#: rates in docs/report-compare.md were measured with SNNBENCH_GATE_REPETITIONS=20)
REPETITIONS = int(os.environ.get("SNNBENCH_GATE_REPETITIONS", "10"))


def toy_wheelhouse(folder: Path) -> Path:
    """The three toy wheels in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for version, passes in TOY_VERSIONS.items():
        make_wheel(folder, "snnbench-toylib", version, source=TOY_SOURCE.format(passes=passes))
    return folder


def _gate(run: Path, candidate: str) -> tuple[int, dict[str, str]]:
    proc = run_cli("compare", str(run), "--envs", f"fake-toy@1.0,fake-toy@{candidate}",
                   "-f", "json")
    assert proc.returncode in (0, 1, 3), proc.stderr
    doc = json.loads(proc.stdout)
    marks = {p["phase"]: p["mark"] for p in doc["pairs"] if p["metric"] == "time_s"}
    return proc.returncode, marks


@pytest.mark.slow
def test_planted_regression_fails_and_the_identical_pair_never_flips(
        tmp_path: Path, fake_plugins: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 23's scenario on a toy library: the planted ×2 forward fails (exit 1, in a run of
    7 replicates); the identical control, over REPETITIONS fresh runs (3 replicates, ABBA, the
    first of them 7), passes or is inconclusive and is never a regression or an improvement.

    7, not 5: the interval is Student's over the processes, and on a loaded machine one process
    in five can run × 2 slow (seen: 1966 µs beside 1550); at 5 a side that one process widens
    the interval of a real × 2 past the factor (inconclusive), at 7 it does not."""
    monkeypatch.setenv("SNNBENCH_ENV_CACHE", str(tmp_path / "envs"))
    wheels = toy_wheelhouse(tmp_path / "wheelhouse")
    config = tmp_path / "sweep.toml"
    config.write_text(SWEEP)
    tally: Counter[str] = Counter()
    verdicts: Counter[int] = Counter()
    for i in range(REPETITIONS):
        adapters = "fake-toy@1.0,fake-toy@1.0.post2" + (",fake-toy@1.0.post1" if i == 0 else "")
        out = tmp_path / f"run{i}"
        replicates = "7" if i == 0 else "3"
        ran = run_cli("run", "--config", str(config), "--adapters", adapters, "--wheelhouse",
                      str(wheels), "--replicates", replicates, "--out", str(out))
        assert ran.returncode == 0, ran.stderr
        if i == 0:
            code, marks = _gate(out, "1.0.post1")
            # the work is planted in the forward (and so the step); on a loaded machine one of
            # the two may straddle the factor, but the gate fails and nothing reads as faster
            assert code == 1, marks
            assert "regression" in (marks["forward"], marks["step"]), marks
            assert marks["forward"] != "improved" and marks["step"] != "improved", marks
        code, marks = _gate(out, "1.0.post2")
        verdicts[code] += 1
        tally.update(f"{phase}:{mark}" for phase, mark in marks.items())
    summary = {"repetitions": REPETITIONS, "exit_codes": dict(verdicts), "marks": dict(tally),
               "load_average": os.getloadavg()}
    print("identical pair:", json.dumps(summary))  # the false-verdict rate, for the record
    (Path(os.environ.get("SNNBENCH_GATE_TALLY", tmp_path / "tally.json"))
     .write_text(json.dumps(summary, indent=2)))
    assert verdicts[1] == 0, summary
    assert not [k for k in tally if k.endswith((":regression", ":improved"))], summary


# --------------------------------------------------------------- paired replicates (issue 32)


def test_paired_interval_cancels_a_drift_common_to_each_pair() -> None:
    """Three pairs whose machine drifted × 0.5 .. × 2 between them, the candidate × 2 in each:
    the paired interval sits around 2 and clears the factor; the unpaired one cannot."""
    rng = np.random.default_rng(0)
    levels = (0.5, 1.0, 2.0)
    base = [lvl * rng.normal(1.0, 0.01, 20) for lvl in levels]
    cand = [2.0 * lvl * rng.normal(1.0, 0.01, 20) for lvl in levels]
    paired = gate.paired_interval(base, cand)
    assert paired.paired and paired.processes == (3, 3)
    assert 1.8 < paired.low < 2.0 < paired.high < 2.2
    assert judge(paired, 1.1) == "regression"
    assert judge(ratio_interval(base, cand), 1.1) == "inconclusive"
    # identical pairs: the point 1
    same = gate.paired_interval(base, base)
    assert (same.low, same.high) == (1.0, 1.0) and judge(same, 1.1) == "same"
    with pytest.raises(ValueError):
        gate.paired_interval(base[:1], cand[:1])
    with pytest.raises(ValueError):
        gate.paired_interval([np.zeros(5), *base[1:]], cand)


def test_a_nan_interval_decides_nothing() -> None:
    nan = float("nan")
    assert judge(RatioInterval(3.0, nan, nan, (1, 1), (20, 20), 0.99), 1.1) == "inconclusive"
    assert replicates_needed(RatioInterval(3.0, nan, nan, (1, 1), (20, 20), 0.99), 1.1) is None
    # a coarse timer's zeros: draws with a baseline median of 0 have no ratio, and no warning
    base = [np.array([0.0] * 10 + [1e-3] * 10 + [1e300] * 3)]
    with np.errstate(all="raise"):
        found = ratio_interval(base, [base[0] * 3], seed=1)
    assert judge(found, 1.1) == "inconclusive"


def test_widened_divides_and_multiplies_by_one_plus_the_spread() -> None:
    wide = _interval(1.5, 1.4, 1.6).widened(0.25)
    assert (wide.low, wide.high, wide.ratio) == pytest.approx((1.12, 2.0, 1.5))

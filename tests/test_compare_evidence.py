"""The gate's evidence rules (issue 32): identical samples pass, one process a side never
fails or improves on its own, replicates of one interleaved run are paired so that the drift of
the machine cancels, a noisy run must be outdone; and damaged data (issue 33) is refused or
undecided, never a pass. Synthetic samples only: nothing here times anything."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from snnbench.gate.compare import compare
from snnbench.records import schema
from snnbench.report.export import format_comparison
from snnbench.store.rundir import RunDirError
from tests.conftest import run_cli
from tests.fixtures.runfolders import FakeCase, timed_case, write_run

RESULTS = Path(__file__).resolve().parents[1] / "results"
COMMITTED = sorted(m.parent for m in RESULTS.rglob(schema.MANIFEST_FILE))


def _step(cmp, adapter: str = "torch"):
    found = [p for p in cmp.time_pairs("step") if p.key[0] == adapter]
    assert len(found) == 1, cmp.pairs
    return found[0]


# ------------------------------------------------------------------------ identical samples


@pytest.mark.parametrize("folder", COMMITTED, ids=lambda f: str(f.relative_to(RESULTS)))
def test_every_committed_run_compared_with_itself_passes(folder: Path) -> None:
    """`compare F F` was inconclusive on 8 of 9 committed folders: each side was resampled on
    its own, so ratio 1 straddled the factor. Identical samples are the point 1."""
    cmp = compare(folder, folder)
    assert cmp.state == "pass" and cmp.exit_code == 0, cmp.verdict
    assert {p.mark for p in cmp.time_pairs()} == {"same"}
    assert all(p.ci_low == p.ci_high == 1.0 for p in cmp.time_pairs())
    assert "one process" not in cmp.verdict


def test_compare_p_p_passes_through_the_cli() -> None:
    folder = RESULTS / "reference" / "cpu-default"
    proc = run_cli("compare", str(folder), str(folder))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout and "identical samples" not in proc.stderr


# -------------------------------------------------------------------- one process a side


def test_single_process_a_a_with_huge_drift_is_never_a_verdict_of_change(tmp_path: Path) -> None:
    """Issue 32's A/A failure: one process a side, and a whole process ran up to 2.6× off on a
    busy machine. Within-process samples are tight, so the bootstrap interval is narrow and
    far from 1; without replicates or a stated spread that is never regression nor improved."""
    marks: set[str] = set()
    for seed in range(30):
        rng = np.random.default_rng(seed)
        drift = float(np.exp(rng.uniform(-1.0, 1.0)))  # 0.37× .. 2.7× for the whole process
        base = timed_case("torch", 64, rng, median_s=2e-3)
        cand = timed_case("torch", 64, rng, median_s=2e-3 * drift)
        cmp = compare(
            write_run(tmp_path / f"b{seed}", [base]), write_run(tmp_path / f"c{seed}", [cand])
        )
        marks |= {p.mark for p in cmp.time_pairs()}
        assert cmp.exit_code in (0, 3), cmp.verdict
    assert not marks & {"regression", "improved"}, marks
    assert "inconclusive" in marks


def test_a_stated_process_spread_lets_a_large_effect_through(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    b = write_run(tmp_path / "b", [timed_case("torch", 64, rng, median_s=1e-3)])
    c = write_run(tmp_path / "c", [timed_case("torch", 64, rng, median_s=3e-3)])
    held = _step(compare(b, c))
    assert held.mark == "inconclusive"
    assert "one process a side" in held.note and held.replicates_needed == 3
    # ±30 % between processes cannot explain 3×; it can explain 1.3×
    assert _step(compare(b, c, process_spread=0.3)).mark == "regression"
    assert _step(compare(b, c, process_spread=2.0)).mark == "inconclusive"
    proc = run_cli("compare", str(b), str(c), "--process-spread", "0.3")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    bad = run_cli("compare", str(b), str(c), "--process-spread", "-1")
    assert bad.returncode == 2 and "--process-spread" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


# ----------------------------------------------------------------- paired replicates


def _interleaved_run(
    path: Path,
    slowdown: float,
    seed: int,
    replicates: int = 3,
    drift: float = 0.6,
    pair_noise: float = 0.02,
) -> Path:
    """One run with two environments of a library, ``replicates`` processes each, whose
    replicate i ran side by side: both share that moment's drift of the machine (a lognormal
    of sigma ``drift``, large), and differ by ``slowdown`` and a small pair noise."""
    rng = np.random.default_rng(seed)
    base, cand = [], []
    for _ in range(replicates):
        level = float(np.exp(rng.normal(0.0, drift)))
        base.append(1e-3 * level * rng.normal(1.0, 0.01, 20))
        cand.append(
            1e-3
            * level
            * slowdown
            * float(np.exp(rng.normal(0.0, pair_noise)))
            * rng.normal(1.0, 0.01, 20)
        )
    cases = [
        FakeCase("torch", 64, environment=env, samples={("step", "time_s"): groups})
        for env, groups in (("torch@A", base), ("torch@B", cand))
    ]
    return write_run(path, cases)


def test_a_planted_two_fold_slow_down_fails_with_three_paired_replicates(tmp_path: Path) -> None:
    """Issue 32 item 4: 2.09× measured, inconclusive ("about 51 replicates"), because the
    three processes a side were treated as independent. Replicate i of A and of B ran side by
    side: paired, the drift cancels and the 2× fails, whatever the common drift."""
    for seed in range(10):
        run = _interleaved_run(tmp_path / f"r{seed}", 2.0, seed)
        cmp = compare(run, run, environments=("torch@A", "torch@B"))
        pair = _step(cmp)
        assert pair.test == "paired" and pair.mark == "regression", pair
        assert cmp.exit_code == 1 and pair.ci_low > 1.1
    assert "(3 pairs)" in format_comparison(cmp, "md")


def test_a_consistent_one_and_a_half_slow_down_fails_paired(tmp_path: Path) -> None:
    for seed in range(10):
        run = _interleaved_run(tmp_path / f"r{seed}", 1.5, seed, pair_noise=0.015)
        assert _step(compare(run, run, environments=("torch@A", "torch@B"))).mark == "regression"


def test_the_identical_release_is_never_judged_paired(tmp_path: Path) -> None:
    marks: set[str] = set()
    for seed in range(30):
        run = _interleaved_run(tmp_path / f"r{seed}", 1.0, seed, pair_noise=0.05)
        marks.add(_step(compare(run, run, environments=("torch@A", "torch@B"))).mark)
    assert not marks & {"regression", "improved"}, marks


def _busy_loop_run(path: Path, slowdown: float, seed: int, slowed: tuple[int, int]) -> Path:
    """Three replicates a side of one interleaved run on a machine with a busy loop per core:
    process ``slowed[0]`` of the baseline and ``slowed[1]`` of the candidate shared their core
    with the loop for most of their samples (× 1.7–2.3 each, drawn), while a fifth of their
    samples ran alone (the fastest samples stay put, as measured: issue 32's closing note)."""
    rng = np.random.default_rng(seed)

    def process(level: float, slow: bool) -> np.ndarray:
        samples = 1e-3 * level * rng.normal(1.0, 0.01, 20)
        if slow:
            shared = rng.random(20) < 0.8
            samples[shared] *= rng.uniform(1.7, 2.3, int(shared.sum()))
        return samples

    base = [process(1.0, r == slowed[0]) for r in range(3)]
    cand = [process(slowdown, r == slowed[1]) for r in range(3)]
    cases = [
        FakeCase("torch", 64, environment=env, samples={("step", "time_s"): groups})
        for env, groups in (("torch@A", base), ("torch@B", cand))
    ]
    return write_run(path, cases)


def test_a_planted_two_fold_slow_down_fails_when_whole_processes_slow_down(
        tmp_path: Path) -> None:
    """Under a busy loop per core a whole process sometimes runs at half speed: the paired
    medians then straddle the factor ([0.09, 26.5] measured), while each process's fastest
    samples stay put. The fastest samples, paired, decide: the 2× fails."""
    for seed in range(10):
        run = _busy_loop_run(tmp_path / f"r{seed}", 2.0, seed, slowed=(seed % 3, (seed + 1) % 3))
        cmp = compare(run, run, environments=("torch@A", "torch@B"))
        pair = _step(cmp)
        assert pair.test == "paired-min" and pair.mark == "regression", pair
        assert cmp.exit_code == 1
    assert "(3 pairs, fastest)" in format_comparison(cmp, "md")


def test_the_identical_release_is_never_judged_when_whole_processes_slow_down(
        tmp_path: Path) -> None:
    marks: set[str] = set()
    for seed in range(30):
        run = _busy_loop_run(tmp_path / f"r{seed}", 1.0, seed, slowed=(seed % 3, (seed + 2) % 3))
        marks.add(_step(compare(run, run, environments=("torch@A", "torch@B"))).mark)
    assert not marks & {"regression", "improved"}, marks


def test_medians_and_fastest_samples_that_disagree_are_inconclusive(tmp_path: Path) -> None:
    """Medians that say ``same`` and fastest samples that say ``regression`` (the baseline's
    processes each had a few samples twice as fast as the rest) contradict each other: the
    pair is inconclusive, never either verdict."""
    rng = np.random.default_rng(3)
    base, cand = [], []
    for _ in range(3):
        b = 1e-3 * rng.normal(1.0, 0.005, 20)
        b[:3] *= 0.5
        base.append(b)
        cand.append(1e-3 * rng.normal(1.0, 0.005, 20))
    run = write_run(tmp_path / "r", [
        FakeCase("torch", 64, environment=env, samples={("step", "time_s"): groups})
        for env, groups in (("torch@A", base), ("torch@B", cand))])
    pair = _step(compare(run, run, environments=("torch@A", "torch@B")))
    assert pair.mark == "inconclusive" and pair.test == "paired", pair
    assert pair.ci_low < 1.0 < 1.1 < pair.ci_high


def test_pairing_needs_one_run(tmp_path: Path) -> None:
    """Two separate runs' replicates did not run side by side: not paired."""
    rng = np.random.default_rng(9)
    kw = dict(median_s=1e-3, processes=3, process_noise=0.03)
    cmp = compare(
        write_run(tmp_path / "a", [timed_case("torch", 64, rng, **kw)]),
        write_run(tmp_path / "b", [timed_case("torch", 64, rng, **kw)]),
    )
    assert _step(cmp).test == "student"


# ------------------------------------------------------------------------- noisy runs


def test_a_noisy_run_must_be_outdone_by_the_effect(tmp_path: Path) -> None:
    """The candidate's manifest says it was noisy; the largest spread noise produced in it (a
    case whose replicate medians span 80 %) bounds what an unpaired verdict may claim: 1.5×
    with three processes a side in two runs is held back, 3× is not."""
    noisy = {"noise": {"noisy": True, "reasons": ["2 other processes kept the cores busy"]}}
    rng = np.random.default_rng(11)
    levels = (1.0, 1.8, 1.0)
    wild = FakeCase(
        "norse",
        64,
        samples={("step", "time_s"): [1e-3 * lvl * rng.normal(1.0, 0.01, 20) for lvl in levels]},
    )

    def torch(scale: float) -> FakeCase:
        return FakeCase(
            "torch",
            64,
            samples={
                ("step", "time_s"): [scale * 1e-3 * rng.normal(1.0, 0.01, 20) for _ in range(3)]
            },
        )

    base = write_run(tmp_path / "base", [wild, torch(1.0)])
    quiet = write_run(tmp_path / "quiet", [wild, torch(1.5)])
    assert _step(compare(base, quiet)).mark == "regression"  # not noisy: the 1.5× fails
    for slowdown, expected in ((1.5, "inconclusive"), (3.0, "regression")):
        cand = write_run(tmp_path / f"n{slowdown}", [wild, torch(slowdown)], manifest=noisy)
        cmp = compare(base, cand)
        pair = _step(cmp)
        assert pair.test == "student" and pair.mark == expected, pair
        if expected == "inconclusive":
            assert "noisy" in pair.note
        assert cmp.noise_spread is not None and cmp.noise_spread >= 0.75


def test_paired_replicates_of_a_noisy_run_measured_its_noise(tmp_path: Path) -> None:
    """A loaded machine is noisy almost always: pairs that ran side by side in it are judged
    by their own interval, whatever spread other cases of the run show."""
    noisy = {"noise": {"noisy": True, "reasons": ["2 other processes kept the cores busy"]}}
    run = _interleaved_run(tmp_path / "r", 2.0, 1)
    rng = np.random.default_rng(3)
    wild = FakeCase(
        "norse",
        64,
        samples={
            ("step", "time_s"): [1e-3 * lvl * rng.lognormal(0.0, 1.0, 20) for lvl in (1, 5, 1)]
        },
    )
    cases = [
        wild,
        *[
            FakeCase("torch", 64, environment=env, samples={("step", "time_s"): s})
            for env, s in _samples_of(run)
        ],
    ]
    folder = write_run(tmp_path / "noisy", cases, manifest=noisy)
    cmp = compare(folder, folder, environments=("torch@A", "torch@B"))
    assert cmp.noise_spread is not None and cmp.noise_spread > 1
    assert _step(cmp).mark == "regression"


def _samples_of(run: Path) -> list[tuple[str, list[np.ndarray]]]:
    frame = pd.read_parquet(run / schema.SAMPLES_PARQUET)
    return [
        (str(env), [g["value"].to_numpy() for _, g in rows.groupby("replicate")])
        for env, rows in frame.groupby("environment")
    ]


# ---------------------------------------------------------------- damaged data (issue 33)


def test_a_nan_interval_never_passes_a_three_fold_slow_down(tmp_path: Path) -> None:
    """Issue 33 item 12: a coarse timer's zeros beside huge values made the interval NaN, and
    NaN compared false everywhere: a 3× slow-down passed, with numpy warnings on stderr."""
    # the medians are positive (the 12th of 23 values), but many bootstrap draws hit a 0
    base = [np.array([0.0] * 10 + [1e-3] * 10 + [1e300] * 3)]
    cand = [np.array([0.0] * 10 + [3e-3] * 10 + [1e300] * 3)]
    b = write_run(tmp_path / "b", [FakeCase("torch", 64, samples={("step", "time_s"): base})])
    c = write_run(tmp_path / "c", [FakeCase("torch", 64, samples={("step", "time_s"): cand})])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cmp = compare(b, c, process_spread=0.1)
    assert _step(cmp).mark != "same" and cmp.state != "pass", cmp.pairs
    proc = run_cli("compare", str(b), str(c))
    assert proc.returncode != 0 and "RuntimeWarning" not in proc.stderr, proc.stderr


def _scale_samples(folder: Path, scale: float, *, summary_too: bool = False) -> None:
    path = folder / schema.SAMPLES_PARQUET
    frame = pd.read_parquet(path)
    frame["value"] = frame["value"] * scale
    frame.to_parquet(path, index=False)
    if summary_too:
        for name in (schema.SUMMARY_PARQUET,):
            table = pd.read_parquet(folder / name)
            for col in ("median", "q1", "q3", "min", "max", "mean", "ci99_low", "ci99_high"):
                table[col] = table[col] * scale
            table.to_parquet(folder / name, index=False)


@pytest.mark.parametrize("damage", ["tripled", "all-nan", "negated"])
def test_damaged_samples_are_refused_in_one_line(tmp_path: Path, damage: str) -> None:
    """Issue 33 item 16: samples × 3 beside an unchanged summary, samples all NaN (dropped
    silently, so the gate passed on the summary), negated medians: refused, exit 2, naming the
    file."""
    rng = np.random.default_rng(21)
    b = write_run(tmp_path / "b", [timed_case("torch", 64, rng, median_s=1e-3)])
    c = write_run(tmp_path / "c", [timed_case("torch", 64, rng, median_s=1e-3)])
    if damage == "tripled":
        _scale_samples(c, 3.0)
    elif damage == "all-nan":
        _scale_samples(c, math.nan)
    else:
        _scale_samples(c, -1.0, summary_too=True)
    with pytest.raises(RunDirError, match=str(c)):
        compare(b, c)
    proc = run_cli("compare", str(b), str(c))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(c.name) in lines[0] and "Traceback" not in proc.stderr


# -------------------------------------------------------------------- notes (issue 33)


def test_an_extreme_alpha_never_says_the_ratio_sits_on_the_factor(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    kw = dict(median_s=1e-3, processes=3, process_noise=0.02)
    b = write_run(tmp_path / "b", [timed_case("torch", 64, rng, **kw)])
    c = write_run(tmp_path / "c", [timed_case("torch", 64, rng, **kw)])
    cmp = compare(b, c, alpha=1e-300)
    pair = _step(cmp)
    assert pair.mark == "inconclusive" and abs(pair.ratio - 1.0) < 0.05
    assert "sits on the factor" not in pair.note and "sits on the factor" not in cmp.verdict


def test_one_zero_process_of_three_is_not_called_one_process_a_side(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    groups = [1e-3 * rng.normal(1.0, 0.01, 20) for _ in range(3)]
    zero = [np.zeros(20), *groups[1:]]
    b = write_run(tmp_path / "b", [FakeCase("torch", 64, samples={("step", "time_s"): groups})])
    c = write_run(tmp_path / "c", [FakeCase("torch", 64, samples={("step", "time_s"): zero})])
    pair = _step(compare(b, c))
    assert pair.mark == "inconclusive"
    assert "one process a side" not in pair.note and "samples of 0" in pair.note
    doc = json.loads(format_comparison(compare(b, c), "json"))
    assert doc["state"] == "inconclusive"


# ------------------------------------------------------------- the verdict is never cut


@pytest.mark.parametrize("columns", ["60", "80", "120"])
def test_the_verdict_prints_whole_at_any_width(tmp_path: Path, columns: str) -> None:
    """Issue 32 item 5: at 80 columns, and into a pipe, the table shortened the ratio to `2.…`
    and the mark to `inconclusi…`. The mark, ratio, interval and case now print whole; the
    medians go first, then the table becomes one block per pair."""
    rng = np.random.default_rng(8)
    kw = dict(processes=3, process_noise=0.02)
    base = [
        timed_case("spikingjelly", n, rng, median_s=1e-3, variant="torch", **kw) for n in (64, 128)
    ]
    cand = [
        timed_case("spikingjelly", 64, rng, median_s=2e-3, variant="torch", **kw),
        timed_case("spikingjelly", 128, rng, median_s=1.3e-3, variant="torch", **kw),
    ]
    b, c = write_run(tmp_path / "b", base), write_run(tmp_path / "c", cand)
    doc = json.loads(run_cli("compare", str(b), str(c), "-f", "json").stdout)
    proc = run_cli("compare", str(b), str(c), env={"COLUMNS": columns})
    assert proc.returncode in (1, 3), proc.stdout + proc.stderr
    out = proc.stdout
    assert "…" not in out, out
    assert max(map(len, out.splitlines())) <= int(columns), out
    words = set(out.split())
    shown = [p for p in doc["pairs"] if p["mark"] not in ("same", "info", "not_run")]
    assert shown
    for p in shown:
        assert p["mark"].replace("_", " ").split()[0] in words
        assert f"{p['ratio']:.2f}" in out and f"n={p['neurons']}" in words
        if p["ci_low"] is not None:
            assert f"[{p['ci_low']:.2f}, {p['ci_high']:.2f}]" in out, out
    assert "spikingjelly:torch" in words


def test_the_rule_is_in_compare_help() -> None:
    proc = run_cli("compare", "--help", env={"COLUMNS": "200"})
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "needs replicates on both sides or a stated --process-spread" in text
    assert "identical samples always pass" in text

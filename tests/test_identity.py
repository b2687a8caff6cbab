"""One identity for a case in every reader: a sweep over a network field beyond the size
(precision, surrogate...) is as many cases, never one pooled case (issue 34's live defect,
issue 33 item 13)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from snnbench.gate.compare import compare
from snnbench.records import schema
from snnbench.records.contract import CaseRecord
from snnbench.report.export import format_comparison
from snnbench.report.history import collect
from snnbench.report.pages import report
from snnbench.report.targets import check_fused_targets
from snnbench.store.rundir import RunFolder, load_run
from snnbench.workload.linear_lif.spec import NetworkSpec
from tests.fixtures.runfolders import FakeCase, timed_case, write_run

REPO = Path(__file__).resolve().parents[1]
PRECISIONS = ("strict", "amp-bf16")


def _sweep(
    field: str,
    values: tuple[str, ...],
    rng: np.random.Generator,
    *,
    slower: dict[str, float] | None = None,
    processes: int = 3,
) -> list[FakeCase]:
    """torch and fused at n=64 and 128, once per value of a network ``field``: one case each,
    with its own case_id, as a real sweep writes them."""
    out = []
    for value in values:
        for adapter in ("torch", "fused"):
            for n in (64, 128):
                factor = (slower or {}).get(value, 1.0)
                out.append(
                    timed_case(
                        adapter,
                        n,
                        rng,
                        median_s=1e-3 * n / 64 * factor,
                        processes=processes,
                        process_noise=0.005,
                        case_id=f"{field}={value}/{adapter}/{n}",
                        network={field: value},
                    )
                )
    return out


def _precision_run(path: Path, seed: int = 0, **kw: object) -> Path:
    return write_run(
        path, _sweep("matmul_precision", PRECISIONS, np.random.default_rng(seed), **kw)
    )  # type: ignore[arg-type]


def test_every_spec_field_is_a_summary_column() -> None:
    size = [c for c in schema.CASE_KEY if c in {f.name for f in dataclasses.fields(NetworkSpec)}]
    fields = [f.name for f in dataclasses.fields(NetworkSpec)]
    assert sorted([*size, *schema.NETWORK_COLUMNS]) == sorted(fields)
    assert set(schema.NETWORK_COLUMNS) <= set(schema.SUMMARY_COLUMNS)
    assert set(schema.CASE_IDENTITY) <= set(schema.CASE_KEY)


def test_the_network_column_names_what_the_run_varies(tmp_path: Path) -> None:
    run = load_run(_precision_run(tmp_path / "p"))
    assert set(run.summary[schema.NETWORK]) == {"strict", "amp-bf16"}
    assert schema.case_text(run.summary.iloc[0]).endswith(" · strict") or schema.case_text(
        run.summary.iloc[0]
    ).endswith(" · amp-bf16")
    # a run that varies nothing beyond the size reads as it always did
    plain = load_run(
        write_run(
            tmp_path / "plain",
            [
                timed_case(
                    "torch",
                    64,
                    np.random.default_rng(1),
                    median_s=1e-3,
                    network={"matmul_precision": "strict"},
                )
            ],
        )
    )
    assert set(plain.summary[schema.NETWORK]) == {""}
    assert schema.case_text(plain.summary.iloc[0]) == "cpu float32 n=64 B=4 T=20 L=1 subtract"


def test_report_of_a_precision_sweep_draws_each_precision(tmp_path: Path) -> None:
    run = _precision_run(tmp_path / "p")
    written = report(run, tmp_path / "rep")
    names = {p.name for p in written}
    for precision in PRECISIONS:
        assert f"cpu-float32-B4-T20-L1-subtract-{precision}_scaling.png" in names, names
    page = (tmp_path / "rep" / "report.md").read_text()
    assert "reset=subtract · strict" in page and "reset=subtract · amp-bf16" in page
    assert "n=64 B=4 T=20 L=1 subtract · amp-bf16" in page


def test_compare_keeps_two_precisions_apart_and_passes(tmp_path: Path) -> None:
    run = _precision_run(tmp_path / "p", processes=5)
    cmp = compare(run, run)
    cases = {(p.case["adapter"], p.case["neurons"], p.case[schema.NETWORK]) for p in cmp.pairs}
    assert cases == {(a, n, m) for a in ("torch", "fused") for n in (64, 128) for m in PRECISIONS}
    assert {p.mark for p in cmp.time_pairs()} == {"same"}
    assert cmp.exit_code == 0
    text = format_comparison(cmp, "md")
    assert "· amp-bf16" in text and "· strict" in text


def test_a_3x_amp_only_regression_is_caught(tmp_path: Path) -> None:
    base = _precision_run(tmp_path / "base", seed=1)
    cand = _precision_run(tmp_path / "cand", seed=2, slower={"amp-bf16": 3.0})
    cmp = compare(base, cand)
    marks = {p.case[schema.NETWORK]: set() for p in cmp.time_pairs()}
    for p in cmp.time_pairs():
        marks[p.case[schema.NETWORK]].add(p.mark)
    assert marks == {"amp-bf16": {"regression"}, "strict": {"same"}}
    assert cmp.exit_code == 1


def test_a_strict_baseline_against_a_two_precision_run(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    strict = [
        c
        for c in _sweep("matmul_precision", PRECISIONS, rng, processes=5)
        if c.network["matmul_precision"] == "strict"
    ]
    base = write_run(tmp_path / "base", strict)
    cand = _precision_run(tmp_path / "cand", seed=4, processes=5)
    cmp = compare(base, cand)
    assert {p.mark for p in cmp.pairs if p.case[schema.NETWORK] == "amp-bf16"} == {"added"}
    assert {p.mark for p in cmp.time_pairs()} == {"same"}
    assert cmp.exit_code == 0


def test_a_surrogate_sweep_is_two_cases_everywhere(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    run = write_run(tmp_path / "s", _sweep("surrogate", ("atan", "sigmoid"), rng, processes=5))
    summary = load_run(run).summary
    assert set(summary[schema.NETWORK]) == {"surrogate=atan", "surrogate=sigmoid"}
    names = {p.name for p in report(run, tmp_path / "rep")}
    assert "cpu-float32-B4-T20-L1-subtract-surrogate-sigmoid_phases.png" in names
    cmp = compare(run, run)
    assert len({p.key for p in cmp.pairs}) == 8 and cmp.exit_code == 0
    titles = {c.group for c in check_fused_targets(summary)}
    assert titles == {
        f"cpu, float32, B=4, T=20, layers=1, reset=subtract · surrogate={s}"
        for s in ("atan", "sigmoid")
    }


def test_history_keeps_two_precisions_apart(tmp_path: Path) -> None:
    runs = [_precision_run(tmp_path / f"r{i}", seed=i) for i in range(3)]
    history = collect(runs)
    step = [
        s
        for s in history.series
        if s.label == "torch" and s.phase == "step" and s.metric == "time_s" and "n=64 " in s.case
    ]
    assert sorted(s.case.rsplit(" · ", 1)[1] for s in step) == sorted(PRECISIONS)
    assert all(len(s.points) == 3 for s in step)


def _record(spec: NetworkSpec, adapter: str, values: list[float]) -> CaseRecord:
    return CaseRecord.from_dict(
        {
            "adapter": adapter,
            "variant": "default",
            "device": "cpu",
            "spec": spec.to_dict(),
            "status": "ok",
            "library": adapter,
            "library_version": "1.0",
            "samples": {
                "step": {"time_s": values},
                "forward": {"time_s": values},
                "backward": {"time_s": values},
            },
        }
    )


def test_tables_from_records_carry_every_field_and_older_folders_get_them(
    tmp_path: Path,
) -> None:
    path = write_run(tmp_path / "r", [])
    folder = RunFolder(path)
    (path / schema.CASES_DIR).mkdir()
    rng = np.random.default_rng(6)
    for beta in (0.5, 0.875):
        for adapter in ("torch", "fused"):
            spec = NetworkSpec(neurons=16, batch_size=2, time_steps=5, beta=beta)
            folder.write_case(_record(spec, adapter, list(rng.normal(1e-3, 1e-5, 8))))
    folder.rebuild_tables("r")
    written = pd.read_parquet(path / schema.SUMMARY_PARQUET)
    assert set(written["beta"]) == {0.5, 0.875} and set(written["seed"]) == {"0"}
    assert set(written[schema.NETWORK]) == {"beta=0.5", "beta=0.875"}
    # the same folder as an older snnbench wrote it: without the newer columns
    old = written.drop(columns=[*schema.NETWORK_COLUMNS, schema.NETWORK])
    old.to_parquet(path / schema.SUMMARY_PARQUET, index=False)
    summary = load_run(path).summary
    assert set(summary["beta"]) == {0.5, 0.875}
    assert set(summary["surrogate"]) == {NetworkSpec().surrogate}
    assert set(summary[schema.NETWORK]) == {"beta=0.5", "beta=0.875"}
    names = {p.name for p in report(path, tmp_path / "rep")}
    assert "cpu-float32-B2-T5-L1-subtract-beta-0.5_phases.png" in names


def test_a_fifo_among_the_records_never_blocks_a_reader(tmp_path: Path) -> None:
    path = write_run(
        tmp_path / "r", [timed_case("torch", 64, np.random.default_rng(7), median_s=1e-3)]
    )
    (path / schema.CASES_DIR).mkdir()
    import os

    os.mkfifo(path / schema.CASES_DIR / "x.json")
    summary = load_run(path).summary  # would block reading the FIFO
    assert set(summary["surrogate"]) == {""}


@pytest.mark.parametrize(
    "manifest",
    sorted(str(p.relative_to(REPO)) for p in (REPO / "results").rglob(schema.MANIFEST_FILE)),
)
def test_committed_folders_load_with_every_network_field(manifest: str) -> None:
    summary = load_run((REPO / manifest).parent, samples=False).summary
    assert set(summary[schema.NETWORK]) == {""}, "a committed run varies only the size"
    assert (summary["surrogate"] != "").all()
    assert summary["beta"].map(math.isfinite).all()
    assert json.loads(json.dumps(list(summary["seed"])))

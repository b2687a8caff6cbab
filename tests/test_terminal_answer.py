"""The terminal answers as it goes (issue 36, items 2, 3 and 7): each case's number as it
finishes, an ETA from the cases that run, who is fastest by how much with an interval, rows
sorted by speed with the probes apart, skipped rows counted, typed JSON against its shipped
schema, the exports of 'run', --quiet/--verbose/--color, and the small things."""

from __future__ import annotations

import json
import re
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from typer.testing import CliRunner

from snnbench.cli import app, output, run as run_command
from snnbench.records.contract import CaseRecord
from snnbench.registry import discover
from snnbench.report.ranking import Entry, rank_run, speedup
from snnbench.report.tables import spike_match_text, typed_rows
from snnbench.report.views import case_line
from snnbench.store.rundir import load_run
from snnbench.sweep.config import RunConfig
from tests.fixtures.runfolders import FakeCase, timed_case, write_run

LONG = "snntorch@1.0.0.post1"


def _run(tmp_path: Path, *, floor: bool = True, skipped: int = 2) -> Path:
    """A run at n=64 and n=256: fused 1 ms, haiku:fp32 1.5 ms, torch 4.7 ms (× n/64), a long
    environment label, the null probe, the GEMM floor, and cases skipped without running."""
    rng = np.random.default_rng(7)
    cases: list[FakeCase] = []
    for n in (64, 256):
        scale = n / 64
        cases += [
            timed_case("null", n, rng, median_s=4e-8, mem_bytes=None),
            timed_case("torch", n, rng, median_s=4.7e-3 * scale),
            timed_case("haiku", n, rng, median_s=1.5e-3 * scale, variant="fp32"),
            timed_case("snntorch", n, rng, median_s=9e-3 * scale, environment=LONG),
            timed_case("fused", n, rng, median_s=1e-3 * scale),
        ]
        if floor:
            cases.append(timed_case("floor", n, rng, median_s=0.4e-3 * scale))
    cases += [FakeCase("rockpool", n, status="skipped",
                       message="reset mode 'zero' not supported (supports: subtract)")
              for n in (64, 256)[:skipped]]
    return write_run(tmp_path / "run", cases, floor_ratio=floor)


def _invoke(*args: str, columns: int = 80, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, list(args),
                              env={"COLUMNS": str(columns), "NO_COLOR": None, **(env or {})})


# -- who is fastest, by how much -----------------------------------------------------------
def test_the_fastest_is_named_with_an_interval_against_the_next_and_torch(tmp_path: Path) -> None:
    rankings = rank_run(load_run(_run(tmp_path)))
    assert [r.case for r in rankings] == ["n=64", "n=256"]
    first = rankings[0]
    # libraries only, fastest first: the probes (null, floor) are never ranked
    assert [e.label for e in first.ranked] == ["fused", "haiku:fp32", "torch", LONG]
    nxt, torch = first.speedups
    assert (nxt.faster, nxt.slower, torch.slower) == ("fused", "haiku:fp32", "torch")
    assert torch.ratio == pytest.approx(4.7, rel=0.03)
    assert torch.low < torch.ratio < torch.high and torch.low > 1 and torch.decided
    assert re.fullmatch(r"fused ran 4\.\d\d?× \[4\.\d+, 4\.\d+\] faster than torch at n=64",
                        torch.sentence()), torch.sentence()


def test_two_libraries_within_the_noise_are_not_told_apart() -> None:
    rng = np.random.default_rng(1)
    a = Entry("a", 1e-3, 1e-4, (rng.normal(1e-3, 2e-4, 30),))
    b = Entry("b", 1.01e-3, 1e-4, (rng.normal(1.01e-3, 2e-4, 30),))
    found = speedup(a, b, "n=64")
    assert found.has_interval and found.low < 1 < found.high and not found.decided
    assert found.sentence().endswith("not told apart (the interval reaches 1×)")
    # without raw samples: the ratio of the medians alone, no interval claimed
    bare = speedup(Entry("a", 1e-3, 0.0), Entry("b", 2e-3, 0.0), "n=64")
    assert bare.sentence() == "a ran 2.00× faster than b at n=64"


# -- the table: sorted, probes apart, labels whole, skipped rows counted ------------------
def test_show_sorts_by_speed_sets_probes_apart_and_counts_skipped_rows(tmp_path: Path) -> None:
    run = _run(tmp_path)
    result = _invoke("show", str(run))
    assert result.exit_code == 0, result.output
    out = result.output
    first_case = out[:out.index("n=256 B=")]
    table_rows = [line.split()[0] for line in first_case[:first_case.index(" probes")].splitlines()
                  if re.match(r"^ \w", line) and "adapter" not in line]
    assert table_rows == ["fused", "haiku:fp32", "torch", LONG]
    # the probes are a line of their own under the table, in seconds with a unit
    assert re.search(r"probes, not libraries: null [\d.]+ ns a step \(the harness overhead\)",
                     " ".join(first_case.split()))
    assert "floor 400 µs a step (the GEMM floor)" in " ".join(first_case.split())
    # the answer, per case
    assert re.search(r"fused ran 1\.\d+× \[[\d.]+, [\d.]+\] faster than haiku:fp32 at n=64", out)
    assert re.search(r"fused ran 4\.\d+× \[[\d.]+, [\d.]+\] faster than torch at n=256", out)
    # skipped rows: one line, with the way to see them
    flat = " ".join(out.split())
    assert f"2 cases not run (skipped or unavailable): 'snnbench show {run} --skipped' " \
           "lists them" in flat
    assert "rockpool" not in out
    listed = _invoke("show", str(run), "--skipped")
    assert "rockpool [skipped ×2]: reset mode 'zero' not supported" in " ".join(
        listed.output.split())


def test_long_adapter_labels_print_whole_at_80_columns_and_into_a_pipe(tmp_path: Path) -> None:
    run = _run(tmp_path)
    for columns, flags in ((80, ()), (60, ()), (80, ("--verbose",))):
        out = _invoke("show", str(run), *flags, columns=columns).output
        assert f" {LONG} " in out, out
        assert "…" not in out
        assert max(len(line.rstrip()) for line in out.splitlines()) <= columns
        # every column is there, none cut at the right edge; numbers wrap at their spaces
        header = next(line for line in out.splitlines() if re.match(r"\s*adapter\s", line))
        assert "grad" in header and "floor×" in header, out
        lines = out.splitlines()
        start = lines.index(header) + 2  # below the rule
        for line in lines[start:start + 12]:
            if line.startswith("  ") and line.strip():  # a row's second line: spreads only
                assert all(re.fullmatch(r"±\d+%", w) for w in line.split()), (line, out)


def test_the_header_promises_only_the_columns_shown(tmp_path: Path) -> None:
    out = " ".join(_invoke("show", str(_run(tmp_path, floor=False))).output.split())
    assert "floor×" not in out and "GEMM floor" not in out
    # the phases' columns are the --verbose view's; its legend says so only there
    assert "fwd ms" not in out and "fwd, bwd" not in out
    verbose = " ".join(_invoke("show", str(_run(tmp_path / "v")), "--verbose",
                               columns=200).output.split())
    assert "fwd ms" in verbose and "floor× = step time / GEMM floor" in verbose
    assert "not run (2 cases):" in verbose


# -- typed JSON, its schema, the exports --------------------------------------------------
def _schema() -> dict[str, Any]:
    text = files("snnbench.schemas").joinpath("show.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def test_show_json_is_typed_and_validates_against_the_shipped_schema(tmp_path: Path) -> None:
    result = _invoke("show", str(_run(tmp_path)), "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    jsonschema.validate(doc, _schema())
    torch = next(r for r in doc["rows"] if r["label"] == "torch" and r["n"] == 64)
    assert isinstance(torch["n"], int) and isinstance(torch["batch_size"], int)
    assert torch["step_ms_median"] == pytest.approx(4.7, rel=0.03)
    assert isinstance(torch["step_samples"], int) and torch["probe"] is False
    assert torch["step_peak_mem_mib"] == pytest.approx(1e6 / 2**20)
    assert next(r for r in doc["rows"] if r["adapter"] == "null")["probe"] is True
    skipped = next(r for r in doc["rows"] if r["status"] == "skipped")
    assert skipped["step_ms_median"] is None
    assert doc["fastest"][0]["ranking"][0] == "fused"
    assert doc["fastest"][0]["speedups"][1]["slower"] == "torch"
    # a field the schema does not know is refused: the schema is the whole contract
    torch["forward ms"] = "0.712±179%"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, _schema())


def test_every_typed_field_is_in_the_schema(tmp_path: Path) -> None:
    rows = typed_rows(load_run(_run(tmp_path)).summary)
    declared = _schema()["properties"]["rows"]["items"]["properties"]
    # a linear-lif row has every field but a graph's own (tests/test_graph_tables.py: those)
    from snnbench.workload import NirGraph

    graph_only = {"kind", "graph_name", "graph_hash", "dt", "discretisation"}
    assert graph_only <= set(NirGraph.typed_params(dict.fromkeys(NirGraph.columns, "")))
    assert set(rows[0]) == set(declared) - graph_only


def test_run_refuses_an_export_path_that_exists_before_anything_runs(tmp_path: Path) -> None:
    existing = tmp_path / "out.json"
    existing.write_text("mine")
    for flag in ("--export-json", "--export-markdown"):
        result = _invoke("run", "--adapters", "torch", "--out", str(tmp_path / "never"),
                         flag, str(existing))
        assert result.exit_code == 2
        assert result.output.count("\n") == 1 and "never overwrites" in result.output
        assert existing.read_text() == "mine" and not (tmp_path / "never").exists()


def test_exports_write_the_typed_json_and_a_markdown_answer(tmp_path: Path) -> None:
    run = _run(tmp_path)
    as_json, as_md = tmp_path / "run.json", tmp_path / "run.md"
    run_command.export_run(run, {"json": as_json, "md": as_md})
    jsonschema.validate(json.loads(as_json.read_text()), _schema())
    md = as_md.read_text()
    assert md.startswith("# snnbench run run\n")
    assert re.search(r"^- fused ran 4\.\d+× \[[\d.]+, [\d.]+\] faster than torch at n=64$", md,
                     re.MULTILINE)
    assert "| adapter | variant |" in md
    # a file that appeared while the run ran is not overwritten either
    late = tmp_path / "late.json"
    late.write_text("someone's")
    with pytest.raises(Exception) as stopped:
        run_command.export_run(run, {"json": late})
    assert getattr(stopped.value, "exit_code", None) == 2
    assert late.read_text() == "someone's"


# -- colour --------------------------------------------------------------------------------
def test_color_always_never_and_no_color(tmp_path: Path) -> None:
    run = str(_run(tmp_path, skipped=0))
    assert "\x1b[" in _invoke("show", run, "--color", "always").output
    assert "\x1b[" not in _invoke("show", run, "--color", "never").output
    bad = _invoke("show", run, "--color", "rainbow")
    assert bad.exit_code == 2 and "--color must be auto, always, never" in bad.output
    output.set_color("auto")
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("NO_COLOR", "1")
            output.set_color("auto")
            assert output.console.no_color and output.err_console.no_color
    finally:
        output.set_color("auto")


# -- as it goes: the case's number, the ETA's count, variants not asked for ---------------
def test_a_finished_case_prints_its_median_step_time_and_spread() -> None:
    config = RunConfig()
    spec = next(iter(config.cases()))
    record = CaseRecord(adapter="torch", variant="default", device="cpu", workload=spec,
                        status="ok")
    record.samples = {"step": {"time_s": [6.0e-3, 6.2e-3, 6.41e-3, 6.6e-3, 6.8e-3]},
                      "forward": {"time_s": [2.67e-3] * 5}}
    line, color = case_line("torch", spec.label, record)
    assert line == f"torch {spec.label}: step 6.41 ms ±6%" and color == "green"
    verbose, _ = case_line("torch", spec.label, record, verbose=True)
    assert verbose.endswith("±6% (fwd 2.67 ms)")
    record.status, record.message = "skipped", "device 'cpu' not supported"
    assert case_line("x", "n=8", record) == ("x n=8: skipped — device 'cpu' not supported",
                                             "yellow")


def test_cases_skipped_without_running_are_not_progress(fake_plugins: Path,
                                                        tmp_path: Path) -> None:
    from snnbench.sweep.run import start_run

    config = RunConfig.from_dict({
        "run": {"adapters": ["fake-subtract-only", "fake-ok"], "timeout_s": 60.0,
                "repeats": 2, "warmup": 1, "min_time_s": 0.0, "warmup_s": 0.0,
                "overhead_probe": False},
        "network": {"batch_size": 2, "time_steps": 5, "surrogate": "fast_sigmoid",
                    "reset": "zero"},
        "sweep": [{"neurons": [8, 16]}],
    })
    events: list[tuple[str, int, int, str]] = []
    start_run(config, tmp_path / "run", tmp_path, False,
              progress=lambda event, i, n, job, record: events.append(
                  (event, i, n, job.adapter)))
    decided = [e for e in events if e[0] == "decided"]
    assert [(i, n, a) for _, i, n, a in decided] == [(1, 2, "fake-subtract-only"),
                                                    (2, 2, "fake-subtract-only")]
    # the bar's total is the two cases that run: the ETA is theirs alone
    assert [(e, i, n) for e, i, n, a in events if e == "done"] == [("done", 1, 2),
                                                                  ("done", 2, 2)]


def test_variants_nobody_asked_for_are_not_expanded() -> None:
    from snnbench.sweep.planning.tasks import plan_tasks

    entries = discover()

    def variants(adapters: list[str], dtype: str = "float32") -> set[tuple[str, str]]:
        config = RunConfig.from_dict({"run": {"adapters": adapters, "overhead_probe": False},
                                      "network": {"dtype": dtype},
                                      "sweep": [{"neurons": [8]}]})
        return {(t.adapter, t.variant) for t in plan_tasks(config, entries, "cpu")}

    # a CPU float32 run: no cudagraph, no 16-bit variants, no CUDA-only kernels
    assert variants(["fused", "haiku", "spikingjelly"]) == {
        ("fused", "default"), ("haiku", "fp32"), ("spikingjelly", "torch")}
    assert ("haiku", "bf16") in variants(["haiku"], dtype="bfloat16")
    # asked for by name, a variant runs (or says why it cannot): the user asked
    assert variants(["fused:cudagraph"]) == {("fused", "cudagraph")}
    # an adapter that cannot run here at all keeps one row saying why
    assert variants(["torch-cudagraph"]) == {("torch-cudagraph", "default")}
    # every library: plain PyTorch first in each case
    config = RunConfig.from_dict({"run": {"adapters": ["all"], "overhead_probe": False},
                                  "sweep": [{"neurons": [8]}]})
    assert plan_tasks(config, entries, "cpu")[0].adapter == "torch"


# -- the small things ----------------------------------------------------------------------
def test_spikes_read_in_percent_and_never_round_up_to_all() -> None:
    assert spike_match_text(1.0) == "100 %"
    assert spike_match_text(0.999996) == "99.999 %"
    assert spike_match_text(0.5) == "50.000 %"


def test_flags_show_no_type_and_detach_reset_help_matches_the_default() -> None:
    top = _invoke("--help").output
    assert re.search(r"--version\s+Show the version", top) and "<bool>" not in top
    run_help = " ".join(_invoke("run", "--help", columns=200).output.split())
    assert "the default config does not" in run_help and "config: yes" not in run_help
    assert RunConfig().network.get("detach_reset", [False]) in ([False], False)


def test_env_prints_no_json_in_its_cells() -> None:
    from snnbench.report.facts import environment_facts_table

    table = environment_facts_table({
        "snnbench": {"version": "0.1.0", "git_dirty": True}, "cpu": {"isa": ["avx", "avx2"]},
        "image": None, "env_vars": {"OMP_NUM_THREADS": "1"}, "packages": {}, "gpus": []})
    cells = dict(table.rows)  # type: ignore[arg-type]
    assert cells == {"snnbench version": "0.1.0", "snnbench git_dirty": "yes",
                     "cpu isa": "avx, avx2", "image": "none",
                     "env_vars OMP_NUM_THREADS": "1",
                     "gpu": "absent (no NVIDIA driver/GPU seen by NVML)"}


def test_verify_has_no_empty_notes_column() -> None:
    from snnbench.report.views import VERIFY_HEADERS, verify_document

    row = {h: "" for h in VERIFY_HEADERS}
    row.update(adapter="torch", var="default", status="ok", spikes="100 %",
               **{"1st diff": "none", "cos dW": "1.000000"})
    doc, _ = verify_document([tuple(row[h] for h in VERIFY_HEADERS)], "strict")
    assert "#" not in doc.tables[0].headers
    noted = {**row, "note": "approximate gradient"}
    doc, _ = verify_document([tuple(noted[h] for h in VERIFY_HEADERS)], "strict")
    assert doc.tables[0].headers[-1] == "#"


def test_one_thread_on_a_busy_machine_is_not_told_to_use_one_thread() -> None:
    from snnbench.host.preflight import _threads_finding

    one = _threads_finding(cpus=2, others=2.0, threads=1, jobs=1)
    assert one.level == "warning" and "1 thread (" in one.message
    assert "--threads" not in one.message and "stop the other processes" in one.message
    two = _threads_finding(cpus=2, others=1.2, threads=2, jobs=1)
    assert "2 threads (" in two.message and "use --threads 1" in two.message


# -- the run as a user sees it, into a pipe at 80 columns --------------------------------
@pytest.mark.slow
def test_run_prints_numbers_as_it_goes_quiet_prints_none_and_exports(tmp_path: Path) -> None:
    import os

    from tests.conftest import FAKE_PLUGIN_DIR, run_cli

    env = {"PYTHONPATH": os.pathsep.join([str(FAKE_PLUGIN_DIR), os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "80", "SNNBENCH_FAKE_SLEEP_SCALE": "0.05"}
    fast = ["--config", "ci-smoke", "--repeats", "3", "--warmup", "1", "--threads", "1",
            "--device", "cpu", "--steps", "5", "--batch-size", "2"]
    out, exported = tmp_path / "run", tmp_path / "run.json"
    proc = run_cli("run", "--adapters", "fake-sleep,fake-ok", "--neurons", "8", *fast, "--out",
                   str(out), "--export-json", str(exported), env=env)
    assert proc.returncode == 0, proc.stderr
    # the case's number, printed as it finished
    assert re.search(r"^  fake-ok float32 n=8 B=2 T=5 L=1 subtract: step [\d.]+ \S+ ±\d+%$",
                     proc.stderr, re.MULTILINE), proc.stderr
    assert all(len(line) <= 80 for line in (proc.stdout + proc.stderr).splitlines())
    assert re.search(r"fake-ok ran [\d.]+× (\[[\d.]+, [\d.]+\] )?faster than fake-sleep at n=8",
                     " ".join(proc.stdout.split())), proc.stdout
    jsonschema.validate(json.loads(exported.read_text()), _schema())
    quiet = run_cli("run", "--adapters", "fake-ok", "--neurons", "8", *fast, "--out",
                    str(tmp_path / "quiet"), "--quiet", env=env)
    assert quiet.returncode == 0, quiet.stderr
    assert "fake-ok n=8" not in quiet.stderr and "case 1/" not in quiet.stderr
    assert "results:" in quiet.stdout

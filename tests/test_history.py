"""``snnbench history``: series over runs, steps, bad input, and the site in a real headless
chromium (selenium + Debian's chromium-driver): loads without console errors, the plots are
drawn, and a screenshot is kept in test-artifacts/."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from snnbench.report.history import HistoryError, collect, detect_steps
from tests.conftest import REPO, run_cli
from tests.fixtures.browser import headless_chromium, open_page
from tests.fixtures.runfolders import timed_case, write_run

#: where the browser test keeps its screenshot (SNNBENCH_TEST_ARTIFACTS overrides it)
ARTIFACTS = Path(os.environ.get("SNNBENCH_TEST_ARTIFACTS", REPO / "test-artifacts"))
OTHER_MACHINE = {"hostname_hash": "ffff000011", "cpu": {"model": "Other CPU", "cores_logical": 8}}


def _series_runs(folder: Path, medians: list[float], manifest: dict[str, Any] | None = None,
                 prefix: str = "run") -> list[Path]:
    """One run per median (torch n=64, 3 % noise), a day apart, library 1.<i>."""
    rng = np.random.default_rng(0)
    runs = []
    for i, median in enumerate(medians):
        case = timed_case("torch", 64, rng, median_s=median, rel_noise=0.03,
                          library_version=f"1.{i}")
        runs.append(write_run(folder / f"{prefix}{i:02d}", [case], manifest={
            "created_utc": f"2026-01-{i + 1:02d}T00:00:00Z", **(manifest or {})}))
    return runs


def test_steps_by_pelt_find_a_level_change_and_not_noise() -> None:
    rng = np.random.default_rng(1)
    flat = 0.01 * rng.normal(1.0, 0.03, 12)
    assert detect_steps(list(flat)) == []
    stepped = np.concatenate([0.01 * rng.normal(1.0, 0.02, 6), 0.015 * rng.normal(1.0, 0.02, 6)])
    (step,) = detect_steps(list(stepped))
    assert step.index == 6 and step.ratio == pytest.approx(1.5, rel=0.05)
    assert detect_steps([0.01, 0.02]) == []  # two points: no segmentation


def test_collect_orders_points_and_finds_the_step(tmp_path: Path) -> None:
    _series_runs(tmp_path / "runs", [0.010, 0.0102, 0.0099, 0.0151, 0.0149, 0.0152])
    history = collect([tmp_path / "runs"])
    assert len(history.runs) == 6 and len(history.machines) == 1
    step = next(s for s in history.series if s.phase == "step" and s.metric == "time_s")
    assert [p.library_version for p in step.points] == [f"1.{i}" for i in range(6)]
    assert all(p.q1 < p.median < p.q3 for p in step.points)  # the IQR travels with the point
    (found,) = step.steps
    assert found.index == 3 and found.ratio == pytest.approx(1.5, rel=0.05)


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    stray = tmp_path / "not-runs"
    stray.mkdir()
    (stray / "notes.txt").write_text("hello")
    empty = tmp_path / "empty"
    empty.mkdir()
    runs = _series_runs(tmp_path / "a", [0.01, 0.011])
    _series_runs(tmp_path / "b", [0.01], OTHER_MACHINE, prefix="other")
    cases = [
        ([str(stray)], "is not a run folder and holds none"),
        ([str(empty)], "is not a run folder and holds none"),
        ([str(tmp_path / "missing")], "does not exist"),
        ([str(runs[0] / "summary.csv")], "is not a run folder nor a folder of runs"),
        ([str(tmp_path / "a"), str(tmp_path / "b")], "the runs come from 2 machines"),
        ([str(tmp_path / "a"), "--x", "sha"], "--x must be date, version, commit"),
    ]
    for args, message in cases:
        proc = run_cli("history", *args, "--out", str(tmp_path / "site"))
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        assert not (tmp_path / "site").exists()  # nothing written on a refusal
    with pytest.raises(HistoryError, match="matches 0 of the machines"):
        collect([tmp_path / "a", tmp_path / "b"], machine="zzz")


def test_machines_are_never_on_one_line(tmp_path: Path) -> None:
    _series_runs(tmp_path / "a", [0.01, 0.011, 0.0105])
    _series_runs(tmp_path / "b", [0.02, 0.021], OTHER_MACHINE, prefix="other")
    both = collect([tmp_path / "a", tmp_path / "b"], per_machine=True)
    step = [s for s in both.series if s.phase == "step" and s.metric == "time_s"]
    assert len(step) == 2 and {len(s.points) for s in step} == {3, 2}
    assert len({s.machine.key for s in step}) == 2
    other = next(m.key for m in both.machines if "Other CPU" in m.label)
    only = collect([tmp_path / "a", tmp_path / "b"], machine=other[:4])
    assert {len(s.points) for s in only.series} == {2}
    out = tmp_path / "site"
    proc = run_cli("history", str(tmp_path / "a"), str(tmp_path / "b"), "--per-machine",
                   "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "history.json").read_text())
    lines = [s for s in doc["series"] if s["phase"] == "step" and s["metric"] == "time_s"]
    assert sorted(len(s["points"]) for s in lines) == [2, 3]


def test_foreign_files_are_never_overwritten_and_a_site_is_refreshed(tmp_path: Path) -> None:
    _series_runs(tmp_path / "runs", [0.01, 0.011])
    out = tmp_path / "site"
    out.mkdir()
    (out / "index.html").write_text("an earlier page")
    (out / "mine.txt").write_text("keep me")
    proc = run_cli("history", str(tmp_path / "runs"), "--out", str(out))
    assert proc.returncode == 2 and "mine.txt" in proc.stderr
    assert (out / "index.html").read_text() == "an earlier page"
    (out / "mine.txt").unlink()
    # a page of that name that history did not write (issue 33 item 3) is the user's
    proc = run_cli("history", str(tmp_path / "runs"), "--out", str(out))
    assert proc.returncode == 2 and "index.html" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert (out / "index.html").read_text() == "an earlier page"
    (out / "index.html").unlink()
    for _ in range(2):  # a site history wrote is refreshed
        proc = run_cli("history", str(tmp_path / "runs"), "--out", str(out), "--x", "version")
        assert proc.returncode == 0, proc.stderr
    page = (out / "index.html").read_text()
    assert "<svg" in page and "x axis: version" in page and ">1.1<" in page
    # every point links to its run (no report there: the run's summary.csv), copied beside
    # the page
    assert page.count('xlink:href="run-run00.csv"') >= 1
    assert (out / "run-run00.csv").read_bytes() == (tmp_path / "runs" / "run00"
                                                    / "summary.csv").read_bytes()
    # offline: nothing fetched (the SVG's xmlns URIs are names, not fetches)
    assert not re.search(r'(?:src|href)="(?:https?:)?//', page)


# ------------------------------------------------------------------------ headless browser


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless chromium (:func:`tests.fixtures.browser.headless_chromium`)."""
    yield from headless_chromium()


@pytest.mark.slow
def test_the_reference_history_renders_in_a_headless_browser(tmp_path: Path,
                                                              browser: Any) -> None:
    out = tmp_path / "site"
    # the committed runs come from two machines that name one CPU model ("AMD EPYC"): an AVX2
    # VM (cpu-default-avx2) and hosts whose ISA went unrecorded; each is drawn apart
    proc = run_cli("history", str(REPO / "results" / "reference"),
                   str(REPO / "results" / "baselines"), "--per-machine", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "history.json").read_text())
    # a figure per adapter, case and metric, and the overview's chart per case (and machine)
    figures = len({(s["adapter"], s["case"], s["metric"]) for s in doc["series"]}) + len(
        {(s["machine"], s["case"]) for s in doc["series"]
         if s["phase"] == "step" and s["metric"] == "time_s"})

    # no console error, every link resolving inside the site (an anchor or a copied report)
    found = open_page(browser, out / "index.html")
    assert any(link.startswith("run-") for link in found["links"])
    assert {"changes", "cases"} <= set(found["ids"])
    drawn = browser.execute_script("""
        return Array.from(document.querySelectorAll('figure > svg')).map(svg => {
            const box = svg.getBoundingClientRect();
            return {w: box.width, h: box.height,
                    lines: svg.querySelectorAll('path').length,
                    links: Array.from(svg.querySelectorAll('a')).map(
                        a => a.getAttribute('xlink:href') || a.getAttribute('href'))};
        });""")
    assert len(drawn) == figures > 0
    assert all(f["w"] > 300 and f["h"] > 80 and f["lines"] > 5 for f in drawn), drawn[:3]
    # every point a link to an existing report of a run, inside the site
    links = {link for f in drawn for link in f["links"]}
    assert links and all((out / link).resolve().is_file() for link in links), links
    assert all("/" not in link for link in links)
    assert any(link.endswith(".html") for link in links)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "history-reference.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    # and the first plots, scrolled into view
    browser.execute_script("document.querySelector('h2[id=g0]').scrollIntoView()")
    plots = ARTIFACTS / "history-reference-plots.png"
    assert browser.save_screenshot(str(plots)) and plots.stat().st_size > 10_000
    # the copied reports open too, their plots drawn
    for copy in sorted(out.glob("run-*.html")):
        assert open_page(browser, copy)["imgs"], copy


def test_machines_with_one_model_name_but_another_isa_are_apart(tmp_path: Path) -> None:
    # a VM shows "AMD EPYC" for AVX2 and AVX-512 hosts alike: joined on one line, the AVX2
    # run's slower fused scan read as a 2.8x step between two commits
    # the CPU references (the GPU lease's folder is a third machine, apart by its CPU model)
    cpu_refs = sorted(str(p) for p in (REPO / "results" / "reference").glob("cpu-*"))
    proc = run_cli("history", *cpu_refs, str(REPO / "results" / "baselines"),
                   "--out", str(tmp_path / "site"))
    assert proc.returncode == 2
    assert "2 machines" in proc.stderr and "avx2" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_cpu_isa_reads_the_flags_that_change_cpu_kernels() -> None:
    from snnbench.host.environment import cpu_isa

    x86 = "processor\t: 0\nflags\t\t: fpu sse4_2 avx f16c fma avx2 avx512f avx512_bf16 ht\n"
    assert cpu_isa(x86) == ["sse4_2", "avx", "f16c", "fma", "avx2", "avx512f", "avx512_bf16"]
    assert cpu_isa("Features\t: fp asimd sve\n") == ["asimd", "sve"]
    assert cpu_isa("nothing here\n") is None


# ------------------------------------------------------------- issue 36: the site's overview


def _commit_runs(folder: Path, medians: list[float], mem: list[float] | None = None
                 ) -> list[Path]:
    """One run per median, a day apart, each at its own snnbench commit (c0…)."""
    rng = np.random.default_rng(7)
    runs = []
    for i, median in enumerate(medians):
        case = timed_case("torch", 64, rng, median_s=median, rel_noise=0.01,
                          mem_bytes=(mem or [326 * 2**20] * len(medians))[i])
        runs.append(write_run(folder / f"run{i:02d}", [case], manifest={
            "created_utc": f"2026-01-{i + 1:02d}T00:00:00Z",
            "snnbench": {"version": "0.1.0", "git_commit": f"c{i}abcdef0123"}}))
    return runs


def _tick_labels(svg: str, axis: str) -> list[str]:
    """The tick labels of one axis ("xtick"/"ytick") of a matplotlib SVG (text kept as text)."""
    chunks = svg.split(f'<g id="{axis}_')[1:]
    return [m.group(1) for c in chunks if (m := re.search(r"<text[^>]*>([^<]*)</text>", c))]


def test_the_site_opens_on_the_changes_and_a_chart_per_case(tmp_path: Path) -> None:
    # a step up by 1.5x between the third and the fourth run; memory flat at ~326 MiB
    _commit_runs(tmp_path / "runs", [0.010, 0.0101, 0.0099, 0.015, 0.0151, 0.0149],
                 mem=[326.0 * 2**20 + i * 1000 for i in range(6)])
    out = tmp_path / "site"
    proc = run_cli("history", str(tmp_path / "runs"), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    page = (out / "index.html").read_text()
    # the overview comes first: the changes, then the chart per case
    assert page.index('id="changes"') < page.index('id="cases"') < page.index('id="machines"')
    changes = page.split('id="changes"')[1].split('id="cases"')[0]
    row = next(r for r in changes.split("<tr>") if "<td>step time</td>" in r)
    assert "×1.5" in row and "slower" in row and "<td>64</td>" in row
    assert "c2abcde..c3abcde" in row  # the commit range the step lies in
    doc = json.loads((out / "history.json").read_text())
    assert any(c["phase"] == "step" and c["commits"] == "c2abcde..c3abcde"
               for c in doc["changes"])
    # human names and units, never the column names; tick labels never repeat
    svgs = ["<svg" + part.split("</svg>")[0] for part in page.split("<svg")[1:]]
    assert svgs
    for svg in svgs:
        ticks = _tick_labels(svg, "ytick")
        assert len(ticks) >= 2 and len(set(ticks)) == len(ticks), ticks
        assert "time_s" not in svg and "peak_mem_bytes" not in svg
    assert any("peak memory [MiB]" in svg for svg in svgs)
    assert any("step time [ms]" in svg for svg in svgs)


def test_the_site_works_when_published_alone(tmp_path: Path) -> None:
    _commit_runs(tmp_path / "runs", [0.01, 0.011, 0.0105])
    # one run with a report: its page is what the points link to
    assert run_cli("report", str(tmp_path / "runs" / "run01")).returncode == 0
    out = tmp_path / "site"
    assert run_cli("history", str(tmp_path / "runs"), "--out", str(out)).returncode == 0
    published = tmp_path / "elsewhere" / "site"
    shutil.copytree(out, published)
    shutil.rmtree(tmp_path / "runs")  # the run folders are not published
    page = (published / "index.html").read_text()
    links = set(re.findall(r'(?:xlink:href|href)="([^"#][^"]*)"', page)) - {
        "http://www.w3.org/1999/xlink"}
    assert links, "the points link to the runs"
    for link in links:
        assert not link.startswith(("..", "/", "http")), link
        assert (published / link).is_file(), link
    assert (published / "run-run01.html").read_bytes() == (
        out / "run-run01.html").read_bytes()
    assert "snnbench report" in (published / "run-run01.html").read_text()
    for anchor in re.findall(r'href="#([^"]+)"', page):
        assert f'id="{anchor}"' in page, anchor

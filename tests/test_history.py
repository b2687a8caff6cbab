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

from snnbench.history import HistoryError, collect, detect_steps
from tests.conftest import REPO, run_cli
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
    # every point links to its run (no report there: the run's summary.csv), relative
    assert page.count('xlink:href="../runs/run00/summary.csv"') >= 1
    # offline: nothing fetched (the SVG's xmlns URIs are names, not fetches)
    assert not re.search(r'(?:src|href)="(?:https?:)?//', page)


# ------------------------------------------------------------------------ headless browser


def _chromium() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless chromium driven by chromedriver; both are stopped after the test."""
    found = _chromium()
    if found is None:
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium "
                    "chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1200,1600", "--allow-file-access-from-files"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(found[1]))
    try:
        yield driver
    finally:
        driver.quit()  # stops chromium and chromedriver


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
    figures = len({(s["adapter"], s["case"], s["metric"]) for s in doc["series"]})

    from selenium.webdriver.support.ui import WebDriverWait

    browser.get((out / "index.html").as_uri())
    # a 3 MB page of inline SVG on a busy machine: wait for the load to finish
    WebDriverWait(browser, 120).until(
        lambda d: d.execute_script("return document.readyState") == "complete")
    severe = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert severe == [], severe
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
    # every point a link to an existing report of a run
    links = {link for f in drawn for link in f["links"]}
    assert links and all((out / link).resolve().is_file() for link in links), links
    assert any(link.endswith("report/report.html") for link in links)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "history-reference.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    # and the first plots, scrolled into view
    browser.execute_script("document.querySelector('h2[id=g0]').scrollIntoView()")
    plots = ARTIFACTS / "history-reference-plots.png"
    assert browser.save_screenshot(str(plots)) and plots.stat().st_size > 10_000


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
    from snnbench.environment import cpu_isa

    x86 = "processor\t: 0\nflags\t\t: fpu sse4_2 avx f16c fma avx2 avx512f avx512_bf16 ht\n"
    assert cpu_isa(x86) == ["sse4_2", "avx", "f16c", "fma", "avx2", "avx512f", "avx512_bf16"]
    assert cpu_isa("Features\t: fp asimd sve\n") == ["asimd", "sve"]
    assert cpu_isa("nothing here\n") is None

"""Every page snnbench writes, opened in a real headless chromium (issue 36): the report of a
committed reference run and of a fixture run with every plot, and a history site published
alone. Each loads with no console error, every image is drawn, every link resolves offline
(:func:`tests.fixtures.browser.open_page`); screenshots are kept in test-artifacts/."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from snnbench.report.pages import report
from tests.conftest import REPO, run_cli
from tests.fixtures.browser import headless_chromium, open_page
from tests.fixtures.runfolders import timed_case, write_run

ARTIFACTS = Path(os.environ.get("SNNBENCH_TEST_ARTIFACTS", REPO / "test-artifacts"))


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless chromium (:func:`tests.fixtures.browser.headless_chromium`)."""
    yield from headless_chromium()


def _check_report(browser: Any, written: list[Path], shot: str) -> None:
    pngs = [p for p in written if p.suffix == ".png"]
    page = next(p for p in written if p.name == "report.html")
    found = open_page(browser, page)
    # every plot the report wrote is on the page, drawn
    assert len(found["imgs"]) == len(pngs) > 0
    # the Markdown's figures are files beside it
    md = next(p for p in written if p.name == "report.md").read_text()
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert sorted(figures) == sorted(p.name for p in pngs)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / shot))


@pytest.mark.slow
def test_the_reference_report_renders_in_a_headless_browser(tmp_path: Path,
                                                             browser: Any) -> None:
    written = report(REPO / "results" / "reference" / "cpu-default", tmp_path / "report")
    _check_report(browser, written, "report-cpu-default.png")
    text = browser.execute_script("return document.body.innerText")
    assert text.index("How far to trust") < text.index("Fastest at each n") < text.index(
        "Environment")


def test_a_report_with_every_plot_renders_in_a_headless_browser(tmp_path: Path,
                                                                browser: Any) -> None:
    rng = np.random.default_rng(0)
    speed = {"torch": 1.0, "snntorch": 2.5, "fused": 0.3, "floor": 0.1}
    cases = [timed_case(a, n, rng, median_s=1e-3 * f * n / 64, mem_bytes=f * n * 1e5)
             for n in (64, 256) for a, f in speed.items()]
    cases += [timed_case(a, 64, rng, median_s=1e-3 * layers, layers=layers)
              for a in ("torch", "fused") for layers in (2, 4)]
    written = report(write_run(tmp_path / "run", cases), tmp_path / "report")
    names = {p.name for p in written}
    for plot in ("at-size", "phases", "speedup", "distribution", "scaling", "memory"):
        assert any(n.endswith(f"{plot}.png") for n in names), (plot, names)
    assert any(n.endswith("layers.png") for n in names)
    _check_report(browser, written, "report-every-plot.png")


def test_a_history_site_published_alone_renders_in_a_headless_browser(tmp_path: Path,
                                                                      browser: Any) -> None:
    rng = np.random.default_rng(1)
    for i, median in enumerate([0.010, 0.0101, 0.0099, 0.015, 0.0151]):
        cases = [timed_case(a, 64, rng, median_s=median * f) for a, f in
                 (("torch", 1.0), ("fused", 0.4))]
        write_run(tmp_path / "runs" / f"run{i}", cases, manifest={
            "created_utc": f"2026-01-{i + 1:02d}T00:00:00Z",
            "snnbench": {"version": "0.1.0", "git_commit": f"c{i}00000000"}})
    assert run_cli("report", str(tmp_path / "runs" / "run3")).returncode == 0
    site = tmp_path / "site"
    proc = run_cli("history", str(tmp_path / "runs"), "--out", str(site))
    assert proc.returncode == 0, proc.stderr
    published = tmp_path / "pages" / "site"
    shutil.copytree(site, published)
    shutil.rmtree(tmp_path / "runs")
    found = open_page(browser, published / "index.html")
    assert "run-run3.html" in found["links"]
    text = browser.execute_script("return document.body.innerText")
    assert re.search(r"×1\.[45]\d slower", text) and "c200000..c300000" in text
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "history-published.png"))
    # the copied report of a run opens on its own, its plots drawn
    assert open_page(browser, published / "run-run3.html")["imgs"]

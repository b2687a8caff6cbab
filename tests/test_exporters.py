"""One exporter registry feeds every output format of show, report and compare: a command's
--format choices are the registry's formats for its kind of result, and a format registered
there is a choice of every command whose result it draws, with no other file touched."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from snnbench.cli import app
from snnbench.gate.verdict import Comparison
from snnbench.report.export import EXPORTERS, Exporter, ReportPage, RunResult
from tests.fixtures.runfolders import timed_case, write_run


def _run(path: Path, slow: float = 1.0) -> Path:
    rng = np.random.default_rng(3)
    cases = [timed_case(adapter, n, rng, median_s=median * n / 64 * slow)
             for n in (64, 128) for adapter, median in (("torch", 4e-3), ("fused", 1e-3))]
    return write_run(path, cases, run_id=path.name)


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "100", "NO_COLOR": "1"})


def test_each_command_offers_the_registry_formats_of_its_kind(tmp_path: Path) -> None:
    assert EXPORTERS.formats(RunResult) == ("text", "md", "html", "json")
    assert EXPORTERS.formats(Comparison) == ("text", "md", "json")
    assert EXPORTERS.formats(ReportPage) == ("md", "html")
    run = str(_run(tmp_path / "a"))
    shown = _invoke("show", run, "--format", "xml")
    assert shown.exit_code == 2
    assert "--format must be text, md, html or json, got 'xml'" in shown.output
    compared = _invoke("compare", run, run, "--format", "html")
    assert compared.exit_code == 2
    assert "--format must be text, md or json, got 'html'" in compared.output


class _Csv(Exporter):
    """A format the package does not ship: a run's rows and a comparison's pairs as CSV, and
    a report page as one line."""

    name = "csv"
    suffix = "csv"

    def run(self, result: RunResult) -> str:
        buffer = io.StringIO()
        columns = ["adapter", "neurons", "phase", "median"]
        result.run.summary[columns].to_csv(buffer, index=False)
        return buffer.getvalue()

    def comparison(self, result: Comparison) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["label", "metric", "mark"])
        writer.writerows([p.label, p.metric, p.mark] for p in result.pairs)
        return buffer.getvalue()

    def report(self, result: ReportPage) -> str:
        return f"run,{result.run.run_id}\n"


@pytest.fixture
def csv_format() -> Iterator[None]:
    EXPORTERS.register(_Csv())
    try:
        yield
    finally:
        EXPORTERS.unregister("csv")


def test_a_registered_exporter_is_a_choice_of_every_command_it_draws_for(
        tmp_path: Path, csv_format: None) -> None:
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b", slow=1.5)
    shown = _invoke("show", str(a), "--format", "csv")
    assert shown.exit_code == 0, shown.output
    rows = list(csv.DictReader(io.StringIO(shown.stdout)))
    assert {r["adapter"] for r in rows} == {"torch", "fused"} and len(rows) > 4
    compared = _invoke("compare", str(a), str(b), "--format", "csv")
    assert compared.exit_code in (0, 1, 3), compared.output
    pairs = list(csv.DictReader(io.StringIO(compared.stdout)))
    assert pairs and {"label", "metric", "mark"} <= set(pairs[0])
    # its name joins the choices every refusal lists
    bad = _invoke("show", str(a), "--format", "xml")
    assert "text, md, html, json or csv" in bad.output
    # and the report writes a page in it beside report.md and report.html
    reported = _invoke("report", str(a), "--out", str(tmp_path / "rep"))
    assert reported.exit_code == 0, reported.output
    assert (tmp_path / "rep" / "report.csv").read_text() == "run,a\n"
    assert (tmp_path / "rep" / "report.md").is_file()


class _OtherMarkdown(_Csv):
    name = "md"


def test_a_format_has_one_exporter() -> None:
    with pytest.raises(ValueError, match="registered already"):
        EXPORTERS.register(_OtherMarkdown())
    assert EXPORTERS.formats(RunResult) == ("text", "md", "html", "json")

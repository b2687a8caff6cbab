"""What an exporter is, and the results it is fed, whole.

As hyperfine's ``src/export/mod.rs``: one :class:`Exporter` per output format, each in a module
of its own, each fed the whole result and returning its text. There are three kinds of result:
a run folder as ``show`` prints it (:class:`RunResult`), a comparison as ``compare`` prints it
(:class:`~snnbench.gate.verdict.Comparison`) and a report page as ``report`` writes it
(:class:`ReportPage`). An exporter draws the kinds it has a method for; the registry
(:mod:`snnbench.report.export.registry`) lists, per kind, the formats that draw it.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar, Final

from rich.console import Console

from snnbench.errors import UserError
from snnbench.gate.verdict import Comparison
from snnbench.render import Table
from snnbench.store.rundir import load_run
from snnbench.store.stats import NOISY_IQR_RATIO
from snnbench.store.storage import Run


@dataclass(frozen=True)
class RunResult:
    """A run folder as ``show`` prints it and ``run --export-*`` writes it.

    ``folder`` is the run folder's name (the terminal's title); ``verbose`` and
    ``skipped_hint`` are ``show``'s; ``page``: a page of its own (a file), which in Markdown
    opens with a heading and who is fastest above the table.
    """

    run: Run
    folder: str
    verbose: bool = False
    skipped_hint: str = ""
    page: bool = False


def load_run_result(run_dir: Path, *, verbose: bool = False, skipped_hint: str = "",
                    page: bool = False) -> RunResult:
    """The run in ``run_dir`` read as ``report`` and ``compare`` read it (a manifest of this
    schema, a complete summary, no live run writing into it), with its raw samples when they
    can be read: they give the speed-ups their intervals; without them (a folder that kept
    none, or damaged ones) the ratios are shown alone."""
    run = load_run(run_dir, samples=False)
    with contextlib.suppress(UserError, OSError, ValueError):
        run = replace(run, samples=load_run(run_dir).samples)
    return RunResult(run, run_dir.name, verbose=verbose, skipped_hint=skipped_hint, page=page)


#: the report's notes, said once for every format
GOALS_NOTE: Final = (
    "Median step times of this run (the fastest fused variant); 'measured' is the ratio the "
    "target bounds: fused/other, fused/floor, best third-party/fused, or fused/torch memory."
)
HEADLINE_NOTE: Final = (
    "The fastest library at each n (the floor, a hardware bound, aside), by how much it beat "
    "the runner-up and torch: the ratio of median step times, in brackets its 95 % bootstrap "
    "interval from this run's raw samples. 'noisy': a step time whose IQR is over "
    f"{100 * NOISY_IQR_RATIO:g} % of its median."
)
PIVOT_NOTE: Final = ("Median step time (forward + backward), fastest first; in brackets the "
                     "speed-up over torch.")


@dataclass(frozen=True)
class ReportPage:
    """Everything ``report`` shows, drawn once per format that draws a page (Markdown, HTML);
    ``out`` is the folder the page is written into (its images are there)."""

    run: Run
    out: Path
    status_line: str
    env: Table
    #: (group title, [(caption, png path)], step pivot table)
    sections: list[tuple[str, list[tuple[str, Path]], Table]]
    timing: Table
    metrics: Table
    problems: Table
    warns: Table
    #: the fused backend's targets (no rows unless asked for: ``report --targets``)
    goals: Table
    overhead: list[str]
    #: what a reader must know before any figure: impossible rows
    alerts: list[str]
    #: how far to trust the page: (is a warning, line)
    trust: list[tuple[bool, str]]
    #: who is fastest at each n
    headline: Table
    #: the nir-check results kept in the run folder, a block each
    #: (:func:`snnbench.report.conformance.conformance_blocks`)
    conformance: list[Block] = field(default_factory=list)


@dataclass(frozen=True)
class Block:
    """One headed table of the report page, drawn alike by every format that draws a page:
    a heading, a note, the table (None: it has no rows, and the page says "None.")."""

    title: str
    table: Table | None
    note: str = ""
    #: the heading's anchor (HTML's ``id``)
    anchor: str = ""
    #: a heading that warns (HTML's ``class="bad"``)
    bad: bool = False


def opening_blocks(page: ReportPage) -> list[Block]:
    """The blocks above the plots: who is fastest at each n, when anyone is."""
    if not page.headline.rows:
        return []
    return [Block("Fastest at each n", page.headline, HEADLINE_NOTE, anchor="fastest")]


def closing_blocks(page: ReportPage) -> list[Block]:
    """The blocks below the plots, in page order; the optional ones only when they have
    rows."""
    blocks = [Block("Timing", page.timing)]
    if page.metrics.rows:
        blocks.append(Block("Other metrics per case", page.metrics))
    blocks.append(Block("Cases that did not finish ok",
                        page.problems if page.problems.rows else None, bad=True))
    if page.warns.rows:
        blocks.append(Block("Measurement warnings", page.warns))
    blocks += page.conformance
    blocks.append(Block("Environment", page.env))
    if page.goals.rows:
        blocks.append(Block("Fused backend against its targets", page.goals, GOALS_NOTE))
    return blocks


#: the kinds of result, and the :class:`Exporter` method that draws each
Result = RunResult | Comparison | ReportPage
KINDS: Final[dict[type, str]] = {RunResult: "run", Comparison: "comparison",
                                 ReportPage: "report"}


class PageWriter(ABC):
    """How one format writes the parts of a report page; :func:`draw_page` calls them in the
    page's order, the same for every format, so the formats cannot drift apart."""

    @abstractmethod
    def opening(self, page: ReportPage) -> None:
        """The title, the alerts, how far to trust the report, the cases and the overhead."""

    @abstractmethod
    def block(self, block: Block) -> None:
        """One headed table (:func:`opening_blocks`, :func:`closing_blocks`)."""

    @abstractmethod
    def paragraph(self, text: str) -> None:
        """A line of text of its own."""

    @abstractmethod
    def section(self, title: str, images: list[tuple[str, Path]], pivot: Table) -> None:
        """One group of cases: its heading, its pivot table (with :data:`PIVOT_NOTE`) when it
        has rows, its plots."""


def draw_page(page: ReportPage, writer: PageWriter) -> None:
    """The report page, part by part, in its one order: the opening, the blocks above the
    plots, a section per group of cases (or why there is none), the blocks below."""
    writer.opening(page)
    for block in opening_blocks(page):
        writer.block(block)
    if not page.sections:
        writer.paragraph("No case finished ok: there is nothing to plot.")
    for title, images, pivot in page.sections:
        writer.section(title, images, pivot)
    for block in closing_blocks(page):
        writer.block(block)


class Exporter:
    """One output format: its ``name`` (the value ``--format`` takes), the ``suffix`` of the
    file it writes, and one method per kind of result it draws, each returning the whole text
    (ending in a newline). A method left as it is here means the format does not draw that
    kind."""

    name: ClassVar[str]
    suffix: ClassVar[str]

    def run(self, result: RunResult) -> str:
        """A run folder, as ``show`` prints it."""
        raise NotImplementedError

    def comparison(self, result: Comparison) -> str:
        """A comparison, as ``compare`` prints it."""
        raise NotImplementedError

    def report(self, result: ReportPage) -> str:
        """A report page, as ``report`` writes it."""
        raise NotImplementedError

    def draws(self, kind: type) -> bool:
        """Whether this format draws results of ``kind``."""
        method = KINDS[kind]
        return getattr(type(self), method) is not getattr(Exporter, method)

    def serialize(self, result: Result) -> str:
        """``result`` as this format's text."""
        method = KINDS[type(result)]
        text: str = getattr(self, method)(result)
        return text

    def print(self, result: Result, console: Console) -> None:
        """``result`` on ``console``: its file gets the text verbatim (no wrapping, no markup),
        so that ``>> $GITHUB_STEP_SUMMARY`` or ``| jq`` get exactly :meth:`serialize`."""
        console.file.write(self.serialize(result))
        console.file.flush()

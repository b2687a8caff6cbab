"""``text``: what the terminal shows, drawn with rich (a table per case and who is fastest;
a comparison's verdict and its pairs table fitted to the width). As a file or a string it is
the same view as plain text, 160 columns wide."""

from __future__ import annotations

import io

from rich.console import Console

from snnbench.gate.compare_output import to_rich
from snnbench.gate.verdict import Comparison
from snnbench.render.terminal import Look, print_document
from snnbench.report.export.base import Exporter, Result, RunResult
from snnbench.report.ranking import rank_run
from snnbench.report.tables import typed_rows
from snnbench.report.views import run_document

#: how the run tables are boxed on a terminal
RUN_LOOK = Look(compact=True, whole_first=True, title_left=True, collapse_padding=True)
#: the width of the plain text this format gives as a string
TEXT_WIDTH = 160


class Terminal(Exporter):
    """The terminal's rich view; :meth:`serialize` gives it as plain text."""

    name = "text"
    suffix = "txt"

    def run(self, result: RunResult) -> str:
        return self._captured(result)

    def comparison(self, result: Comparison) -> str:
        return self._captured(result)

    def print(self, result: Result, console: Console) -> None:
        if isinstance(result, RunResult):
            run = result.run
            doc = run_document(result.folder, typed_rows(run.summary), rank_run(run),
                               verbose=result.verbose, skipped_hint=result.skipped_hint)
            print_document(console, doc, RUN_LOOK)
        elif isinstance(result, Comparison):
            console.print(to_rich(result))
        else:
            super().print(result, console)

    def _captured(self, result: Result) -> str:
        buffer = io.StringIO()
        self.print(result, Console(file=buffer, width=TEXT_WIDTH, no_color=True,
                                   force_terminal=False))
        return buffer.getvalue()

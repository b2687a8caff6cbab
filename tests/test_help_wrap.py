"""Every command's help reads as filled paragraphs at 80 columns (not source lines cut in two)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from snnbench.cli import app

COMMANDS = ("run", "show", "merge", "env", "verify", "report", "compare", "history", "list",
            "export-nir")


@pytest.mark.parametrize("command", COMMANDS)
def test_help_paragraphs_fill_an_80_column_terminal(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80"},
                                terminal_width=80)
    assert result.exit_code == 0
    # the description: from the line after "Usage:" to the first panel
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    end = next(i for i, line in enumerate(lines) if line.startswith(("╭", "┌")))
    paragraphs: list[list[str]] = [[]]
    for line in lines[start:end]:
        if line.strip():
            paragraphs[-1].append(line.rstrip())
        elif paragraphs[-1]:
            paragraphs.append([])
    for paragraph in paragraphs:
        # every line but a paragraph's last is filled: none ends after a word or two
        for line in paragraph[:-1]:
            assert len(line) > 55, f"{command} --help cuts a line short:\n" + "\n".join(paragraph)

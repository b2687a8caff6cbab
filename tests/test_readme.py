"""The README stays real: it opens with the two set-up commands and a committed results figure,
stays short, every `snnbench ...` command it shows parses against the current CLI, and every
relative link in it, in CONTRIBUTING.md and in docs/ resolves (file and heading)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import typer

from snnbench.cli import app
from tests.conftest import REPO

try:  # typer >= 0.24 carries its own copy of click; the CLI raises that copy's errors
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - an older typer on the stock click
    from click.exceptions import UsageError  # type: ignore[no-redef,assignment]

README = REPO / "README.md"
MAX_BYTES = 16 * 1024
IMAGE_WITHIN_LINES = 40
LINKED_DOCS = [README, REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]

#: a Markdown link or image: [label](target), the label may hold one level of brackets
LINK = re.compile(r"(!?)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)


def _without_code_blocks(text: str) -> str:
    """Fenced blocks hold output and code, not links: blank them, keeping line numbers."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def _links(path: Path) -> list[tuple[int, bool, str]]:
    """(line number, is an image, target) of every link outside code blocks."""
    found = []
    for number, line in enumerate(_without_code_blocks(path.read_text()).splitlines(), 1):
        found += [(number, bang == "!", target) for bang, target in LINK.findall(line)]
    return found


def _anchors(path: Path) -> set[str]:
    """The heading anchors GitHub makes for a Markdown file: lower case, punctuation dropped
    (word characters, '-' and spaces kept), spaces as '-'."""
    headings = re.findall(r"^#{1,6} (.*)$", _without_code_blocks(path.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _snnbench_commands() -> list[str]:
    """Every `snnbench ...` command the README shows: the lines of its sh blocks (a trailing
    comment dropped) and its inline code spans that start with the command."""
    text = README.read_text()
    commands = []
    for lang, body in FENCE.findall(text):
        if lang != "sh":
            continue
        for line in body.replace("\\\n", " ").splitlines():  # continued lines joined
            line = line.split(" # ")[0].strip()
            if line.startswith("snnbench "):
                commands.append(line)
    spans = re.findall(r"`(snnbench [^`]+)`", _without_code_blocks(text))
    return commands + spans


def _parse(command: str) -> None:
    """Parse ``command`` as the CLI would, without running it: an unknown command or flag, a
    missing argument or a value of the wrong type raises the CLI's UsageError. The README
    gives no option before the command's name, so the first word is the command."""
    words = shlex.split(command)[1:]
    group = typer.main.get_command(app)
    # the group's context alone: parsing no arguments would print the help (no_args_is_help)
    with group.context_class(group, info_name="snnbench") as ctx:
        if not words or words == ["--help"]:
            return  # `snnbench --help`: the group's own help
        sub = group.get_command(ctx, words[0])  # type: ignore[attr-defined]
        if sub is None:
            raise UsageError(f"no such command {words[0]!r}", ctx)
        if len(words) == 1 or words[1:] == ["--help"]:
            return  # the command named in prose (`snnbench compare`): that it exists is enough
        sub.make_context(words[0], words[1:], parent=ctx).close()


def test_readme_opens_with_the_two_set_up_commands() -> None:
    first = FENCE.search(README.read_text())
    assert first is not None and first.start() < 20
    assert [line.split("#")[0].strip() for line in first.group(2).splitlines()] == \
        ["make bench", "make test"]


def test_readme_is_at_most_16_kb() -> None:
    size = len(README.read_bytes())
    assert size <= MAX_BYTES, f"README.md is {size} bytes, more than {MAX_BYTES}"


def test_readme_shows_a_committed_results_figure_within_its_first_40_lines() -> None:
    images = [(n, target) for n, image, target in _links(README)
              if image and n <= IMAGE_WITHIN_LINES]
    assert images, f"no image in the README's first {IMAGE_WITHIN_LINES} lines"
    _, target = images[0]
    figure = REPO / target
    assert not re.match(r"[a-z]+:", target) and figure.is_file(), target
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{target} is not a PNG"
    # a results figure from a committed run folder, with the run's manifest beside its report
    assert target.startswith("results/reference/"), target
    assert (figure.parent.parent / "manifest.json").is_file(), target
    if (REPO / ".git").exists() and shutil.which("git"):
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", target], cwd=REPO,
                                 capture_output=True, text=True)
        assert tracked.returncode == 0, f"{target} is not committed"


def test_every_snnbench_command_in_the_readme_parses_against_the_cli() -> None:
    commands = _snnbench_commands()
    assert len(commands) >= 8, commands  # the compare and gate sections at least
    for sub in ("verify", "run", "report", "compare"):
        assert any(c.startswith(f"snnbench {sub} ") for c in commands), sub
    failures = []
    for command in commands:
        try:
            _parse(command)
        except UsageError as exc:
            failures.append(f"{command}: {exc.format_message()}")
        except ValueError as exc:  # shlex: an unbalanced quote
            failures.append(f"{command}: {exc}")
    assert not failures, "\n".join(failures)


def test_the_command_check_refuses_what_the_cli_refuses() -> None:
    """The check above is no rubber stamp: an unknown flag or command, a text for a number and
    a missing argument fail it."""
    for wrong in ("snnbench run --no-such-flag", "snnbench no-such-command x",
                  "snnbench run --replicates many", "snnbench compare --factor 2"):
        with pytest.raises(UsageError):
            _parse(wrong)
    _parse("snnbench run --neurons 64,128")


@pytest.mark.parametrize("doc", LINKED_DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for number, _, target in _links(doc):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # a URL: not checked offline
        path, _, anchor = target.partition("#")
        linked = (doc.parent / path) if path else doc
        if not linked.exists():
            broken.append(f"{doc.name}:{number}: {target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{doc.name}:{number}: {target} (no such heading)")
    assert not broken, "\n".join(broken)

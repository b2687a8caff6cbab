"""Property (issue 21): a damaged run folder — files cut short, deleted, duplicated, or
replaced by garbage JSON — is read by ``show``, ``report``, ``compare`` and ``merge`` either
fine (exit 0) or refused in one line (exit 2). Never a traceback, never compare's regression
code 1, and nothing outside the folder is touched.

The commands run in this process (typer's CliRunner) on a copy of the committed cpu-smoke
baseline, damaged anew for every example.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st
from typer.testing import CliRunner

from snnbench.cli import app
from snnbench.records.contract import CaseRecord
from tests.conftest import REPO

PRISTINE = REPO / "results" / "baselines" / "cpu-smoke"
#: the folder's files, relative to it (the same in every copy)
FILES = sorted(str(p.relative_to(PRISTINE)) for p in PRISTINE.rglob("*") if p.is_file())

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=6,
)
damage = st.one_of(
    st.tuples(st.just("truncate"), st.sampled_from(FILES), st.floats(0.0, 0.99)),
    st.tuples(st.just("delete"), st.sampled_from(FILES), st.none()),
    st.tuples(st.just("duplicate"), st.sampled_from(FILES), st.text("abcxyz-", min_size=1,
                                                                    max_size=6)),
    st.tuples(st.just("garbage"), st.sampled_from(FILES), json_values),
)


def _apply(folder: Path, op: tuple[str, str, Any]) -> None:
    kind, name, arg = op
    path = folder / name
    if not path.is_file():
        return  # an earlier step removed it
    if kind == "truncate":
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * arg)])
    elif kind == "delete":
        path.unlink()
    elif kind == "duplicate":
        shutil.copy(path, path.with_name(f"{path.stem}{arg}{path.suffix}"))
    else:
        path.write_text(json.dumps(arg))


def _snapshot(root: Path, skip: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and skip not in p.parents}


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(damage, min_size=1, max_size=4))
def test_damaged_run_folders_are_read_or_refused_in_one_line(
        ops: list[tuple[str, str, Any]]) -> None:
    with tempfile.TemporaryDirectory(prefix="snnbench-damaged-") as tmp:
        root = Path(tmp)
        base = Path(shutil.copytree(PRISTINE, root / "base"))
        run = Path(shutil.copytree(PRISTINE, root / "run"))
        for op in ops:
            _apply(run, op)
        outside = _snapshot(root, run)
        codes: dict[str, int] = {}
        for args in (["show", str(run)], ["report", str(run)],
                     ["compare", str(base), str(run)], ["compare", str(run), str(base)],
                     ["merge", str(run)]):
            result = CliRunner().invoke(app, args)
            codes[args[0]] = result.exit_code
            assert result.exit_code in (0, 2), (ops, args, result.exit_code, result.stdout,
                                                result.stderr, result.exception)
            assert "Traceback" not in result.stdout + result.stderr, (ops, args)
            if result.exit_code == 2:
                lines = result.stderr.splitlines()
                assert len(lines) == 1 and lines[0].startswith("error: "), (ops, args, lines)
            else:
                assert not isinstance(result.exception, BaseException) or isinstance(
                    result.exception, SystemExit), (ops, args, result.exception)
        assert _snapshot(root, run) == outside, ops
        # one reader, one set of rules: what show accepts, report accepts, and the reverse
        assert codes["show"] == codes["report"], (ops, codes)
        if codes["merge"] == 0:
            # merged records are the folder's own: no copy counted twice, none hiding a case
            for path in (run / "cases").glob("*.json"):
                assert CaseRecord.read(path).key == path.stem, (ops, path.name)

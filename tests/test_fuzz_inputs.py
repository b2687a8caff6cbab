"""Property: whatever a user types — any value of any type in any config key, any text in any
flag — snnbench either accepts it or says so in one line with exit 2. Never a traceback.

The CLI runs in this process (typer's CliRunner). Where the input is accepted, the step that
would start work (the sweep, the verification, the comparison, the probes) is replaced by a
stub that checks what it was given and raises :class:`Reached`; nothing is run or written.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st
from typer.testing import CliRunner, Result

from snnbench.cli import app
from snnbench.sweep.config import RunConfig, RunSettings
from snnbench.workload.linear_lif.spec import FLOAT_FIELDS, NetworkSpec

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
RUN_KEYS = tuple(f.name for f in dataclasses.fields(RunSettings))
SPEC_KEYS = tuple(f.name for f in dataclasses.fields(NetworkSpec))


class Reached(Exception):
    """The input was accepted: the stub that replaces the real work was called."""


def _check_config(cfg: RunConfig) -> None:
    """An accepted config holds only valid, finite cases, and survives the manifest round trip
    that ``--resume`` relies on."""
    cases = cfg.cases()
    for workload in cases:
        assert all(math.isfinite(workload.params()[name]) for name in FLOAT_FIELDS)
    again = RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert [s.case_id for s in again.cases()] == [s.case_id for s in cases]


def _start_run(cfg: RunConfig, *args: Any, **kwargs: Any) -> None:
    _check_config(cfg)
    raise Reached


def _verification(request: Any, **kwargs: Any) -> None:
    raise Reached


def _compare(*args: Any, **kwargs: Any) -> None:
    for name in ("factor", "mem_threshold"):
        assert math.isfinite(kwargs[name])
    raise Reached


def _discover(**_: object) -> None:
    raise Reached


@pytest.fixture(scope="module")
def stubs() -> Iterator[None]:
    with mock.patch("snnbench.sweep.run.start_run", _start_run), \
            mock.patch("snnbench.sweep.verify_cmd.run_verification", _verification), \
            mock.patch("snnbench.gate.compare.compare", _compare), \
            mock.patch("snnbench.cli.list.discover", _discover):
        yield


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def check(result: Result) -> None:
    """Accepted (the stub was reached), or exit 2 with one line — nothing else."""
    if isinstance(result.exception, Reached):
        event("accepted")
        return
    event("refused: " + result.stderr.split(":")[1][:30] if ":" in result.stderr else "refused")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"a traceback reached the user: {result.exception!r}") \
            from result.exception
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stdout + result.stderr


# -- values --------------------------------------------------------------------------------
WORDS = ["cpu", "cuda", "auto", "all", "torch", "fake-ok", "float32", "bfloat16", "subtract",
         "zero", "both", "sigmoid", "atan", "fast_sigmoid", "gaussian", "bernoulli", "strict",
         "tf32", "forward", "backward", "step", "true", "false", "nan", "inf", ""]
#: NaN and the infinities get their own branch, weighted: they are the values most likely to slip
#: through a range check (NaN compares false with everything)
edge_floats = st.sampled_from([math.nan, math.inf, -math.inf])
scalars = st.one_of(
    edge_floats,
    edge_floats,
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([0, 1, 2, 4, 16, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 0.5, 1.0, 25.0]),
    st.booleans(),
    st.sampled_from(WORDS),
    st.text(max_size=8),
    st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(2100, 1, 1)),
)
toml_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(string.ascii_letters, min_size=1, max_size=4), inner, max_size=2),
    max_leaves=4,
)


def toml(value: Any) -> str:
    """``value`` as a TOML literal (inline tables and arrays for containers)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml(v)}" for k, v in value.items()) + "}"


entry = st.one_of(
    st.tuples(st.just("run"), st.sampled_from(RUN_KEYS), toml_values),
    st.tuples(st.just("network"), st.sampled_from(SPEC_KEYS), toml_values),
    st.tuples(st.just("sweep"), st.sampled_from(SPEC_KEYS), toml_values),
)
#: a valid config the single-key test changes one key of
VALID = {"run": {"adapters": ["torch"], "device": "cpu", "repeats": 3},
         "network": {"neurons": 16, "time_steps": 5, "surrogate_slope": 4.0},
         "sweep": {"batch_size": [2, 4]}}


def _config_text(entries: list[tuple[str, str, Any]], base: dict[str, dict[str, Any]]) -> str:
    tables = {t: dict(keys) for t, keys in base.items()}
    for table, key, value in entries:
        tables.setdefault(table, {})[key] = value
    return "".join(
        (f"[[{t}]]\n" if t == "sweep" else f"[{t}]\n")
        + "".join(f"{key} = {toml(value)}\n" for key, value in keys.items())
        for t, keys in tables.items()
    )


def _run_config(folder: Path, text: str) -> Result:
    cfg = folder / "fuzz.toml"
    cfg.write_text(text, encoding="utf-8")
    return CliRunner().invoke(app, ["run", "--config", str(cfg), "--out", str(folder / "out")])


@SETTINGS
@given(changed=entry)
def test_any_value_in_any_config_key(stubs: None, folder: Path,
                                     changed: tuple[str, str, Any]) -> None:
    # one key of a valid config changed: every key's own validation is exercised
    check(_run_config(folder, _config_text([changed], VALID)))


@SETTINGS
@given(entries=st.lists(entry, min_size=1, max_size=4, unique_by=lambda e: (e[0], e[1])))
def test_any_values_in_several_config_keys(stubs: None, folder: Path,
                                           entries: list[tuple[str, str, Any]]) -> None:
    check(_run_config(folder, _config_text(entries, {})))


# -- flags ---------------------------------------------------------------------------------
flag_text = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "NaN", "+inf", "1e309"]),
    st.sampled_from(["-1", "0", "0.5", "1", "4"]),
    st.sampled_from([*WORDS, "-1", "0", "1", "3", "0.5", "1e309", "-0", "+inf", "NaN", "1e-300",
                     ",", ",,", "64,,128", "1,2", "8,16", "torch,fake-ok", "torch:nosuch",
                     "1.5", "2**8", "0x10", " 4 ", "４"]),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.floats().map(repr),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
            max_size=12),
)


def _flags(names: list[str]) -> st.SearchStrategy[list[str]]:
    """One flag with any text, sometimes after up to two others (the last occurrence wins)."""
    one = st.tuples(st.sampled_from(names), flag_text)
    pairs = st.tuples(st.lists(one, max_size=2), one).map(lambda t: [*t[0], t[1]])
    return pairs.map(lambda ps: [item for name, value in ps for item in (name, value)])


RUN_FLAGS = ["--config", "--adapters", "--neurons", "--batch-size", "--steps", "--layers",
             "--dtype", "--precision", "--device", "--reset", "--repeats", "--warmup", "--timeout",
             "--threads"]
RUN_SWITCHES = ["--resume", "--allow-mismatch", "--detach-reset", "--no-detach-reset"]


@SETTINGS
@given(flags=_flags(RUN_FLAGS), switches=st.lists(st.sampled_from(RUN_SWITCHES), max_size=2))
def test_any_text_in_any_run_flag(stubs: None, folder: Path, flags: list[str],
                                  switches: list[str]) -> None:
    args = ["run", *flags, *switches, "--out", str(folder / "run-out")]
    check(CliRunner().invoke(app, args))


VERIFY_FLAGS = ["--adapters", "--reset", "--neurons", "--steps", "--batch-size", "--dtype", "--precision",
                "--device", "--detach-reset", "--surrogate", "--surrogate-slope", "--timeout"]


@SETTINGS
@given(flags=_flags(VERIFY_FLAGS))
def test_any_text_in_any_verify_flag(stubs: None, flags: list[str]) -> None:
    check(CliRunner().invoke(app, ["verify", *flags]))


COMPARE_FLAGS = ["--factor", "--mem-threshold", "--alpha", "--time-floor-ms", "--mem-floor-mib",
                 "--format"]


@SETTINGS
@given(flags=_flags(COMPARE_FLAGS))
def test_any_text_in_any_compare_flag(stubs: None, folder: Path, flags: list[str]) -> None:
    args = ["compare", str(folder / "a"), str(folder / "b"), *flags]
    check(CliRunner().invoke(app, args))


@SETTINGS
@given(timeout=flag_text, as_json=st.booleans())
def test_any_text_in_the_list_flag(stubs: None, timeout: str, as_json: bool) -> None:
    check(CliRunner().invoke(app, ["list", "--timeout", timeout, *(["--json"] if as_json else [])]))


@SETTINGS
@given(command=st.sampled_from(["show", "report"]), name=flag_text, option=flag_text)
def test_any_folder_and_flag_for_show_and_report(folder: Path, command: str, name: str,
                                                 option: str) -> None:
    # folders that hold no run, under this test's own directory: nothing can be written
    path = folder / "nothing-here" / name.replace("/", "_").replace(".", "_")
    flag = (["--format", option] if command == "show"
            else ["--out", str(folder / "reports" / option.replace("/", "_"))])
    result = CliRunner().invoke(app, [command, str(path), *flag])
    assert result.exit_code != 0, f"{command} accepted a folder that holds no run"
    check(result)

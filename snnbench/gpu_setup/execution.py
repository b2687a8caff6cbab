"""Running a plan: each step's commands (output appended to its log) and its check, one report
line per library."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from snnbench.gpu_setup.common import MARKER, tail
from snnbench.gpu_setup.context import Command, Step


@dataclass(frozen=True)
class Outcome:
    """One library's line of the report."""

    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        """``name  ok: detail`` or ``name  FAILED: detail``."""
        return f"{self.name:<14} {'ok' if self.ok else 'FAILED'}: {self.detail}"


Runner = Callable[[Command, Path], tuple[int, str]]


def run_command(command: Command, log: Path) -> tuple[int, str]:
    """Run ``command``, appending its output to ``log``; (exit status, output)."""
    env = {**os.environ, **command.env}
    with open(log, "a") as out:
        out.write(f"$ {command.shell()}\n")
        out.flush()
        try:
            result = subprocess.run(command.argv, env=env, stdin=subprocess.DEVNULL,
                                    capture_output=True, text=True, timeout=command.timeout_s,
                                    start_new_session=True)
        except subprocess.TimeoutExpired as exc:
            text = (exc.stdout or "") if isinstance(exc.stdout, str) else ""
            out.write(text + f"\n[killed after {command.timeout_s:.0f} s]\n")
            return 124, text + f"\nERROR: no result within {command.timeout_s:.0f} s"
        out.write(result.stdout + result.stderr)
    return result.returncode, result.stdout + result.stderr


def run_check(python: str, step: Step, log: Path, runner: Runner = run_command,
              env: Mapping[str, str] | None = None) -> Outcome:
    """Run a step's check in the target interpreter."""
    code, output = runner(Command((python, "-c", step.check), dict(env or {}),
                                  timeout_s=step.check_timeout_s), log)
    for line in reversed(output.splitlines()):
        if line.startswith(MARKER):
            answer = json.loads(line[len(MARKER):])
            return Outcome(step.name, bool(answer["ok"]), str(answer["detail"]))
    return Outcome(step.name, False, f"the check crashed (exit {code}): {tail(output)}")


def execute(steps: Sequence[Step], python: str, log_dir: Path, mode: str, force: bool = False,
            runner: Runner = run_command, progress: Callable[[str], None] | None = None,
            env: Mapping[str, str] | None = None) -> list[Outcome]:
    """Set up (``mode="install"``) or only check (``"check"``) each step; one outcome each.

    ``env`` is added to every command's environment (the target's bin folder on ``PATH``).
    """
    say = progress or (lambda text: print(text, file=sys.stderr, flush=True))
    outcomes: list[Outcome] = []
    for step in steps:
        log = log_dir / f"{step.name}.log"
        if mode == "check":
            outcome = run_check(python, step, log, runner, env)
        else:
            outcome = _install(step, python, log, force, runner, say, env or {})
        print(outcome.line(), flush=True)
        outcomes.append(outcome)
    return outcomes


def _install(step: Step, python: str, log: Path, force: bool, runner: Runner,
             say: Callable[[str], None], env: Mapping[str, str]) -> Outcome:
    if not force:
        before = run_check(python, step, log, runner, env)
        if before.ok:
            return replace(before, detail=before.detail + " (already set up)")
    if step.blocked:
        return Outcome(step.name, False, step.blocked)
    for command in step.commands:
        say(f"[gpu-setup] {step.name}: {command.shell()}")
        start = time.perf_counter()
        code, output = runner(replace(command, env={**env, **command.env}), log)
        if code != 0:
            return Outcome(step.name, False, f"{tail(output)} (exit {code}; log: {log})")
        say(f"[gpu-setup] {step.name}: done in {time.perf_counter() - start:.0f} s")
    after = run_check(python, step, log, runner, env)
    if not after.ok:
        return replace(after, detail=f"{after.detail} (log: {log})")
    return after

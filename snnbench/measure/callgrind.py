"""Instruction counts of the timed phases, under Valgrind's callgrind (``[run] instructions``).

Wall time on a shared runner cannot resolve a change of a few per cent; the number of
instructions a phase executes can, because it does not depend on what else the machine does.
After a case is timed, its worker starts a second process under ``valgrind --tool=callgrind``
(:mod:`snnbench.measure.callgrind_worker`) that builds the same model, warms it up and switches
collection on only around ``k`` calls of each phase, dumping the counters after each phase
(``torch._C._valgrind_toggle`` and ``_valgrind_toggle_and_dump_stats``, what
``torch.utils.benchmark``'s ``collect_callgrind`` uses). This module builds that command, reads
each dump's total instructions (``Ir``) and gives them per call; the timed samples are never
disturbed, since the counting process starts after the last one.

Counts are taken with one thread (valgrind serialises threads, and a thread spinning at a
barrier would count its spins), and miss what costs time without instructions: memory stalls,
cache misses, parallelism, the GPU (docs/instructions.md).

Where counting cannot work (no valgrind, a framework without torch's hooks, a failure of the
counting process) :func:`collect` gives a reason instead, recorded as the metric's ``skipped``
note; the case itself stays ``ok``.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from snnbench.records.contract import Job

#: calls of each phase counted (the count is given per call)
CALLS = 3
#: rounds of CALLS warm-up calls of each phase before counting (first-call work, caches,
#: allocator pools)
WARMUP_ROUNDS = 1
#: frameworks whose process can switch callgrind's collection on and off (torch's hooks)
COUNTED_FRAMEWORKS = ("torch",)
#: seconds kept back from the case's timeout for the timed worker to write its record
_MARGIN_S = 15.0
#: the fewest seconds worth starting a counting process with (valgrind's start alone is ~10 s)
_MIN_BUDGET_S = 30.0

_TOTAL = re.compile(r"^(?:totals|summary):\s*(\d+)", re.MULTILINE)
_EVENTS = re.compile(r"^events:\s*(.+)$", re.MULTILINE)


class CallgrindError(ValueError):
    """A callgrind output that cannot be read; the message says which and why."""


def parse_total(text: str) -> int:
    """Total instructions (``Ir``) of one callgrind output file's text.

    The ``totals:`` line (else ``summary:``) holds one number per event of the ``events:``
    line; ``Ir`` is the first event callgrind writes, but the events line is read to be sure.
    """
    events = _EVENTS.search(text)
    names = events.group(1).split() if events else ["Ir"]
    if "Ir" not in names:
        raise CallgrindError(f"no Ir event in the output (events: {' '.join(names)})")
    for line in text.splitlines():
        if line.startswith(("totals:", "summary:")):
            values = line.split(":", 1)[1].split()
            index = names.index("Ir")
            if index < len(values) and values[index].isdigit():
                return int(values[index])
    if _TOTAL.search(text) is None:
        raise CallgrindError("no 'totals:' or 'summary:' line: not a callgrind output")
    raise CallgrindError("the 'totals:' line has no Ir value")


def valgrind_missing() -> str | None:
    """Why instructions cannot be counted on this machine, or None."""
    if sys.platform != "linux":
        return f"instruction counts need valgrind on Linux (this is {sys.platform})"
    if shutil.which("valgrind") is None:
        return "valgrind is not installed (apt-get install -y valgrind)"
    return None


def skip_reason(framework: str, device: str) -> str | None:
    """Why a case of ``framework`` on ``device`` gets no instruction counts, or None."""
    if device != "cpu":
        return f"instruction counts are for the CPU only (this case runs on {device})"
    if framework not in COUNTED_FRAMEWORKS:
        return (f"instruction counts need torch's callgrind hooks; a {framework} adapter is "
                "not counted")
    return valgrind_missing()


@dataclass
class Counts:
    """Instructions per call of each phase, or why there are none."""

    #: phase → instructions per call (Ir / :data:`CALLS`)
    per_call: dict[str, float] = field(default_factory=dict)
    #: why the metric is missing ("" when counted)
    skipped: str = ""
    #: seconds the counting process took, start to end
    wall_s: float = 0.0
    calls: int = CALLS
    #: ``switched`` (instrumentation switched on after the imports) or ``from start``
    instrumented: str = ""

    def to_dict(self) -> dict[str, object]:
        """What the case record's ``measurement["instructions"]`` holds."""
        return {"calls": self.calls, "wall_s": round(self.wall_s, 3), "skipped": self.skipped,
                "phases": sorted(self.per_call), "instrumented": self.instrumented}


@functools.cache
def fixed_layout() -> tuple[str, ...]:
    """``setarch ARCH -R``: the prefix that turns address-space randomisation off, where it
    works here (else nothing). Hash tables keyed by addresses (torch's autograd graph, Python
    objects hashed by id) probe differently at every layout: with randomisation the same case
    counted 263,622 to 263,773 instructions per forward over seven runs, without it 263,858 to
    263,860 over four (benchmarks/instructions_gate.py, docs/instructions.md)."""
    setarch = shutil.which("setarch")
    if setarch is None:
        return ()
    prefix = (setarch, platform.machine(), "-R")
    try:
        ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=30,
                            check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return prefix if ok else ()


def command(job_path: Path, out_file: Path, instrument_at_start: bool) -> list[str]:
    """The valgrind command line that counts the job in ``job_path`` (with the address space's
    layout fixed where that works, :func:`fixed_layout`).

    Without instrumentation at the start the process imports its libraries at valgrind's
    plain speed and switches instrumentation on itself (``callgrind_control -i on``), about
    twice as fast as instrumenting the imports too; :func:`collect` falls back to
    instrumenting from the start where that switch fails.
    """
    return [*fixed_layout(), "valgrind", "--tool=callgrind", "--collect-atstart=no",
            f"--instr-atstart={'yes' if instrument_at_start else 'no'}",
            f"--callgrind-out-file={out_file}", "--quiet",
            sys.executable, "-m", "snnbench.measure.callgrind_worker", str(job_path)]


def counting_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The counting process's environment: one thread everywhere, a fixed hash seed."""
    env = dict(os.environ if base is None else base)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                 "NUMEXPR_NUM_THREADS"):
        env[name] = "1"
    # str hashes (dict and set order) must not change the path through Python's code
    env["PYTHONHASHSEED"] = "0"
    if platform.machine() in ("x86_64", "AMD64"):
        # valgrind runs no AVX-512: the fused CPU scan is built for AVX2 here
        # (snnbench.fused.cpu.MARCH_ENV), torch picks its AVX2 kernels from valgrind's CPUID
        env.setdefault("SNNBENCH_FUSED_MARCH", "x86-64-v3")
    return env


def read_dumps(out_file: Path, phases: tuple[str, ...], calls: int) -> dict[str, float]:
    """Per-call instructions of each phase from the dumps ``out_file.1``, ``.2``... (one per
    phase, in order). Raises :class:`CallgrindError` for a missing or unreadable dump."""
    out: dict[str, float] = {}
    for number, phase in enumerate(phases, start=1):
        path = Path(f"{out_file}.{number}")
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise CallgrindError(f"no callgrind dump for {phase}: {exc.strerror}") from exc
        out[phase] = parse_total(text) / calls
    return out


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if not line.startswith("==")]
    return lines[-1] if lines else ""


def collect(job: Job, folder: Path, budget_s: float) -> Counts:
    """Count the phases of ``job`` in a fresh process under callgrind.

    ``folder`` holds the job copy and callgrind's files (removed afterwards); ``budget_s`` is
    the most the counting may take: past it the process is killed and the metric skipped.
    """
    missing = valgrind_missing()
    if missing:
        return Counts(skipped=missing)
    if budget_s < _MIN_BUDGET_S:
        return Counts(skipped=f"only {budget_s:.0f} s of the case's timeout left for counting")
    start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="callgrind-", dir=folder))
    try:
        job_path = work / "job.json"
        job.write(job_path)
        reason = ""
        for at_start in (False, True):
            out_file = work / f"callgrind.{'instr' if at_start else 'switch'}.out"
            left = budget_s - (time.monotonic() - start)
            try:
                done = subprocess.run(command(job_path, out_file, at_start), env=counting_env(),
                                      capture_output=True, text=True, timeout=max(1.0, left),
                                      check=False)
            except subprocess.TimeoutExpired:
                return Counts(skipped=f"counting took longer than the {budget_s:.0f} s left",
                              wall_s=time.monotonic() - start)
            if done.returncode != 0:
                sys.stderr.write(done.stderr[-4000:])
                return Counts(skipped="the counting process failed (exit "
                                      f"{done.returncode}): {_last_line(done.stderr)}",
                              wall_s=time.monotonic() - start)
            try:
                per_call = read_dumps(out_file, tuple(job.phases), CALLS)
            except CallgrindError as exc:
                return Counts(skipped=str(exc), wall_s=time.monotonic() - start)
            if all(v > 0 for v in per_call.values()):
                return Counts(per_call=per_call, wall_s=time.monotonic() - start,
                              instrumented="from start" if at_start else "switched")
            # zero counts: the switch to instrumentation did not reach valgrind; count again
            # with the whole process instrumented
            reason = "callgrind counted no instructions"
        return Counts(skipped=reason, wall_s=time.monotonic() - start)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def budget(timeout_s: float, since_prepared_s: float) -> float:
    """Seconds the counting may take: what is left of the case's timeout, less a margin."""
    return timeout_s - since_prepared_s - _MARGIN_S

"""What Slurm itself says about the array tasks of a sweep, with or without accounting.

``squeue -t all`` asks the controller, which knows every job it holds in memory: pending,
running and, for ``MinJobAge`` seconds (default 300), finished ones with their final state
(``TIMEOUT``, ``CANCELLED``, ``OUT_OF_MEMORY``...). It works without accounting. What it does
not list (an array task cancelled before it started vanishes at once; a finished one is
purged after ``MinJobAge``) is asked of ``sacct`` when accounting is on; when it is off, or
sacct does not know the task either, the task is *gone* once squeue has not listed it for
:data:`GONE_AFTER_S`: its cases are over, whatever became of them.

sacct being unavailable is said once (:attr:`SlurmStates.warnings`), never per poll.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

#: states a task never leaves (``squeue --states`` names; sacct adds ``by UID`` to CANCELLED)
TERMINAL = frozenset({
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
    "PREEMPTED", "REVOKED", "SPECIAL_EXIT", "TIMEOUT",
})
#: a task squeue no longer lists, and sacct cannot tell about, is over after this long
GONE_AFTER_S = 15.0
#: the state of a task Slurm no longer knows
GONE = "GONE"
#: seconds a squeue or sacct call may take
CALL_TIMEOUT_S = 30.0

Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


@dataclass(frozen=True)
class TaskState:
    """One array task as Slurm sees it."""

    #: the base state (``RUNNING``, ``TIMEOUT``, ``CANCELLED``...), or :data:`GONE`
    state: str
    #: squeue's reason (``Resources``, ``ReqNodeNotAvail...``, ``TimeLimit``) or sacct's
    #: full state (``CANCELLED by 0``)
    reason: str = ""
    node: str = ""
    #: ``squeue``, ``sacct`` or ``""`` (gone)
    source: str = ""

    @property
    def over(self) -> bool:
        return self.state in TERMINAL or self.state == GONE

    def describe(self) -> str:
        """``TIMEOUT (TimeLimit, squeue)``: for messages."""
        extra = ", ".join(x for x in (self.reason if self.reason not in ("None", "") else "",
                                      self.source) if x)
        return f"{self.state} ({extra})" if extra else self.state


def status_of(state: TaskState) -> tuple[str, str]:
    """(status, why) for the cases of a task that ended in ``state`` without recording them.

    ``oom`` only when Slurm says OUT_OF_MEMORY; a time limit is ``timeout``; a cancel,
    preemption or node failure (and a task Slurm lost track of) ``lost``, which ``--resume``
    runs again like a ``timeout``.
    """
    what = state.describe()
    if state.state == "TIMEOUT":
        return "timeout", f"the array task reached its Slurm time limit ({what})"
    if state.state == "OUT_OF_MEMORY":
        return "oom", f"Slurm killed the array task for its memory ({what})"
    if state.state == "FAILED":
        return "error", f"the array task failed ({what})"
    if state.state == GONE:
        return "lost", ("Slurm no longer knows the array task (cancelled before it started, "
                        "or finished and forgotten, with no accounting to ask)")
    if state.state == "COMPLETED":
        return "lost", f"the array task ended without recording this case ({what})"
    return "lost", f"the array task was stopped: {what}"


def expand_task_ids(job_id: str) -> list[str]:
    """``12_3`` → [``12_3``]; ``12_[1-3,5%2]`` → [``12_1``, ``12_2``, ``12_3``, ``12_5``];
    a plain ``12`` stays."""
    match = re.fullmatch(r"(\d+)_\[([\d,\-]+)(?:%\d+)?\]", job_id)
    if not match:
        return [job_id]
    base, ranges = match.groups()
    ids = []
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        ids += [f"{base}_{i}" for i in range(int(low), int(high or low) + 1)]
    return ids


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=CALL_TIMEOUT_S,
                          check=False)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


class SlurmStates:
    """Follows array tasks through squeue, then sacct; one instance per sweep."""

    def __init__(self, run: Runner = _run, clock: Callable[[], float] = time.monotonic) -> None:
        self._run = run
        self._clock = clock
        #: None: not asked yet; False: accounting is off (or sacct fails) here
        self.sacct_ok: bool | None = None
        #: one line each, said once (the caller shows them)
        self.warnings: list[str] = []
        self._unlisted_since: dict[str, float] = {}
        self._final: dict[str, TaskState] = {}

    @property
    def final(self) -> dict[str, TaskState]:
        """Tasks known to be over, with their final state."""
        return dict(self._final)

    def _warn(self, line: str) -> None:
        if line not in self.warnings:
            self.warnings.append(line)

    def squeue(self, array_ids: Iterable[str]) -> dict[str, TaskState] | None:
        """Every task of the arrays the controller lists; None when it cannot be asked."""
        found: dict[str, TaskState] = {}
        for array in sorted(set(array_ids)):
            try:
                proc = self._run(["squeue", "-h", "-r", "-t", "all", "-j", array,
                                  "-o", "%i|%T|%r|%N"])
            except (OSError, subprocess.SubprocessError) as exc:
                self._warn(f"squeue failed ({exc}): waiting for the task records only")
                return None
            if proc.returncode != 0:
                if "Invalid job id" in proc.stderr:
                    continue  # purged: none of its tasks is listed
                self._warn(f"squeue failed ({_first_line(proc.stderr) or proc.returncode}); "
                           "retrying at every poll")
                return None
            for line in proc.stdout.splitlines():
                fields = line.strip().split("|")
                if len(fields) < 2 or not fields[0]:
                    continue
                state = fields[1].split()[0].upper()
                for task in expand_task_ids(fields[0]):
                    found[task] = TaskState(state, fields[2] if len(fields) > 2 else "",
                                            fields[3] if len(fields) > 3 else "", "squeue")
        return found

    def sacct(self, task_ids: Iterable[str]) -> dict[str, TaskState]:
        """Final states sacct knows (empty when accounting is off: said once)."""
        tasks = sorted(set(task_ids))
        if not tasks or self.sacct_ok is False:
            return {}
        arrays = sorted({t.split("_")[0] for t in tasks})
        command = ["sacct", "-n", "-X", "-P", "-o", "JobID,State,NodeList"]
        for array in arrays:
            command += ["-j", array]
        try:
            proc = self._run(command)
        except (OSError, subprocess.SubprocessError) as exc:
            proc = subprocess.CompletedProcess(command, 1, "", str(exc))
        if proc.returncode != 0:
            self.sacct_ok = False
            self._warn(f"Slurm accounting is not available here (sacct: "
                       f"{_first_line(proc.stderr) or 'failed'}): array tasks are followed "
                       f"with squeue, and one it no longer lists counts as ended after "
                       f"{GONE_AFTER_S:g} s")
            return {}
        self.sacct_ok = True
        found: dict[str, TaskState] = {}
        for line in proc.stdout.splitlines():
            fields = line.strip().split("|")
            if len(fields) < 2 or "." in fields[0]:
                continue
            full = fields[1].strip()
            state = full.split()[0].upper() if full else ""
            for task in expand_task_ids(fields[0]):
                if task in tasks and state in TERMINAL:
                    found[task] = TaskState(state, full, fields[2] if len(fields) > 2 else "",
                                            "sacct")
        return found

    def poll(self, task_ids: Iterable[str]) -> dict[str, TaskState]:
        """The state of each task (``<array>_<index>``) Slurm can tell about now; a task it
        has not listed for :data:`GONE_AFTER_S` is :data:`GONE`. A task missing from the
        answer is still unknown (squeue could not be asked)."""
        tasks = sorted(set(task_ids))
        states: dict[str, TaskState] = {t: self._final[t] for t in tasks if t in self._final}
        ask = [t for t in tasks if t not in self._final]
        if not ask:
            return states
        listed = self.squeue(t.split("_")[0] for t in ask)
        if listed is None:
            return states
        now = self._clock()
        unlisted = []
        for task in ask:
            if task in listed:
                self._unlisted_since.pop(task, None)
                states[task] = listed[task]
            else:
                unlisted.append(task)
        accounted = self.sacct(unlisted) if unlisted else {}
        for task in unlisted:
            since = self._unlisted_since.setdefault(task, now)
            if task in accounted:
                states[task] = accounted[task]
            elif now - since >= GONE_AFTER_S:
                states[task] = TaskState(GONE)
        for task, state in states.items():
            if state.over:
                self._final[task] = state
        return states

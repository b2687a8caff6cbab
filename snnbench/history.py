"""``snnbench history``: many run folders as time series, with steps detected.

Every ok summary row of every run becomes a :class:`Point` (its median, with q1 and q3: the
IQR) of a :class:`Series`: one machine, one adapter label, one case, one phase, one metric.
The machine is part of a series' identity, so runs from different machines are never drawn on
one line; by default a history holds one machine only (:class:`HistoryError` otherwise), as
asv keeps one result folder per machine.

**Steps** are found with PELT (``ruptures``; Killick et al. 2012), an exact penalised
segmentation of the log medians into constant pieces: the same model as asv's own step
detection (a piecewise-constant fit with a penalty per step), from a maintained library. The
penalty is :data:`PENALTY` · σ² · log n per step, with σ the noise of the series itself: the
median absolute difference of successive log medians / (0.6745 · √2), a robust estimate that
a step barely moves (one large difference among many small ones), floored at 1 %. BIC's factor
would be 2; on simulated series of 12 runs with 3 % noise it marked a false step in 27 % of
flat series, 6 in 5 % (0.3 % at 30 runs), while still finding 98 % of × 1.5 steps and 75 % of
× 1.1 steps (6 + 6 runs). The within-run IQR
is not used for σ: it leaves out the noise between processes and runs, which is what a history
of separate runs shows (the lesson of the gate, :mod:`snnbench.gate`). A step is kept when the
medians of the pieces on either side differ by at least :data:`MIN_STEP`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np

from snnbench import metrics, schema
from snnbench.contract import adapter_label
from snnbench.errors import UserError
from snnbench.overhead import PROBES
from snnbench.rundir import Run, RunDirError, load_run

XAxis = Literal["date", "version", "commit"]
X_AXES: tuple[str, ...] = ("date", "version", "commit")
#: the step penalty's factor of σ² · log n (see the module docstring for why not BIC's 2)
PENALTY = 6.0
#: steps smaller than this ratio of piece medians are not reported
MIN_STEP = 1.05
#: σ of a series is never taken below this (1 %): identical medians would make any wiggle a step
MIN_NOISE = 0.01
#: metrics drawn: times and peaks (the others are per-case facts, not speeds)
METRICS: tuple[str, ...] = tuple(m.name for m in metrics.METRICS.values() if m.history)
#: run folders are looked for this deep below a folder given on the command line
SEARCH_DEPTH = 3


class HistoryError(UserError):
    """Input that makes no history (no runs, mixed machines, no data); one line."""


@dataclass(frozen=True)
class Machine:
    """The machine a run was measured on: its hostname hash, CPU and GPUs."""

    key: str
    label: str


def machine_of(manifest: dict[str, Any], host: str = "") -> Machine:
    """The machine of a run (``host``: the row's host, for runs spread over a cluster)."""
    cpu = manifest.get("cpu") if isinstance(manifest.get("cpu"), dict) else {}
    assert isinstance(cpu, dict)
    gpus = sorted(str(g.get("name", "?")) for g in manifest.get("gpus") or []
                  if isinstance(g, dict))
    # the vector ISA too: a VM may show one model name ("AMD EPYC") for AVX2 and AVX-512 hosts,
    # whose CPU kernels run at other speeds (runs before the field was recorded: "isa?")
    isa = cpu.get("isa")
    isa_text = " ".join(str(f) for f in isa) if isinstance(isa, list) else "isa?"
    parts = [str(manifest.get("hostname_hash") or "?"), str(cpu.get("model") or "?"),
             str(cpu.get("cores_logical") or "?"), isa_text, *gpus, host]
    key = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:8]
    widest = next((f for f in ("amx_bf16", "avx512_bf16", "avx512f", "avx2", "sve", "asimd")
                   if isinstance(isa, list) and f in isa), "ISA unknown")
    label = f"{cpu.get('model') or 'unknown CPU'} ×{cpu.get('cores_logical') or '?'} {widest}"
    if gpus:
        label += " + " + ", ".join(gpus)
    label += f" (host {host or manifest.get('hostname_hash') or '?'})"
    return Machine(key, label)


@dataclass(frozen=True)
class Point:
    """One run's value of a series."""

    run_id: str
    run_path: Path
    date: datetime
    library_version: str
    commit: str
    median: float
    q1: float
    q3: float
    n_samples: int
    replicates: int


@dataclass(frozen=True)
class Step:
    """A change of level between ``points[index - 1]`` and ``points[index]``."""

    index: int
    before: float
    after: float

    @property
    def ratio(self) -> float:
        """after / before (> 1: slower or larger)."""
        return self.after / self.before


@dataclass
class Series:
    """One machine, adapter, case, phase and metric over runs, in date order."""

    machine: Machine
    label: str
    case: str
    phase: str
    metric: str
    points: list[Point] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)


@dataclass
class History:
    """Every series of a set of runs, and the runs themselves."""

    runs: list[Run]
    series: list[Series]
    machines: list[Machine]

    def groups(self) -> dict[tuple[str, str], list[Series]]:
        """Series by (adapter label, case), in label and case order."""
        out: dict[tuple[str, str], list[Series]] = {}
        order = {m: i for i, m in enumerate(METRICS)}
        for s in sorted(self.series, key=lambda s: (s.label, s.case, order[s.metric],
                                                    s.machine.key, s.phase)):
            out.setdefault((s.label, s.case), []).append(s)
        return out


def find_runs(paths: Iterable[str | Path]) -> list[Path]:
    """Run folders named by ``paths``: a run folder itself, or a folder holding run folders
    (up to :data:`SEARCH_DEPTH` levels down). Raises :class:`HistoryError` for a missing path
    or one that holds no run, and when there is none at all."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise HistoryError(f"{path} does not exist")
        if (path / schema.MANIFEST_FILE).is_file():
            found.append(path)
            continue
        if not path.is_dir():
            raise HistoryError(f"{path} is not a run folder nor a folder of runs")
        inside = sorted(m.parent for depth in range(1, SEARCH_DEPTH + 1)
                        for m in path.glob("/".join(["*"] * depth) + "/" + schema.MANIFEST_FILE))
        if not inside:
            raise HistoryError(f"{path} is not a run folder and holds none (no manifest.json "
                               f"within {SEARCH_DEPTH} levels)")
        found.extend(inside)
    if not found:
        raise HistoryError("no run folders given")
    unique = list(dict.fromkeys(p.resolve() for p in found))
    return unique


def _date(manifest: dict[str, Any]) -> datetime:
    text = str(manifest.get("created_utc") or "")
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return datetime.fromtimestamp(0, UTC)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _case_text(row: Any) -> str:
    return (f"{row['device']} {row['dtype']} n={int(row['neurons'])} B={int(row['batch_size'])} "
            f"T={int(row['time_steps'])} L={int(row['layers'])} {row['reset']}")


def detect_steps(medians: Sequence[float]) -> list[Step]:
    """Steps of a series of medians (see the module docstring: PELT on the log medians, a
    penalty from the series' own robust noise, steps of at least :data:`MIN_STEP`)."""
    import ruptures

    values = np.log(np.asarray(medians, dtype=float))
    n = len(values)
    if n < 3 or not np.isfinite(values).all():
        return []
    diffs = np.abs(np.diff(values))
    sigma = max(float(np.median(diffs)) / (0.6745 * math.sqrt(2.0)), math.log1p(MIN_NOISE))
    ends = ruptures.Pelt(model="l2", min_size=1, jump=1).fit(values).predict(
        pen=PENALTY * sigma**2 * math.log(n))
    steps: list[Step] = []
    starts = [0, *ends[:-1]]
    for (a, b), (c, d) in zip(zip(starts, ends, strict=True),
                              zip(starts[1:], ends[1:], strict=True), strict=False):
        before, after = float(np.exp(np.median(values[a:b]))), float(np.exp(np.median(values[c:d])))
        if max(after / before, before / after) >= MIN_STEP:
            steps.append(Step(index=c, before=before, after=after))
    return steps


def collect(paths: Iterable[str | Path], *, machine: str | None = None,
            per_machine: bool = False) -> History:
    """Load the runs named by ``paths`` and build their series.

    Runs from several machines are refused unless ``machine`` picks one (its key, or a
    prefix of it) or ``per_machine`` draws each machine's series apart. Raises
    :class:`HistoryError` (or :class:`~snnbench.rundir.RunDirError` for a damaged run).
    """
    runs: list[Run] = []
    for path in find_runs(paths):
        try:
            runs.append(load_run(path, samples=False))
        except RunDirError as exc:
            raise HistoryError(f"{exc}") from exc
    by_machine: dict[Machine, list[Run]] = {}
    for run in runs:
        by_machine.setdefault(machine_of(run.manifest), []).append(run)
    if machine is not None:
        chosen = [m for m in by_machine if m.key.startswith(machine)]
        if len(chosen) != 1:
            known = "; ".join(f"{m.key}: {m.label}" for m in by_machine)
            raise HistoryError(f"--machine {machine!r} matches {len(chosen)} of the machines "
                               f"({known})")
        runs = by_machine[chosen[0]]
    elif len(by_machine) > 1 and not per_machine:
        known = "; ".join(f"{m.key}: {m.label}, {len(r)} runs" for m, r in by_machine.items())
        raise HistoryError(f"the runs come from {len(by_machine)} machines ({known}): their "
                           "times do not belong on one line; pick one with --machine KEY, or "
                           "draw each machine apart with --per-machine")
    series: dict[tuple[str, ...], Series] = {}
    for run in runs:
        summary = run.summary
        rows = summary[(summary["status"] == "ok") & summary["metric"].isin(METRICS)
                       & ~summary["adapter"].isin(PROBES)]
        when, commit = _date(run.manifest), str((run.manifest.get("snnbench") or {})
                                                 .get("git_commit") or "")[:10]
        # a run spread over several hosts (a cluster) has a machine per host; a local run's
        # one host is the manifest's machine
        spread = len({h for h in rows["host"] if h}) > 1
        for _, row in rows.iterrows():
            median = float(row["median"])
            if not (math.isfinite(median) and median > 0):
                continue
            mach = machine_of(run.manifest, str(row["host"]) if spread else "")
            label = adapter_label(str(row["adapter"]), str(row["variant"]),
                                  str(row.get("environment", "") or ""))
            key = (mach.key, label, _case_text(row), str(row["phase"]), str(row["metric"]))
            s = series.setdefault(key, Series(mach, label, key[2], key[3], key[4]))
            s.points.append(Point(
                run_id=run.run_id, run_path=run.path, date=when,
                library_version=str(row["library_version"]), commit=commit, median=median,
                q1=float(row["q1"]), q3=float(row["q3"]),
                n_samples=int(row["n_samples"]) if row["n_samples"] == row["n_samples"] else 0,
                replicates=int(row["replicates"]) if row["replicates"] == row["replicates"]
                else 1))
    if not series:
        raise HistoryError("the runs hold no ok measurement to draw")
    for s in series.values():
        s.points.sort(key=lambda p: (p.date, p.run_id))
        s.steps = detect_steps([p.median for p in s.points])
    machines = list(dict.fromkeys(s.machine for s in series.values()))
    return History(runs=runs, series=list(series.values()), machines=machines)

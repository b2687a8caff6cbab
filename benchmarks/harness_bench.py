"""Issue 38's figure: where a sweep's wall time goes besides measuring.

Runs ``snnbench run`` on a config (the shipped default, or ``benchmarks/harness.toml`` for a
short one) in a fresh folder, times it from outside, and prints per case and in total: the
case's wall time (as the sweep saw its worker), the measured time (its timed samples: every
iteration of every timed block), and where the rest went, from the phases each worker records
(``CaseRecord.overhead_s``)::

    .venv/bin/python benchmarks/harness_bench.py                  # configs/default.toml
    .venv/bin/python benchmarks/harness_bench.py --config benchmarks/harness.toml
    .venv/bin/python benchmarks/harness_bench.py --run results/r1  # an existing run folder

Columns (seconds): ``start`` (process creation to the case's first step: interpreter, harness
imports, reading the job), ``import`` (the adapter's module and library, framework settings),
``compile`` (first-use preparation such as kernel builds, and the first forward+backward, where
torch.compile and XLA compile), ``build`` (the network), ``verify`` (the reference, computed once
per network in a sweep, the pre-timing equivalence check and the case metrics), ``warm-up``,
``calibrate`` (the timed phases less their samples: block calibration, timer, memory probes),
``write/exit`` (what the worker's wall time holds beyond its phases: writing the record,
exiting), ``other`` (energy, instructions). ``parent`` is the sweep's wall time outside its
workers: planning, the noise check, library environments, storing records, tables and the
report. Not a unit test: the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from snnbench.records.contract import CaseRecord, adapter_label

#: report column → the worker phases (``CaseRecord.overhead_s``) it adds up
COLUMNS: dict[str, tuple[str, ...]] = {
    "start": ("start",),
    "import": ("load", "import", "settings"),
    "compile": ("prepare", "first_call"),
    "build": ("build",),
    "verify": ("reference", "verify", "metrics"),
    "warm-up": ("warmup",),
    "other": ("energy", "instructions"),
}


def measured_s(record: CaseRecord) -> float:
    """Seconds of timed samples: per phase, each sample (one iteration's time) times the
    iterations of its block."""
    blocks = record.measurement.get("block_size") or {}
    total = 0.0
    for phase, metrics in record.samples.items():
        times = metrics.get("time_s") if isinstance(metrics, dict) else None
        if times:
            total += sum(float(t) for t in times) * int(blocks.get(phase, 1) or 1)
    return total


def case_row(record: CaseRecord) -> dict[str, Any]:
    """One case's wall, measured and overhead seconds (the report's columns)."""
    phases = record.overhead_s
    measured = measured_s(record)
    row: dict[str, Any] = {
        "case": f"{adapter_label(record.adapter, record.variant, record.environment.name)} "
                f"{record.workload.size_label}",
        "status": record.status,
        "wall": float(record.wall_s or 0.0),
        "measured": measured,
    }
    for column, names in COLUMNS.items():
        row[column] = sum(float(phases.get(name, 0.0)) for name in names)
    row["calibrate"] = max(0.0, float(phases.get("timing", 0.0)) - measured)
    inside = sum(float(v) for v in phases.values())
    row["write/exit"] = max(0.0, row["wall"] - inside) if phases else 0.0
    return row


ORDER = ("wall", "measured", "start", "import", "compile", "build", "verify", "warm-up",
         "calibrate", "write/exit", "other")


def table(rows: list[dict[str, Any]], sweep_wall: float | None) -> str:
    """A markdown table of ``rows`` with a total row, and the sweep's own figures."""
    total: dict[str, Any] = {"case": f"**total ({len(rows)} cases)**", "status": ""}
    for column in ORDER:
        total[column] = sum(row[column] for row in rows)
    lines = ["| case | status | " + " | ".join(ORDER) + " |",
             "|---|---|" + "---:|" * len(ORDER)]
    for row in [*rows, total]:
        cells = [f"{row[c]:.2f}" for c in ORDER]
        lines.append(f"| {row['case']} | {row['status']} | " + " | ".join(cells) + " |")
    measured = total["measured"]
    lines.append("")
    if sweep_wall is not None:
        parent = sweep_wall - total["wall"]
        lines.append(f"sweep wall {sweep_wall:.1f} s; in workers {total['wall']:.1f} s; "
                     f"parent (planning, noise check, storing, tables, report) {parent:.1f} s")
        if measured > 0:
            lines.append(f"wall / measured = {sweep_wall / measured:.2f} "
                         f"({measured:.1f} s measured)")
    elif measured > 0:
        lines.append(f"case wall / measured = {total['wall'] / measured:.2f}")
    shares = {c: total[c] for c in ORDER[2:]}
    if total["wall"] > 0:
        parts = ", ".join(f"{c} {100 * v / total['wall']:.0f}%"
                          for c, v in sorted(shares.items(), key=lambda kv: -kv[1]) if v > 0)
        lines.append(f"of the workers' wall: measured {100 * measured / total['wall']:.0f}%, "
                     f"{parts}")
    return "\n".join(lines)


def read_records(run: Path) -> list[CaseRecord]:
    """The records of the cases that ran a worker (skips decided in the parent have none)."""
    records = [CaseRecord.read(path) for path in sorted((run / "cases").glob("*.json"))]
    return sorted((r for r in records if r.wall_s), key=lambda r: r.order)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="default",
                        help="the sweep config (a shipped name or a path; default: default)")
    parser.add_argument("--run", default="", help="read this run folder instead of running")
    parser.add_argument("--out", default="", help="the run folder to make (default: a new "
                        "temporary one)")
    parser.add_argument("--json", default="", help="also write the rows and totals here")
    parser.add_argument("--extra", default="", help="more snnbench run flags")
    args = parser.parse_args()
    sweep_wall: float | None = None
    if args.run:
        run = Path(args.run)
    else:
        run = Path(args.out or tempfile.mkdtemp(prefix="snnbench-harness-")) / "run"
        command = [sys.executable, "-m", "snnbench", "run", "--config", args.config,
                   "--out", str(run), *args.extra.split()]
        load = os.getloadavg()
        start = time.perf_counter()
        proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
        sweep_wall = time.perf_counter() - start
        print(f"# {' '.join(command[1:])}: exit {proc.returncode} in {sweep_wall:.1f} s; "
              f"load before {load[0]:.2f}, after {os.getloadavg()[0]:.2f}")
        if proc.returncode not in (0, 1):
            print(proc.stderr[-2000:], file=sys.stderr)
            return 1
    rows = [case_row(r) for r in read_records(run)]
    print(f"# run folder {run}")
    print(table(rows, sweep_wall))
    if args.json:
        Path(args.json).write_text(json.dumps({"sweep_wall_s": sweep_wall, "run": str(run),
                                               "cases": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The instruction-count metric measured: its spread, its cost, and the gate it gives (issue 32).

``spread``: the same command ``--runs`` times (``snnbench run --instructions``, one fresh run
each); per adapter and phase the counts' relative spread ((max - min) / median) and the wall
time of the counting process (``measurement.instructions.wall_s`` of each case record)::

    .venv/bin/python benchmarks/instructions_gate.py spread --runs 5 --adapters torch,fused

``gate``: ``--pairs`` times, a run of ``fake-torch-work`` (the tests' torch adapter of known
work) at scale 1 and one at 1.05 (5 % more matmuls); ``snnbench compare --metric instructions``
must fail every planted pair and pass every identical one (run i against run i+1 at scale 1)::

    PYTHONPATH=tests/fake_plugin .venv/bin/python benchmarks/instructions_gate.py gate --pairs 10

Not a unit test: the wall times depend on the machine and on whatever else runs on it (run
``uptime`` beside it and report it); the counts should not.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SNNBENCH = [sys.executable, "-m", "snnbench"]


def run(out: Path, adapters: str, neurons: int, steps: int, env: dict[str, str]) -> float:
    """One ``snnbench run --instructions`` into ``out``; its wall time (s)."""
    start = time.monotonic()
    subprocess.run([*SNNBENCH, "run", "--adapters", adapters, "--neurons", str(neurons),
                    "--steps", str(steps), "--batch-size", "4", "--device", "cpu",
                    "--threads", "1", "--repeats", "5", "--instructions", "--out", str(out)],
                   env={**os.environ, **env}, check=True, capture_output=True, text=True)
    return time.monotonic() - start


def counts(folder: Path) -> dict[str, Any]:
    """adapter → {phase: instructions per call, "wall_s": ..., "skipped": ...}."""
    out: dict[str, Any] = {}
    for path in sorted((folder / "cases").glob("*.json")):
        record = json.loads(path.read_text())
        info = record.get("measurement", {}).get("instructions", {})
        entry: dict[str, Any] = {"wall_s": info.get("wall_s"), "skipped": info.get("skipped"),
                                 "status": record["status"]}
        for phase, metrics in record.get("samples", {}).items():
            if "instructions" in metrics:
                entry[phase] = metrics["instructions"][0]
        out[record["adapter"]] = entry
    return out


def spread(args: argparse.Namespace) -> dict[str, Any]:
    seen: dict[str, dict[str, list[float]]] = {}
    walls: list[float] = []
    for i in range(args.runs):
        walls.append(run(args.out / f"spread-{i}", args.adapters, args.neurons, args.steps, {}))
        for adapter, entry in counts(args.out / f"spread-{i}").items():
            for key, value in entry.items():
                if isinstance(value, float | int):
                    seen.setdefault(adapter, {}).setdefault(key, []).append(float(value))
            if entry.get("skipped"):
                seen.setdefault(adapter, {})["skipped: " + entry["skipped"]] = []
    report: dict[str, Any] = {"run_wall_s": walls}
    for adapter, phases in seen.items():
        for key, values in phases.items():
            if key == "wall_s" or not values:
                report[f"{adapter} {key}"] = values
                continue
            values.sort()
            mid = values[len(values) // 2]
            report[f"{adapter} {key}"] = {"median": mid, "values": values,
                                          "rel_spread": (values[-1] - values[0]) / mid}
    return report


def compare(baseline: Path, candidate: Path) -> int:
    done = subprocess.run([*SNNBENCH, "compare", str(baseline), str(candidate), "--metric",
                           "instructions"], capture_output=True, text=True, check=False)
    return done.returncode


def gate(args: argparse.Namespace) -> dict[str, Any]:
    plain = [args.out / f"a-{i}" for i in range(args.pairs + 1)]
    planted = [args.out / f"b-{i}" for i in range(args.pairs)]
    for i in range(args.pairs + 1):
        run(plain[i], "fake-torch-work", args.neurons, args.steps,
            {"SNNBENCH_FAKE_WORK_SCALE": "1"})
        if i < args.pairs:
            run(planted[i], "fake-torch-work", args.neurons, args.steps,
                {"SNNBENCH_FAKE_WORK_SCALE": "1.05"})
    planted_codes = [compare(plain[i], planted[i]) for i in range(args.pairs)]
    identical_codes = [compare(plain[i], plain[i + 1]) for i in range(args.pairs)]
    ratios = []
    for i in range(args.pairs):
        a, b = counts(plain[i])["fake-torch-work"], counts(planted[i])["fake-torch-work"]
        ratios.append({p: b[p] / a[p] for p in ("forward", "backward", "step")})
    return {"planted_exit_codes": planted_codes, "identical_exit_codes": identical_codes,
            "planted_ratios": ratios,
            "planted_failed": sum(c == 1 for c in planted_codes),
            "identical_passed": sum(c == 0 for c in identical_codes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=("spread", "gate"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--adapters", default="torch,fused")
    parser.add_argument("--neurons", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report = spread(args) if args.what == "spread" else gate(args)
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()

"""How noisy is ``snnbench compare`` on this machine? Identical runs, compared pairwise.

Runs the same ``snnbench run`` command 2 × PAIRS times (skipping runs already finished in
FOLDER), compares run 2i with run 2i+1 in both directions, and prints:

- the false-positive rate: the share of comparisons that exit 1 although nothing changed, with
  the floors given (default: snnbench's per-device defaults) and with no floor at all;
- per device, the largest median-time difference among pairs that passed the factor and were
  significant (what a time floor must exceed), and the largest peak-memory difference;
- floors to use here: 1.5 × those largest differences (the rule snnbench's defaults follow).

    python scripts/compare_noise.py results/noise --pairs 10
    python scripts/compare_noise.py results/noise --pairs 10 -- --config ci-smoke \\
        --adapters torch,fused,haiku --neurons 64,128,256 --steps 50 --batch-size 4

Everything after ``--`` is passed to ``snnbench run`` (default: the command above, from
issue 11). Use the suggested floors with ``snnbench compare --time-floor-ms/--mem-floor-mib``.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from snnbench.gate.compare import Comparison, compare

DEFAULT_RUN = ["--config", "ci-smoke", "--adapters", "torch,fused,haiku",
               "--neurons", "64,128,256", "--steps", "50", "--batch-size", "4"]
MARGIN = 1.5


def _finished(run: Path) -> bool:
    try:
        return bool(json.loads((run / "manifest.json").read_text()).get("finished_utc"))
    except (OSError, ValueError):
        return False


def run_all(folder: Path, pairs: int, run_args: list[str]) -> list[Path]:
    """The 2 × ``pairs`` run folders, running the ones not finished yet."""
    runs = [folder / f"run-{i:02d}" for i in range(2 * pairs)]
    for index, run in enumerate(runs):
        if _finished(run):
            continue
        if run.exists():
            sys.exit(f"{run} exists but did not finish: remove it or finish it with --resume")
        print(f"[{index + 1}/{len(runs)}] snnbench run ... --out {run}", file=sys.stderr,
              flush=True)
        proc = subprocess.run([sys.executable, "-m", "snnbench", "run", *run_args,
                               "--out", str(run)], capture_output=True, text=True, check=False)
        if proc.returncode not in (0, 1):
            sys.exit(f"snnbench run failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return runs


def comparisons(runs: list[Path], **rule: float) -> list[Comparison]:
    """Run 2i against 2i+1 and back, for every pair."""
    out = []
    for a, b in zip(runs[::2], runs[1::2], strict=True):
        out += [compare(a, b, **rule), compare(b, a, **rule)]
    return out


def analyse(runs: list[Path], factor: float) -> dict[str, object]:
    """False-positive rates and the largest identical-run differences, per device."""
    with_defaults = comparisons(runs, factor=factor)
    # process_spread 0: judge the one-process intervals as they are (the gate itself holds a
    # one-process verdict back), to find the differences the floors must cover
    raw = comparisons(runs, factor=factor, time_floor_s=0.0, mem_floor_bytes=0.0,
                      process_spread=0.0)
    time_max: dict[str, float] = defaultdict(float)
    mem_max: dict[str, float] = defaultdict(float)
    for cmp in raw:
        for p in cmp.pairs:
            device = str(p.case["device"])
            diff = abs(p.candidate - p.baseline)
            if not math.isfinite(diff):
                continue
            if p.metric == "time_s" and p.mark in ("regression", "improved"):
                time_max[device] = max(time_max[device], diff)
            elif p.metric == "peak_mem_bytes" and p.mark in ("regression", "improved", "same"):
                mem_max[device] = max(mem_max[device], diff)
    flagged = sum(c.exit_code == 1 for c in with_defaults)
    flagged_raw = sum(c.exit_code == 1 for c in raw)
    return {
        "comparisons": len(raw),
        "false_positives_with_floors": flagged,
        "false_positives_without_floors": flagged_raw,
        "largest_time_difference_s": dict(time_max),
        "largest_memory_difference_bytes": dict(mem_max),
        "suggested_time_floor_ms": {d: round(MARGIN * v * 1e3, 3) for d, v in time_max.items()},
        "suggested_mem_floor_mib": {d: round(MARGIN * v / 2**20, 2) for d, v in mem_max.items()},
        "regressions_with_floors": [
            f"{p.label} {p.case_text} {p.phase}/{p.metric} ×{p.ratio:.2f}"
            for c in with_defaults for p in c.regressions
        ],
    }


def main() -> None:
    """Parse arguments, run what is missing, print the analysis as JSON."""
    argv = sys.argv[1:]
    run_args = DEFAULT_RUN
    if "--" in argv:
        cut = argv.index("--")
        argv, run_args = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where the run folders go (run-00, run-01...)")
    parser.add_argument("--pairs", type=int, default=10, help="pairs of identical runs")
    parser.add_argument("--factor", type=float, default=1.10, help="compare's --factor")
    args = parser.parse_args(argv)
    runs = run_all(args.folder, args.pairs, run_args)
    print(json.dumps(analyse(runs, args.factor), indent=2))


if __name__ == "__main__":
    main()

"""Issue 14's goal: the default sweep's fused/best-other ratio, quiet and under load.

Runs ``snnbench run --config default`` (by default on a subset of adapters, to keep it short)
once per (load, thread wait policy), the load being nothing or one busy process
(``python -c "while True: pass"``) pinned to the last core, and prints per n the fused step
time, the best other adapter's (floor excluded), their ratio, and the run's noise verdict::

    .venv/bin/python benchmarks/loaded_sweep.py --out /tmp/loaded
    .venv/bin/python benchmarks/loaded_sweep.py --adapters all --waits passive

Not a unit test: the figures depend on the machine and what else runs on it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd


def busy_process(cpu: int) -> subprocess.Popen[bytes]:
    """One Python busy loop pinned to ``cpu``."""
    code = f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    return subprocess.Popen([sys.executable, "-c", code])


def ratios(run: Path) -> list[dict[str, object]]:
    """Per n: fused step median, the best other adapter and its median, the ratio."""
    summary = pd.read_csv(run / "summary.csv", keep_default_na=False, na_values=["nan"])
    step = summary[(summary["phase"] == "step") & (summary["metric"] == "time_s")
                   & (summary["status"] == "ok")]
    rows = []
    for n, group in step.groupby("neurons"):
        fused = group[group["adapter"] == "fused"]
        others = group[~group["adapter"].isin(["fused", "floor"])]
        if fused.empty or others.empty:
            continue
        best = others.loc[others["median"].idxmin()]
        label = best["adapter"] + ("" if best["variant"] == "default" else f":{best['variant']}")
        f_med, o_med = float(fused["median"].min()), float(best["median"])
        rows.append({"n": int(n), "fused_ms": f_med * 1e3, "best": label,
                     "best_ms": o_med * 1e3, "ratio": f_med / o_med,
                     "busy_cores": float(fused["busy_cores"].max())})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapters", default="fused,floor,torch,haiku,spyx")
    parser.add_argument("--loads", default="quiet,busy")
    parser.add_argument("--waits", default="library,passive")
    parser.add_argument("--out", default="/tmp/loaded-sweep")
    parser.add_argument("--extra", default="", help="more snnbench run flags")
    args = parser.parse_args()
    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    cpus = sorted(os.sched_getaffinity(0))
    report = []
    for load in args.loads.split(","):
        for wait in args.waits.split(","):
            folder = root / f"{load}-{wait}"
            busy = busy_process(cpus[-1]) if load == "busy" else None
            try:
                if busy is not None:
                    time.sleep(0.5)
                before = os.getloadavg()
                command = [sys.executable, "-m", "snnbench", "run", "--config", "default",
                           "--adapters", args.adapters, "--thread-wait", wait,
                           "--out", str(folder), *args.extra.split()]
                proc = subprocess.run(command, capture_output=True, text=True)
                after = os.getloadavg()
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
            noisy = [ln for ln in proc.stderr.splitlines() if ln.startswith("noisy run")]
            entry = {"load": load, "wait": wait, "exit": proc.returncode,
                     "loadavg_before": before, "loadavg_after": after,
                     "rows": ratios(folder) if (folder / "summary.csv").exists() else [],
                     "noisy": noisy}
            report.append(entry)
            print(f"== {load} / thread_wait={wait}: exit {proc.returncode}, load average "
                  f"{before[0]:.2f} → {after[0]:.2f}", flush=True)
            for row in entry["rows"]:
                print(f"   n={row['n']:5} fused {row['fused_ms']:8.2f} ms  best other "
                      f"{row['best']:10} {row['best_ms']:8.2f} ms  ratio {row['ratio']:.2f}  "
                      f"busy_cores {row['busy_cores']:.2f}", flush=True)
            for line in noisy:
                print(f"   {line}", flush=True)
    (root / "report.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

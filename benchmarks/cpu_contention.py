"""CPU thread behaviour under contention: why oneDNN GEMMs time in ~4–8 ms steps on a busy core.

Issue 14: on the 2-core development machine, with one other process busy, the fused and floor
CPU paths timed in multiples of about 8 ms (fused n=128: 24 ms loaded, 0.6 ms quiet). This
script times the step phase of some adapters at one small case, each configuration in a fresh
process, quiet and with one busy process (``python -c "while True: pass"``) pinned to the last
core, across the OpenMP wait policy, thread count and affinity::

    .venv/bin/python benchmarks/cpu_contention.py                  # every configuration
    .venv/bin/python benchmarks/cpu_contention.py --configs t2,t1 --loads busy --json out.json

Per configuration it prints the median, q1, q3 and min of the step time in ms, the share of
samples above 2× the minimum (the "stepped" ones), and the involuntary context switches per
step (``ru_nivcsw``): a thread pushed off its core by the scheduler. Not a unit test: figures
depend on the machine and on whatever else runs on it (run ``uptime`` first and report it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

#: name → (threads, environment, CPUs the timed process may use: None = all)
CONFIGS: dict[str, tuple[int, dict[str, str], tuple[int, ...] | None]] = {
    # libgomp defaults: OMP_WAIT_POLICY unset = spin ~300k iterations, then sleep on a futex
    "t2": (2, {}, None),
    "t2-active": (2, {"OMP_WAIT_POLICY": "ACTIVE"}, None),
    "t2-passive": (2, {"OMP_WAIT_POLICY": "PASSIVE"}, None),
    "t2-spin0": (2, {"GOMP_SPINCOUNT": "0"}, None),
    # libgomp's default spin is 300k pause instructions; shorter spins test whether the
    # ~8 ms steps are that spin (about 65 cycles per pause on Zen at 2.4 GHz: 8 ms)
    "t2-spin30k": (2, {"GOMP_SPINCOUNT": "30000"}, None),
    "t2-spin3k": (2, {"GOMP_SPINCOUNT": "3000"}, None),
    # KMP_BLOCKTIME only matters for Intel's libiomp; torch's pip wheel uses libgomp (kept to
    # show it changes nothing)
    "t2-kmp0": (2, {"KMP_BLOCKTIME": "0"}, None),
    "t1": (1, {}, None),
    # one thread pinned to the core the busy process does not use
    "t1-pin0": (1, {}, (0,)),
    # two threads squeezed onto the free core: oversubscription without the other process
    "t2-pin0": (2, {}, (0,)),
}


def child(adapter: str, neurons: int, steps: int, batch: int, seconds: float) -> dict[str, Any]:
    """In a fresh process: build the adapter's model and time its step phase."""
    import torch

    from snnbench.registry import get_entry
    from snnbench.workload.linear_lif.spec import NetworkSpec, make_case_data

    threads = int(os.environ.get("OMP_NUM_THREADS", "0")) or os.cpu_count() or 1
    torch.set_num_threads(threads)
    spec = NetworkSpec(neurons=neurons, time_steps=steps, batch_size=batch, reset="zero",
                       surrogate="sigmoid", surrogate_slope=4.0, detach_reset=False)
    impl = get_entry(adapter).create()
    impl.check_variant("default", "cpu")
    model = impl.build(spec, make_case_data(spec), "cpu", "default")
    for _ in range(5):
        model.zero_grad()
        model.step()
    from snnbench.host.preflight import CpuMonitor

    samples: list[float] = []
    monitor = CpuMonitor().start()
    before = resource.getrusage(resource.RUSAGE_SELF)
    cpu0, start = time.process_time(), time.perf_counter()
    while (time.perf_counter() - start) < seconds or len(samples) < 20:
        model.zero_grad()
        t0 = time.perf_counter()
        model.step()
        samples.append(time.perf_counter() - t0)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    others = monitor.stop().others_cores
    model.close()
    q = statistics.quantiles(samples, n=4)
    low = min(samples)
    return {
        "median_ms": statistics.median(samples) * 1e3, "q1_ms": q[0] * 1e3, "q3_ms": q[2] * 1e3,
        "min_ms": low * 1e3, "n": len(samples),
        "stepped": sum(s > 2 * low for s in samples) / len(samples),
        "nivcsw_per_step": (after.ru_nivcsw - before.ru_nivcsw) / len(samples),
        "nvcsw_per_step": (after.ru_nvcsw - before.ru_nvcsw) / len(samples),
        # process CPU time over wall time: 2.0 = both threads always on a core (spinning or
        # working), 1.0 = one core's worth
        "cpu_share": (time.process_time() - cpu0) / wall,
        "threads": torch.get_num_threads(),
        # cores other processes kept busy while this configuration was timed
        "others_cores": others,
    }


def busy_process(cpu: int) -> subprocess.Popen[bytes]:
    """One Python busy loop pinned to ``cpu`` (the issue's 'one busy process')."""
    code = f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    return subprocess.Popen([sys.executable, "-c", code])


def run_config(name: str, adapter: str, args: argparse.Namespace) -> dict[str, Any]:
    threads, extra, cpus = CONFIGS[name]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           **extra}
    for key in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME"):
        if key not in extra:
            env.pop(key, None)
    command = [sys.executable, __file__, "--child", adapter, "--neurons", str(args.neurons),
               "--steps", str(args.steps), "--batch", str(args.batch),
               "--seconds", str(args.seconds)]
    if cpus is not None:
        command = ["taskset", "-c", ",".join(map(str, cpus)), *command]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", default="")
    parser.add_argument("--adapters", default="fused,floor,torch")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--loads", default="quiet,busy")
    parser.add_argument("--neurons", type=int, default=128)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat every configuration this many times, interleaved (keep "
                        "the rounds whose 'others' column is near 0: the quiet ones)")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.neurons, args.steps, args.batch, args.seconds)))
        return 0
    cpus = sorted(os.sched_getaffinity(0))
    results: list[dict[str, Any]] = []
    print(f"load average before: {os.getloadavg()}; CPUs {cpus}; n={args.neurons} "
          f"T={args.steps} B={args.batch}", flush=True)
    print(f"{'load':6} {'adapter':7} {'config':11} {'median':>7} {'q1':>7} {'q3':>7} "
          f"{'min':>7} {'stepped':>7} {'nivcsw':>7} {'cpu':>5} {'others':>6}", flush=True)
    for load in args.loads.split(","):
        busy = busy_process(cpus[-1]) if load == "busy" else None
        try:
            if busy is not None:
                time.sleep(0.5)
            plan = [(a, c) for _ in range(args.rounds) for a in args.adapters.split(",")
                    for c in args.configs.split(",")]
            for adapter, name in plan:
                if True:
                    r = run_config(name, adapter, args)
                    r.update(load=load, adapter=adapter, config=name,
                             loadavg=os.getloadavg()[0])
                    results.append(r)
                    if "error" in r:
                        print(f"{load:6} {adapter:7} {name:11} error: {r['error']}", flush=True)
                        continue
                    print(f"{load:6} {adapter:7} {name:11} {r['median_ms']:7.2f} "
                          f"{r['q1_ms']:7.2f} {r['q3_ms']:7.2f} {r['min_ms']:7.2f} "
                          f"{r['stepped']:7.0%} {r['nivcsw_per_step']:7.2f} "
                          f"{r['cpu_share']:5.2f} {r['others_cores']:6.2f}", flush=True)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
    print(f"load average after: {os.getloadavg()}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

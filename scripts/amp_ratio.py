"""CPU step time under AMP against float32, per adapter, interleaved in one process (issue 24).

For each adapter the float32 (``strict``) model and the AMP model of the same case are built
in one process and their forward+backward steps timed alternately (A B A B ...), so that a
machine whose load drifts (a shared machine) weighs on both alike; the ratio is of medians.
The case is the default sweep's network (B=16, T=100, reset zero, not detached, sigmoid 4).
A sweep (``snnbench run --config default --precision amp-bf16``) gives the same figures with
the harness's full statistics, on a quiet machine.

Run: ``python scripts/amp_ratio.py [--mode amp-bf16] [--neurons 128,512] [--rounds 15]``.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from snnbench.registry import get_entry
from snnbench.workload.linear_lif.spec import NetworkSpec, make_case_data

ADAPTERS = ("torch:default", "snntorch:default", "norse:default", "spikingjelly:torch",
            "sinabs:default", "haiku:fp32", "spyx:fp32", "fused:default", "floor:default")


def _step_time(model: object) -> float:
    start = time.perf_counter()
    model.zero_grad()  # type: ignore[attr-defined]
    model.step()  # type: ignore[attr-defined]
    model.synchronize()  # type: ignore[attr-defined]
    return time.perf_counter() - start


def ratio(
    name: str, variant: str, spec: NetworkSpec, mode: str, rounds: int
) -> tuple[float, float]:
    """(median float32 step s, median AMP step s) of one adapter on ``spec``."""
    adapter = get_entry(name).create()
    amp_spec = spec.replace(matmul_precision=mode)
    models = [adapter.build(s, make_case_data(s), "cpu", variant) for s in (spec, amp_spec)]
    for m in models:  # warm-up: compilation, first-call allocations
        for _ in range(2):
            _step_time(m)
    times: list[list[float]] = [[], []]
    for _ in range(rounds):
        for i, m in enumerate(models):
            times[i].append(_step_time(m))
    for m in models:
        m.close()
    return float(np.median(times[0])), float(np.median(times[1]))


def main(argv: list[str] | None = None) -> int:
    """Print a markdown table: adapter, n, float32 ms, AMP ms, AMP/float32."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="amp-bf16")
    parser.add_argument("--neurons", default="128,512,1024")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--adapters", default=",".join(ADAPTERS))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    base = NetworkSpec(batch_size=16, time_steps=100, reset="zero", detach_reset=False,
                       surrogate="sigmoid", surrogate_slope=4.0)
    print(f"| adapter | n | float32 step ms | {args.mode} step ms | {args.mode}/float32 |")
    print("|---|---|---|---|---|")
    for item in args.adapters.split(","):
        name, _, variant = item.partition(":")
        for n in (int(v) for v in args.neurons.split(",")):
            fp32, amp = ratio(name, variant or "default", base.replace(neurons=n), args.mode,
                              args.rounds)
            print(f"| {item} | {n} | {fp32 * 1e3:.2f} | {amp * 1e3:.2f} | {amp / fp32:.2f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Which code actually runs for each SpikingJelly backend row (issue 18, item 5).

SpikingJelly 2.0 may route multi-step LIF on a GPU through its Triton kernels whatever backend
is asked for (its PR 660). For each variant of our ``spikingjelly`` adapter this builds the model
exactly as a benchmark case does, runs one forward + backward under ``sys.setprofile`` (every
SpikingJelly Python function called) and ``torch.profiler`` (every device kernel launched), and
prints which of them name Triton, the native CUDA operators, CuPy or plain torch.

    python benchmarks/sj_kernels.py --device cuda --neurons 512

One JSON line per variant (``SJ-KERNELS {...}``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
from types import FrameType
from typing import Any

from snnbench.registry import get_entry
from snnbench.workload.linear_lif.spec import NetworkSpec, make_case_data


def classify(names: list[str]) -> list[str]:
    """Which kernel families the function or kernel names show."""
    found = []
    lowered = " ".join(names).lower()
    for kind in ("triton", "cupy"):
        if kind in lowered:
            found.append(kind)
    if "native" in lowered or "sj_cuda" in lowered or "_C." in " ".join(names):
        found.append("cuda")
    return found


def probe(variant: str, device: str, n: int) -> dict[str, Any]:
    """Run one step of the variant's model and record what ran."""
    import torch

    spec = NetworkSpec(neurons=n, batch_size=16, time_steps=50, reset="subtract",
                       detach_reset=False, surrogate="sigmoid", surrogate_slope=4.0)
    adapter = get_entry("spikingjelly").create()
    adapter.check_variant(variant, device)
    model = adapter.build(spec, make_case_data(spec), device, variant)
    model.synchronize()
    calls: collections.Counter[str] = collections.Counter()

    def tracer(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if module.startswith("spikingjelly"):
                calls[f"{module}.{frame.f_code.co_name}"] += 1

    activities = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        sys.setprofile(tracer)
        try:
            model.zero_grad()
            model.backward(model.forward())
            model.synchronize()
        finally:
            sys.setprofile(None)
    kernels = sorted({e.key for e in prof.key_averages()
                      if getattr(e, "device_type", None) is not None
                      and "CUDA" in str(e.device_type)})
    functions = sorted(calls)
    model.close()
    return {"variant": variant, "device": device, "n": n,
            "python_families": classify(functions), "kernel_families": classify(kernels),
            "functions": [f for f in functions if "._ops." in f or "neuron" in f][:80],
            "kernels": kernels[:40]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--neurons", type=int, default=512)
    parser.add_argument("--variants", default="torch,triton,cuda")
    args = parser.parse_args()
    variants = args.variants.split(",")
    if len(variants) > 1:
        # the backend is chosen by an environment variable read when SpikingJelly is imported
        # (the adapter's worker_env): one fresh process per variant, as in a benchmark run
        for variant in variants:
            env = {**os.environ, **get_entry("spikingjelly").create().worker_env(variant)}
            subprocess.run([sys.executable, __file__, "--device", args.device, "--neurons",
                            str(args.neurons), "--variants", variant], env=env, check=False)
        return
    for variant in variants:
        try:
            row = probe(variant, args.device, args.neurons)
        except Exception as exc:  # each variant is reported, even when another fails
            row = {"variant": variant, "error": f"{type(exc).__name__}: {exc}"}
        print("SJ-KERNELS " + json.dumps(row), flush=True)
        print(f"{variant}: python {row.get('python_families')} kernels "
              f"{row.get('kernel_families')} {row.get('error', '')}", flush=True)


if __name__ == "__main__":
    main()

"""The GPU measurement goals of issue 18, from one process per adapter and size.

For each (adapter, n) it builds the model once, warms it up, then takes interleaved step samples
with the ``cuda-event`` timer and the host timer (``perf_counter`` after a synchronize), and
prints median, IQR/median and the ratio of the two timers' medians. The null adapter's step is
printed beside the fused step at the same n (the harness-overhead goal).

    python benchmarks/gpu_timers.py --device cuda --cases fused:512,torch:512,null:512,fused:4096

One JSON line per case on stdout (``GPU-TIMERS {...}``), a table at the end.
"""

from __future__ import annotations

import argparse
import json
import time

from snnbench.measure.timing import make_timer, time_block
from snnbench.registry import get_entry
from snnbench.store.stats import summarize
from snnbench.workload.linear_lif.spec import NetworkSpec, make_case_data


def one_case(adapter: str, n: int, device: str, samples: int, dtype: str) -> dict[str, object]:
    """Interleaved samples of the step phase under both timers."""
    name, _, variant = adapter.partition(":")
    spec = NetworkSpec(neurons=n, batch_size=16, time_steps=500, reset="subtract",
                       detach_reset=False, surrogate="sigmoid", surrogate_slope=4.0,
                       dtype=dtype)  # type: ignore[arg-type]
    instance = get_entry(name).create()
    variant = variant or instance.variants[0]
    instance.check_variant(variant, device)
    model = instance.build(spec, make_case_data(spec), device, variant)
    kinds = ["cuda-event", "host"] if device == "cuda" else ["host"]
    timers = {kind: make_timer(kind, model) for kind in kinds}
    start = time.perf_counter()
    while time.perf_counter() - start < 1.0:  # warm-up: ≥ 1 s and ≥ 3 steps
        for _ in range(3):
            time_block(model, "step", timers["host"])
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(samples):
        for kind in kinds:
            times[kind].append(time_block(model, "step", timers[kind]))
    model.close()
    out: dict[str, object] = {"adapter": adapter, "n": n, "dtype": dtype, "samples": samples}
    for kind, values in times.items():
        # the harness' own statistics (quantiles by linear interpolation), as in summary.csv
        summary = summarize(values)
        out[kind] = {"median_ms": summary.median * 1e3, "iqr_over_median": summary.iqr_ratio}
    if len(kinds) == 2:
        event = out["cuda-event"]["median_ms"]  # type: ignore[index]
        host = out["host"]["median_ms"]  # type: ignore[index]
        out["host_over_event"] = host / event
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--cases", default="fused:512,fused::cudagraph:512,torch:512,null:512,"
                                            "fused:4096,torch:4096")
    parser.add_argument("--samples", type=int, default=21)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    rows = []
    for item in args.cases.split(","):
        adapter, _, n = item.rpartition(":")
        adapter = adapter.replace("::", ":")
        try:
            row = one_case(adapter, int(n), args.device, args.samples, args.dtype)
        except Exception as exc:  # one failing case must not hide the others
            row = {"adapter": adapter, "n": int(n), "error": f"{type(exc).__name__}: {exc}"}
        print("GPU-TIMERS " + json.dumps(row), flush=True)
        rows.append(row)
    for row in rows:
        if "error" in row:
            print(f"{row['adapter']:<18} {row['n']:>6}  error: {row['error']}")
            continue
        cells = "  ".join(f"{k} {v['median_ms']:.4f} ms iqr/med {v['iqr_over_median']:.3%}"
                          for k, v in row.items() if isinstance(v, dict))
        ratio = row.get("host_over_event")
        print(f"{row['adapter']:<18} {row['n']:>6}  {cells}"
              + (f"  host/event {ratio:.4f}" if ratio else ""))


if __name__ == "__main__":
    main()

"""How often does summation order flip a spike at threshold under AMP? (issue 24)

Under automatic mixed precision every Linear output is a float32 sum rounded once to 16 bits.
Two GEMMs that add the same products in another order give float32 sums a few ulps apart; that
changes the 16-bit current only when the sum lies next to a rounding boundary, and changes a
spike only when the membrane then lies within that one 16-bit ulp of the threshold. After a
flip the neuron's reset differs, so its later spikes may differ too.

This script measures it on the canonical network (the default sweep's shapes and settings) by
computing the first layer's currents in three summation orders:

* ``numpy``: NumPy's float32 GEMM (OpenBLAS), what :mod:`snnbench.workload.linear_lif.reference`
  uses;
* ``torch``: ``F.linear`` under ``torch.autocast`` on the CPU (oneDNN), what the torch adapters
  compute;
* ``exact``: the float64 sum, rounded to float32 and then to 16 bits (the correctly rounded
  value, an order-free baseline);
* ``two-roundings``: not an order but a different network, for scale: the product rounded to
  16 bits and the bias then added in 16 bits, what a ``jmp``/``hk.mixed_precision`` policy,
  ``nnx.Linear(dtype=bfloat16)`` and ``F.linear`` under autocast on a non-contiguous 3-D input
  compute (snnbench's adapters avoid it);

and running the same float32 LIF (the reference's) on each. Reported per mode and n, summed over
seeds and both reset modes: the fraction of currents whose 16-bit value differs from NumPy's,
the fraction of neurons whose spike train differs anywhere (a flip at threshold, and its
consequences), and the fraction of spikes that differ. The same figures for ``strict`` (float32
currents, no 16-bit rounding) show the baseline that the 0.999 float32 bar already covers.

Run: ``python scripts/amp_flips.py`` (about a minute on 2 cores); ``--quick`` for a smoke run.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np

from snnbench.workload.linear_lif.reference import _lif_forward, linear_currents, round_to_dtype
from snnbench.workload.linear_lif.spec import NetworkSpec, make_case_data

ORDERS: tuple[str, ...] = ("torch", "exact", "two-roundings")


@dataclass
class Flips:
    """Counts for one (mode, n, order) against NumPy's order."""

    currents: int = 0
    current_diff: int = 0
    neurons: int = 0
    neuron_diff: int = 0
    spikes: int = 0
    spike_diff: int = 0

    def add(self, ref_x: np.ndarray, x: np.ndarray, ref_s: np.ndarray, s: np.ndarray) -> None:
        """Accumulate one case: currents (T, B, n) and spikes (T, B, n) of both orders."""
        self.currents += ref_x.size
        self.current_diff += int((ref_x != x).sum())
        differ = ref_s != s
        self.neurons += differ[0].size
        self.neuron_diff += int(differ.any(axis=0).sum())
        self.spikes += differ.size
        self.spike_diff += int(differ.sum())


def currents(order: str, inputs: np.ndarray, w: np.ndarray, b: np.ndarray,
             amp: str | None) -> np.ndarray:
    """The first layer's currents (T, B, n) in the given summation order."""
    if order == "numpy":
        return linear_currents(inputs, w, b, amp)
    rounded = [a if amp is None else round_to_dtype(a, amp) for a in (inputs, w, b)]
    if order == "two-roundings":
        if amp is None:
            return linear_currents(inputs, w, b, None)
        dot = round_to_dtype((rounded[0] @ rounded[1].T).astype(np.float32), amp)
        return round_to_dtype((dot + rounded[2]).astype(np.float32), amp)
    if order == "exact":
        h, wc, bc = (a.astype(np.float64) for a in rounded)
        out = (h @ wc.T + bc).astype(np.float32)
        return out if amp is None else round_to_dtype(out, amp)
    import torch

    t = [torch.from_numpy(np.ascontiguousarray(a)) for a in (inputs, w, b)]
    rows = t[0].reshape(-1, w.shape[1])
    if amp is None:
        y = torch.nn.functional.linear(rows, t[1], t[2])
    else:
        dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}[amp]
        with torch.autocast("cpu", dtype=dtype):
            y = torch.nn.functional.linear(rows, t[1], t[2])
    return y.float().numpy().reshape(inputs.shape[0], inputs.shape[1], -1)


def measure(
    neurons: tuple[int, ...], seeds: int, base: NetworkSpec
) -> dict[tuple[str, int, str], Flips]:
    """Flips for every precision mode, n and order, over ``seeds`` seeds and both resets."""
    out: dict[tuple[str, int, str], Flips] = {}
    for mode in ("strict", "amp-bf16", "amp-fp16"):
        for n in neurons:
            for seed in range(seeds):
                for reset in ("subtract", "zero"):
                    spec = base.replace(neurons=n, seed=seed, reset=reset, matmul_precision=mode)
                    data = make_case_data(spec)
                    args = (data.inputs, data.weights[0], data.biases[0], spec.amp_dtype)
                    ref_x = currents("numpy", *args)
                    ref_s, _ = _lif_forward(ref_x, spec)
                    for order in ORDERS:
                        x = currents(order, *args)
                        s, _ = _lif_forward(x, spec)
                        out.setdefault((mode, n, order), Flips()).add(ref_x, x, ref_s, s)
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the table (markdown) of :func:`measure` on the default sweep's shapes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small case (a smoke run)")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)
    # the default sweep's network (B=16, T=100, sigmoid slope 4, not detached)
    base = NetworkSpec(batch_size=16, time_steps=100, detach_reset=False, surrogate="sigmoid",
                       surrogate_slope=4.0)
    neurons = (64,) if args.quick else (128, 512, 1024)
    seeds = 1 if args.quick else args.seeds
    if args.quick:
        base = base.replace(batch_size=4, time_steps=20)
    results = measure(neurons, seeds, base)
    print(f"B={base.batch_size} T={base.time_steps}, {seeds} seed(s) x 2 resets; "
          "differences against NumPy's summation order")
    print("| mode | n | other order | currents differing | neurons whose train differs "
          "| spikes differing (of all) |")
    print("|---|---|---|---|---|---|")
    for (mode, n, order), f in results.items():
        if order == "two-roundings" and mode == "strict":
            continue
        print(f"| {mode} | {n} | {order} | {f.current_diff / f.currents:.3%} "
              f"| {f.neuron_diff} of {f.neurons} | {f.spike_diff} of {f.spikes} "
              f"({f.spike_diff / f.spikes:.1e}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

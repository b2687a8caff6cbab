"""A sweep's bookkeeping (records written, tables built) against its size (issue 34, item 6).

Writes a synthetic sweep of N cases through the run folder's real storage path, no training:
each case's record as the sweep stores it (``RunFolder.add_case``, the tables rebuilt as the
records double) and the tables rebuilt once at the end (``rebuild_tables``, as ``run`` does).
"Before" is the old path: every case's record followed by a full ``rebuild_tables``::

    .venv/bin/python benchmarks/bookkeeping.py                 # 100 and 1000 cases
    .venv/bin/python benchmarks/bookkeeping.py --cases 100,1000 --before-limit 1000

The old path reads every record after every case, so it grows with the square of the cases:
beyond ``--before-limit`` cases (default 200; 1000 takes over an hour on a busy 2-core machine)
its total is estimated from rebuilds timed at ten sizes up to N (interpolated to every size
1..N and summed) and printed as such. Linear: 1000 cases take about 10× the time of 100.

Not a unit test: the times depend on the machine and on whatever else runs on it (the load,
``os.getloadavg``, is printed before and after); the records the rebuilds read do not.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from snnbench.records.contract import CaseRecord
from snnbench.store.rundir import RunFolder
from snnbench.workload.linear_lif.spec import NetworkSpec

ADAPTERS = ("torch", "fused", "norse", "snntorch")
RUN_ID = "bookkeeping"


def record(index: int, repeats: int) -> CaseRecord:
    """One ok case as a worker reports it: forward, backward and step times and memory."""
    rng = random.Random(index)
    spec = NetworkSpec(neurons=8 + index // len(ADAPTERS), batch_size=2, time_steps=5)
    samples = {phase: {"time_s": [rng.gauss(1e-3, 1e-5) for _ in range(repeats)],
                       "peak_mem_bytes": [4e6]}
               for phase in ("forward", "backward", "step")}
    return CaseRecord.from_dict({
        "adapter": ADAPTERS[index % len(ADAPTERS)], "variant": "default", "device": "cpu",
        "spec": spec.to_dict(), "status": "ok", "library": "synthetic",
        "library_version": "1", "order": index, "samples": samples,
        "finished_utc": f"2026-01-01T00:00:00.{index:06d}Z"})


#: records read by the rebuilds so far: the work the load does not change
READ = [0]
_case_records = RunFolder.case_records


def _counted(self: RunFolder) -> list[CaseRecord]:
    records = _case_records(self)
    READ[0] += len(records)
    return records


RunFolder.case_records = _counted  # type: ignore[method-assign]


def new_folder(root: Path, name: str) -> RunFolder:
    folder = RunFolder.create(root / name)
    folder.write_manifest({"run_id": RUN_ID})
    return folder


def after(records: list[CaseRecord], root: Path) -> float:
    """Seconds for the sweep's path: each record as it finishes, the tables at the end."""
    folder = new_folder(root, "after")
    start = time.perf_counter()
    folder.begin_cases()
    for rec in records:
        folder.add_case(rec, RUN_ID)
    folder.rebuild_tables(RUN_ID)
    return time.perf_counter() - start


def before(records: list[CaseRecord], root: Path) -> float:
    """Seconds for the old path: each record followed by a full rebuild of the tables."""
    folder = new_folder(root, "before")
    start = time.perf_counter()
    for rec in records:
        folder.write_case(rec)
        folder.rebuild_tables(RUN_ID)
    return time.perf_counter() - start


def before_estimate(records: list[CaseRecord], root: Path) -> tuple[float, list[float]]:
    """The old path's seconds for len(records) cases, estimated: the records written (timed)
    and rebuilds timed at ten sizes, the rebuild of every size 1..N read off the line through
    them (flat below the first). Returns the estimate and the ten timed rebuilds."""
    folder = new_folder(root, "estimate")
    n = len(records)
    sizes = sorted({max(1, round(n * i / 10)) for i in range(1, 11)})
    written = 0.0
    timed: list[tuple[int, float]] = []
    done = 0
    for size in sizes:
        start = time.perf_counter()
        for rec in records[done:size]:
            folder.write_case(rec)
        written += time.perf_counter() - start
        done = size
        start = time.perf_counter()
        folder.rebuild_tables(RUN_ID)
        timed.append((size, time.perf_counter() - start))
    every = np.interp(np.arange(1, n + 1), [k for k, _ in timed], [s for _, s in timed])
    return written + float(every.sum()), [s for _, s in timed]


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="100,1000", help="sweep sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=20, help="timed samples per phase")
    parser.add_argument("--before-limit", type=int, default=200,
                        help="largest sweep the old path is run in full (else estimated)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.cases.split(",")]
    print(f"load average before: {load()}")
    results: dict[int, tuple[float, float, bool]] = {}
    for n in sizes:
        records = [record(i, args.repeats) for i in range(n)]
        with tempfile.TemporaryDirectory(prefix="bookkeeping-") as tmp:
            root = Path(tmp)
            READ[0] = 0
            now = after(records, root)
            read_after = READ[0]
            if n <= args.before_limit:
                READ[0] = 0
                old, estimated = before(records, root), False
                read_before = READ[0]
            else:
                old, rebuilds = before_estimate(records, root)
                estimated = True
                read_before = n * (n + 1) // 2  # one rebuild of k records after case k
                print(f"  n={n}: one rebuild at {n // 10}, {2 * n // 10}... {n} records: "
                      + ", ".join(f"{s:.2f}" for s in rebuilds) + " s")
        results[n] = (old, now, estimated)
        print(f"{n:5d} cases: before {old:8.1f} s{' (estimated)' if estimated else ''}   "
              f"after {now:7.2f} s   ({now / n * 1e3:.1f} ms a case); records read by the "
              f"rebuilds: before {read_before}, after {read_after}", flush=True)
    if len(sizes) >= 2:
        small, large = sizes[0], sizes[-1]
        print(f"after: {large} cases take {results[large][1] / results[small][1]:.1f}× the "
              f"time of {small} (linear: {large / small:.0f}×); before: "
              f"{results[large][0] / results[small][0]:.1f}×")
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()

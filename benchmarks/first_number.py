"""Seconds from starting ``snnbench run`` to the first numbers it prints (issue 36: a new user
reaches a first real number within 15 s on the default config).

    .venv/bin/python benchmarks/first_number.py                 # the default config
    .venv/bin/python benchmarks/first_number.py --numbers 3 -- --adapters torch,fused

Starts ``snnbench run`` (the default config, or the options after ``--``) into a new folder
under a temporary directory, timestamps every line it writes to stderr, and stops it (SIGTERM:
finished cases are kept, workers are stopped) once ``--numbers`` case lines with a step time
have appeared. Prints the lines with their times, then the times of the first numbers. Not a
unit test: figures depend on the machine and what else runs on it (``uptime`` is printed).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: a per-case line with a number: ``  torch n=128 ...: step 6.41 ms ±2%``
NUMBER = re.compile(r": step [\d.]+ \S+ ±")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--numbers", type=int, default=2,
                        help="stop after this many case lines with a number (default 2)")
    parser.add_argument("--timeout", type=float, default=600.0, help="give up after (s)")
    parser.add_argument("run_args", nargs="*", help="options for snnbench run (after --)")
    args = parser.parse_args(argv)
    snnbench = Path(sys.executable).parent / "snnbench"
    print(f"uptime: {os.getloadavg()[0]:.2f} load (1 min) on {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="first-number-") as tmp:
        start = time.monotonic()
        proc = subprocess.Popen([str(snnbench), "run", "--out", str(Path(tmp) / "run"),
                                 *args.run_args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "COLUMNS": "200"})
        found: list[float] = []
        assert proc.stderr is not None
        try:
            for line in proc.stderr:
                took = time.monotonic() - start
                print(f"{took:6.1f} s  {line.rstrip()}", flush=True)
                if NUMBER.search(line):
                    found.append(took)
                if len(found) >= args.numbers or took > args.timeout:
                    break
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    print("first numbers after: " + ", ".join(f"{t:.1f} s" for t in found))
    return 0 if found else 1


if __name__ == "__main__":
    raise SystemExit(main())

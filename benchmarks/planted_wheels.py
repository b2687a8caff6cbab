"""Make a wheelhouse for the gate's maintainer check: one library release three times over,
two identical and one with planted extra work.

    python benchmarks/planted_wheels.py WHEEL OUT_DIR [--factor 2.0]

From ``snntorch-1.0.0-py2.py3-none-any.whl`` it writes ``1.0.0.post1`` (identical),
``1.0.0.post2`` (``snn.Leaky.forward`` busy-waits ``factor - 1`` times as long as the real
call took, so the neuron's forward costs ``factor`` times as much and computes the same
numbers) and ``1.0.0.post3`` (identical). A run then puts them side by side:

    snnbench run --adapters snntorch@1.0.0.post1,snntorch@1.0.0.post2,snntorch@1.0.0.post3 \\
        --wheelhouse OUT_DIR --replicates 3 ...
    snnbench compare RUN --envs snntorch@1.0.0.post1,snntorch@1.0.0.post2   # must fail
    snnbench compare RUN --envs snntorch@1.0.0.post1,snntorch@1.0.0.post3   # must not judge

Only snnTorch's ``_neurons/leaky.py`` is patched; the wheel's RECORD is rewritten by
``wheel pack``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

PLANT = '''    def forward(self, input_, mem=None):
        # planted by snnbench's benchmarks/planted_wheels.py: the same result, FACTOR x the time
        import time as _planted_time

        _start = _planted_time.perf_counter()
        _out = self._planted_forward(input_, mem)
        _took = _planted_time.perf_counter() - _start
        _end = _planted_time.perf_counter() + (FACTOR - 1.0) * _took
        while _planted_time.perf_counter() < _end:
            pass
        return _out

    def _planted_forward(self, input_, mem=None):
'''


def _repack(wheel: Path, out: Path, version: str, factor: float | None) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "wheel", "unpack", str(wheel), "-d", tmp],
                       check=True, capture_output=True)
        (root,) = Path(tmp).iterdir()
        name, old = root.name.rsplit("-", 1)
        info = root / f"{name}-{old}.dist-info"
        meta = info / "METADATA"
        meta.write_text(meta.read_text().replace(f"\nVersion: {old}\n", f"\nVersion: {version}\n",
                                                 1))
        info.rename(root / f"{name}-{version}.dist-info")
        if factor is not None:
            leaky = root / "snntorch" / "_neurons" / "leaky.py"
            text = leaky.read_text()
            head = "    def forward(self, input_, mem=None):\n"
            if text.count(head) != 1:
                raise SystemExit(f"{leaky}: Leaky.forward not found once; cannot plant")
            leaky.write_text(text.replace(head, PLANT.replace("FACTOR", repr(factor))))
        renamed = root.parent / f"{name}-{version}"
        root.rename(renamed)
        subprocess.run([sys.executable, "-m", "wheel", "pack", str(renamed), "-d", str(out)],
                       check=True, capture_output=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--factor", type=float, default=2.0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    base = args.wheel.name.split("-")[1]
    for suffix, factor in (("post1", None), ("post2", args.factor), ("post3", None)):
        _repack(args.wheel, args.out, f"{base}.{suffix}", factor)
    print("\n".join(sorted(p.name for p in args.out.glob("*.whl"))))


if __name__ == "__main__":
    main()

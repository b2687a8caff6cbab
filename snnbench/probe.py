"""``python -m snnbench.probe NAME``: import one adapter's library in a throw-away process.

``snnbench list`` runs one probe per adapter, so a library that crashes, hangs or needs an
import-time workaround (lava-dl's stubs, rockpool's samna) never touches the harness process.
The answer is one JSON line prefixed with :data:`MARKER` on stdout.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from typing import Any

from snnbench.adapter import AdapterUnavailable
from snnbench.host.processes import run_captured
from snnbench.plugin import Adapter
from snnbench.registry import get_entry

MARKER = "SNNBENCH-PROBE "


def probe(name: str) -> dict[str, Any]:
    """Version or unavailability reason of adapter ``name``, with its capabilities."""
    result: dict[str, Any] = {"name": name, "available": False, "version": None, "reason": ""}
    try:
        adapter = get_entry(name).create()
        result["variants"] = list(adapter.variants)
        result["library"] = adapter.library
        result["framework"] = adapter.framework
        result["description"] = adapter.description
        result["capabilities"] = {
            v: adapter.capabilities(v).to_dict() for v in adapter.variants
        }
        result["version"] = adapter.version()
        unusable = _variants_unusable_here(adapter)
        result["variants_unavailable"] = unusable
        if unusable and set(unusable) == set(adapter.variants):
            reasons = list(dict.fromkeys(unusable.values()))
            result["reason"] = "; ".join(reasons)
        else:
            result["available"] = True
    except AdapterUnavailable as exc:
        result["reason"] = str(exc)
    except Exception as exc:  # a probe reports every failure as a reason
        result["reason"] = f"{type(exc).__name__}: {exc}"
    return result


def _variants_unusable_here(adapter: Adapter) -> dict[str, str]:
    """Variants that cannot run on this machine at all, with the reason.

    A variant that runs on the CPU can always run; a CUDA-only one (``torch-cudagraph``,
    ``fused:cudagraph``, SpikingJelly's CUDA backends) is asked whether it could run on CUDA
    here, so that ``list`` never calls "available" what a CPU-only torch cannot run.
    """
    unusable: dict[str, str] = {}
    for variant in adapter.variants:
        devices = adapter.capabilities(variant).devices
        if "cpu" in devices:
            continue
        try:
            adapter.check_variant(variant, "cuda")
        except AdapterUnavailable as exc:
            where = "CUDA" if tuple(devices) == ("cuda",) else ", ".join(devices)
            unusable[variant] = f"{where} only: {exc}"
    return unusable


def run_probe(name: str, timeout_s: float, python: str = "") -> tuple[dict[str, Any], bool]:
    """The probe's answer for adapter ``name`` from a process of its own (under ``python``,
    default this interpreter), and whether the probe gave it (True) or it hung or crashed
    (False: a passing failure, never cached)."""
    try:
        proc = run_captured([python or sys.executable, "-P", "-m", "snnbench.probe", name],
                            timeout_s)
    except subprocess.TimeoutExpired:
        return {"name": name, "available": False,
                "reason": f"import hung > {timeout_s:g} s"}, False
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARKER):
            result: dict[str, Any] = json.loads(line[len(MARKER):])
            return result, True
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"name": name, "available": False,
            "reason": f"probe crashed (exit {proc.returncode}): {tail}"}, False


def main() -> int:
    """Print the probe result of ``sys.argv[1]``."""
    # a plugin that prints at import or in version(): its text goes to stderr, the answer
    # alone to stdout
    with contextlib.redirect_stdout(sys.stderr):
        result = probe(sys.argv[1])
    print(MARKER + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

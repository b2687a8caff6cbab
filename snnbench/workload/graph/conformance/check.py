"""``snnbench nir-check``: every library's own importer, each in a process of its own with a
timeout, run on the graph's input and classified against snnbench's reference.

The graph is read and checked first (:meth:`NirGraph.from_file`: every defect one line, before
any importer runs); the reference is the workload's (:meth:`NirGraph.reference`) at the user's
dt, reset and discretisation. An importer's process cannot install anything (:mod:`.guard`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

import numpy as np

from snnbench.workload.graph.conformance.guard import NO_INSTALL_ENV
from snnbench.workload.graph.conformance.importers import IMPORTERS, Importer
from snnbench.workload.graph.conformance.probes import classify
from snnbench.workload.graph.conformance.result import (
    UNAVAILABLE,
    UNSUPPORTED,
    ConformanceReport,
    LibraryCheck,
)
from snnbench.workload.graph.load import GraphError
from snnbench.workload.graph.workload import GraphData, NirGraph

#: seconds one importer's process may take (import, build and run)
DEFAULT_TIMEOUT = 300.0
#: what the check runs at unless told: a graph from nir ≥ 1.0.6 means a reset to v_reset
DEFAULTS = {"time_steps": 100, "batch_size": 4, "seed": 0, "input_std": 1.0,
            "reset": "zero", "discretisation": "euler"}


def installed_version(dist: str) -> str | None:
    """The installed version of ``dist``, or None."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def parse_libraries(text: str | None) -> tuple[str, ...]:
    """``--libraries``: comma-separated names of :data:`IMPORTERS` (None: all)."""
    if text is None:
        return tuple(IMPORTERS)
    names = tuple(dict.fromkeys(n.strip().lower() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in IMPORTERS]
    if unknown or not names:
        raise GraphError(f"--libraries: unknown library {unknown[0] if unknown else text!r} "
                         f"(known: {', '.join(IMPORTERS)})")
    return names


def run_importer(name: str, graph_path: str, inputs: np.ndarray, dt: float,
                 timeout: float, python: str = sys.executable) -> np.ndarray | str:
    """The output of library ``name``'s importer on ``inputs``, run in a process of its own
    that cannot install anything; or, where it raised, crashed or hung, the one-line
    reason."""
    with tempfile.TemporaryDirectory(prefix="snnbench-nir-check-") as tmp:
        folder = Path(tmp)
        np.save(folder / "inputs.npy", inputs)
        env = {**os.environ, **NO_INSTALL_ENV}
        cmd = [python, "-m", "snnbench.workload.graph.conformance.worker", name, graph_path,
               str(folder / "inputs.npy"), str(folder), repr(float(dt))]
        try:
            proc = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=timeout,
                                  check=False)
        except subprocess.TimeoutExpired:
            return f"timed out after {timeout:g} s"
        result_file = folder / "result.json"
        if not result_file.is_file():
            tail = [line for line in proc.stderr.strip().splitlines() if line.strip()]
            last = tail[-1][:160] if tail else "no message"
            return f"its process died (exit status {proc.returncode}): {last}"
        result = json.loads(result_file.read_text())
        if result.get("status") != "ok":
            return str(result.get("reason", "raised"))
        output: np.ndarray = np.load(folder / "output.npy")
        return output


def check_library(name: str, workload: NirGraph, data: GraphData, reference: np.ndarray,
                  timeout: float = DEFAULT_TIMEOUT, python: str = sys.executable
                  ) -> LibraryCheck:
    """One library's :class:`LibraryCheck` of ``workload``."""
    importer: Importer = IMPORTERS[name]
    version = installed_version(importer.dist)
    if version is None:
        return LibraryCheck(importer.library, "", UNAVAILABLE,
                            reason=f"{importer.dist} is not installed", called=importer.called)
    start = time.monotonic()
    got = run_importer(name, workload.graph, data.inputs, workload.dt, timeout, python)
    if isinstance(got, str):
        return LibraryCheck(importer.library, version, UNSUPPORTED, reason=got,
                            called=importer.called, seconds=time.monotonic() - start)
    verdict = classify(data.graph, data.inputs, got, workload.dynamics, reference,
                       data.params)
    return LibraryCheck(importer.library, version, verdict.verdict,
                        findings=verdict.findings, called=importer.called,
                        agreement=verdict.agreement, output_mean=float(np.mean(got)),
                        reference_mean=float(np.mean(reference)),
                        seconds=time.monotonic() - start)


def check_graph(path: str | Path, dt: float | None, libraries: Sequence[str] | None = None,
                timeout: float = DEFAULT_TIMEOUT, python: str = sys.executable,
                progress: Callable[[str], None] | None = None,
                **choices: object) -> ConformanceReport:
    """The conformance of every library in ``libraries`` (None: all) on the graph at
    ``path``; ``choices`` are the workload's (``time_steps``, ``batch_size``, ``seed``,
    ``input_std``, ``reset``, ``discretisation``; :data:`DEFAULTS` otherwise). A bad graph
    or choice raises a one-line :class:`GraphError` before any importer runs."""
    names = tuple(libraries) if libraries is not None else tuple(IMPORTERS)
    unknown = [n for n in names if n not in IMPORTERS]
    if unknown:
        raise GraphError(f"unknown library {unknown[0]!r} (known: {', '.join(IMPORTERS)})")
    if not isinstance(timeout, int | float) or not timeout > 0:
        raise GraphError(f"timeout must be a positive number of seconds, got {timeout!r}")
    workload = NirGraph.from_file(path, dt=dt, **{**DEFAULTS, **choices})
    data = workload.make_data()
    reference = np.asarray(workload.reference(data).output)
    checks = []
    for name in names:
        if progress is not None:
            progress(IMPORTERS[name].library)
        checks.append(check_library(name, workload, data, reference, timeout, python))
    versions = {d: v for d in ("nir", "nirtorch") if (v := installed_version(d))}
    return ConformanceReport(
        graph=workload.graph, network=workload.network, graph_hash=workload.graph_hash,
        dt=workload.dt, time_steps=workload.time_steps, batch_size=workload.batch_size,
        seed=workload.seed, input_std=workload.input_std, reset=workload.reset,
        discretisation=workload.discretisation,
        versions=versions, checks=tuple(checks))

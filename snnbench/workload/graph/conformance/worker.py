"""The process one library's importer runs in:
``python -m snnbench.workload.graph.conformance.worker LIB GRAPH INPUTS OUT_DIR DT``.

It forbids installs (:mod:`.guard`) before anything imports the library, reads the graph
with ``nir``, runs the library's module (:data:`.importers.IMPORTERS`) on the input saved at
INPUTS and writes OUT_DIR/result.json (``{"status": "ok"}`` with OUT_DIR/output.npy, or
``{"status": "raised", "reason": "..."}``). What the library prints goes to stderr.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
import traceback
from pathlib import Path

from snnbench.workload.graph.conformance.guard import forbid_installs


def _reason(exc: BaseException) -> str:
    """``Type: first line of the message``, where the library raised it."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0][:160] if lines else 'no message'}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        where = frames[-1]
        text += f" (in {Path(where.filename).name}:{where.lineno})"
    return text


def main(argv: list[str]) -> int:
    """Run one importer; the exit status is 0 whenever result.json was written."""
    forbid_installs()
    name, graph_path, inputs_path, out_dir, dt_text = argv
    out = Path(out_dir)
    from snnbench.workload.graph.conformance.importers import IMPORTERS

    try:
        import nir
        import numpy as np

        graph = nir.read(graph_path)
        inputs = np.load(inputs_path)
        module = importlib.import_module(
            f"snnbench.workload.graph.conformance.{IMPORTERS[name].module}")
        with contextlib.redirect_stdout(sys.stderr):
            output = module.run(graph, inputs, float(dt_text))
        np.save(out / "output.npy", np.asarray(output, dtype=np.float32))
        result = {"status": "ok"}
    except Exception as exc:  # whatever an importer raises is its result
        traceback.print_exc()
        result = {"status": "raised", "reason": _reason(exc)}
    (out / "result.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

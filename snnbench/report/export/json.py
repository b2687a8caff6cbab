"""``json``: typed JSON, numbers as numbers and units in the field names (a run's schema is
``snnbench/schemas/show.schema.json``); NaN is never written."""

from __future__ import annotations

import json
import math

from snnbench.gate import interval as gate
from snnbench.gate.verdict import MIN_SAMPLES, Comparison
from snnbench.report.export.base import Exporter, RunResult
from snnbench.report.ranking import rank_run
from snnbench.report.tables import typed_rows
from snnbench.report.views import show_json


class Json(Exporter):
    """The whole result as one JSON document."""

    name = "json"
    suffix = "json"

    def run(self, result: RunResult) -> str:
        run = result.run
        doc = show_json(run.run_id, typed_rows(run.summary), rank_run(run))
        return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"

    def comparison(self, result: Comparison) -> str:
        return comparison_json(result) + "\n"


def comparison_json(cmp: Comparison) -> str:
    """The whole comparison as JSON (NaN written as null)."""
    geo = cmp.geomean_ratio()
    doc = {
        "baseline": str(cmp.baseline),
        "candidate": str(cmp.candidate),
        "baseline_run_id": cmp.baseline_run_id,
        "candidate_run_id": cmp.candidate_run_id,
        "environments": list(cmp.environments) if cmp.environments else None,
        "rule": {"factor": cmp.factor, "mem_threshold": cmp.mem_threshold, "alpha": cmp.alpha,
                 "confidence": 1.0 - cmp.alpha,
                 "method": gate.METHOD,
                 "process_spread": cmp.process_spread, "noise_spread": cmp.noise_spread,
                 "resamples": gate.RESAMPLES, "seed": cmp.seed,
                 "time_floor_s": cmp.time_floors, "mem_floor_bytes": cmp.mem_floors,
                 "count_factor": cmp.count_factor,
                 "gated_metrics": (list(cmp.gated_metrics) if cmp.gated_metrics is not None
                                   else None),
                 "min_samples": MIN_SAMPLES},
        "state": cmp.state,
        "exit_code": cmp.exit_code,
        "verdict": cmp.verdict,
        "one_process": cmp.one_process,
        "replicates_needed": cmp.replicates_needed,
        "geomean_time_ratio": geo if math.isfinite(geo) else None,
        "compared_time_pairs": len(cmp.time_pairs()),
        "counts": cmp.counts(),
        "warnings": cmp.warnings,
        "pairs": [p.as_dict() for p in cmp.pairs],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False)

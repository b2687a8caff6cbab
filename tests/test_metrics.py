"""The metrics registry: every metric is one entry; tables and the gate read it."""

from __future__ import annotations

import math

from snnbench.measure.worker import _throughput
from snnbench.records import metrics, schema


def test_samples_per_s_is_the_batch_over_the_median_step_time() -> None:
    # median of (0.1, 0.2, 0.4) is 0.2 s: a batch of 16 gives 80 samples/s
    assert _throughput(16, [0.1, 0.4, 0.2]) == {"samples_per_s": [80.0]}
    assert _throughput(16, []) == {}


def test_the_registry_gives_units_labels_and_gate_rules() -> None:
    assert schema.METRIC_UNITS["samples_per_s"] == "samples/s"
    assert metrics.format_value(1234.5, "samples_per_s") == "1234 samples/s"
    assert metrics.format_value(math.nan, "samples_per_s") == "—"
    assert metrics.metric("samples_per_s").better == "higher"
    assert metrics.metric("time_s").gate_for("step") == "interval"
    assert metrics.metric("time_s").gate_for("setup") == "info"
    assert metrics.metric("peak_mem_bytes").gate_for("step") == "threshold"
    assert metrics.GATED == ("time_s", "peak_mem_bytes", "instructions")


def test_an_unknown_metric_reads_plainly_and_is_never_gated() -> None:
    other = metrics.metric("made_up")
    assert (other.unit, other.label, other.short_label) == ("", "made_up", "made_up")
    assert other.gate_for("step") == "info"
    assert metrics.format_value(0.5, "made_up") == "0.5"

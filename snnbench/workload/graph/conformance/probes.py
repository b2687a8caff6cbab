"""Classifying a library's output against the reference, by probes.

A probe is a :class:`Hypothesis`: the graph run as the reference runs it but for a few
named differences (another time step, ``r`` ignored, another reset or spike rule, a node kind
dropped, the output one step late, features flattened channels-last). :func:`classify` runs
the hypotheses with fewest differences first and takes the first whose output equals the
library's within float32's bars: each difference it reports was found by running it, not
assumed of the library. Where two hypotheses compute the same on a graph (τ ≪ 1 s: the decay
at dt = 1 vanishes, and ``r`` ignored and the input added unscaled coincide), the one tried
first is reported.

The probe's forward (:func:`probe_output`) is the reference's step (:mod:`..reference`) with
those differences as options; with none it computes what the reference does (tested).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from snnbench.workload.graph.compare import MAX_OUTPUT_REL_ERR, MIN_SPIKE_MATCH
from snnbench.workload.graph.conformance.result import DIFFERENT, EXACT, SCALED
from snnbench.workload.graph.nodes import (
    IF,
    LI,
    LIF,
    Array,
    CubaLIF,
    Flatten,
    Graph,
    Node,
    Output,
)
from snnbench.workload.graph.reference import Dynamics, node_forward

#: input gains: ``r`` as given, ``r`` ignored (r = 1), the input added unscaled (g = 1)
GAINS: tuple[str, ...] = ("r", "r=1", "unit")
#: spike rules: v ≥ θ (the reference), v > θ, ⌊v/θ⌋ spikes per step, and a spike from the
#: membrane before the step's input (one step late, as Spyx's neuron does)
RULES: tuple[str, ...] = ("ge", "gt", "count", "late")
#: the least fraction of equal entries among those where either side spikes
MIN_EVENT_MATCH = 0.99
#: hypotheses with up to this many differences are tried
MAX_DIFFERENCES = 4
#: the probes of one library stop after this many seconds (the best so far is reported)
PROBE_SECONDS = 120.0


@dataclass(frozen=True)
class Hypothesis:
    """How a library may run the graph: the reference's choices with some changed."""

    dt: float
    discretisation: str
    gain: str = "r"
    reset: str = "zero"
    rule: str = "ge"
    #: a neuron kind run as the identity (its input passed on: the node dropped)
    dropped: str = ""
    #: the whole output delayed by this many steps
    shift: int = 0
    #: a Flatten of (C, H, W) features merges them channels-last, (H, W, C), as a JAX
    #: library's layout has them
    channels_last: bool = False

    def differences(self, base: Hypothesis) -> list[str]:
        """Each way this differs from ``base``, in words."""
        out = []
        if self.dt == base.dt and self.discretisation != base.discretisation:
            out.append("exact exponential decay, not forward Euler"
                       if self.discretisation == "exponential"
                       else "forward Euler, not the exact decay")
        elif (self.dt, self.discretisation) != (base.dt, base.discretisation):
            out.append(_step_words(self.dt, self.discretisation))
        if self.gain != base.gain:
            out.append({"r": "uses r", "r=1": "r ignored (equal to the reference with r = 1)",
                        "unit": "input added unscaled (r and dt/τ ignored)"}[self.gain])
        if self.reset != base.reset:
            out.append(f"{self.reset} reset" if self.reset == "subtract"
                       else "resets to zero")
        if self.rule != base.rule:
            out.append({"ge": "spikes on v ≥ θ", "gt": "spikes on v > θ, not v ≥ θ",
                        "count": "emits spike counts (⌊v/θ⌋ per step)",
                        "late": "spikes one step late (from the membrane before the "
                                "step's input)"}[self.rule])
        if self.dropped:
            out.append(f"{self.dropped} nodes dropped (the output is their raw input)")
        if self.shift:
            out.append(f"output {self.shift} step late (the reference shifted by "
                       f"{self.shift})")
        if self.channels_last:
            out.append("features flattened channels-last (H, W, C) where the next "
                       "layer's weights expect (C, H, W)")
        return out


def _step_words(dt: float, discretisation: str) -> str:
    if discretisation == "exponential" and dt == 1.0:
        return "τ counted in steps (exact decay at dt = 1)"
    if discretisation == "exponential":
        return f"exact exponential decay at dt = {dt:g} s"
    return f"behaves as dt = {dt:g} s"


# -- the probe's forward ------------------------------------------------------------------------

def _membrane(tau: Array, r: Array, v_leak: Array, hyp: Hypothesis
              ) -> tuple[Array, Array, Array]:
    """(a, g, l) of v ← a·v + g·x + l under ``hyp``."""
    if hyp.discretisation == "euler":
        k = hyp.dt / tau
        # 1 − dt/τ below 0 (a dt beyond τ) is clipped to 0, as an importer that computes a
        # decay factor does; the reference refuses such a dt
        a = np.clip(1.0 - k, 0.0, 1.0)
    else:
        a = np.exp(-hyp.dt / tau)
        k = 1.0 - a
    gain = {"r": k * r, "r=1": k, "unit": np.ones_like(k)}[hyp.gain]
    return a, gain, k * v_leak


def _neuron(node: Node, x: Array, hyp: Hypothesis) -> Array:
    if isinstance(node, IF):
        a = np.ones(node.in_shape)
        g = {"r": hyp.dt * node.r, "r=1": np.full(node.in_shape, hyp.dt),
             "unit": np.ones(node.in_shape)}[hyp.gain]
        leak, theta = np.zeros(node.in_shape), node.v_threshold
    elif isinstance(node, LIF | LI):
        a, g, leak = _membrane(node.tau, node.r, node.v_leak, hyp)
        theta = node.v_threshold if isinstance(node, LIF) else np.zeros(node.in_shape)
    else:
        assert isinstance(node, CubaLIF)
        a, g, leak = _membrane(node.tau_mem, node.r, node.v_leak, hyp)
        syn = _membrane(node.tau_syn, node.w_in, np.zeros(node.in_shape),
                        replace(hyp, gain="r" if hyp.gain == "r=1" else hyp.gain))
        alpha, gamma = syn[0], syn[1]
        theta = node.v_threshold
    v = np.zeros(x.shape[1:])
    cur = np.zeros(x.shape[1:])
    out = np.empty_like(x)
    for t in range(x.shape[0]):
        drive = x[t]
        if isinstance(node, CubaLIF):
            cur = alpha * cur + gamma * x[t]
            drive = cur
        if hyp.rule == "late":
            s = (v >= theta).astype(np.float64)
        v_pre = a * v + (g * drive + leak)
        if isinstance(node, LI):
            out[t] = v = v_pre
            continue
        if hyp.rule == "ge":
            s = (v_pre >= theta).astype(np.float64)
        elif hyp.rule == "gt":
            s = (v_pre > theta).astype(np.float64)
        elif hyp.rule == "count":
            s = np.maximum(np.floor(v_pre / theta), 0.0)
        out[t] = s
        v = v_pre - theta * s if hyp.reset == "subtract" else v_pre * (s == 0)
    return out


class _Cache:
    """Stateless nodes' outputs by (node, input digest): most hypotheses share the layers
    before the first neuron."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, bytes], Array] = {}

    def get(self, name: str, node: Node, x: Array, params: Mapping[str, Array]) -> Array:
        key = (name, hashlib.blake2b(np.ascontiguousarray(x).data, digest_size=16).digest())
        if key not in self.values:
            self.values[key] = node_forward(node, x, params)
        return self.values[key]


def probe_output(graph: Graph, inputs: np.ndarray, hyp: Hypothesis,
                 params: Mapping[str, np.ndarray] | None = None, cache: _Cache | None = None,
                 silent: list[str] | None = None) -> Array:
    """The Output node's value (T, B, *shape) of ``graph`` on ``inputs`` under ``hyp``;
    the spiking nodes that never spiked are appended to ``silent``."""
    cache = cache or _Cache()
    values_of = {k: np.asarray(v, dtype=np.float64)
                 for k, v in (params or graph.parameters()).items()}
    values: dict[str, Array] = {}
    for name, node in graph.nodes:
        if name == graph.input:
            values[name] = np.asarray(inputs, dtype=np.float64)
            continue
        preds = graph.predecessors(name)
        x = values[preds[0]]
        for src in preds[1:]:
            x = x + values[src]
        if isinstance(node, Output) or (node.stateful and node.kind == hyp.dropped):
            values[name] = x
        elif hyp.channels_last and isinstance(node, Flatten) and len(node.in_shape) == 3:
            lead = x.shape[:2]
            values[name] = np.moveaxis(x, 2, -1).reshape(*lead, *node.out_shape)
        elif node.stateful:
            values[name] = _neuron(node, x, hyp)
            if silent is not None and not isinstance(node, LI) and not values[name].any():
                silent.append(name)
        else:
            own = {f: values_of[f"{name}.{f}"] for f in node.trainable}
            values[name] = cache.get(name, node, x, own)
    out = values[graph.output]
    if hyp.shift:
        shifted = np.zeros_like(out)
        shifted[hyp.shift:] = out[:-hyp.shift]
        out = shifted
    return out


# -- matching -----------------------------------------------------------------------------------

def _equal(output: Array, candidate: Array) -> npt.NDArray[np.bool_]:
    """Entry-wise equality within float32's rounding: spikes and counts compare exactly,
    an output that is not spikes (a dropped neuron's raw current) to float32's precision."""
    scale = float(np.abs(candidate).max()) if candidate.size else 0.0
    return np.isclose(output, candidate, rtol=MAX_OUTPUT_REL_ERR,
                      atol=MAX_OUTPUT_REL_ERR * scale * 1e-2)


def agreement(output: Array, candidate: Array, spiking: bool) -> float:
    """Spiking: the fraction of equal entries; a read-out: 1 − its largest error relative
    to the candidate's largest magnitude (clipped at 0)."""
    if spiking:
        return float(_equal(output, candidate).mean())
    scale = float(np.abs(candidate).max()) or 1.0
    return max(0.0, 1.0 - float(np.abs(output - candidate).max()) / scale)


def matches(output: Array, candidate: Array, spiking: bool) -> bool:
    """Within float32's bars (those of :mod:`..compare`); spikes also equal on at least
    :data:`MIN_EVENT_MATCH` of the entries where either side spikes, so that a sparse or
    silent output does not match every sparse candidate."""
    if not spiking:
        return agreement(output, candidate, spiking) >= 1.0 - MAX_OUTPUT_REL_ERR
    if agreement(output, candidate, spiking) < MIN_SPIKE_MATCH:
        return False
    events = int(np.count_nonzero((output != 0) | (candidate != 0)))
    differ = int(np.count_nonzero(~_equal(output, candidate)))
    return events == 0 or differ <= (1.0 - MIN_EVENT_MATCH) * events


def read_out_factor(output: Array, reference: Array) -> float | None:
    """c where a read-out is c × the reference's within the bar (c ≠ 1), else None."""
    norm = float((reference * reference).sum())
    if norm == 0.0:
        return None
    c = float((output * reference).sum()) / norm
    if not math.isfinite(c) or abs(c - 1.0) < 1e-3 or c == 0.0:
        return None
    return c if matches(output, c * reference, spiking=False) else None


@dataclass(frozen=True)
class Classification:
    """The verdict of one output, what was found, and the best agreement seen."""

    verdict: str
    findings: tuple[str, ...]
    agreement: float


def hypotheses(base: Hypothesis, kinds: tuple[str, ...], user_dt: float,
               max_differences: int = MAX_DIFFERENCES) -> Iterator[Hypothesis]:
    """Every hypothesis with 1..``max_differences`` changes from ``base``, fewest first."""
    # τ in steps (Sinabs) before dt = 1 (Spyx's default): for τ ≪ 1 s the two are one step
    steps = [(user_dt, "euler"), (1e-4, "euler"), (1e-3, "euler"), (1.0, "exponential"),
             (1.0, "euler"), (user_dt, "exponential")]
    neuron_kinds = [k for k in ("LIF", "IF", "CubaLIF", "LI") if k in kinds]
    options: dict[str, list[Any]] = {
        "step": [s for s in dict.fromkeys(steps) if s != (base.dt, base.discretisation)],
        "gain": [g for g in GAINS if g != base.gain],
        "reset": [r for r in ("zero", "subtract") if r != base.reset],
        "rule": [r for r in RULES if r != base.rule],
        "dropped": [k for k in neuron_kinds if len(neuron_kinds) > 1 or k != "LI"],
        "shift": [1],
        "channels_last": [True] if "Flatten" in kinds else [],
    }
    dims = [d for d, values in options.items() if values]
    for n in range(1, max_differences + 1):
        for chosen in itertools.combinations(dims, n):
            if "dropped" in chosen and len(neuron_kinds) == 1 and len(chosen) > 1 \
                    and set(chosen) & {"step", "gain", "reset", "rule"}:
                continue  # every neuron dropped: its dynamics make no difference
            for values in itertools.product(*(options[d] for d in chosen)):
                change: dict[str, Any] = dict(zip(chosen, values, strict=True))
                step = change.pop("step", None)
                if step is not None:
                    change["dt"], change["discretisation"] = step
                yield replace(base, **change)


def classify(graph: Graph, inputs: np.ndarray, output: np.ndarray, dyn: Dynamics,
             reference: np.ndarray, params: Mapping[str, np.ndarray] | None = None,
             seconds: float = PROBE_SECONDS) -> Classification:
    """The verdict of a library's ``output`` (T, B, *shape) of ``graph`` on ``inputs``,
    against ``reference`` (the reference's output at ``dyn``)."""
    spiking = graph.spiking_output()
    out = np.asarray(output, dtype=np.float64)
    if out.shape != reference.shape:
        return Classification(DIFFERENT, (f"output shape {tuple(out.shape)}, expected "
                                          f"{tuple(reference.shape)}",), 0.0)
    if not np.all(np.isfinite(out)):
        return Classification(DIFFERENT, ("output holds NaN or inf",), 0.0)
    best = agreement(out, reference, spiking)
    base = Hypothesis(dt=dyn.dt, discretisation=dyn.discretisation, reset=dyn.reset)
    cache = _Cache()
    if matches(out, reference, spiking):
        quiet: list[str] = []
        probe_output(graph, inputs, base, params, cache, quiet)
        return Classification(EXACT, _silence(out, reference, spiking, quiet), best)
    if not spiking:
        factor = read_out_factor(out, reference)
        if factor is not None:
            return Classification(SCALED, (f"read-out = {factor:.6g} × the reference's",),
                                  best)
    counts = _counts(out) if spiking else ()
    start = time.monotonic()
    best_hyp: Hypothesis | None = None
    tried = 0
    for hyp in hypotheses(base, graph.node_kinds(), dyn.dt):
        tried += 1
        quiet = []
        candidate = probe_output(graph, inputs, hyp, params, cache, quiet)
        score = agreement(out, candidate, spiking)
        if matches(out, candidate, spiking):
            found = tuple(hyp.differences(base))
            found += tuple(c for c in counts if hyp.rule != "count")
            found += _silence(out, candidate, spiking, quiet)
            only_step = replace(hyp, dt=base.dt, discretisation=base.discretisation) == base
            return Classification(SCALED if only_step else DIFFERENT, found, score)
        if score > best:
            best, best_hyp = score, hyp
        if time.monotonic() - start > seconds:
            break
    closest = (f"; closest probe: {', '.join(best_hyp.differences(base))}"
               if best_hyp is not None else "")
    return Classification(DIFFERENT, (*counts,
        f"no probe matched ({tried} probes of up to {MAX_DIFFERENCES} differences): "
        f"agreement {best:.1%}{closest}",), best)


def _counts(output: Array) -> tuple[str, ...]:
    """A spiking output of whole numbers ≥ 0 beyond 1: spike counts."""
    top = float(output.max()) if output.size else 0.0
    whole = bool(np.all(output == np.round(output))) and float(output.min(initial=0.0)) >= 0
    if whole and top > 1.0:
        return (f"emits spike counts (up to {top:g} per step)",)
    return ()


def _silence(output: Array, candidate: Array, spiking: bool, quiet: list[str]
             ) -> tuple[str, ...]:
    """A match where nothing (or some layer) spikes shows less than it seems."""
    if spiking and not output.any() and not candidate.any():
        return ("both silent: no output spike, so a weak probe",)
    if quiet:
        return (f"no spike from {', '.join(quiet)} in the matching probe: a weak probe",)
    return ()

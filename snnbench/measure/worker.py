"""Inside one worker process: build one adapter's network, verify it, measure it, report.

Run as ``python -m snnbench.measure.worker JOB.json``. The job names the adapter, variant, spec,
device and settings, and where to write the result JSON. Anything that goes wrong in Python
becomes a status in the result (``unavailable``, ``skipped``, ``mismatch``, ``error``, ``oom``);
what kills the process (a segfault, an abort, a hang) is classified by the parent runner from
the missing result file and the exit status.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from snnbench.adapter import AdapterUnavailable, CaseSkipped
from snnbench.adapter_shim import AnyAdapter, as_v2, implementation
from snnbench.host import lifeline
from snnbench.host.environment import TRACKED_PACKAGES, package_versions
from snnbench.host.gpustate import open_monitor
from snnbench.host.libenv import pin_names
from snnbench.host.preflight import CpuMonitor
from snnbench.measure import callgrind
from snnbench.measure.energy import measure_energy
from snnbench.measure.measurement import MeasurementInfo
from snnbench.measure.memory import MemoryProbe, RssProbe, current_rss_bytes, probe_for
from snnbench.measure.timing import (
    MeasureSettings,
    default_timer_kind,
    make_timer,
    null_region_s,
    sample_phase,
    warm_up,
)
from snnbench.measure.verify import cached_reference, check_adapter
from snnbench.plugin import Adapter, Model
from snnbench.records.contract import (
    DUMP_NOT_WRITTEN,
    RESULT_NOT_WRITTEN_EXIT,
    CaseRecord,
    ContractError,
    Job,
    Samples,
    now_utc,
)
from snnbench.records.fileio import WriteError, atomic_path
from snnbench.records.schema import REFERENCES_DIR
from snnbench.registry import get_entry
from snnbench.workload import Agreement, Workload


def is_oom(exc: BaseException) -> bool:
    """True for out-of-memory errors of any framework (host MemoryError, CUDA OOM, XLA)."""
    if isinstance(exc, MemoryError):
        return True
    text = f"{type(exc).__name__}: {exc}"
    return any(
        marker in text
        for marker in ("OutOfMemoryError", "out of memory", "RESOURCE_EXHAUSTED", "Out of memory")
    )


def apply_framework_settings(framework: str, workload: Workload, threads: int
                             ) -> dict[str, Any]:
    """The same precision, thread and seed settings for every adapter of a framework: those
    the workload asks for (:meth:`~snnbench.workload.Workload.framework_settings`)."""
    wanted = workload.framework_settings()
    applied: dict[str, Any] = {"threads": threads, "matmul_precision": wanted.matmul_precision,
                               # how idle OpenMP threads wait ([run] thread_wait), as set
                               "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")}
    tf32 = wanted.matmul_precision == "tf32"
    if framework == "torch" or "torch" in sys.modules:
        import torch

        # the library's own default, before we set ours: what its users get without snnbench
        applied["torch_default_float32_matmul_precision"] = torch.get_float32_matmul_precision()
        torch.set_num_threads(threads)
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.set_float32_matmul_precision("high" if tf32 else "highest")
        torch.manual_seed(wanted.seed)
        applied["torch_threads"] = torch.get_num_threads()
        applied["torch_tf32"] = tf32
        if wanted.autocast_dtype is not None:
            # float32 everywhere except the Linear layers, which the adapters run under
            # torch.autocast (snnbench.adapters._torch_common.AmpLinear)
            applied["torch_autocast_dtype"] = wanted.autocast_dtype
    if framework == "jax":
        import jax

        # None: XLA's default, which runs float32 matrix products as TF32 on NVIDIA GPUs from
        # Ampere on (JAX's documented default precision); recorded so a row says what users of
        # the library get without snnbench's setting
        default = getattr(jax.config, "jax_default_matmul_precision", None)
        applied["jax_default_matmul_precision"] = default or "default (TF32 on NVIDIA GPUs)"
        jax.config.update(  # type: ignore[no-untyped-call]
            "jax_default_matmul_precision", "tensorfloat32" if tf32 else "highest"
        )
        applied["jax_matmul_precision"] = "tensorfloat32" if tf32 else "highest"
        applied["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    return applied


def device_available(framework: str, device: str) -> str | None:
    """Why ``device`` cannot be used by ``framework`` here, or None."""
    if device == "cpu":
        return None
    if framework == "torch":
        import torch

        if not torch.cuda.is_available():
            return "no CUDA device visible to torch (CPU-only build or no GPU)"
    elif framework == "jax":
        import jax

        if not any(d.platform == "gpu" for d in jax.devices()):
            return "no GPU visible to JAX (CPU-only jaxlib or no GPU)"
    return None


def _check_output(model: Model, workload: Workload, handle: Any) -> None:
    spikes = model.spikes(handle)
    expected = workload.output_shape()
    if tuple(spikes.shape) != expected:
        raise ValueError(f"adapter returned spikes of shape {tuple(spikes.shape)}, "
                         f"expected {expected} (T, B, {'n' if len(expected) == 3 else '...'})")
    if not np.all(np.isfinite(spikes)):
        raise ValueError("adapter returned NaN or inf spikes")


class Laps:
    """Wall seconds of the worker's phases outside the timed samples, as a stopwatch read at
    each phase's end (:attr:`snnbench.records.contract.CaseRecord.overhead_s`): what a sweep's time
    went to besides measuring (``benchmarks/harness_bench.py``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        """Charge the time since the previous lap (or the start) to ``phase``."""
        now = time.perf_counter()
        self.seconds[phase] = round(self.seconds.get(phase, 0.0) + now - self._last, 6)
        self._last = now

    def skip(self) -> None:
        """Charge the time since the previous lap to no phase (already counted elsewhere)."""
        self._last = time.perf_counter()


def process_age_s(stat: str = "/proc/self/stat", uptime: str = "/proc/uptime") -> float | None:
    """Seconds since this process was created (None when it cannot be read): the start-up a
    fresh worker pays before its first step (interpreter, imports, reading the job).

    On Linux both ends are read on the kernel's clock since boot (``/proc/uptime`` and the
    process's start time in clock ticks): psutil adds the start time to the boot time, which
    the kernel gives in whole seconds, and so overstated every age by up to a second (half a
    second on average: the ``start`` of every case, forked ones included)."""
    try:
        with open(stat, encoding="ascii", errors="replace") as handle:
            # "pid (comm) state ...": comm may hold spaces and ")"; starttime is field 22
            fields = handle.read().rpartition(")")[2].split()
        with open(uptime, encoding="ascii") as handle:
            now = float(handle.read().split()[0])
        return max(0.0, now - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return max(0.0, time.time() - psutil.Process().create_time())
    except Exception:  # a start-up figure is never worth a failed case
        return None


def measure(any_adapter: AnyAdapter, job: Job, record: CaseRecord, prepare_s: float,
            laps: Laps | None = None) -> None:
    """Build, warm up and time every phase; fills ``record.samples`` and ``record.measurement``
    (:class:`~snnbench.measure.measurement.MeasurementInfo`: timer, warm-up, blocks, GPU clocks),
    and ``laps`` with the build, first call, warm-up and timing phases' wall time."""
    adapter = as_v2(any_adapter)
    laps = laps or Laps()
    device, settings = job.device, job.measure
    framework = adapter.framework
    rss = RssProbe()
    baseline_rss = current_rss_bytes()
    record.measurement["baseline_rss_bytes"] = baseline_rss

    start = time.perf_counter()
    workload = job.workload
    data = workload.make_data()
    model = adapter.build(workload, data, device, job.variant)
    model.synchronize()
    build_s = time.perf_counter() - start
    del data
    laps.lap("build")
    probe: MemoryProbe = probe_for(framework, device)
    samples: Samples = {"setup": {"prepare_s": [prepare_s], "build_s": [build_s]}}
    info = MeasurementInfo(timer=model.timer_kind() or default_timer_kind(framework, device))
    monitor = open_monitor(device)
    try:
        start = time.perf_counter()
        model.zero_grad()
        handle = model.forward()
        model.synchronize()
        _check_output(model, workload, handle)
        model.backward(handle)
        model.synchronize()
        del handle
        samples["setup"]["first_call_s"] = [time.perf_counter() - start]
        laps.lap("first_call")
        timer = make_timer(info.timer, model)
        info.gpu_idle = monitor.read() if monitor else None
        warm = warm_up(model, settings, timer, monitor.at_boost if monitor else None)
        laps.lap("warmup")
        info.warmup_steps, info.warmup_s, info.warmup_stop = warm.steps, warm.seconds, warm.stop
        info.timer_null_s = null_region_s(timer)
        info.gpu_before = monitor.read() if monitor else None
        # what other processes did with the CPUs while this case was timed (a busy machine)
        cpu_monitor = CpuMonitor().start()
        for phase in job.phases:
            probe.reset()
            rss.reset()
            model.reset_peak_memory()
            timed = sample_phase(model, phase, settings, timer, info.timer_null_s)
            info.block_size[phase] = timed.block.size
            if timed.block.note:
                info.block_note[phase] = timed.block.note
            metrics: dict[str, list[float]] = {"time_s": timed.times}
            if phase == "step":
                metrics.update(_throughput(workload.batch_size, timed.times))
            peak = model.peak_memory_bytes()
            if peak is None:
                peak = probe.peak_bytes()
                if probe.name == "rss" and peak is not None:
                    metrics["peak_rss_bytes"] = [float(peak)]
                    peak = max(0, peak - baseline_rss)
            if peak is not None:
                metrics["peak_mem_bytes"] = [float(peak)]
            samples[phase] = metrics
        info.gpu_after = monitor.read() if monitor else None
        record.measurement["cpu"] = cpu_monitor.stop().to_dict()
        laps.lap("timing")
        if job.energy and device == "cuda":
            energy = _measure_energy(model, settings)
            if energy:
                samples["step"].update(energy)
            laps.lap("energy")
    finally:
        if monitor:
            monitor.close()
        model.close()
        info.store(record.measurement)
    record.samples = samples


def _throughput(batch_size: int, times: list[float]) -> dict[str, list[float]]:
    """``samples_per_s``: batch samples per second of the step phase, from its median time
    (the median, as for the time itself: one slow sample does not move it)."""
    median = float(np.median(times)) if times else 0.0
    # NaN > 0 is False: a phase without a usable time has no throughput either
    return {"samples_per_s": [batch_size / median]} if median > 0 else {}


def _measure_energy(model: Model, settings: MeasureSettings) -> dict[str, list[float]]:
    def step() -> None:
        model.zero_grad()
        model.step()

    result = measure_energy(step, model.synchronize, max(1.0, settings.min_time_s))
    if result is None:
        return {}
    return {
        "energy_j": [float(result.joules_per_step)],
        "power_w": [float(result.average_power_w)],
    }


def count_instructions(framework: str, job: Job, record: CaseRecord,
                       since_prepared_s: float) -> None:
    """The ``instructions`` metric of each timed phase, counted under callgrind in a process of
    its own once the timing is over (:mod:`snnbench.measure.callgrind`); where it cannot be counted,
    ``measurement["instructions"]["skipped"]`` says why and the case stays ok."""
    reason = callgrind.skip_reason(framework, job.device)
    if reason:
        counts = callgrind.Counts(skipped=reason)
    else:
        counts = callgrind.collect(job, Path(job.result_path).parent,
                                   callgrind.budget(job.timeout_s, since_prepared_s))
    for phase, value in counts.per_call.items():
        record.samples.setdefault(phase, {})["instructions"] = [value]
    record.measurement["instructions"] = counts.to_dict()
    if counts.skipped:
        print(f"instructions not counted: {counts.skipped}", file=sys.stderr, flush=True)


def _record_equivalence(record: CaseRecord, agreement: Agreement) -> None:
    record.equivalence = agreement.to_dict()
    record.spike_match = agreement.spike_match
    record.grad_cosine = agreement.grad_cosine


def references_folder(job: Job) -> Path | None:
    """Where the sweep keeps its networks' references: beside the job folders (the folder
    holding this job's own), so every case of a sweep shares them; None without a result
    path (a job run in-process, as in tests) and for a cluster engine's task: such tasks own
    their job folders and may outlive a killed sweep, so a folder shared beside them would
    have no owner left to remove it (each case then computes its reference once, itself)."""
    if not job.result_path or job.placement.executor != "local":
        return None
    return Path(job.result_path).parent.parent / REFERENCES_DIR


def _verify_only(adapter: Adapter, job: Job, record: CaseRecord, reference: Any) -> None:
    """``snnbench verify``: compare with the reference at the job's workload, optionally dump."""
    capabilities = adapter.capabilities(job.variant)
    record.exact_dynamics = capabilities.exact_dynamics
    record.exact_gradient = capabilities.exact_gradient
    record.approximation_note = capabilities.approximation_note
    if not capabilities.verifiable:
        record.status = "skipped"
        record.message = "computes no LIF (pseudo-adapter): nothing to verify"
        return
    agreement, arrays = check_adapter(adapter, job.variant, job.workload, job.device,
                                      reference)
    _record_equivalence(record, agreement)
    # silent on both sides, or another network: no bar is met by agreeing on nothing
    problems = agreement.problems(capabilities)
    record.status = "mismatch" if problems else "ok"
    record.message = "; ".join(problems) or capabilities.approximation_note
    if job.dump_path:
        # the case it checked, as a dump always named it (for linear-lif the spec's JSON)
        payload: dict[str, Any] = {**arrays, "spec_json": np.array(job.workload.reference_key())}
        try:
            # a temporary file and a rename: a full disk leaves the earlier dump whole
            with atomic_path(Path(job.dump_path)) as tmp, open(tmp, "wb") as handle:
                np.savez(handle, **payload)
        except WriteError as exc:
            record.status = "error"
            record.message = f"{DUMP_NOT_WRITTEN}: {exc}"
            return
        record.dump_path = job.dump_path


def _mark_prepared(job: Job) -> None:
    """Tell the parent that preparation is over: the case's own time limit starts now."""
    with contextlib.suppress(OSError):
        job.prepared_marker.touch()


def installed_packages(job: Job) -> dict[str, str]:
    """Versions this process sees of the tracked packages and of every package the job's
    environment installed (read here, inside the overlay, so they are the overlay's)."""
    names = TRACKED_PACKAGES + tuple(n for n in pin_names(job.environment.resolved)
                                     if n not in TRACKED_PACKAGES)
    with contextlib.suppress(KeyError):  # the plugin's own version, beside its library's
        plugin = get_entry(job.adapter).distribution
        if plugin and plugin not in names:
            names += (plugin,)
    return {k: v for k, v in package_versions(names).items() if v is not None}


def _adapter_home(adapter: Adapter | None) -> Path | None:
    """Where the adapter's own code lives: its module's folder, or the module file itself for
    a top-level module (a plugin that is one file)."""
    if adapter is None:
        return None
    # a v1 plugin's own code, not the shim around it
    own = type(implementation(adapter)).__module__
    module = sys.modules.get(own)
    filename = getattr(module, "__file__", None)
    if not filename:
        return None
    path = Path(filename).resolve()
    return path.parent if "." in own else path


def adapter_frame(exc: BaseException, adapter: Adapter | None) -> str:
    """``file.py:LINE in function`` of the innermost frame of ``exc``'s traceback that lies in
    the adapter's own code (else the innermost frame): what a plugin author needs to find a
    crash, since a message like "'NoneType' object has no attribute 'detach'" names neither."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    home = _adapter_home(adapter)
    chosen = frames[-1]
    if home is not None:
        for frame in reversed(frames):
            path = Path(frame.filename).resolve()
            if path == home or home in path.parents:
                chosen = frame
                break
    return f"{Path(chosen.filename).name}:{chosen.lineno} in {chosen.name}"


def run_job(job: Job, started_s: float | None = None) -> CaseRecord:
    """Execute one job; always returns a record (status + message, samples if ok).

    ``started_s``: the seconds this process took to get here (:func:`process_age_s`),
    recorded as the ``start`` of :attr:`CaseRecord.overhead_s`.
    """
    variant, device = job.variant, job.device
    workload = job.workload
    laps = Laps()
    record = CaseRecord.for_job(job)
    record.started_utc = now_utc()
    record.packages = installed_packages(job)
    phase = "computing the reference"
    adapter: Adapter | None = None
    # one short case for the pre-timing check and the case metrics: the same T for both
    small = workload if job.mode == "verify" else workload.shortened(job.verify_time_steps)
    try:
        # before any library is imported: NumPy alone computes it, the same for every case of
        # this network, which the sweep's first such case computes and the others read
        reference = cached_reference(small, references_folder(job))
        laps.lap("reference")
        phase = "loading the adapter"
        adapter = get_entry(job.adapter).create()
        record.library = adapter.library
        laps.lap("load")
        phase = "importing the library"
        record.library_version = adapter.version()
        laps.lap("import")
        # first-use work (e.g. compiling a kernel) happens here: timed apart, never a sample,
        # and under the prepare limit rather than the case's timeout
        phase = "preparing the library"
        start = time.perf_counter()
        adapter.check_variant(variant, device)
        prepare_s = time.perf_counter() - start
        _mark_prepared(job)
        laps.lap("prepare")
        prepared = time.monotonic()
        phase = "applying settings"
        record.settings = apply_framework_settings(adapter.framework, workload, job.threads)
        reason = device_available(adapter.framework, device)
        if reason:
            raise AdapterUnavailable(reason)
        reason = adapter.reason_skipped(workload, device, variant)
        if reason:
            raise CaseSkipped(reason)
        capabilities = adapter.capabilities(variant)
        laps.lap("settings")
        if job.mode == "verify":
            phase = "verifying equivalence"
            _verify_only(adapter, job, record, reference)
            laps.lap("verify")
            return record
        agreement: Agreement | None = None
        if job.verify and capabilities.verifiable:
            phase = "verifying equivalence"
            agreement, _ = check_adapter(adapter, variant, small, device, reference)
            _record_equivalence(record, agreement)
            laps.lap("verify")
            # the same rule as `snnbench verify` (Agreement.problems): the output bar for an
            # adapter that declares exact dynamics, the gradient bar for one that declares
            # exact gradients (the bars of the case's kind and precision: AMP has its own);
            # silent on both sides, or another network, is never timed as exact
            problems = agreement.problems(capabilities, detailed=True)
            if problems:
                text = "; ".join(problems)
                if not job.allow_mismatch:
                    record.status = "mismatch"
                    record.message = text + ": not timed (use --allow-mismatch to time it)"
                    return record
                record.message = text + "; timed anyway (--allow-mismatch)"
        if not capabilities.verifiable:
            record.message = record.message or capabilities.approximation_note
        elif (not capabilities.exact_gradient and not record.message
              # a library may be exact at some settings only: trust the measured gradient
              and (agreement is None or agreement.gradient_below_bar())):
            record.message = f"approximate gradient: {capabilities.approximation_note}"
        phase = "measuring"
        laps.skip()
        measure(adapter, job, record, prepare_s, laps)
        record.samples["case"] = small.case_metrics(reference)
        laps.lap("metrics")
        if job.instructions:
            phase = "counting instructions"
            count_instructions(adapter.framework, job, record, time.monotonic() - prepared)
            laps.lap("instructions")
        record.status = "ok"
    except AdapterUnavailable as exc:
        record.status = "unavailable"
        record.message = str(exc)
    except CaseSkipped as exc:
        record.status = "skipped"
        record.message = str(exc)
    except BaseException as exc:  # every failure of a case must become its row
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        record.status = "oom" if is_oom(exc) else "error"
        where = adapter_frame(exc, adapter)
        record.message = f"while {phase}: {type(exc).__name__}: {exc}".strip()
        if where:
            record.message += f" (at {where})"
        record.traceback = traceback.format_exc(limit=20)
        # the worker's output is the case's log (logs/<case>.log): the traceback belongs there
        print(record.traceback, file=sys.stderr, flush=True)
    finally:
        record.finished_utc = now_utc()
        record.overhead_s = ({"start": round(started_s, 6)} if started_s is not None else {})
        record.overhead_s.update(laps.seconds)
    return record


def main(argv: list[str] | None = None) -> int:
    """Entry point of the worker process: ``python -m snnbench.measure.worker JOB.json``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m snnbench.measure.worker JOB.json", file=sys.stderr)
        return 2
    # first: a worker whose parent dies removes its job folder and ends with it
    lifeline.arm(Path(args[0]).parent)
    try:
        job = Job.read(Path(args[0]))
    except ContractError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return write_result(run_job(job, started_s=process_age_s()), job)


def write_result(record: CaseRecord, job: Job) -> int:
    """Write the job's record where the parent reads it; the worker's exit code.

    A record that cannot be written (a full disk) is said in one line and exits with
    :data:`~snnbench.records.contract.RESULT_NOT_WRITTEN_EXIT`: the parent records the case
    ``lost``, which ``--resume`` runs again, never an ``error`` that stays.
    """
    try:
        record.write(Path(job.result_path))
    except WriteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return RESULT_NOT_WRITTEN_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())

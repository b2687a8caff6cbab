"""The pre-flight noise check: is this machine quiet enough to time on? (pyperf's ``system show``)

Before a sweep (and again after it) the runner records what else the machine is doing and how
its clocks are set, as a typed, versioned :class:`Preflight` in the manifest:

* ``load``: the CPU load average (1 and 5 min) and, sampled over a short window, the cores
  other processes keep busy right now (the load average lags by a minute either way: a compile
  that just ended still reads as load; a process started 10 s ago hardly does);
* ``steal``: CPU time the hypervisor gave to other guests (a virtual machine on a busy host);
* ``gpu_processes``: other compute processes on the GPUs (NVML), on a CUDA run;
* ``threads``: threads requested × cases run side by side, against the cores left free;
* ``governor`` and ``turbo``: the CPU frequency governor ("performance" holds the clock) and
  turbo/boost (the clock follows temperature and load).

Each finding has a level: ``warning`` (the run would be noisy: ``--strict`` refuses it),
``notice`` (worth knowing and recorded, but not contention: a governor, turbo) or ``ok``, and
a message that says what to do, as hyperfine's warnings do. Every input is injectable
(:class:`Probes`: a sysfs root, the load average, a CPU-time sampler, a GPU-process lister),
so tests need no busy machine.

:class:`CpuMonitor` is the same CPU-time measurement around a region of code: a worker wraps
its timed phases in it and records how many cores other processes used meanwhile, so a run
that became busy after its pre-flight check is marked case by case.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, PlainSerializer, WrapSerializer

from snnbench.errors import UserError
from snnbench.host import nvml
from snnbench.records.contract import CaseRecord, case_busy_cores, now_utc
from snnbench.records.validation import dump, validate

#: version of the record below (bump when a field changes meaning)
PREFLIGHT_SCHEMA = 1
#: other processes keeping this many cores busy (or more) make a run noisy
BUSY_CORES = 0.5
#: seconds the check samples CPU use for (a compromise: long enough to see a busy process,
#: short enough to cost nothing beside a sweep)
WINDOW_S = 0.5
#: where Linux describes the CPUs' frequency scaling
CPU_SYSFS = Path("/sys/devices/system/cpu")

Level = Literal["ok", "notice", "warning"]


@dataclass(frozen=True)
class Finding:
    """One check's outcome: its name, level, value and a message that says what to do."""

    check: str
    level: Level
    message: str
    value: Any = None


@dataclass(frozen=True)
class CpuSample:
    """CPU use over one window, in cores (1.0 = one core busy the whole window)."""

    wall_s: float
    #: cores busy with anything but this process (its threads included)
    others_cores: float
    #: cores the hypervisor gave to other guests (``steal`` time)
    steal_cores: float
    #: cores this process used
    own_cores: float

    def to_dict(self) -> dict[str, float]:
        """Plain data for JSON."""
        return {k: round(v, 4) for k, v in asdict(self).items()}


#: (busy seconds summed over CPUs, steal seconds) of the whole machine
SystemTimes = Callable[[], tuple[float, float]]


def system_times() -> tuple[float, float]:
    """Busy and steal CPU seconds of the whole machine since boot, summed over CPUs."""
    import psutil

    t = psutil.cpu_times()
    # guest time is already counted in user time on Linux
    busy = t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)
    return busy, getattr(t, "steal", 0.0)


def own_times() -> float:
    """CPU seconds this process (all its threads) has used."""
    return time.process_time()


class CpuMonitor:
    """Measure what other processes do with the CPUs while a region of this process runs::

        monitor = CpuMonitor().start()
        ...                               # the timed phases
        sample = monitor.stop()           # CpuSample(wall_s, others_cores, steal_cores, ...)

    Others = the machine's busy time less this process's own, over the wall time. Cheap: two
    reads of ``/proc/stat`` and of this process's CPU clock.
    """

    def __init__(self, system: SystemTimes = system_times, own: Callable[[], float] = own_times,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self._system, self._own, self._clock = system, own, clock
        self._start: tuple[float, float, float, float] | None = None

    def start(self) -> CpuMonitor:
        """Begin a window (a second call starts it again)."""
        busy, steal = self._system()
        self._start = (busy, steal, self._own(), self._clock())
        return self

    def stop(self) -> CpuSample:
        """End the window and return what it saw."""
        if self._start is None:
            raise RuntimeError("CpuMonitor.stop() before start()")
        busy0, steal0, own0, t0 = self._start
        busy, steal = self._system()
        own, wall = self._own() - own0, self._clock() - t0
        if wall <= 0:
            return CpuSample(0.0, 0.0, 0.0, 0.0)
        # the counters tick at USER_HZ (10 ms): never report less than nothing
        others = max(0.0, (busy - busy0) - own) / wall
        return CpuSample(wall, others, max(0.0, steal - steal0) / wall, max(0.0, own) / wall)


def sample_cpu(window_s: float) -> CpuSample:
    """Other processes' CPU use over ``window_s`` seconds (this process sleeps meanwhile)."""
    monitor = CpuMonitor().start()
    time.sleep(window_s)
    return monitor.stop()


@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a GPU that is not this one."""

    gpu: int
    pid: int
    used_bytes: int | None = None


def nvml_compute_processes() -> list[GpuProcess]:
    """Compute processes on every NVIDIA GPU, but this process (none without NVML)."""
    try:
        pynvml = nvml.init()
    except nvml.NvmlUnavailable:  # no package, no driver, no GPU: nothing can run on one
        return []
    found: list[GpuProcess] = []
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if int(proc.pid) == os.getpid():
                    continue
                used = getattr(proc, "usedGpuMemory", None)
                found.append(GpuProcess(index, int(proc.pid),
                                        int(used) if isinstance(used, int) else None))
    except Exception:  # a driver that answers part of the questions: report what it did
        pass
    finally:
        nvml.shutdown(pynvml)
    return found


def available_cpus() -> int:
    """CPUs this process may run on (its affinity), else every CPU."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class Probes:
    """Where the check reads the machine from; tests replace any of them."""

    sysfs: Path = CPU_SYSFS
    loadavg: Callable[[], tuple[float, float, float]] = os.getloadavg
    cpus: Callable[[], int] = available_cpus
    sample: Callable[[float], CpuSample] = sample_cpu
    gpu_processes: Callable[[], list[GpuProcess]] = nvml_compute_processes
    window_s: float = WINDOW_S


#: what :func:`check_machine` reads when given no probes (tests replace it)
PROBES = Probes()


def _rounded(digits: int) -> PlainSerializer:
    """A number written rounded to ``digits`` decimals."""
    return PlainSerializer(lambda value: round(value, digits))


#: a tuple in memory, a JSON list on disk (its items written as they are)
_AsList = WrapSerializer(lambda value, write: list(write(value)))


@dataclass(frozen=True)
class Preflight:
    """What the machine was doing when a run started (or ended), and what that means.

    Written and read by the contract's pydantic TypeAdapter (built on first use).
    """

    # unknown keys are ignored: the written record also holds ``noisy`` (derived from the
    # findings), and a manifest of a newer minor may hold more
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="ignore")

    #: "start" (before the sweep) or "end" (after it)
    when: str
    recorded_utc: str
    cpus: int
    load_avg: Annotated[tuple[float, float, float],
                        PlainSerializer(lambda load: [round(v, 2) for v in load])]
    #: cores other processes kept busy over the check's window, and the hypervisor's steal
    others_cores: Annotated[float, _rounded(3)]
    steal_cores: Annotated[float, _rounded(3)]
    threads: int
    jobs: int
    device: str
    #: the distinct governors of the CPUs ("" where the kernel exposes none, e.g. in a VM)
    governors: Annotated[tuple[str, ...], _AsList]
    #: True on, False off, None unknown
    turbo: bool | None
    gpu_processes: Annotated[tuple[GpuProcess, ...], _AsList]
    findings: Annotated[tuple[Finding, ...], _AsList]
    schema: int = PREFLIGHT_SCHEMA

    @property
    def warnings(self) -> tuple[Finding, ...]:
        """The findings that make a run noisy (``--strict`` refuses them)."""
        return tuple(f for f in self.findings if f.level == "warning")

    @property
    def noisy(self) -> bool:
        """True when any finding is a warning."""
        return bool(self.warnings)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the manifest (with ``noisy``, derived from the findings)."""
        return {**dump(self), "noisy": self.noisy}

    @classmethod
    def from_dict(cls, data: Any, source: str = "preflight") -> Preflight:
        """Inverse of :meth:`to_dict`; :class:`snnbench.records.contract.ContractError` names what
        is wrong."""
        return validate(cls, data, source, "pre-flight check")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def read_governors(sysfs: Path) -> tuple[str, ...]:
    """The distinct scaling governors of the CPUs, sorted (empty when none is exposed)."""
    found = {g for g in (_read(p) for p in sysfs.glob("cpu[0-9]*/cpufreq/scaling_governor"))
             if g}
    return tuple(sorted(found))


def read_turbo(sysfs: Path) -> bool | None:
    """Turbo/boost: intel_pstate's ``no_turbo``, else cpufreq's ``boost`` (global or per
    policy, as amd-pstate exposes it); None when the kernel says nothing."""
    no_turbo = _read(sysfs / "intel_pstate" / "no_turbo")
    if no_turbo in ("0", "1"):
        return no_turbo == "0"
    values = [_read(sysfs / "cpufreq" / "boost")]
    values += [_read(p) for p in sorted(sysfs.glob("cpufreq/policy*/boost"))]
    known = [v for v in values if v in ("0", "1")]
    if not known:
        return None
    return any(v == "1" for v in known)


def _load_finding(load: tuple[float, float, float], sample: CpuSample) -> Finding:
    value = {"load_1m": round(load[0], 2), "load_5m": round(load[1], 2),
             "others_cores": round(sample.others_cores, 2)}
    if sample.others_cores >= BUSY_CORES:
        return Finding("load", "warning",
                       f"other processes keep {sample.others_cores:.1f} cores busy (load average "
                       f"{load[0]:.2f}): times will include waiting for a core; stop them, or "
                       "run where nothing else runs", value)
    if load[0] >= BUSY_CORES:
        return Finding("load", "notice",
                       f"load average {load[0]:.2f} but the CPUs are idle now (recent work)",
                       value)
    return Finding("load", "ok", f"load average {load[0]:.2f}", value)


def _steal_finding(sample: CpuSample) -> Finding:
    if sample.steal_cores >= BUSY_CORES / 5:
        return Finding("steal", "warning",
                       f"the hypervisor gives {sample.steal_cores:.2f} cores' time to other "
                       "guests: this virtual machine's host is busy; time on dedicated cores",
                       round(sample.steal_cores, 3))
    return Finding("steal", "ok", "no CPU time stolen by the hypervisor",
                   round(sample.steal_cores, 3))


def _threads_finding(cpus: int, others: float, threads: int, jobs: int) -> Finding:
    wanted = threads * jobs
    free = max(0.0, cpus - others)
    value = {"threads": threads, "jobs": jobs, "cpus": cpus, "free_cores": round(free, 2)}
    if wanted > free + 0.25:
        fit = max(1, math.floor((free + 0.25) / jobs))
        # advice that changes something: at one thread a case already asks for the least
        ways = [f"--threads {fit}"] if fit < threads else []
        if jobs > 1:
            ways.append("fewer --jobs")
        how = " or ".join(ways) if ways else "stop the other processes"
        return Finding("threads", "warning",
                       f"{_count(wanted, 'thread')} ({threads} per case × {jobs} at once) on "
                       f"{free:.1f} free cores of {cpus}: threads will wait for cores; "
                       f"{'use ' if ways else ''}{how}", value)
    return Finding("threads", "ok", f"{_count(wanted, 'thread')} on {free:.1f} free cores",
                   value)


def _count(number: int, noun: str) -> str:
    """``1 thread``, ``2 threads``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _gpu_finding(device: str, processes: list[GpuProcess]) -> Finding:
    value = [asdict(p) for p in processes]
    if not processes:
        return Finding("gpu_processes", "ok", "no other compute process on the GPUs", value)
    pids = ", ".join(f"{p.pid} (GPU {p.gpu})" for p in processes[:5])
    text = (f"{len(processes)} other compute process(es) on the GPUs: {pids}; they share the "
            "GPU's time and memory: stop them")
    # on a CPU run another process on the GPU shares nothing that is timed
    return Finding("gpu_processes", "warning" if device == "cuda" else "notice", text, value)


def _governor_finding(governors: tuple[str, ...]) -> Finding:
    if not governors:
        return Finding("governor", "ok", "no frequency governor exposed (set by the host)", [])
    if set(governors) == {"performance"}:
        return Finding("governor", "ok", "governor performance", list(governors))
    return Finding("governor", "notice",
                   f"CPU frequency governor {', '.join(governors)}: the clock follows the load; "
                   "for stable CPU times use 'performance' (cpupower frequency-set -g "
                   "performance, or pyperf system tune)", list(governors))


def _turbo_finding(turbo: bool | None) -> Finding:
    if turbo:
        return Finding("turbo", "notice",
                       "turbo/boost is on: the clock follows temperature and the other cores' "
                       "load; disable it for stable CPU times (pyperf system tune)", True)
    return Finding("turbo", "ok", "turbo off" if turbo is False else "turbo state unknown",
                   turbo)


def check_machine(threads: int, jobs: int = 1, device: str = "cpu", when: str = "start",
                  probes: Probes | None = None) -> Preflight:
    """Check this machine for a run of ``jobs`` cases at once, ``threads`` threads each."""
    probes = probes or PROBES
    load = probes.loadavg()
    cpus = max(1, probes.cpus())
    sample = probes.sample(probes.window_s)
    governors = read_governors(probes.sysfs)
    turbo = read_turbo(probes.sysfs)
    gpu = probes.gpu_processes()
    findings = (
        _load_finding(load, sample),
        _steal_finding(sample),
        _threads_finding(cpus, sample.others_cores, threads, max(1, jobs)),
        _gpu_finding(device, gpu),
        _governor_finding(governors),
        _turbo_finding(turbo),
    )
    return Preflight(
        when=when, recorded_utc=now_utc(), cpus=cpus, load_avg=load,
        others_cores=sample.others_cores, steal_cores=sample.steal_cores, threads=threads,
        jobs=max(1, jobs), device=device, governors=governors, turbo=turbo,
        gpu_processes=tuple(gpu), findings=findings,
    )


class NoisyMachine(UserError):
    """``--strict`` and the machine is noisy: the message names every warning."""


def refusal(preflight: Preflight) -> str:
    """The one line ``--strict`` stops with (exit 2)."""
    reasons = "; ".join(f"{f.check}: {f.message}" for f in preflight.warnings)
    return f"--strict: the machine is noisy, not running ({reasons})"


@dataclass
class NoiseVerdict:
    """Whether a whole run was noisy, and why: the manifest's ``noise`` entry."""

    noisy: bool = False
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the manifest (``asdict``: nothing to check or reshape)."""
        return asdict(self)


def noise_verdict(preflights: list[dict[str, Any]], records: list[CaseRecord]) -> NoiseVerdict:
    """Noisy when a pre-flight check (start or end) warned, or a case was timed while other
    processes kept :data:`BUSY_CORES` or more busy."""
    reasons: list[str] = []
    for check in preflights:
        for finding in check.get("findings", []):
            if finding.get("level") == "warning":
                reasons.append(f"at the {check.get('when', '?')}: {finding.get('message', '')}")
    measured = [b for r in records if (b := case_busy_cores(r)) is not None]
    busy = [b for b in measured if b >= BUSY_CORES]
    if busy:
        reasons.append(f"{len(busy)} of {len(measured)} timed cases ran while other processes "
                       f"kept up to {max(busy):.1f} cores busy (column busy_cores)")
    return NoiseVerdict(bool(reasons), reasons)

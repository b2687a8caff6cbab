"""The roofline of a GPU row: the work a phase must do, what the device can do at most, and
whether the measured time is physically possible.

A timed row of the canonical network (``layers`` × Linear(n, n) + LIF, B samples, T steps) must
at least run its dense matrix products and move its weights. That work, divided by the
device's datasheet peak *for the precision the row ran in*, is a lower bound on its time: the
**floor**. A row faster than its floor is not a winner but a measurement defect (an
unsynchronized timer, a phase that skipped work, a library that ran TF32 while the row says
strict fp32), and is flagged ``impossible``.

The work counted is a lower bound on purpose, so a flag is never a false alarm from a generous
model:

* FLOPs: only the dense matrix products (2·n² per sample, step and layer forward; backward the
  weight gradient of every layer and the input gradient of every layer but the first). The
  neuron's elementwise work, biases and surrogate are left out. A library that exploited spike
  sparsity would need fewer, and would be flagged: none of the adapters does on a GPU, and the
  flag's message says to check.
* Bytes: each layer's weights read once in the forward pass; in the backward pass read once
  more and the weight gradient written once. Activations, which most libraries keep in memory,
  are left out.

Peaks are the dense (no structured sparsity) figures of NVIDIA's datasheets, listed with their
source in :data:`DEVICE_PEAKS`; a GPU whose model is not listed gets no roofline (NaN columns,
never a flag). CPU rows get none either: a CPU's peak depends on clocks, cores and ISA in ways a
datasheet table does not capture.

Pure functions over a summary table; the summary writer and reader call :func:`annotate`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from snnbench.workload.base import Work

if TYPE_CHECKING:  # only annotations: the CLI imports this module (through the schema)
    # at start-up, and pandas alone takes a second to import
    import pandas as pd

#: the arithmetic a row's matrix products ran in, for choosing the peak
PeakPrecision = Literal["fp32", "tf32", "bf16", "fp16"]

#: the roofline columns a summary carries, in this order (NaN / False where there is none)
ROOFLINE_COLUMNS: Final[tuple[str, ...]] = (
    "flops", "flop_per_s", "peak_flop_share", "min_bytes", "bandwidth_share", "floor_s",
    "impossible",
)
#: the float columns of :data:`ROOFLINE_COLUMNS`
ROOFLINE_FLOAT_COLUMNS: Final[tuple[str, ...]] = ROOFLINE_COLUMNS[:-1]

_TIMED: Final = ("forward", "backward", "step")


@dataclass(frozen=True)
class DevicePeak:
    """A GPU model's datasheet peaks (dense, boost clock)."""

    #: a display name, and the lower-case substrings that identify the model in the name the
    #: driver reports (``NVIDIA H100 80GB HBM3``); the first entry of :data:`DEVICE_PEAKS`
    #: whose every substring occurs wins, so a specific entry comes before a general one
    model: str
    matches: tuple[str, ...]
    #: FLOP/s per precision: fp32 on the CUDA cores, tf32/bf16/fp16 on the tensor cores
    fp32: float
    tf32: float
    bf16: float
    fp16: float
    #: memory bandwidth, bytes/s
    bandwidth: float
    #: where the figures come from
    source: str

    def flop_peak(self, precision: PeakPrecision) -> float:
        """Peak FLOP/s in ``precision``."""
        return float(getattr(self, precision))


_T = 1e12
_H100 = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_H200 = "https://www.nvidia.com/en-us/data-center/h200/"
_A100 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_ADA = "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
_L4 = "https://www.nvidia.com/en-us/data-center/l4/"
_L40S = "https://www.nvidia.com/en-us/data-center/l40s/"

#: datasheet peaks, dense figures (the datasheets' tensor-core numbers "with sparsity" halved)
DEVICE_PEAKS: Final[tuple[DevicePeak, ...]] = (
    DevicePeak("H200", ("h200",), 67 * _T, 494.5 * _T, 989.5 * _T, 989.5 * _T, 4.8e12, _H200),
    DevicePeak("H100 PCIe", ("h100", "pcie"), 51 * _T, 378 * _T, 756.5 * _T, 756.5 * _T, 2.0e12,
               _H100),
    DevicePeak("H100 NVL", ("h100", "nvl"), 60 * _T, 417.5 * _T, 835.5 * _T, 835.5 * _T,
               3.9e12, _H100),
    DevicePeak("H100 SXM", ("h100",), 67 * _T, 494.5 * _T, 989.5 * _T, 989.5 * _T, 3.35e12,
               _H100),
    DevicePeak("A100 40GB", ("a100", "40gb"), 19.5 * _T, 156 * _T, 312 * _T, 312 * _T,
               1.555e12, _A100),
    DevicePeak("A100 80GB", ("a100",), 19.5 * _T, 156 * _T, 312 * _T, 312 * _T, 2.039e12, _A100),
    DevicePeak("L40S", ("l40s",), 91.6 * _T, 183 * _T, 362.05 * _T, 362.05 * _T, 0.864e12,
               _L40S),
    DevicePeak("L4", ("l4",), 30.3 * _T, 60 * _T, 121 * _T, 121 * _T, 0.3e12, _L4),
    # GeForce: tensor-core figures with FP32 accumulation (what the libraries' matmuls use)
    DevicePeak("RTX 4090", ("4090",), 82.6 * _T, 82.6 * _T, 165.2 * _T, 165.2 * _T,
               1.008e12, _ADA),
)


def device_peak(gpu_name: str) -> DevicePeak | None:
    """The peaks of the GPU the driver names ``gpu_name``; None for a model not listed."""
    name = gpu_name.lower()
    for peak in DEVICE_PEAKS:
        if all(m in name for m in peak.matches):
            return peak
    return None


def peak_precision(dtype: str, matmul_precision: str) -> PeakPrecision:
    """The arithmetic a row's matrix products ran in: its dtype when 16-bit, else the
    automatic-mixed-precision dtype, else TF32 when allowed, else fp32."""
    if dtype == "bfloat16" or matmul_precision == "amp-bf16":
        return "bf16"
    if dtype == "float16" or matmul_precision == "amp-fp16":
        return "fp16"
    return "tf32" if matmul_precision == "tf32" else "fp32"


@dataclass(frozen=True)
class Roofline:
    """One timed row against its device's peaks."""

    work: Work
    seconds: float
    peak: DevicePeak
    precision: PeakPrecision

    @property
    def flop_per_s(self) -> float:
        """Achieved FLOP/s (the counted FLOPs over the measured time)."""
        return self.work.flops / self.seconds if self.seconds > 0 else math.nan

    @property
    def peak_flop_share(self) -> float:
        """Achieved FLOP/s as a share of the device's peak in the row's precision."""
        return self.flop_per_s / self.peak.flop_peak(self.precision)

    @property
    def bandwidth_share(self) -> float:
        """The least bytes over the measured time, as a share of the peak bandwidth."""
        if self.seconds <= 0:
            return math.nan
        return self.work.bytes / self.seconds / self.peak.bandwidth

    @property
    def floor_s(self) -> float:
        """The least time the work can take on this device: compute or memory, whichever
        binds."""
        return max(self.work.flops / self.peak.flop_peak(self.precision),
                   self.work.bytes / self.peak.bandwidth)

    @property
    def impossible(self) -> bool:
        """True when the row was measured faster than its floor."""
        return 0 < self.seconds < self.floor_s


#: the least work of one timed summary row's phase, or None where its workload has no model:
#: the workload says (:meth:`snnbench.workload.Workload.row_work`; this module sits below it)
WorkOf = Callable[[Mapping[str, object]], "Work | None"]


def row_roofline(row: Mapping[str, object], gpu_name: str, work_of: WorkOf
                 ) -> Roofline | None:
    """The roofline of one summary row (a ``time_s`` row of a timed phase on a GPU of a listed
    model, with a positive median, whose workload counts its work: ``work_of``), else
    None."""
    if str(row.get("metric")) != "time_s" or str(row.get("phase")) not in _TIMED:
        return None
    if not str(row.get("device", "")).startswith("cuda"):
        return None
    peak = device_peak(gpu_name)
    seconds = _number(row.get("median"))
    if peak is None or not seconds > 0:
        return None
    try:
        work = work_of(row)
    except (ValueError, OverflowError, KeyError, TypeError):
        return None
    if work is None:
        return None
    precision = peak_precision(str(row.get("dtype", "float32")),
                               str(row.get("matmul_precision", "strict") or "strict"))
    return Roofline(work, seconds, peak, precision)


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def gpu_models(manifest: Mapping[str, object]) -> dict[str, str]:
    """Each host's GPU model name, from a run's manifest (its ``hosts`` list, else its own
    ``gpus`` under the key ""). A host whose GPUs are of two models gets none: which one a row
    ran on is not recorded."""
    out: dict[str, str] = {}
    entries: list[tuple[str, object]] = []
    hosts = manifest.get("hosts")
    if isinstance(hosts, list):
        entries = [(str(h.get("host", "")), h.get("gpus")) for h in hosts if isinstance(h, dict)]
    if not entries:
        entries = [("", manifest.get("gpus"))]
    for host, gpus in entries:
        names = {str(g.get("name", "")) for g in gpus if isinstance(g, dict)} \
            if isinstance(gpus, list) else set()
        names.discard("")
        if len(names) == 1:
            out[host] = names.pop()
    return out


def annotate(summary: pd.DataFrame, gpu_by_host: Mapping[str, str], work_of: WorkOf,
             probes: Collection[str] = ()) -> pd.DataFrame:
    """``summary`` with the :data:`ROOFLINE_COLUMNS` filled for every row that has a roofline
    (``work_of``: the least work of a row, :data:`WorkOf`).

    ``gpu_by_host``: the GPU model name of each host (``hosts/<host>.json``); a row whose host
    is not listed takes the only model when the run saw one, else gets no roofline.
    ``probes``: adapters that do no work on purpose (the harness's ``null``): never flagged.
    """
    frame = summary.copy()
    for col in ROOFLINE_FLOAT_COLUMNS:
        frame[col] = math.nan
    frame["impossible"] = False
    models = set(gpu_by_host.values())
    only = next(iter(models)) if len(models) == 1 else ""
    for index, row in frame.iterrows():
        if str(row.get("adapter")) in probes:
            continue
        gpu = gpu_by_host.get(str(row.get("host", "")), only)
        line = row_roofline({str(k): v for k, v in row.items()}, gpu, work_of) if gpu else None
        if line is None:
            continue
        frame.at[index, "flops"] = line.work.flops
        frame.at[index, "flop_per_s"] = line.flop_per_s
        frame.at[index, "peak_flop_share"] = line.peak_flop_share
        frame.at[index, "min_bytes"] = line.work.bytes
        frame.at[index, "bandwidth_share"] = line.bandwidth_share
        frame.at[index, "floor_s"] = line.floor_s
        frame.at[index, "impossible"] = line.impossible
    return frame


def impossible_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """The rows flagged ``impossible`` (none when the summary has no roofline columns)."""
    if "impossible" not in summary.columns:
        return summary.iloc[0:0]
    return summary[summary["impossible"].fillna(False).astype(bool)]


IMPOSSIBLE_NOTE: Final = (
    "measured faster than the device's datasheet peak allows for its dense matrix products "
    "(a measurement defect, e.g. an unsynchronized timer or a precision other than the row "
    "states; or a sparse computation): not a result")

"""The CPU scan backend: C++ scans compiled once at first use and called through ctypes.

The source is :data:`snnbench.fused._scan_source.SOURCE` (a string: it ships with the
package without package-data settings).

Why a plain C++ shared library (and not torch.compile, a torch C++ extension or numba): the
scans alone, forward then backward, at n=512, B=16, T=100 (819,200 neuron·steps, fp32), one
thread, median of 15, on the development machine (AMD EPYC Zen 5, torch 2.13.0+cpu):

* this library (g++ -O3 -march=native -ffp-contract=off):   0.097 ms forward, 0.093 backward
  (fast_sigmoid or atan surrogate; 0.43 ms with the sigmoid surrogate, whose exp is written
  to vectorise: libm's scalar expf made it 5.2 ms); compiled in 1.0-1.4 s, once per machine
  (then loaded from the cache in ~10 ms);
* the same loops built with ``torch.utils.cpp_extension.load_inline`` (torch and pybind11
  headers, ninja): 0.083 ms forward, the same within noise, but 21 s to build (32 s on a busy
  machine);
* ``torch.compile`` (inductor) of the Python loop over T: 0.55 ms forward, after 28 s (43 s
  busy) of compilation in every new process;
* eager PyTorch ops per time step (what the ``torch`` adapter runs): 9.3 ms forward;
* numba is not installed here; it would add a dependency (and its own JIT time) for the same
  loop.

A call through ctypes and the Python wrapper costs 2.6 µs. The scan uses one thread per
started 2 M neuron·steps (a sigmoid-surrogate backward step counts 5; ``threads_for`` in the
source), up to torch's thread count: below that a second thread saves tens of µs, while on a
busy machine a parallel region waits for a descheduled thread (7-12 ms measured instead of
0.1-0.9 ms).

The library is cached under the torch extensions directory (``$TORCH_EXTENSIONS_DIR`` or
``~/.cache/torch_extensions``), keyed by a hash of the source, the compiler command, the
compiler's version and the CPU's feature flags (it is compiled with ``-march=native``), and is
written atomically, so concurrent worker processes never load a half-written file.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from snnbench.fused.params import LIFParams

#: -ffp-contract=off keeps ``beta*v`` and ``+x`` two roundings (no FMA), as in the reference.
#: -fno-trapping-math lets GCC turn ``vp >= theta ? 1 : 0`` into a vector select: without it,
#: on CPUs without AVX-512 masked stores (AVX2), GCC 12 left every scan loop scalar ("control
#: flow in loop"), 1.7 ns per element, 14x the AVX-512 figure above. It permits no reordering
#: or contraction of arithmetic: every rounding stays as written (the exactness tests check it).
_FLAGS: tuple[str, ...] = (
    "-O3",
    "-march=native",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fopenmp",
    "-fPIC",
    "-shared",
    "-std=c++17",
)
#: the ``-march`` of the build, ``native`` unless set: the instruction counter
#: (snnbench.measure.callgrind) sets x86-64-v3 (AVX2), since valgrind cannot run AVX-512 code and a
#: native build dies there of SIGILL
MARCH_ENV = "SNNBENCH_FUSED_MARCH"
_DTYPE_CODES: dict[torch.dtype, int] = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
_ABI_VERSION = 2


class BuildError(RuntimeError):
    """The CPU scan library could not be compiled or loaded; the message says why."""


@dataclass(frozen=True)
class BuildInfo:
    """Where the compiled scan lives and what loading it cost in this process."""

    path: Path
    #: seconds spent compiling in this process (0.0 when a cached build was loaded)
    compile_s: float
    cached: bool


_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_info: BuildInfo | None = None


def _cache_root() -> Path:
    """torch's extension directory, without importing torch.utils.cpp_extension (slow)."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if root:
        return Path(root)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "torch_extensions"


def _compiler() -> str:
    for candidate in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if candidate and shutil.which(candidate):
            return candidate
    raise BuildError("no C++ compiler found (set CXX, or install g++)")


def _flags() -> tuple[str, ...]:
    """:data:`_FLAGS` with the ``-march`` of :data:`MARCH_ENV` (``native`` by default)."""
    march = os.environ.get(MARCH_ENV) or "native"
    return tuple(f"-march={march}" if flag == "-march=native" else flag for flag in _FLAGS)


def _cpu_flags() -> str:
    """The CPU feature flags: a -march=native build must not be reused on another CPU."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def _build_key(cxx: str, source: bytes) -> str:
    try:
        version = subprocess.run(
            [cxx, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(f"cannot run the C++ compiler {cxx!r}: {exc}") from exc
    digest = hashlib.sha256()
    for part in (source, " ".join(_flags()).encode(), version.encode(), _cpu_flags().encode()):
        digest.update(part)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _source() -> str:
    from snnbench.fused._scan_source import SOURCE

    return SOURCE


def _compile(cxx: str, source: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    src = target.with_name(f"lif_scan_{os.getpid()}.cpp")
    try:
        src.write_text(source)
        proc = subprocess.run(
            [cxx, *_flags(), str(src), "-o", str(tmp)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()[-12:]
            raise BuildError(
                f"compiling the CPU LIF scan failed ({cxx}, exit {proc.returncode}):\n"
                + "\n".join(detail)
            )
        os.replace(tmp, target)  # atomic: a concurrent loader sees the old or the new file
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(f"compiling the CPU LIF scan failed: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
        src.unlink(missing_ok=True)


def _load(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    lib.snn_lif_abi_version.restype = ctypes.c_int
    if lib.snn_lif_abi_version() != _ABI_VERSION:
        raise BuildError(f"{path} has a different ABI version; delete it to rebuild")
    i64, f32, i32, ptr = ctypes.c_int64, ctypes.c_float, ctypes.c_int, ctypes.c_void_p
    lib.snn_lif_forward.restype = i32
    lib.snn_lif_forward.argtypes = [ptr, ptr, ptr, i32, i64, i64, f32, f32, i32, i32]
    lib.snn_lif_backward.restype = i32
    lib.snn_lif_backward.argtypes = [
        ptr, ptr, i64, i32, ptr, ptr, i32, i64, i64, i64, f32, f32, f32, i32, i32, i32, i32,
    ]
    lib.snn_transpose_f32.restype = None
    lib.snn_transpose_f32.argtypes = [ptr, ptr, i64, i64, i32]
    return lib


def build() -> BuildInfo:
    """Compile (or load the cached) scan library; raise :class:`BuildError` with the reason.

    Safe to call many times and from several processes; only the first call in a process
    does any work.
    """
    global _lib, _info
    with _lock:
        if _info is not None:
            return _info
        source = _source()
        cxx = _compiler()
        key = _build_key(cxx, source.encode())
        target = _cache_root() / f"snnbench_fused_cpu_{key}" / "lif_scan.so"
        cached = target.is_file()
        start = time.perf_counter()
        if not cached:
            _compile(cxx, source, target)
        compile_s = 0.0 if cached else time.perf_counter() - start
        try:
            _lib = _load(target)
        except OSError as exc:
            raise BuildError(f"cannot load {target}: {exc}") from exc
        _info = BuildInfo(path=target, compile_s=compile_s, cached=cached)
        return _info


def _library() -> ctypes.CDLL:
    if _lib is None:
        build()
    assert _lib is not None
    return _lib


def is_loaded() -> bool:
    """Whether this process has the compiled library loaded (:func:`build` succeeded)."""
    return _lib is not None


def transpose(src: torch.Tensor) -> torch.Tensor:
    """A new contiguous (cols, rows) copy of the contiguous float32 CPU matrix ``src``.

    A tiled copy, about twice as fast as ``src.t().contiguous()`` (36 against 76 µs for
    1600 × 128 on one thread). Needs :func:`build` to have succeeded.
    """
    if src.dim() != 2 or src.dtype != torch.float32 or not src.is_contiguous():
        raise TypeError("transpose needs a contiguous 2-D float32 tensor")
    rows, cols = src.shape
    dst = torch.empty((cols, rows), dtype=torch.float32)
    _library().snn_transpose_f32(src.data_ptr(), dst.data_ptr(), rows, cols,
                                 torch.get_num_threads())
    return dst


def _check_status(code: int, what: str) -> None:
    if code == 1:
        raise MemoryError(f"{what}: out of memory for the scan state")
    if code != 0:
        raise RuntimeError(f"{what}: the CPU scan library returned error {code}")


def scan_forward(y: torch.Tensor, vpre: torch.Tensor, spikes: torch.Tensor, p: LIFParams) -> None:
    """Run the LIF recurrence over y (T, B·n) → v_pre (float32) and spikes, all contiguous.

    For float32, ``vpre`` may be ``y`` itself (v_pre overwrites y in place).
    """
    if spikes.dtype != y.dtype or vpre.dtype != torch.float32:
        raise TypeError("the CPU scan needs spikes in y's dtype and a float32 v_pre")
    lib = _library()
    steps, width = y.shape[0], y.numel() // max(1, y.shape[0])
    code = lib.snn_lif_forward(
        y.data_ptr(),
        vpre.data_ptr(),
        spikes.data_ptr(),
        _DTYPE_CODES[y.dtype],
        steps,
        width,
        p.beta,
        p.threshold,
        p.reset_code,
        torch.get_num_threads(),
    )
    _check_status(code, "LIF forward scan")


def scan_backward(
    vpre: torch.Tensor,
    grad_s: torch.Tensor,
    dy: torch.Tensor,
    p: LIFParams,
    want_db: bool,
) -> torch.Tensor | None:
    """Reverse-time BPTT: v_pre (T, B, n) float32 and dL/ds → dL/dy in ``dy``; returns db.

    ``dy`` has the spikes' dtype; for float32 it is ``vpre`` (overwritten in place). ``grad_s``
    may be the stride-0 gradient of ``.sum()`` (read as one value per step, never expanded)
    or have contiguous rows; any other layout is copied first.
    """
    lib = _library()
    steps, batch, n = vpre.shape
    if grad_s.dtype != dy.dtype:
        grad_s = grad_s.to(dy.dtype)
    st, sb, sj = grad_s.stride()
    if sb == 0 and sj == 0:
        bcast = 1
    elif sj == 1 and (sb == n or batch == 1):
        bcast = 0
    else:
        grad_s = grad_s.contiguous()
        st, bcast = grad_s.stride(0), 0
    if steps == 1:
        st = 0  # the stride of a size-1 dimension is arbitrary; never use it
    db = torch.empty(n, dtype=torch.float32) if want_db else None
    code = lib.snn_lif_backward(
        vpre.data_ptr(),
        grad_s.data_ptr(),
        st,
        bcast,
        dy.data_ptr(),
        db.data_ptr() if db is not None else None,
        _DTYPE_CODES[dy.dtype],
        steps,
        batch,
        n,
        p.beta,
        p.threshold,
        p.slope,
        p.reset_code,
        p.surrogate_code,
        int(p.detach_reset),
        torch.get_num_threads(),
    )
    _check_status(code, "LIF backward scan")
    return db

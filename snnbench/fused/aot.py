"""Compile the Triton scans ahead of time for a GPU architecture, on a machine with no GPU.

Triton lowers a kernel to PTX and its bundled ``ptxas`` assembles the PTX into a cubin without a
driver, given the target. This module compiles exactly the launches the fused layer would make
for a shape (the same :class:`~snnbench.fused.triton_kernels.Launch` objects, built from meta
tensors, specialised by Triton's own argument specialiser) and reads the results with the
``cuobjdump`` and ``nvdisasm`` that ship with Triton. That shows, with no GPU at hand:

* that every kernel compiles for the target (``sm_90``: H100 and H200), which running under
  ``TRITON_INTERPRET=1`` cannot show, since the interpreter never lowers the code;
* registers per thread, spills (local memory) and the shared memory of the prefetch pipeline;
* in the machine code (SASS): loads pipelined through shared memory (``LDGSTS``, i.e. cp.async)
  and whether any fused multiply-add (``FFMA``) is left in the forward kernel. There must be
  none: the membrane update rounds twice in the reference, and an FFMA would flip spikes.

It says nothing about speed. ``python -m snnbench.fused.aot`` prints the table for the
benchmark's GPU shapes (B=16, T=500, n from 512 to 16384 on an H200's 132 SMs).
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from snnbench.fused.params import RESETS, SURROGATES, LIFParams

#: an H200 (and H100 SXM): compute capability 9.0 with 132 SMs
H200_ARCH, H200_SMS = 90, 132
_RESOURCES = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
# an instruction line of nvdisasm: /*0040*/  [@!P0] OPCODE.MODIFIERS operands ;
_OPCODE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)", re.M)


class AotUnavailable(RuntimeError):
    """Triton or its CUDA tools are missing, so nothing can be compiled ahead of time."""


@dataclass(frozen=True)
class KernelBuild:
    """One kernel compiled for one GPU architecture, with what its cubin says."""

    kernel: str
    arch: int
    signature: dict[str, str]
    constexprs: dict[str, Any]
    grid: tuple[int, ...]
    num_warps: int
    registers: int
    spill_bytes: int
    shared_bytes: int
    sass_ops: dict[str, int] = field(default_factory=dict)

    @property
    def ffma(self) -> int:
        """Fused multiply-adds in the machine code."""
        return self.sass_ops.get("FFMA", 0)

    @property
    def pipelined_loads(self) -> int:
        """Asynchronous global→shared copies (cp.async), i.e. prefetched loads."""
        return self.sass_ops.get("LDGSTS", 0)


def tools_dir() -> Path:
    """The folder of the ``cuobjdump``/``nvdisasm`` that ship with Triton's NVIDIA backend."""
    try:
        import triton.backends.nvidia as nvidia
    except Exception as exc:
        raise AotUnavailable(f"cannot import triton's NVIDIA backend: {exc}") from exc
    folder = Path(nvidia.__file__).parent / "bin"
    missing = [t for t in ("cuobjdump", "nvdisasm") if not (folder / t).is_file()]
    if missing:
        raise AotUnavailable(f"triton's NVIDIA backend has no {', '.join(missing)} in {folder}")
    return folder


def _specialise(
    fn: Any, args: Sequence[Any]
) -> tuple[dict[str, str], dict[str, Any], dict[tuple[int, ...], list[list[Any]]]]:
    """Signature, constants and attributes for ``args``, decided as Triton's launcher does.

    Integers equal to 1 become constants, integers and pointers divisible by 16 get a
    divisibility hint (so the compiler may vectorise), parameters in ``do_not_specialize`` get
    neither. Meta tensors stand in for device tensors: data pointer 0 is divisible by 16, as
    every fresh CUDA allocation is.
    """
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    signature: dict[str, str] = {}
    constants: dict[str, Any] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    no_spec = {p.name for p in fn.params if p.do_not_specialize}
    for i, (name, value) in enumerate(zip(fn.arg_names, args, strict=False)):
        kind, key = native_specialize_impl(BaseBackend, value, False, name not in no_spec, True)
        if kind == "constexpr":
            signature[name] = "constexpr"
            constants[name] = key
            continue
        signature[name] = kind
        if key == "D":
            attrs[(i,)] = [["tt.divisibility", 16]]
    return signature, constants, attrs


def compile_launch(
    launch: Any, arch: int, options: dict[str, Any] | None = None
) -> KernelBuild:
    """Compile one :class:`~snnbench.fused.triton_kernels.Launch` for ``sm_<arch>`` with the
    launch's own compile options (``options`` overrides some, e.g. to show what FMA contraction
    would do)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from snnbench.fused.triton_kernels import LAUNCH_OPTIONS

    fn = launch.kernel
    signature, constants, attrs = _specialise(fn, launch.args)
    for name in launch.constexprs:
        signature[name] = "constexpr"
    constants.update(launch.constexprs)
    source = ASTSource(fn=fn, signature=signature, constexprs=constants, attrs=attrs)
    options = {"num_warps": launch.num_warps, **LAUNCH_OPTIONS, **(options or {})}
    compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)
    cubin: bytes = compiled.asm["cubin"]
    registers, spill, sass_ops = _inspect(cubin)
    return KernelBuild(
        kernel=fn.__name__,
        arch=arch,
        signature={k: v for k, v in signature.items() if v != "constexpr"},
        constexprs=dict(launch.constexprs),
        grid=tuple(launch.grid),
        num_warps=launch.num_warps,
        registers=registers,
        spill_bytes=spill,
        shared_bytes=int(compiled.metadata.shared),
        sass_ops=sass_ops,
    )


def _inspect(cubin: bytes) -> tuple[int, int, dict[str, int]]:
    """(registers, local-memory bytes, opcode counts) of a one-kernel cubin."""
    tools = tools_dir()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        usage = _tool(tools / "cuobjdump", "--dump-resource-usage", str(path))
        sass = _tool(tools / "nvdisasm", str(path))
    found = _RESOURCES.search(usage)
    if found is None:
        raise AotUnavailable(f"unexpected cuobjdump output: {usage.strip()[:200]}")
    registers, _stack, _static_shared, local = (int(g) for g in found.groups())
    return registers, local, dict(collections.Counter(_OPCODE.findall(sass)))


def _tool(path: Path, *args: str) -> str:
    proc = subprocess.run([str(path), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise AotUnavailable(f"{path.name} failed: {proc.stderr.strip()[:300]}")
    return proc.stdout


_TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def layer_launches(
    batch: int,
    neurons: int,
    time_steps: int,
    dtype: str,
    params: LIFParams,
    *,
    sms: int = H200_SMS,
    broadcast_grad: bool = True,
    want_db: bool = True,
    scan: str = "default",
) -> tuple[Any, Any]:
    """The (forward, backward) launches of one fused layer on a GPU with ``sms`` SMs.

    ``broadcast_grad``: the upstream gradient is the stride-0 gradient of ``spikes.sum()`` (the
    harness's loss); otherwise a contiguous one (e.g. under CUDA-graph replay, which copies it
    into a static buffer). ``scan``: the kernel design (``default`` or ``chunked``). Built from
    meta tensors: nothing is allocated.
    """
    from snnbench.fused import triton_kernels as tk

    meta = torch.device("meta")
    dt = _TORCH_DTYPES[dtype]
    rows = (time_steps, batch * neurons)
    y = torch.empty(rows, dtype=dt, device=meta)
    vpre = y if dt == torch.float32 else torch.empty(rows, dtype=torch.float32, device=meta)
    spikes = torch.empty(rows, dtype=dt, device=meta)
    programs = tk.PROGRAMS_PER_SM * sms
    forward = tk.forward_launch(y, vpre, spikes, params, programs, scan)
    shape = (time_steps, batch, neurons)
    grad = (
        torch.empty((), dtype=dt, device=meta).expand(shape)
        if broadcast_grad
        else torch.empty(shape, dtype=dt, device=meta)
    )
    vpre3 = vpre.view(shape)
    dy = vpre3 if dt == torch.float32 else torch.empty(shape, dtype=dt, device=meta)
    backward = tk.backward_launch(vpre3, grad, dy, params, want_db, programs, scan=scan)
    return forward, backward


def _row(n: int, dtype: str, build: KernelBuild) -> list[str]:
    tile = "x".join(
        str(build.constexprs[k]) for k in ("BLOCK_B", "BLOCK_N", "BLOCK") if k in build.constexprs
    )
    return [
        str(n), dtype, build.kernel.strip("_").replace("_kernel", ""),
        f"{build.grid}", tile, str(build.constexprs.get("CHUNK", 1)), str(build.num_warps),
        str(build.constexprs["STAGES"]),
        str(build.registers), str(build.spill_bytes), str(build.shared_bytes),
        str(build.pipelined_loads), str(build.ffma),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Print what the kernels compile to for a GPU's shapes; exit 1 on a spill or FFMA in the
    forward, 2 when nothing can be compiled here."""
    parser = argparse.ArgumentParser(prog="python -m snnbench.fused.aot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", type=int, default=H200_ARCH, help="compute capability × 10")
    parser.add_argument("--sms", type=int, default=H200_SMS, help="streaming multiprocessors")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--time-steps", type=int, default=500)
    parser.add_argument("--neurons", default="512,1024,2048,4096,8192,16384")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--reset", choices=RESETS, default="subtract")
    parser.add_argument("--surrogate", choices=SURROGATES, default="sigmoid")
    parser.add_argument("--slope", type=float, default=4.0)
    parser.add_argument("--detach-reset", action="store_true")
    parser.add_argument("--scan", choices=("default", "chunked"), default="default",
                        help="the scan kernels' design (chunked: CHUNK time steps per tile load)")
    ns = parser.parse_args(argv)
    try:
        neurons = [int(x) for x in ns.neurons.split(",") if x.strip()]
        dtypes = [d.strip() for d in ns.dtypes.split(",") if d.strip()]
        if any(d not in _TORCH_DTYPES for d in dtypes) or any(n < 1 for n in neurons):
            raise ValueError
    except ValueError:
        print(f"error: --neurons takes positive integers and --dtypes {', '.join(_TORCH_DTYPES)}")
        return 2
    params = LIFParams(reset=ns.reset, surrogate=ns.surrogate, slope=ns.slope,
                       detach_reset=ns.detach_reset)
    headers = ["n", "dtype", "kernel", "grid", "tile", "chunk", "warps", "stages", "regs",
               "spill B", "shared B", "LDGSTS", "FFMA"]
    rows: list[list[str]] = []
    bad = False
    try:
        for n in neurons:
            for dtype in dtypes:
                for launch in layer_launches(ns.batch, n, ns.time_steps, dtype, params,
                                             sms=ns.sms, scan=ns.scan):
                    build = compile_launch(launch, ns.arch)
                    rows.append(_row(n, dtype, build))
                    bad |= build.spill_bytes > 0 or (
                        "forward" in build.kernel and build.ffma > 0
                    )
    except AotUnavailable as exc:
        print(f"error: {exc}")
        return 2
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print(f"sm_{ns.arch}, {ns.sms} SMs, B={ns.batch}, T={ns.time_steps}, reset={ns.reset}, "
          f"surrogate={ns.surrogate}, scan={ns.scan}")
    for line in [headers, *rows]:
        print("  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

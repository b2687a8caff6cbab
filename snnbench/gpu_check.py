"""``make gpu-check``: check a GPU box in under 25 minutes and keep everything in one folder.

Runs, in order, each command's output saved as ``<step>.txt`` in the folder:

1. ``setup``: the set-up report (``python -m snnbench.gpu_setup check``: one line per library);
2. ``env``: the machine, GPU and versions a run records;
3. ``verify-float32``: ``snnbench verify --device cuda`` for every adapter (both resets, n=256,
   the opennm-2024 surrogate); ``verify-bfloat16``: the adapters with a bf16 variant;
4. ``run``: ``configs/gpu-check.toml`` (opennm-2024's network, lightly sampled) into ``run/``;
5. ``compile``: torch-compile and norse-compile at n=512, T=500, into ``compile/``;
6. ``report``: ``snnbench report`` of both runs.

A step that outlives its time slice is interrupted (its finished cases are kept; the folder's
README.md says how to finish it) and the next step starts: the whole check ends within the
budget (``--budget-min``, 25 by default; docs/gpu-check.md explains the estimate). The folder
(``results/gpu-check-<date>-<gpu>/``) is made to be committed as ``results/reference/gpu-<gpu>/``.
Exit status: 0 when every step succeeded, 1 when one failed or was cut, 2 for bad input.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from snnbench.errors import UserError, exit_status
from snnbench.host.processes import interruptible_children, stop_group

#: adapters with a bfloat16 variant that matters on a GPU (the JAX ones run bf16 only as bf16)
BF16_ADAPTERS = "fused,torch,torch-cudagraph,haiku:bf16,spyx:bf16"
#: the compiled variants, timed in a run of their own (each compiles for a minute or more)
COMPILED_ADAPTERS = "torch-compile,norse-compile"
#: what verify checks: the opennm-2024 surrogate (sigmoid, slope 4), which every CUDA backend
#: of every library can honour
VERIFY_ARGS = ("--device", "cuda", "--reset", "both", "--neurons", "256",
               "--surrogate", "sigmoid", "--surrogate-slope", "4")


class GpuCheckError(UserError):
    """Bad input to ``gpu_check`` (one line, exit 2)."""


@dataclass(frozen=True)
class CheckStep:
    """One command of the check and its share of the budget."""

    name: str  #: also the name of its output file, ``<name>.txt``
    argv: tuple[str, ...]
    limit_s: float  #: at most this long, even with budget to spare
    reserve_s: float = 0.0  #: held back for this step while the earlier ones run
    resume: str = ""  #: how to finish this step's work by hand when it was cut
    needs: Path | None = None  #: not run when this does not exist (a report needs its run)


@dataclass(frozen=True)
class StepResult:
    """What happened to one step."""

    step: CheckStep
    status: str  #: "ok", "failed", "cut" or "not run"
    exit_code: int | None
    seconds: float
    limit_s: float


def gpu_slug(name: str) -> str:
    """A folder-friendly GPU model: ``"NVIDIA H100 80GB HBM3"`` → ``"h100-80gb-hbm3"``."""
    words = re.sub(r"^(nvidia\s+)?(geforce\s+)?", "", name.strip(), flags=re.IGNORECASE)
    slug = re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-")
    return slug or "gpu"


def default_out(gpu_name: str, now: datetime | None = None) -> Path:
    """``results/gpu-check-<YYYYmmdd-HHMM>-<gpu>``."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M")
    return Path("results") / f"gpu-check-{stamp}-{gpu_slug(gpu_name)}"


def plan_steps(out: Path, python: str = sys.executable) -> list[CheckStep]:
    """The check's commands, in order, writing under ``out``.

    Everything is reached through the installed package (``-m``, a shipped config by name), so
    the check runs the same from a checkout and from an installed wheel.
    """
    bench = (python, "-m", "snnbench")
    run_dir, compile_dir = out / "run", out / "compile"
    config = "gpu-check"
    return [
        CheckStep("setup", (python, "-m", "snnbench.gpu_setup", "check",
                            "--log-dir", str(out / "setup-logs")), limit_s=300),
        CheckStep("env", (*bench, "env"), limit_s=120),
        CheckStep("verify-float32", (*bench, "verify", *VERIFY_ARGS, "--adapters", "all",
                                     "--timeout", "300"), limit_s=600),
        CheckStep("verify-bfloat16", (*bench, "verify", *VERIFY_ARGS, "--dtype", "bfloat16",
                                      "--adapters", BF16_ADAPTERS, "--timeout", "300"),
                  limit_s=240),
        CheckStep("run", (*bench, "run", "--config", config, "--out", str(run_dir)),
                  limit_s=1200, resume=f"snnbench run --resume --out {run_dir}"),
        CheckStep("compile", (*bench, "run", "--config", config, "--adapters", COMPILED_ADAPTERS,
                              "--neurons", "512", "--reset", "subtract", "--timeout", "110",
                              "--out", str(compile_dir)),
                  limit_s=240, reserve_s=240, resume=f"snnbench run --resume --out {compile_dir}"),
        CheckStep("report", (*bench, "report", str(run_dir)), limit_s=120, reserve_s=90,
                  needs=run_dir),
        CheckStep("report-compile", (*bench, "report", str(compile_dir)), limit_s=60,
                  reserve_s=30, needs=compile_dir),
    ]


def step_limits(steps: Sequence[CheckStep], index: int, remaining_s: float) -> float:
    """Seconds step ``index`` may take: its own limit, but never time held for later steps."""
    held = sum(step.reserve_s for step in steps[index + 1:])
    return max(0.0, min(steps[index].limit_s, remaining_s - held))


Launcher = Callable[[CheckStep, float, IO[str]], tuple[str, int | None]]


def launch(step: CheckStep, limit_s: float, log: IO[str]) -> tuple[str, int | None]:
    """Run ``step``, copying its output to ``log`` and stdout; interrupt it after ``limit_s``.

    Returns ("ok" | "failed" | "cut", exit code). A cut step gets SIGINT first (``snnbench
    run`` then stops its worker and keeps the finished cases), SIGKILL 30 s later.
    """
    env = {**os.environ, "COLUMNS": "160", "PYTHONUNBUFFERED": "1"}
    with interruptible_children():  # the cut's SIGINT must reach it
        proc = subprocess.Popen(step.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env,
                                start_new_session=True)
    assert proc.stdout is not None
    stream = proc.stdout

    def pump() -> None:
        for line in stream:
            log.write(line)
            log.flush()
            sys.stdout.write(line)
            sys.stdout.flush()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    cut = False
    try:
        proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        cut = True
        stop_group(proc, grace_s=30)
    except BaseException:
        stop_group(proc, grace_s=30)
        raise
    finally:
        reader.join(timeout=10)
    if cut:
        log.write(f"\n[gpu-check: interrupted after {limit_s:.0f} s]\n")
        return "cut", proc.returncode
    return ("ok" if proc.returncode == 0 else "failed"), proc.returncode


def run_steps(steps: Sequence[CheckStep], out: Path, budget_s: float,
              launcher: Launcher = launch, clock: Callable[[], float] = time.monotonic
              ) -> list[StepResult]:
    """Run every step within ``budget_s`` in total; each step's output goes to ``out``."""
    deadline = clock() + budget_s
    results: list[StepResult] = []
    for index, step in enumerate(steps):
        limit = step_limits(steps, index, deadline - clock())
        if limit < 1.0 or (step.needs is not None and not step.needs.exists()):
            results.append(StepResult(step, "not run", None, 0.0, limit))
            continue
        print(f"[gpu-check] {step.name} (at most {limit:.0f} s): {shlex.join(step.argv)}",
              flush=True)
        start = clock()
        with open(out / f"{step.name}.txt", "w") as log:
            log.write(f"$ {shlex.join(step.argv)}\n")
            status, code = launcher(step, limit, log)
        results.append(StepResult(step, status, code, clock() - start, limit))
    return results


def readme(results: Sequence[StepResult], out: Path, gpu_name: str, budget_s: float,
           started: datetime) -> str:
    """The folder's README.md: what ran, how it ended, how to keep or finish it."""
    total = sum(r.seconds for r in results)
    slug = gpu_slug(gpu_name)
    lines = [
        f"# gpu-check on {gpu_name}",
        "",
        f"Made by `make gpu-check` (snnbench/gpu_check.py), started {started:%Y-%m-%d %H:%M} UTC, "
        f"{total / 60:.1f} min of a {budget_s / 60:.0f} min budget. `setup.txt` is the set-up "
        "report, `env.txt` the machine, `verify-*.txt` the equivalence checks, `run/` the "
        "lightly sampled opennm-2024 comparison (configs/gpu-check.toml) with its `report/`, "
        "`compile/` the compiled variants at n=512.",
        "",
        "| step | status | exit | time (s) | limit (s) |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        code = "" if r.exit_code is None else str(r.exit_code)
        lines.append(f"| {r.step.name} | {r.status} | {code} | {r.seconds:.0f} | "
                     f"{r.limit_s:.0f} |")
    cut = [r.step.resume for r in results if r.status == "cut" and r.step.resume]
    missing = [shlex.join(r.step.argv) for r in results if r.status == "not run"]
    if cut or missing:
        lines += ["", "Unfinished; to complete (a cut run keeps its finished cases):", ""]
        lines += [f"    {command}" for command in (*cut, *missing)]
    lines += ["", "To keep this check as the reference for this GPU:", "",
              f"    git mv {out} results/reference/gpu-{slug}   # or mv, then git add", ""]
    return "\n".join(lines)


def gpu_name(python: str) -> str | None:
    """The first CUDA GPU's name as torch sees it, or None without one."""
    code = ("import torch; print(torch.cuda.get_device_name(0) "
            "if torch.cuda.is_available() else '')")
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    name = out.stdout.strip().splitlines()[-1:] if out.returncode == 0 else []
    return name[0] if name and name[0] else None


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m snnbench.gpu_check",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path,
                        help="the folder to write (default: results/gpu-check-<date>-<gpu>)")
    parser.add_argument("--budget-min", type=float, default=25.0,
                        help="the whole check ends within this many minutes (default 25)")
    parser.add_argument("--dry-run", action="store_true", help="print the steps, run nothing")
    args = parser.parse_args(argv)
    return exit_status("gpu-check", lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    if args.budget_min <= 0:
        raise GpuCheckError(f"--budget-min must be > 0, got {args.budget_min}")
    budget_s = args.budget_min * 60.0
    name = "GPU" if args.dry_run else gpu_name(sys.executable)
    if name is None:
        raise GpuCheckError("no CUDA GPU is visible to torch here: gpu-check needs one "
                            "(run `make gpu-setup` first on a GPU box)")
    out: Path = args.out or default_out(name)
    if out.exists() and any(out.iterdir()):
        raise GpuCheckError(f"{out} exists and is not empty: give another --out")
    steps = plan_steps(out)
    if args.dry_run:
        for index, step in enumerate(steps):
            limit = step_limits(steps, index, budget_s)
            print(f"{step.name:<16} ≤ {limit:4.0f} s  {shlex.join(step.argv)}")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)
    results = run_steps(steps, out, budget_s)
    (out / "README.md").write_text(readme(results, out, name, budget_s, started))
    for result in results:
        print(f"[gpu-check] {result.step.name:<16} {result.status:<8} {result.seconds:5.0f} s")
    print(f"[gpu-check] everything is in {out} (README.md says how to keep it)")
    return 0 if all(r.status == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

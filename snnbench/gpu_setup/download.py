"""``download``: fill a wheelhouse, on a machine with network, for an offline GPU box."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from snnbench.gpu_setup.common import tail
from snnbench.gpu_setup.context import ROOTS, Command, Context
from snnbench.gpu_setup.machine import cuda_major, cupy_distribution


def download_commands(ctx: Context, dest: Path, python_version: str,
                      platforms: Sequence[str]) -> tuple[list[Command], list[str]]:
    """``pip download`` commands for a wheelhouse serving ``ctx.machine`` (what it lacks), and
    notes for what pip cannot fetch. Runs where there is network, for another machine."""
    target = ["--dest", str(dest), "--python-version", python_version, "--only-binary=:all:",
              "--implementation", "cp", *(f"--platform={p}" for p in platforms)]
    base = (sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps")
    roots = {root for names in ROOTS.values() for root in names}
    wanted = ctx.missing(ctx.lock.closure(roots))
    commands = [Command((*base, *target, ctx.lock.pin(n))) for n in wanted]
    commands.append(Command((*base, *target, "--ignore-requires-python", ctx.lock.pin("lava-dl"))))
    major = cuda_major(ctx.machine)
    jaxlib = ctx.machine.jaxlib or ctx.lock.pins.get("jaxlib")
    if major and jaxlib:
        for name in (f"jax-cuda{major}-plugin", f"jax-cuda{major}-pjrt"):
            if ctx.machine.installed.get(name) != jaxlib:
                commands.append(Command((*base, *target, f"{name}=={jaxlib}")))
    cupy = cupy_distribution(ctx.machine)
    if cupy and cupy not in ctx.machine.installed:
        commands.append(Command((*base, *target, ctx.lock.pin(cupy))))
    # sources: SpikingJelly's sdist downloads anywhere; sinabs-exodus's metadata step needs a
    # CUDA torch, so pip cannot fetch its sdist on a CPU machine: its git tag is the same source
    commands.append(Command((*base, "--dest", str(dest), "--no-binary=:all:",
                             ctx.lock.pin("spikingjelly"))))
    exodus = ctx.lock.pins.get("sinabs-exodus", "2.0.0")
    notes = [
        f"sinabs-exodus {exodus}: pip cannot download its sdist without a CUDA torch (its "
        "setup.py builds the extension's metadata); bring its source instead: git clone "
        f"--depth 1 --branch v{exodus} https://github.com/synsense/sinabs-exodus "
        f"{dest}/sinabs-exodus-{exodus} (or `pip download --no-deps --no-binary=:all: "
        f"--no-build-isolation sinabs-exodus=={exodus}` on a machine with a CUDA torch)"]
    return commands, notes


#: run by :func:`pure_wheel_command`: build the wheel, keep it only if it is pure Python
_PURE_WHEEL = """
import glob, os, subprocess, sys
pin, dest = sys.argv[1], sys.argv[2]
before = set(glob.glob(os.path.join(dest, '*.whl')))
code = subprocess.call([sys.executable, '-m', 'pip', 'wheel', '--no-deps',
                        '--disable-pip-version-check', '-q', '-w', dest, pin])
impure = [w for w in set(glob.glob(os.path.join(dest, '*.whl'))) - before
          if not w.endswith('-none-any.whl')]
for w in impure:
    os.remove(w)
if impure:
    sys.exit('not pure Python: ' + ', '.join(os.path.basename(w) for w in impure))
sys.exit(code)
"""


def pure_wheel_command(command: Command) -> tuple[str, ...]:
    """For ``command`` (a binary-only ``pip download`` for another platform), a command that
    builds the project's wheel from its sdist here and keeps it only if it is pure Python."""
    argv = list(command.argv)
    return (sys.executable, "-c", _PURE_WHEEL, argv[-1], argv[argv.index("--dest") + 1])



def fill_wheelhouse(ctx: Context, dest: Path, python_version: str, platforms: Sequence[str],
                    dry_run: bool = False, strict: bool = False) -> int:
    """Run :func:`download_commands` (one line each: ``ok`` or ``FAILED: <reason>``), then print
    the notes; the exit status (1 with ``strict`` when a download failed)."""
    commands, notes = download_commands(ctx, dest, python_version, platforms)
    failed = 0
    for command in commands:
        if dry_run:
            print(f"$ {command.shell()}")
            continue
        result = subprocess.run(command.argv, capture_output=True, text=True)
        what = command.argv[-1]
        if result.returncode != 0 and "--only-binary=:all:" in command.argv:
            # a pure-Python project that publishes only an sdist (norse, rockpool): build its
            # wheel here, since the offline machine may lack the sdist's build backend
            result = subprocess.run(pure_wheel_command(command), capture_output=True,
                                    text=True)
        print(f"{what:<40} {'ok' if result.returncode == 0 else 'FAILED: ' + tail(result.stderr)}",
              flush=True)
        failed += result.returncode != 0
    for note in notes:
        print(f"note: {note}")
    return 1 if strict and failed else 0

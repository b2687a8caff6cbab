"""``download``: fill a wheelhouse, on a machine with network, for an offline GPU box."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from snnbench.gpu_setup.common import tail
from snnbench.gpu_setup.context import ROOT, ROOTS, Command, Context
from snnbench.gpu_setup.machine import cuda_major, cupy_distribution
from snnbench.gpu_setup.steps import selected

#: runs one download command: (argv, environment overrides) -> (exit status, its stderr)
DownloadRunner = Callable[[Sequence[str], Mapping[str, str]], tuple[int, str]]


def sdist_command(ctx: Context, dest: Path, dist: str) -> Command:
    """Fetch ``dist``'s sdist at the lock's version from the index into ``dest``, unbuilt
    (:mod:`.sdist`: ``pip download`` would build its metadata first)."""
    # the child imports snnbench.gpu_setup from where this process did (a checkout, or
    # site-packages), whatever the folder it is started in
    return Command((sys.executable, "-m", "snnbench.gpu_setup.sdist", "--dest", str(dest),
                    ctx.lock.pin(dist)), {"PYTHONPATH": str(ROOT)})


def download_commands(ctx: Context, dest: Path, python_version: str,
                      platforms: Sequence[str]) -> tuple[list[Command], list[str]]:
    """``pip download`` commands for a wheelhouse serving ``ctx.machine`` (what it lacks, for
    the libraries ``--only`` / ``--skip`` leave), and notes for the user. Runs where there is
    network, for another machine."""
    target = ["--dest", str(dest), "--python-version", python_version, "--only-binary=:all:",
              "--implementation", "cp", *(f"--platform={p}" for p in platforms)]
    base = (sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps")
    names = selected(ctx.options)
    roots = {root for name in names for root in ROOTS.get(name, ())}
    wanted = ctx.missing(ctx.lock.closure(roots))
    commands = [Command((*base, *target, ctx.lock.pin(n))) for n in wanted]
    if "lava-dl" in names:
        commands.append(Command((*base, *target, "--ignore-requires-python",
                                 ctx.lock.pin("lava-dl"))))
    major = cuda_major(ctx.machine)
    jaxlib = ctx.machine.jaxlib or ctx.lock.pins.get("jaxlib")
    if "jax-cuda" in names and major and jaxlib:
        for name in (f"jax-cuda{major}-plugin", f"jax-cuda{major}-pjrt"):
            if ctx.machine.installed.get(name) != jaxlib:
                commands.append(Command((*base, *target, f"{name}=={jaxlib}")))
    cupy = cupy_distribution(ctx.machine)
    if "cupy" in names and cupy and cupy not in ctx.machine.installed:
        commands.append(Command((*base, *target, ctx.lock.pin(cupy))))
    # sources, built on the GPU box against its torch: SpikingJelly's sdist downloads anywhere;
    # sinabs-exodus's metadata step needs a CUDA torch, so its sdist is fetched unbuilt
    notes = []
    if "spikingjelly" in names:
        commands.append(Command((*base, "--dest", str(dest), "--no-binary=:all:",
                                 ctx.lock.pin("spikingjelly"))))
    if "sinabs-exodus" in names:
        commands.append(sdist_command(ctx, dest, "sinabs-exodus"))
        notes.append(f"{ctx.lock.pin('sinabs-exodus')}: its sdist, from the package index; "
                     "`install --wheelhouse` builds it on the GPU box against its torch")
    return commands, notes


def _run(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, str]:
    result = subprocess.run(list(argv), capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, env={**os.environ, **env})
    return result.returncode, result.stderr


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
                    dry_run: bool = False, strict: bool = False,
                    runner: DownloadRunner = _run) -> int:
    """Run :func:`download_commands` (one line each: ``ok`` or ``FAILED: <reason>``) through
    ``runner``, then print the notes; the exit status (1 with ``strict`` when one failed)."""
    commands, notes = download_commands(ctx, dest, python_version, platforms)
    failed = 0
    for command in commands:
        if dry_run:
            print(f"$ {command.shell()}")
            continue
        code, stderr = runner(command.argv, command.env)
        what = command.argv[-1]
        if code != 0 and "--only-binary=:all:" in command.argv:
            # a pure-Python project that publishes only an sdist (norse, rockpool): build its
            # wheel here, since the offline machine may lack the sdist's build backend
            code, stderr = runner(pure_wheel_command(command), command.env)
        print(f"{what:<40} {'ok' if code == 0 else 'FAILED: ' + tail(stderr)}", flush=True)
        failed += code != 0
    for note in notes:
        print(f"note: {note}")
    return 1 if strict and failed else 0

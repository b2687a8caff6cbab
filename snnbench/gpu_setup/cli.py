"""The command line: ``python -m snnbench.gpu_setup install|check|probe|download [options]``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from snnbench.errors import exit_status
from snnbench.gpu_setup.common import SetupError
from snnbench.gpu_setup.context import ROOT, Context, Options
from snnbench.gpu_setup.download import fill_wheelhouse
from snnbench.gpu_setup.execution import execute
from snnbench.gpu_setup.lock import DEFAULT_LOCK, read_lock
from snnbench.gpu_setup.machine import Machine, bare_machine, path_env, probe
from snnbench.gpu_setup.steps import PLANNERS, plan

DESCRIPTION = ("Set up the GPU-only parts of snnbench's stack on a machine that already has a "
               "CUDA torch.")


class _Parser(argparse.ArgumentParser):
    """argparse, but a misuse is one line (a :class:`SetupError`, exit 2), not the usage."""

    def error(self, message: str) -> NoReturn:
        raise SetupError(f"{message} (see --help)")


def _jobs(text: str) -> int:
    """``--max-jobs``: a whole number of parallel compile jobs, 0 meaning automatic."""
    try:
        jobs = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if jobs < 0:
        raise argparse.ArgumentTypeError(f"{jobs} is negative: give a number of jobs, "
                                         "or 0 for MAX_JOBS or the CPU count")
    return jobs


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="python -m snnbench.gpu_setup", description=DESCRIPTION)
    parser.add_argument("mode", nargs="?", default="install",
                        choices=("install", "check", "probe", "download"),
                        help="install (default): set up what is missing, then check; check: "
                             "the report only; probe: this machine's facts as JSON; download: "
                             "fill a wheelhouse (--dest) for the machine of --machine")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter to set up (default: this one)")
    parser.add_argument("--lock", type=Path, default=DEFAULT_LOCK,
                        help="versions to install (default: snnbench/locks/requirements-gpu.txt)")
    parser.add_argument("--wheelhouse", type=Path,
                        help="install offline from this folder (wheels, sdists, source folders)")
    parser.add_argument("--online", action="store_true",
                        help="with --wheelhouse: also use the package index")
    parser.add_argument("--arch-list", help="TORCH_CUDA_ARCH_LIST for the CUDA builds, e.g. 9.0 "
                        "(default: $TORCH_CUDA_ARCH_LIST, else the visible GPUs)")
    parser.add_argument("--max-jobs", type=_jobs, default=0,
                        help="parallel compile jobs (default 0: MAX_JOBS, else the CPU count)")
    parser.add_argument("--only", default="", help=f"comma list of: {', '.join(PLANNERS)}")
    parser.add_argument("--skip", default="", help="comma list of libraries to leave alone")
    parser.add_argument("--force", action="store_true", help="rebuild even what already works")
    parser.add_argument("--exodus-source", type=Path, help="a sinabs-exodus source folder")
    parser.add_argument("--spikingjelly-source", type=Path, help="a SpikingJelly source folder")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when a library is not ok (for image builds)")
    parser.add_argument("--log-dir", type=Path, help="full logs (default: build/gpu-setup)")
    parser.add_argument("--machine", type=Path,
                        help="plan for the facts in this JSON (from `probe`) instead of probing")
    parser.add_argument("--dest", type=Path, help="download: the wheelhouse folder to fill")
    parser.add_argument("--python-version", help="download: the target's Python (default: "
                        "--machine's, else this one's)")
    parser.add_argument("--platform", action="append",
                        help="download: wheel platform tags (default: manylinux x86_64)")
    return parser.parse_args(argv)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in PLANNERS]
    if unknown:
        raise SetupError(f"unknown library {', '.join(unknown)} (known: {', '.join(PLANNERS)})")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    return exit_status("gpu-setup", lambda: _main(_arguments(argv)))


def _main(args: argparse.Namespace) -> int:
    if args.mode == "probe":
        print(json.dumps(_machine_dict(probe(args.python)), indent=2))
        return 0
    if not args.lock.is_file():
        raise SetupError(f"no lock file at {args.lock}")
    for path in (args.wheelhouse, args.exodus_source, args.spikingjelly_source):
        if path is not None and not path.exists():
            raise SetupError(f"{path} does not exist")
    if args.mode == "download" and args.dest is None:
        raise SetupError("download needs --dest DIR")
    options = Options(wheelhouse=args.wheelhouse, online=args.online, arch_list=args.arch_list,
                      max_jobs=args.max_jobs, only=_names(args.only), skip=_names(args.skip),
                      force=args.force, exodus_source=args.exodus_source,
                      spikingjelly_source=args.spikingjelly_source)
    try:
        lock = read_lock(args.lock)
    except ValueError as exc:
        raise SetupError(str(exc)) from exc
    if args.machine is not None:
        try:
            machine = Machine.from_dict(json.loads(args.machine.read_text()))
        except RecursionError:  # json cannot read nesting that deep
            raise SetupError(f"cannot read machine facts from {args.machine}: nested too "
                             "deeply") from None
        except (OSError, ValueError) as exc:
            raise SetupError(f"cannot read machine facts from {args.machine}: {exc}") from exc
    elif args.mode == "download":
        machine = bare_machine(lock, args.python_version)
    else:
        machine = probe(args.python)
    ctx = Context(machine, lock, options)
    if args.mode == "download":
        return _download(ctx, args)
    print(f"# gpu-setup: {machine.summary()}", flush=True)
    steps = plan(ctx)
    if args.dry_run:
        for step in steps:
            print(f"{step.name:<14} {step.note}".rstrip())
            if step.blocked:
                print(f"  cannot set up here: {step.blocked}")
                continue
            for command in step.commands:
                print(f"  $ {command.shell()}")
        return 0
    log_dir = args.log_dir or _default_log_dir()
    log_dir.mkdir(parents=True, exist_ok=True)
    outcomes = execute(steps, machine.python, log_dir, args.mode, force=args.force,
                       env=path_env(machine))
    ok = sum(o.ok for o in outcomes)
    print(f"# {ok} of {len(outcomes)} ok; logs in {log_dir}", flush=True)
    if args.strict and ok < len(outcomes):
        for outcome in outcomes:  # an image build keeps no log folder: show what failed
            log = log_dir / f"{outcome.name}.log"
            if not outcome.ok and log.exists():
                lines = log.read_text(errors="replace").splitlines()[-60:]
                print(f"--- {log} (last {len(lines)} lines)", *lines, sep="\n", file=sys.stderr)
        return 1
    return 0




def _download(ctx: Context, args: argparse.Namespace) -> int:
    version = args.python_version or ".".join(ctx.machine.python_version.split(".")[:2])
    platforms = args.platform or ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64",
                                  "manylinux2014_x86_64"]
    return fill_wheelhouse(ctx, args.dest, version, platforms, dry_run=args.dry_run,
                           strict=args.strict)


def _machine_dict(machine: Machine) -> dict[str, Any]:
    return dataclasses.asdict(machine)


def _default_log_dir() -> Path:
    # a checkout keeps its logs in build/; an installed wheel must not write into site-packages
    if (ROOT / "pyproject.toml").exists():
        wanted = ROOT / "build" / "gpu-setup"
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        wanted = Path(cache) / "snnbench" / "gpu-setup"
    try:
        wanted.mkdir(parents=True, exist_ok=True)
        return wanted
    except OSError:  # an installed copy of this package, in a read-only site-packages
        return Path(tempfile.mkdtemp(prefix="snnbench-gpu-setup-"))


"""Set up the GPU-only parts of snnbench's stack on a machine that already has a CUDA torch.

``make gpu-setup`` runs this package, and so does the Docker GPU stage (docker/Dockerfile): one
recipe in both places. It uses only the standard library and ``pip`` (``packaging`` where it is
installed, else pip's copy: see :mod:`._packaging`), so it runs before snnbench is installed
(``python -m snnbench.gpu_setup ...`` from the repository root), against any interpreter
(``--python``). It never replaces what the machine already has (torch, triton, JAX, flax, CUDA
wheels, CuPy...): it installs what is missing, at the versions of the GPU image's lock
(snnbench/locks/requirements-gpu.txt), builds the two CUDA sources, and checks each library.

    python -m snnbench.gpu_setup install [--wheelhouse DIR] [--arch-list 9.0]   # set up
    python -m snnbench.gpu_setup check                                          # report only
    python -m snnbench.gpu_setup install --dry-run                              # the plan
    python -m snnbench.gpu_setup probe > box.json        # this machine's facts, as JSON
    python -m snnbench.gpu_setup download --dest DIR --machine box.json  # a wheelhouse for it

Per library (one line each on stdout, ``ok: ...`` or ``FAILED: <reason>``; progress on stderr):

* sinabs-exodus and SpikingJelly's native CUDA operators are compiled against the installed
  torch (``--no-build-isolation``), for ``TORCH_CUDA_ARCH_LIST`` (``--arch-list``, else the
  environment, else the visible GPUs);
* JAX's CUDA plugin (``jax-cudaNN-plugin`` and ``-pjrt``) at the installed jaxlib's version;
* lava-dl alone, ``--no-deps --ignore-requires-python`` (its wheel declares Python < 3.11); with
  a GPU visible, its CUDA extension is compiled now (torch caches it for every later process);
* the CuPy wheel for the CUDA major of torch (or nvcc): ``cupy-cuda12x`` / ``cupy-cuda13x``;
* what each library imports at run time (spyx: grain, portpicker, nir, optax...), only where
  the library does not import already.

A machine without network installs from a folder (``--wheelhouse DIR``: ``pip --no-index
--find-links DIR``) holding the wheels and the SpikingJelly and sinabs-exodus sdists (a source
folder named ``sinabs-exodus*`` is used instead where there is one); ``download`` fills such a
folder on a machine with network, for the libraries ``--only``/``--skip`` leave. Nothing comes
from a Git repository. Exit status: 0 (failures are lines of the report), 2 for a misuse (one
line on stderr), 1 with ``--strict`` when a library is not ok (the Docker build uses that).

The modules, one job each: :mod:`.lock` (the image locks and their one parser, shared with
docker/verify_stack.py), :mod:`.machine` (the facts and what follows from them alone),
:mod:`.context` (options, commands, steps and their checks), :mod:`.steps` (one planner per
library), :mod:`.execution` (running a plan), :mod:`.download` (the wheelhouse), :mod:`.sdist`
(an sdist from the index, unbuilt: ``download`` runs it as ``python -m``, so it is not imported
here), :mod:`.cli` (the command line), :mod:`._packaging` (``packaging``, or pip's copy of it on
a bare box).
"""

from __future__ import annotations

from snnbench.gpu_setup.cli import _arguments, _names, main
from snnbench.gpu_setup.common import MARKER, SetupError, tail
from snnbench.gpu_setup.context import (
    HARNESS_ROOTS,
    MIN_SETUPTOOLS,
    ROOT,
    ROOTS,
    Command,
    Context,
    Options,
    Step,
    check_code,
)
from snnbench.gpu_setup.download import (
    download_commands,
    fill_wheelhouse,
    pure_wheel_command,
    sdist_command,
)
from snnbench.gpu_setup.execution import Outcome, Runner, execute, run_check, run_command
from snnbench.gpu_setup.lock import (
    DEFAULT_LOCK,
    NOT_NEEDED,
    OUTSIDE_MARKER,
    Lock,
    Pin,
    canonical,
    parse_lock,
    provided_by_machine,
    read_lock,
)
from snnbench.gpu_setup.machine import (
    PROBE_CODE,
    Machine,
    arch_list,
    bare_machine,
    build_blocker,
    cuda_major,
    cupy_distribution,
    older_than,
    path_env,
    probe,
)
from snnbench.gpu_setup.steps import PLANNERS, plan, selected

__all__ = [
    "DEFAULT_LOCK", "HARNESS_ROOTS", "MARKER", "MIN_SETUPTOOLS", "NOT_NEEDED", "OUTSIDE_MARKER",
    "PLANNERS", "PROBE_CODE", "ROOT", "ROOTS", "Command", "Context", "Lock", "Machine",
    "Options", "Outcome", "Pin", "Runner", "SetupError", "Step", "_arguments", "_names",
    "arch_list", "bare_machine", "build_blocker", "canonical", "check_code", "cuda_major",
    "cupy_distribution", "download_commands", "execute", "fill_wheelhouse", "main",
    "older_than", "parse_lock", "path_env", "plan", "probe", "provided_by_machine",
    "pure_wheel_command", "read_lock", "run_check", "run_command", "sdist_command", "selected",
    "tail",
]

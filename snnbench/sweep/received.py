"""A run folder someone sent runs no code: what ``run --resume`` refuses to take from it.

Run folders are what people send each other, and whoever wrote a manifest chose every value
in it. Resuming one runs this snnbench on the cases it records, and nothing else the folder
names:

* no setup line, Apptainer image or Ray address of its recorded executor;
* no library environment to build: a requirement may be a source tree whose build backend
  runs, a URL or an sdist; environments this machine's own cache already holds (built by the
  user) are reused;
* no environment cache of its own (``[run] env_cache``): a cached environment's
  ``bin/python`` is what the worker runs, and the folder may ship one.

The user's own executor options replace the recorded executor; ``--trust-folder`` (a folder
the user wrote) lifts every refusal. Each refusal is one line naming ``--trust-folder``,
before anything is written or run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from snnbench.errors import UserError
from snnbench.executors import ExecutorSettings
from snnbench.executors.plugins import recorded_commands
from snnbench.host.libenv import Base, BuildSettings, EnvironmentRequest, cached, default_cache_dir
from snnbench.records.fileio import StorageError
from snnbench.store.rundir import RunFolder
from snnbench.sweep.plan import Plan

#: how every refusal ends: what to do instead
_TRUST = "a received folder runs no code: --trust-folder if you wrote this folder"


#: the executor options that name text or code to run (:func:`recorded_commands`), each with
#: the value that runs nothing
COMMAND_OPTIONS = {"slurm.setup": (), "slurm.image": "", "slurm.container_args": (),
                   "ray.address": ""}


def refuse_recorded_commands(settings: ExecutorSettings, folder: Path,
                             given: Iterable[str] = ()) -> None:
    """Refuse to resume with a manifest's executor that would run what the folder names.

    Its setup lines run only when the user gives them again (``given``: the executor options
    given now, as :meth:`ExecutorSettings.with_overrides` takes them), or says
    ``--trust-folder``.
    """
    # what the user gives again is theirs; what only the manifest names is not
    given = set(given)
    stripped = settings.with_overrides({k: v for k, v in COMMAND_OPTIONS.items() if k in given})
    found = recorded_commands(stripped)
    if found:
        raise StorageError(
            f"{folder}/manifest.json asks to run {', '.join(found)} with the "
            f"{settings.name} executor; a received folder runs no code: give the executor "
            "options again (e.g. --executor local), or --trust-folder if you wrote this folder"
        )


def recorded_executor(folder: Path) -> ExecutorSettings:
    """The ``[executor]`` a run folder's manifest records; the default one when it cannot be
    read (resuming reports a missing or damaged manifest by itself)."""
    try:
        manifest = RunFolder(folder).manifest_data()
        return ExecutorSettings.from_dict(manifest["config"].get("executor"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UserError):
        return ExecutorSettings()


def refuse_recorded_environments(plan: Plan, folder: Path) -> None:
    """Refuse a resumed plan that would build a library environment, or take one from an
    environment cache the manifest names: both run code the folder chose.

    An environment this machine's own cache (``$SNNBENCH_ENV_CACHE`` or the default) holds
    complete is the user's own build, and is reused without running anything new.
    """
    own = default_cache_dir()
    recorded = plan.config.run.env_cache
    if recorded and os.path.realpath(recorded) != os.path.realpath(own):
        raise StorageError(
            f"{folder}/manifest.json names its own environment cache {recorded} (its "
            f"interpreters would run the cases); {_TRUST}"
        )
    requests = list(
        dict.fromkeys(
            EnvironmentRequest(t.environment.name, tuple(t.environment.requirements))
            for t in plan.tasks
            if t.environment.name
        )
    )
    if not requests:
        return
    settings, base = BuildSettings(cache_dir=own), Base.current()
    missing = [r for r in requests if cached(r, settings, base) is None]
    if missing:
        named = "; ".join(f"{r.name} ({', '.join(r.requirements)})" for r in missing[:3])
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise StorageError(
            f"{folder}/manifest.json asks to build the library environment(s) {named}{more}, "
            f"which {own} does not hold (building one runs its packages' code); {_TRUST}"
        )

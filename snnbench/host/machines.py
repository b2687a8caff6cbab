"""One machine record per host that ran cases of a run: ``<run>/hosts/<host>.json``.

A sweep spread over a cluster runs on many machines. Like asv's one-folder-per-machine, each
host writes its own record (CPU, GPUs, driver, package versions, container image) once, so
merging is trivial: the manifest's ``hosts`` lists them all, and every case row names its host.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any

from snnbench.host.environment import collect_environment
from snnbench.records.contract import now_utc
from snnbench.records.schema import HOSTS_DIR


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "unknown"


def container_info(image: str) -> dict[str, Any] | None:
    """What a run records about an Apptainer image (path, size, modification time)."""
    if not image:
        return None
    info: dict[str, Any] = {"runtime": "apptainer", "image": image}
    with contextlib.suppress(OSError):
        stat = os.stat(image)
        info["bytes"] = stat.st_size
        info["modified_utc"] = stat.st_mtime
    return info


def machine_record(host: str, executor: str, image: str = "") -> dict[str, Any]:
    """This machine as a run records it."""
    environment = collect_environment()
    if image:
        environment["image"] = container_info(image)
    return {"host": host, "executor": executor, "recorded_utc": now_utc(), **environment}


def write_machine_record(run_dir: Path, host: str, executor: str, image: str = "") -> Path:
    """Write this host's record into the run folder, unless it already has one."""
    from snnbench.records.fileio import atomic_write_json

    folder = run_dir / HOSTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_safe(host)}.json"
    if not path.exists():
        atomic_write_json(path, machine_record(host, executor, image))
    return path


def read_machine_records(run_dir: Path) -> list[dict[str, Any]]:
    """Every host's record, by host name. A damaged one, or one whose file is not named after
    its host (a copy, a rename), raises :class:`~snnbench.store.storage.StorageError` naming it:
    it would go into the manifest's host list (what ``compare`` checks the machines by)."""
    from snnbench.records.fileio import StorageError, read_json

    records = []
    for path in sorted((run_dir / HOSTS_DIR).glob("*.json")):
        data = read_json(path, follow=False)  # a received folder's link is not followed
        host = data.get("host") if isinstance(data, dict) else None
        if not isinstance(host, str) or _safe(host) != path.stem:
            what = (f"is the record of host {host!r}" if isinstance(host, str)
                    else "is not a machine record")
            raise StorageError(
                f"{path} {what}: remove it (a resumed run on that host writes it anew)")
        records.append(data)
    return records

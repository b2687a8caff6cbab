"""``make image-check`` under faults (issue 19). The real proof is the image check itself, which
.ci/run runs with podman: it builds the CPU image and uses it. Here a stand-in engine injects
the faults a real one cannot be made to show on demand: no engine, no Debian mirror, an image
that fails its checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "image_check.py"
BASE_SCRIPT = REPO / "docker" / "base" / "make-base-images.sh"

#: a stand-in for podman: logs every call as JSON; `info` works, images exist per $FAKE_IMAGES,
#: `build` writes the --iidfile, `run` fails when $FAKE_RUN_FAILS is set
FAKE_ENGINE = r"""#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(args) + "\n")
cmd = args[0] if args else ""
if cmd == "info" or cmd == "--version":
    print("podman version 0.0-fake"); sys.exit(0)
if cmd == "image" and args[1] == "inspect":
    name = args[-1]
    if name.startswith("sha256:"):
        print("4150000000"); sys.exit(0)
    sys.exit(0 if name in os.environ.get("FAKE_IMAGES", "").split(",") else 1)
if cmd == "build":
    iid = args[args.index("--iidfile") + 1]
    open(iid, "w").write("sha256:" + "c" * 64)
    sys.exit(0)
if cmd == "run":
    if os.environ.get("FAKE_RUN_FAILS"):
        print("Traceback (most recent call last):\n  boom", file=sys.stderr); sys.exit(1)
    print("snnbench 0.1.0"); sys.exit(0)
sys.exit(0)
"""


def _bin(tmp_path: Path, with_engine: bool = True) -> Path:
    """A PATH folder with python3, bash, git and (optionally) the stand-in podman."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "python3").symlink_to(os.path.realpath(sys.executable))
    for tool in ("bash", "git", "mktemp", "rm", "cat", "tail", "awk", "dirname",
                 "touch", "cp", "mkdir", "tar"):
        found = subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True,
                               text=True).stdout.strip()
        if found:
            (folder / tool).symlink_to(found)
    if with_engine:
        engine = folder / "podman"
        engine.write_text(FAKE_ENGINE)
        engine.chmod(0o755)
    return folder


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _env(tmp_path: Path, folder: Path, **extra: str) -> dict[str, str]:
    env = {"PATH": str(folder), "HOME": str(tmp_path), "FAKE_LOG": str(tmp_path / "calls.log"),
           "SNNBENCH_TORCH_WHEELS": str(tmp_path / "no-wheels")}
    env.update(extra)
    return env


def test_no_engine_is_one_line_and_exit_2(tmp_path: Path) -> None:
    folder = _bin(tmp_path, with_engine=False)
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                          env=_env(tmp_path, folder), timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs podman or a running docker" in lines[0]
    assert "apt-get install -y podman" in lines[0]


def test_no_debian_mirror_is_one_line_exit_2_and_nothing_tagged(tmp_path: Path) -> None:
    folder = _bin(tmp_path)
    debootstrap = folder / "debootstrap"
    debootstrap.write_text("#!/bin/sh\necho debootstrap must not run >&2\nexit 1\n")
    debootstrap.chmod(0o755)
    env = _env(tmp_path, folder, SNNBENCH_DEBIAN_MIRROR="http://127.0.0.1:9/debian")
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "the Debian mirror http://127.0.0.1:9/debian is not reachable" in lines[0]
    verbs = [c[0] for c in _calls(tmp_path / "calls.log")]
    assert "import" not in verbs and "build" not in verbs and "tag" not in verbs


def test_an_image_that_fails_its_checks_is_never_tagged(tmp_path: Path) -> None:
    folder = _bin(tmp_path)
    env = _env(tmp_path, folder, FAKE_IMAGES="localhost/debian:bookworm,"
               "localhost/python:3.11-bookworm", FAKE_RUN_FAILS="1")
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 1
    # no --init: the image's own entry point is tini (issue 33 item 11)
    assert "FAILED" in proc.stderr and "run --rm" in proc.stderr
    assert "--init" not in proc.stderr
    calls = _calls(tmp_path / "calls.log")
    assert ["tag", "sha256:" + "c" * 64, "snnbench:cpu"] not in calls
    assert ["rmi", "snnbench:cpu-candidate"] in calls  # the candidate tag is removed
    build = next(c for c in calls if c[0] == "build")
    assert build[build.index("--target") + 1] == "cpu"
    assert "PYTHON_IMAGE=localhost/python:3.11-bookworm" in build
    assert "--format" in build  # podman: else SHELL is ignored and RUN uses /bin/sh


def test_a_local_torch_wheel_is_mounted_not_baked_in(tmp_path: Path) -> None:
    folder = _bin(tmp_path)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    env = _env(tmp_path, folder, FAKE_IMAGES="localhost/debian:bookworm,"
               "localhost/python:3.11-bookworm", FAKE_RUN_FAILS="1",
               SNNBENCH_TORCH_WHEELS=str(wheels))
    subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env,
                   timeout=120)
    build = next(c for c in _calls(tmp_path / "calls.log") if c[0] == "build")
    assert f"{wheels}:{wheels}:ro" in build
    assert "TORCH_INDEX=" in build and f"PIP_FIND_LINKS={wheels}" in build
    assert not any(arg.startswith("--env") or arg == "-e" for arg in build)

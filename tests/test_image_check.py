"""``make image-check`` under faults (issue 19). The real proof is the image check itself, which
.ci/run runs with podman: it builds the CPU image and uses it. Here a stand-in engine injects
the faults a real one cannot be made to show on demand: no engine, no Debian mirror, an image
that fails its checks."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
    broken = [a for a in args if a.startswith("GPU_LOCK=")]
    if broken and not os.environ.get("FAKE_BROKEN_LOCK_BUILDS"):
        print("STEP 14/31: RUN bash docker/install-stack.sh gpu preflight")
        print("lock-preflight: /opt/snnbench/snnbench/locks/requirements-gpu.txt cannot be "
              "installed: snnbench-no-such-package==0.0.1 (no such project)")
        print("Error: building at STEP \"RUN bash docker/install-stack.sh gpu preflight\": "
              "exit status 1")
        sys.exit(1)
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


# ------------------------------------------------------------ the GPU image (issue 37)

BASES = "localhost/debian:bookworm,localhost/python:3.11-bookworm"
BROKEN = REPO / "tests" / "data" / "requirements-gpu-broken.txt"


def test_a_broken_gpu_lock_fails_with_one_line_and_tags_nothing(tmp_path: Path) -> None:
    folder = _bin(tmp_path)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--target", "gpu", "--lock", str(BROKEN)],
                          capture_output=True, text=True, env=_env(tmp_path, folder,
                                                                   FAKE_IMAGES=BASES),
                          timeout=120)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("image-check: FAILED: lock-preflight: ")
    assert "snnbench-no-such-package==0.0.1 (no such project)" in lines[0]
    # the build's log is kept, under a name of its own (another check may run beside it)
    log = Path(re.search(r"; log: (\S+)\)$", lines[0])[1])
    assert log.name.startswith("snnbench-image-build-gpu-") and log.exists()
    log.unlink()
    calls = _calls(tmp_path / "calls.log")
    assert not [c for c in calls if c[0] == "tag"]
    build = next(c for c in calls if c[0] == "build")
    assert "GPU_LOCK=tests/data/requirements-gpu-broken.txt" in build
    assert ["rmi", "snnbench:gpu-candidate"] in calls


def test_image_check_gpu_first_proves_a_broken_lock_is_refused(tmp_path: Path) -> None:
    folder = _bin(tmp_path)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--target", "gpu"], capture_output=True,
                          text=True, env=_env(tmp_path, folder, FAKE_IMAGES=BASES,
                                              FAKE_RUN_FAILS="1"), timeout=120)
    assert "a broken lock fails the build with one line and tags nothing: lock-preflight:" in (
        proc.stdout)
    # that failure was expected: its log is not left behind
    expected = re.search(r"; log: (\S+)\)\n", proc.stdout)
    assert expected and not Path(expected[1]).exists()
    builds = [c for c in _calls(tmp_path / "calls.log") if c[0] == "build"]
    # the broken lock first, then the image and its cached rebuild: both from the real lock,
    # the CUDA sources for one architecture, everything else from the same base as the CPU image
    assert "GPU_LOCK=tests/data/requirements-gpu-broken.txt" in builds[0]
    assert len(builds) == 3 and not [a for b in builds[1:] for a in b if a.startswith("GPU_LOCK")]
    for build in builds:
        assert build[build.index("--target") + 1] == "gpu"
        assert "PYTHON_IMAGE=localhost/python:3.11-bookworm" in build
        assert "TORCH_CUDA_ARCH_LIST=9.0" in build
    assert "figures: gpu image 4.15 GB; first build" in proc.stdout
    assert "cached rebuild" in proc.stdout
    # the image then failed its checks (FAKE_RUN_FAILS): never tagged
    assert proc.returncode == 1
    assert not [c for c in _calls(tmp_path / "calls.log") if c[0] == "tag"]


def test_a_broken_lock_that_builds_fails_the_check(tmp_path: Path) -> None:
    folder = _bin(tmp_path)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--target", "gpu"], capture_output=True,
                          text=True, env=_env(tmp_path, folder, FAKE_IMAGES=BASES,
                                              FAKE_BROKEN_LOCK_BUILDS="1"), timeout=120)
    assert proc.returncode == 1
    assert "the GPU image built from the broken lock" in proc.stderr
    calls = _calls(tmp_path / "calls.log")
    assert ["rmi", "snnbench:gpu-broken-lock-check"] in calls
    assert len([c for c in calls if c[0] == "build"]) == 1  # the real image is not built
    assert not [c for c in calls if c[0] == "tag"]


def test_lock_outside_the_repository_is_one_line_exit_2(tmp_path: Path) -> None:
    folder = _bin(tmp_path)
    lock = tmp_path / "lock.txt"
    lock.write_text("torch==2.13.0\n")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--target", "gpu", "--lock", str(lock)],
                          capture_output=True, text=True,
                          env=_env(tmp_path, folder, FAKE_IMAGES=BASES), timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not inside the repository" in lines[0]
    assert not _calls(tmp_path / "calls.log")


def _podman_with_base() -> bool:
    if shutil.which("podman") is None:
        return False
    env = {**os.environ, "CONTAINERS_CONF": str(REPO / "docker" / "base" / "containers.conf")}
    probe = subprocess.run(["podman", "image", "inspect", "localhost/python:3.11-bookworm"],
                           capture_output=True, env=env, timeout=120)
    return probe.returncode == 0


@pytest.mark.skipif(not _podman_with_base(), reason="needs podman and the local base image "
                    "(make image-check makes it); make image-check-gpu runs the same check")
def test_a_broken_gpu_lock_fails_a_real_build_before_any_download(tmp_path: Path) -> None:
    # the real engine and image build: the preflight stops it in seconds (no wheel downloaded)
    tag = f"snnbench:gpu-test-broken-{os.getpid()}"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--target", "gpu", "--lock", str(BROKEN),
                           "--tag", tag], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("image-check: FAILED: lock-preflight: ")
    assert "snnbench-no-such-package==0.0.1 (no such project)" in lines[0]
    kept = re.search(r"; log: (\S+)\)$", lines[0])
    assert kept is not None
    Path(kept[1]).unlink()  # a failure's log is kept for its reader: here, the test
    env = {**os.environ, "CONTAINERS_CONF": str(REPO / "docker" / "base" / "containers.conf")}
    for name in (tag, f"{tag}-candidate"):
        assert subprocess.run(["podman", "image", "inspect", name], capture_output=True,
                              env=env).returncode != 0, name


def _preflight():  # docker/lock_preflight.py, a script, loaded as a module
    import importlib.util
    spec = importlib.util.spec_from_file_location("lock_preflight",
                                                  REPO / "docker" / "lock_preflight.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lock_preflight_names_every_pin_that_cannot_install() -> None:
    pf = _preflight()
    from pip._vendor.packaging.tags import Tag
    tags = frozenset({Tag("cp311", "cp311", "manylinux_2_28_x86_64"),
                      Tag("py3", "none", "manylinux_2_17_x86_64"), Tag("py3", "none", "any")})
    index = {
        "torch": ["torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                  "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl"],
        "winonly": ["winonly-1.0-cp311-cp311-win_amd64.whl"],
        "sinabs-exodus": ["sinabs_exodus-2.0.0.tar.gz"],
        "nvidia-cuda-nvcc": ["nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64"
                             ".manylinux_2_17_x86_64.whl"],
    }
    lock = pf.pins("torch==2.13.0\n    # via x\nwinonly==1.0\nsinabs-exodus==2.0.0\n"
                   "nvidia-cuda-nvcc==13.0.88\ntorch==2.99.0\nno-such==1.0\n# a comment\n")
    assert len(lock) == 6
    bad = pf.problems(lock, "https://index.invalid/simple", tags,
                      fetch=lambda _index, name: index.get(name))
    assert bad == ["winonly==1.0 (no file for this Python and platform)",
                   "torch==2.99.0 (no file for this Python and platform)",
                   "no-such==1.0 (no such project)"]


def test_lock_preflight_misuse_and_an_unreachable_index_are_one_line(tmp_path: Path) -> None:
    # the real index is not reached: an unreachable one is exit 2, one line
    lock = tmp_path / "lock.txt"
    lock.write_text("torch==2.13.0\n")
    proc = subprocess.run([sys.executable, str(REPO / "docker" / "lock_preflight.py"), str(lock),
                           "--index-url", "http://127.0.0.1:9/simple"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lock-preflight: cannot read the index")
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    proc = subprocess.run([sys.executable, str(REPO / "docker" / "lock_preflight.py"), str(empty)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.strip().endswith("pins nothing")


def _script():  # scripts/image_check.py, loaded as a module
    import importlib.util
    spec = importlib.util.spec_from_file_location("image_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_failed_build_is_explained_by_its_failing_step() -> None:
    ic = _script()
    # an earlier step's success line, then the engine failing by itself (the disk full while
    # it committed the layer): the engine's error, cut to its end, where the cause is
    log = "\n".join([
        "STEP 11/33: RUN bash docker/install-stack.sh gpu preflight",
        "lock preflight ok: all 133 pins of lock have a file on https://pypi.org/simple",
        "STEP 12/33: RUN bash docker/install-stack.sh gpu locked",
        "ERROR: a pip complaint that did not fail the step",
        "cuda-home: nvcc 13.0 in /opt/venv/lib/python3.11/site-packages/nvidia/cu13",
        "Error: committing container for step {" + "x" * 2000
        + "}: processing tar file(write libtriton.so: no space left on device): exit status 1",
    ])
    reason = ic.build_failure_reason(log)
    assert reason.startswith("Error: … ") and reason.endswith(
        "no space left on device): exit status 1")
    assert len(reason) < 400
    # a RUN command that failed: its own line, not the engine's "building at STEP"
    broken = "\n".join(["STEP 11/33: RUN bash docker/install-stack.sh gpu preflight",
                         "lock-preflight: lock cannot be installed: x==1 (no such project)",
                         "Error: building at STEP \"RUN ...\": while running runtime: exit "
                         "status 1"])
    assert ic.build_failure_reason(broken) == (
        "lock-preflight: lock cannot be installed: x==1 (no such project)")
    pip = broken.replace("lock-preflight: lock cannot be installed: x==1 (no such project)",
                         "ERROR: No matching distribution found for torch==9.9")
    assert ic.build_failure_reason(pip) == "ERROR: No matching distribution found for torch==9.9"


def test_in_the_gpu_image_only_a_missing_gpu_excuses_an_adapter() -> None:
    ic = _script()
    # the reasons the CUDA-only adapters give in the GPU image on a machine without a GPU
    for reason in ("CUDA only: no CUDA device is visible to torch",
                   "CUDA only: no CUDA device visible to torch (CPU-only build or no GPU)",
                   "needs a GPU: no GPU is visible"):
        assert ic.unavailable_ok(reason, "gpu"), reason
    # ...and what must fail the check there, though the CPU image accepts the first
    for reason in ("CUDA only: torch 2.13.0+cpu is a CPU build (needs CUDA torch + nvcc)",
                   "CUDA extension not importable: ModuleNotFoundError: exodus_cuda",
                   "cannot import lava (ModuleNotFoundError)"):
        assert not ic.unavailable_ok(reason, "gpu"), reason
    assert ic.unavailable_ok("CUDA only: torch 2.13.0+cpu is a CPU build", "cpu")


def test_the_cache_summary_counts_the_steps_of_a_multi_stage_build() -> None:
    """podman prefixes a multi-stage build's steps with their stage (``[2/3] STEP 4/9:``):
    a cached rebuild once read "23 of 0 steps from the cache"."""
    ic = _script()
    log = "\n".join(["[1/2] STEP 1/2: FROM python:3.11-slim AS base",
                     "[1/2] STEP 2/2: RUN true", "--> Using cache 1a2b",
                     "[2/2] STEP 1/3: FROM base AS cpu", "[2/2] STEP 2/3: COPY . /src",
                     "--> Using cache 3c4d", "[2/2] STEP 3/3: RUN pip install /src",
                     "--> Using cache 5e6f", "COMMIT snnbench:cpu"])
    assert ic.cache_summary(log) == "3 of 5 steps from the cache"
    failed = "\n".join(["[2/2] STEP 3/3: RUN pip install /src", "ERROR: no wheel for x==1",
                        "Error: building at STEP \"RUN pip install /src\": exit status 1"])
    assert ic.build_failure_reason(failed) == "ERROR: no wheel for x==1"

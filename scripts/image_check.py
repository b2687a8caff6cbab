"""``make image-check`` / ``make image-check-gpu``: an image built with podman (or docker) and
used, as a user would.

    python3 scripts/image_check.py [--target cpu|gpu] [--engine podman|docker] [--base IMAGE]
                                   [--tag snnbench:TARGET] [--arch-list 9.0] [--lock PATH]

1. The engine: podman, else a docker whose daemon answers. On hosts like the development VMs
   podman runs with ``docker/base/containers.conf`` (runc, ulimits within the host's).
2. The base image: ``--base`` if given, else ``localhost/python:3.11-bookworm``, made from the
   Debian mirror by ``docker/base/make-base-images.sh`` when missing (no registry needed).
3. ``docker/Dockerfile --target TARGET`` is built under a candidate tag, then built again: the
   first build's time (cold where no layer came from the cache, as in CI) and the cached
   rebuild's are printed, with the image's size. CPU: torch's CPU wheel comes from the PyTorch
   CPU index, or from pip's local wheel folder when it holds the locked wheel (mounted
   read-only into the build, named by build arguments, not kept in the image). GPU: everything
   from the package index, CUDA included (the compiler too, as wheels); the CUDA sources are
   compiled for ``--arch-list`` only (default 9.0: the lent H200), to keep CI short.
   A build that fails prints one line: the step's own message where it gave one (a lock that
   cannot install: ``lock-preflight: ... cannot be installed: NAME==VERSION (why)``).
4. GPU only, first: a broken lock (``tests/data/requirements-gpu-broken.txt``, or ``--lock``)
   must stop the build at its preflight, before any wheel is downloaded, with that one line,
   and tag nothing.
5. Inside the candidate: ``--version``; GPU: every library checked (``python -m
   snnbench.gpu_setup check --strict``) and a first-use CUDA build (lava-dl's JIT extension,
   for the arch list, with no GPU); ``list`` (every adapter available, except those that say
   they are CUDA only, in the GPU image: that no GPU is visible; ``fused`` included);
   ``verify``; a small ``run`` whose results land on a mounted host folder, owned by the calling
   user, its manifest naming the image; ``report`` on it.
6. Only then is the candidate tagged ``--tag``; on any failure the candidate tag is removed, so
   no half-checked image is ever tagged as good.

Standard library only: it runs before any venv exists. One line per step; exit 1 with the
command that broke, exit 2 when something it needs is missing (no engine, no mirror).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE_SCRIPT = REPO / "docker" / "base" / "make-base-images.sh"
CONTAINERS_CONF = REPO / "docker" / "base" / "containers.conf"
LOCAL_BASE = "localhost/python:3.11-bookworm"
LOCK = REPO / "snnbench" / "locks" / "requirements-cpu.txt"
GPU_LOCK = REPO / "snnbench" / "locks" / "requirements-gpu.txt"
#: a GPU lock that cannot install: the build must stop at its preflight (step 4)
BROKEN_GPU_LOCK = REPO / "tests" / "data" / "requirements-gpu-broken.txt"
#: lines a failed build's log gives as its reason, most specific first
REASON_PREFIXES = ("lock-preflight: ", "install-stack: ", "ERROR: ", "Error: ")
#: what an adapter that needs CUDA says in the GPU image on a machine without a GPU
NO_GPU_VISIBLE = re.compile(r"no (CUDA device|GPU)( is)? visible")
#: the adapters the in-image run and verify use: the reference and our fused backend
SMOKE_ADAPTERS = "torch,fused"


class Missing(Exception):
    """Something the check needs is not on this machine (exit 2)."""


class Failed(Exception):
    """A step failed (exit 1); the message names the command."""


def say(text: str) -> None:
    print(f"image-check: {text}", flush=True)


def run(argv: Sequence[str], *, timeout: float = 600, env: dict[str, str] | None = None,
        quiet_ok: bool = True) -> str:
    """Run ``argv``; its stdout, or :class:`Failed` with the command and its output."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise Failed(f"{shlex.join(argv)} ran over {timeout:g} s") from exc
    if proc.returncode != 0 or "Traceback (most recent call last)" in proc.stderr:
        raise Failed(f"{shlex.join(argv)} exited {proc.returncode}\n--- stdout\n"
                     f"{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")
    return proc.stdout


def engine_env(engine: str) -> dict[str, str]:
    """The environment engine commands run with (podman: runc and host-compatible ulimits)."""
    env = dict(os.environ)
    if engine == "podman" and "CONTAINERS_CONF" not in env and shutil.which("runc"):
        env["CONTAINERS_CONF"] = str(CONTAINERS_CONF)
    return env


def pick_engine(wanted: str | None) -> str:
    """podman, else a docker whose daemon answers; :class:`Missing` when neither works."""
    candidates = [wanted] if wanted else ["podman", "docker"]
    for engine in candidates:
        if shutil.which(engine) is None:
            continue
        probe = subprocess.run([engine, "info"], capture_output=True, text=True, timeout=120,
                               env=engine_env(engine), stdin=subprocess.DEVNULL)
        if probe.returncode == 0:
            return engine
    raise Missing("needs podman or a running docker: none answers here "
                  "(on Debian: apt-get install -y podman runc debootstrap)")


def local_torch_wheels() -> str | None:
    """pip's local wheel folder, when it holds the lock's torch wheel (offline machines)."""
    folder = os.environ.get("SNNBENCH_TORCH_WHEELS")
    if folder is None:
        proc = subprocess.run([sys.executable, "-m", "pip", "config", "get",
                               "global.find-links"], capture_output=True, text=True)
        folder = proc.stdout.strip().split()[0] if proc.returncode == 0 and proc.stdout.strip() \
            else ""
    if not folder or not Path(folder).is_dir():
        return None
    pin = next(line for line in LOCK.read_text().splitlines() if line.startswith("torch=="))
    version = pin.split("==", 1)[1]
    found = list(Path(folder).glob(f"torch-{version}-*.whl"))
    return folder if found else None


def build(engine: str, base: str, candidate: str, target: str = "cpu",
          extra_args: Sequence[str] = ()) -> tuple[str, float, str]:
    """Build ``target`` under ``candidate``: its image ID, the seconds it took, and how much came
    from the layer cache ("cold: ..." or "N of M steps from the cache")."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                           capture_output=True, text=True).stdout.strip()
    argv = [engine, "build", "-f", str(REPO / "docker" / "Dockerfile"), "--target", target,
            "-t", candidate, "--build-arg", f"PYTHON_IMAGE={base}",
            "--build-arg", f"GIT_COMMIT={commit}{'-dirty' if dirty else ''}",
            "--build-arg", f"IMAGE_TAG=snnbench:{target}", *extra_args]
    if engine == "podman":
        argv += ["--format", "docker"]  # else SHELL is ignored and RUN steps use /bin/sh
    wheels = local_torch_wheels() if target == "cpu" else None
    if wheels:
        argv += ["--build-arg", "TORCH_INDEX=", "--build-arg", f"PIP_FIND_LINKS={wheels}",
                 "-v" if engine == "podman" else "--volume", f"{wheels}:{wheels}:ro"]
        say(f"torch's CPU wheel from the local folder {wheels}")
    iid = Path(tempfile.mkdtemp(prefix="snnbench-iid-")) / "iid"
    argv += ["--iidfile", str(iid), str(REPO)]
    start = time.monotonic()
    # one log per check process: two checks at once (a test beside make image-check-gpu) must
    # not write into each other's
    log = Path(tempfile.gettempdir()) / f"snnbench-image-build-{target}-{os.getpid()}.log"
    with log.open("w") as out:
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=engine_env(engine),
                              stdin=subprocess.DEVNULL, timeout=7200)
    took = time.monotonic() - start
    text = log.read_text(errors="replace")
    if proc.returncode != 0:
        shutil.rmtree(iid.parent, ignore_errors=True)
        raise Failed(f"{build_failure_reason(text)} (the {target} image build exited "
                     f"{proc.returncode} after {took:.0f} s; log: {log})")
    image_id = iid.read_text().strip()
    shutil.rmtree(iid.parent, ignore_errors=True)
    log.unlink(missing_ok=True)  # kept only where a failure message names it
    return image_id, took, cache_summary(text)


def build_failure_reason(log: str) -> str:
    """One line saying why a build failed, from the failing step's output (after the log's last
    ``STEP`` line). Where the engine failed by itself (not a RUN command's exit status: e.g. the
    disk full while it committed a layer), its error, cut to its end, where the cause is; else
    the first line of the most specific kind (:data:`REASON_PREFIXES`: the lock preflight's, the
    install script's, pip's, the engine's); else the log's last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    steps = [i for i, line in enumerate(lines) if _STEP_LINE.match(line)]
    failing = lines[steps[-1] + 1:] if steps else lines

    def cut(line: str) -> str:
        return line if len(line) <= 400 else f"{line[:6]} … {line[-300:]}"

    engine = [line for line in failing if line.startswith("Error: ")]
    if engine and "building at STEP" not in engine[-1] and "while running runtime" not in (
            engine[-1]):
        return cut(engine[-1])
    for prefix in REASON_PREFIXES:
        for line in failing:
            if line.startswith(prefix):
                return cut(line)
    return cut(lines[-1]) if lines else "the build printed nothing"


#: a build step's first line in podman's log: ``STEP 3/9: RUN ...``, or in a multi-stage
#: build ``[2/3] STEP 3/9: RUN ...`` (an unprefixed pattern counted none of those: "23 of 0
#: steps from the cache")
_STEP_LINE = re.compile(r"(\[\d+/\d+\] )?STEP \d+/\d+: ")


def cache_summary(log: str) -> str:
    """How much of a build came from the layer cache, from podman's log ("STEP n/m: ...",
    "--> Using cache ...") or BuildKit's ("#n [stage k/m] ...", "#n CACHED")."""
    lines = log.splitlines()
    steps = sum(1 for line in lines
                if _STEP_LINE.match(line) or re.match(r"#\d+ \[\S+ +\d+/\d+\] ", line))
    cached = sum(1 for line in lines if "Using cache" in line or re.match(r"#\d+ CACHED", line))
    if cached == 0:
        return "cold: no step from the cache"
    return f"{cached} of {steps} steps from the cache"


class Container:
    """``engine run --rm`` of one image, with what every check needs: no ``--init``, as
    most people type it (the image brings its own, tini)."""

    def __init__(self, engine: str, image: str) -> None:
        self.engine, self.image = engine, image
        self.env = engine_env(engine)

    def run(self, *args: str, mounts: Sequence[str] = (), user: str | None = None,
            extra: Sequence[str] = (), timeout: float = 900) -> tuple[str, float]:
        name = f"snnbench-image-check-{os.getpid()}-{time.monotonic_ns()}"
        argv = [self.engine, "run", "--rm", "--name", name, *extra]
        for mount in mounts:
            argv += ["-v", mount]
        if user:
            argv += ["--user", user]
        argv += [self.image, *args]
        start = time.monotonic()
        try:
            return run(argv, timeout=timeout, env=self.env), time.monotonic() - start
        finally:
            # a container that ran over its time must not outlive the check
            subprocess.run([self.engine, "rm", "-f", name], capture_output=True, env=self.env)


def use(box: Container, scratch: Path, target: str = "cpu", arch_list: str = "9.0") -> None:
    """What a user does with the image, each step checked."""
    out, took = box.run("--version")
    say(f"--version: {out.strip()} ({took:.1f} s)")
    if target == "gpu":
        check_libraries(box)
        check_first_use_build(box, arch_list)

    out, took = box.run("list", "--json")
    listed = json.loads(out)
    missing = [f"{a['name']} ({a.get('reason')})" for a in listed
               if not a.get("available") and not unavailable_ok(a.get("reason") or "", target)]
    if missing:
        what = "no GPU is visible" if target == "gpu" else "CUDA only"
        raise Failed(f"unavailable in the image (and not because {what}): " + "; ".join(missing))
    available = sorted(a["name"] for a in listed if a.get("available"))
    if "fused" not in available:
        raise Failed("fused is not available in the image")
    cuda_only = sorted(a["name"] for a in listed if not a.get("available"))
    rest = (f"{', '.join(cuda_only)} say no GPU is visible" if target == "gpu"
            else "the rest CUDA only")
    say(f"list: {len(available)} of {len(listed)} adapters available ({', '.join(available)}); "
        f"{rest or 'none unavailable'} ({took:.1f} s)")

    out, took = box.run("verify", "--adapters", SMOKE_ADAPTERS)
    if "OK" not in out:
        raise Failed(f"verify --adapters {SMOKE_ADAPTERS} printed:\n{out}")
    say(f"verify --adapters {SMOKE_ADAPTERS}: {out.strip().splitlines()[-1]} ({took:.1f} s)")

    # results on a mounted host folder, written as the calling user
    host = scratch / "results"
    host.mkdir()
    me = f"{os.getuid()}:{os.getgid()}"
    # the image's identity, passed at run time as docker/docker.mk does
    identity = ["-e", f"SNNBENCH_IMAGE_TAG=snnbench:{target}",
                "-e", f"SNNBENCH_IMAGE_DIGEST={box.image}"]
    _, took = box.run("run", "--config", "ci-smoke", "--adapters", f"{SMOKE_ADAPTERS},null",
                      "--neurons", "64", "--steps", "10", "--batch-size", "2",
                      "--out", "/results/smoke", mounts=[f"{host}:/results"], user=me,
                      extra=identity)
    run_dir = host / "smoke"
    rows = [json.loads(p.read_text()) for p in (run_dir / "cases").glob("*.json")]
    ok = sorted({r["adapter"] for r in rows if r.get("status") == "ok"})
    if not {"torch", "fused"} <= set(ok):
        raise Failed(f"the in-image run gave ok rows only for {ok}: "
                     + "; ".join(f"{r['adapter']} {r.get('status')} {r.get('message', '')}"
                                 for r in rows))
    foreign = [p for p in run_dir.rglob("*") if p.stat().st_uid != os.getuid()]
    if foreign:
        raise Failed(f"{len(foreign)} result file(s) not owned by uid {os.getuid()}, "
                     f"e.g. {foreign[0]}")
    images = _recorded_images(json.loads((run_dir / "manifest.json").read_text()))
    if not any(rec.get("digest") == box.image for rec in images):
        raise Failed(f"the manifest does not record the image {box.image}: {images}")
    say(f"run (as {me}, results on the host, files owned by uid {os.getuid()}): ok rows for "
        f"{', '.join(ok)}; the manifest records the image's tag and ID ({took:.1f} s)")

    _, took = box.run("report", "/results/smoke", mounts=[f"{host}:/results"], user=me)
    if not (run_dir / "report" / "report.md").exists():
        raise Failed("report wrote no report/report.md on the host")
    say(f"report: {run_dir / 'report' / 'report.md'} ({took:.1f} s)")


def unavailable_ok(reason: str, target: str) -> bool:
    """Whether an adapter may be unavailable in the ``target`` image for ``reason``: in the CPU
    image, because it is CUDA only; in the GPU image (checked without a GPU), only because no
    GPU is visible: not because anything is missing."""
    if target == "gpu":
        return NO_GPU_VISIBLE.search(reason) is not None
    return "CUDA only" in reason


#: lava-dl's CUDA extension compiled as its JIT does at first use (torch's extension loader on
#: the .cu file lava ships, under lava's module name), for the arch list: lava's own accessor
#: refuses to start without a visible GPU, the build itself needs none
LAVA_JIT = """
import os, sys, time, contextlib
os.environ["TORCH_CUDA_ARCH_LIST"] = sys.argv[1]
import importlib.util
from torch.utils.cpp_extension import CUDA_HOME, load
spec = importlib.util.find_spec("lava.lib.dl.slayer.neuron.dynamics.leaky_integrator")
source = os.path.join(os.path.dirname(spec.origin), "leaky_integrator.cu")
start = time.perf_counter()
with contextlib.redirect_stdout(sys.stderr):
    module = load(name="dynamics", sources=[source])
assert hasattr(module, "fwd") or hasattr(module, "dynamics"), dir(module)
print("lava-dl's leaky_integrator.cu built for sm %s in %.0f s by nvcc from %s"
      % (sys.argv[1], time.perf_counter() - start, CUDA_HOME))
"""


def check_libraries(box: Container) -> None:
    """Every library of the GPU stack imports (gpu_setup's checks, one line each, no GPU)."""
    out, took = box.run("-m", "snnbench.gpu_setup", "check", "--strict",
                        extra=["--entrypoint", "python"], timeout=900)
    lines = [line for line in out.splitlines() if line and not line.startswith("#")]
    say(f"libraries: {len(lines)} checked ({took:.1f} s)")
    for line in lines:
        say(f"  {line}")


def check_first_use_build(box: Container, arch_list: str) -> None:
    """The compiler and headers that first-use CUDA builds need are in the image: lava-dl's JIT
    extension is built in it, without a GPU."""
    out, took = box.run("-c", LAVA_JIT, arch_list, extra=["--entrypoint", "python"],
                        timeout=1800)
    say(f"first-use build: {out.strip().splitlines()[-1]} ({took:.1f} s)")


def _recorded_images(manifest: object) -> list[dict[str, object]]:
    """Every image record (``{"tag", "digest", ...}``) the manifest holds, wherever it sits."""
    found: list[dict[str, object]] = []
    if isinstance(manifest, dict):
        if "digest" in manifest and "tag" in manifest:
            found.append(manifest)
        for value in manifest.values():
            found += _recorded_images(value)
    elif isinstance(manifest, list):
        for item in manifest:
            found += _recorded_images(item)
    return found


def broken_lock_refused(engine: str, base: str, lock: Path, extra_args: Sequence[str]) -> None:
    """A GPU build from ``lock`` (one that cannot install) must stop at the preflight, with the
    preflight's one line, and leave no image under the tag it was built for."""
    try:
        rel = lock.resolve().relative_to(REPO)
    except ValueError:
        raise Missing(f"--lock {lock} is not inside the repository (the build context)") from None
    tag = "snnbench:gpu-broken-lock-check"
    env = engine_env(engine)
    try:
        build(engine, base, tag, "gpu", [*extra_args, "--build-arg", f"GPU_LOCK={rel}"])
    except Failed as exc:
        line = str(exc)
        if not line.startswith("lock-preflight: ") or "\n" in line:
            raise Failed(f"the broken lock {rel} failed the build, but not at its preflight "
                         f"in one line: {line}") from None
        tagged = subprocess.run([engine, "image", "inspect", tag], capture_output=True, env=env)
        if tagged.returncode == 0:
            raise Failed(f"the broken lock {rel} left an image tagged {tag}") from None
        say(f"a broken lock fails the build with one line and tags nothing: {line}")
        expected = re.search(r"; log: (\S+)\)$", line)
        if expected:  # the failure was the point: its log is no evidence of anything wrong
            Path(expected[1]).unlink(missing_ok=True)
        return
    subprocess.run([engine, "rmi", tag], capture_output=True, env=env)
    raise Failed(f"the GPU image built from the broken lock {rel}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--engine", choices=("podman", "docker"))
    parser.add_argument("--base", help=f"the python:3.11 base image (default: {LOCAL_BASE}, "
                                       "made locally from the Debian mirror)")
    parser.add_argument("--tag", help="tag given once every check passed (default: "
                                      "snnbench:TARGET)")
    parser.add_argument("--arch-list", default="9.0",
                        help="gpu: TORCH_CUDA_ARCH_LIST of the CUDA builds (default 9.0)")
    parser.add_argument("--lock", type=Path,
                        help="gpu: build from this lock (a file in the repository) instead of "
                             "snnbench/locks/requirements-gpu.txt")
    parser.add_argument("--broken-lock", type=Path, default=BROKEN_GPU_LOCK,
                        help="gpu: a lock that cannot install, checked to fail first")
    args = parser.parse_args(argv)
    tag = args.tag or f"snnbench:{args.target}"
    candidate = f"{tag}-candidate"
    gpu_args: list[str] = []
    if args.target == "gpu":
        gpu_args = ["--build-arg", f"TORCH_CUDA_ARCH_LIST={args.arch_list}",
                    "--build-arg", f"MAX_JOBS={os.cpu_count() or 1}"]
    try:
        if args.lock is not None:
            if args.target != "gpu":
                raise Missing("--lock is for --target gpu")
            try:
                gpu_args += ["--build-arg",
                             f"GPU_LOCK={args.lock.resolve().relative_to(REPO)}"]
            except ValueError:
                raise Missing(f"--lock {args.lock} is not inside the repository (the build "
                              "context)") from None
        engine = pick_engine(args.engine)
        env = engine_env(engine)
        say(f"engine: {run([engine, '--version'], env=env).strip()}")
        base = args.base
        if base is None:
            start = time.monotonic()
            proc = subprocess.run(["bash", str(BASE_SCRIPT), engine], env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True)
            for line in proc.stdout.splitlines():
                say(line.removeprefix("make-base-images: "))
            if proc.returncode == 2:
                raise Missing(proc.stderr.strip().splitlines()[-1].removeprefix(
                    "make-base-images: "))
            if proc.returncode != 0:
                raise Failed(f"{BASE_SCRIPT} exited {proc.returncode}\n{proc.stderr[-3000:]}")
            base = LOCAL_BASE
            say(f"base image {base} ready ({time.monotonic() - start:.1f} s)")
        if args.target == "gpu" and args.lock is None:
            start = time.monotonic()
            broken_lock_refused(engine, base, args.broken_lock, gpu_args)
            say(f"broken-lock check: {time.monotonic() - start:.0f} s")
        image_id, took, cached = build(engine, base, candidate, args.target, gpu_args)
        size = run([engine, "image", "inspect", "--format", "{{.Size}}", image_id], env=env)
        say(f"built {candidate} ({image_id[:12]}): {int(size) / 1e9:.2f} GB in {took:.0f} s "
            f"({cached})")
        again, took_again, cached_again = build(engine, base, candidate, args.target, gpu_args)
        if again != image_id:
            raise Failed(f"the rebuild gave another image ({again[:12]}, not {image_id[:12]}): "
                         f"a step is not cached ({cached_again})")
        say(f"figures: {args.target} image {int(size) / 1e9:.2f} GB; first build {took:.0f} s "
            f"({cached}); cached rebuild {took_again:.0f} s ({cached_again})")
        with tempfile.TemporaryDirectory(prefix="snnbench-image-check-") as scratch:
            use(Container(engine, image_id), Path(scratch), args.target, args.arch_list)
        run([engine, "tag", image_id, tag], env=env)
        say(f"passed: tagged {tag} ({image_id[:12]})")
        return 0
    except Missing as exc:
        print(f"image-check: {exc}", file=sys.stderr)
        return 2
    except Failed as exc:
        print(f"image-check: FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        # the candidate tag never outlives the check: good images carry --tag only
        if "engine" in locals():
            # rmi of a tag: only untags an image that also carries --tag, and deletes one that
            # failed its checks
            subprocess.run([engine, "rmi", candidate], capture_output=True,
                           env=engine_env(engine))


if __name__ == "__main__":
    sys.exit(main())

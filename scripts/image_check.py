"""``make image-check``: the CPU image built with podman (or docker) and used, as a user would.

    python3 scripts/image_check.py [--engine podman|docker] [--base IMAGE] [--tag snnbench:cpu]

1. The engine: podman, else a docker whose daemon answers. On hosts like the development VMs
   podman runs with ``docker/base/containers.conf`` (runc, ulimits within the host's).
2. The base image: ``--base`` if given, else ``localhost/python:3.11-bookworm``, made from the
   Debian mirror by ``docker/base/make-base-images.sh`` when missing (no registry needed).
3. ``docker/Dockerfile --target cpu`` is built under a candidate tag. torch's CPU wheel comes
   from the PyTorch CPU index, or from pip's local wheel folder when it holds the locked
   wheel (mounted read-only into the build, named by build arguments, not kept in the image).
4. Inside the candidate: ``--version``; ``list`` (every adapter available, except those that
   say they are CUDA only; ``fused`` included); ``verify``; a small ``run`` whose results land
   on a mounted host folder, owned by the calling user; ``report`` on it.
5. Only then is the candidate tagged ``--tag``; on any failure the candidate tag is removed, so
   no half-checked image is ever tagged as good.

Standard library only: it runs before any venv exists. One line per step; exit 1 with the
command that broke, exit 2 when something it needs is missing (no engine, no mirror).
"""

from __future__ import annotations

import argparse
import json
import os
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


def build(engine: str, base: str, candidate: str) -> tuple[str, float]:
    """Build the CPU stage under ``candidate``; its image ID and the seconds it took."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                           capture_output=True, text=True).stdout.strip()
    argv = [engine, "build", "-f", str(REPO / "docker" / "Dockerfile"), "--target", "cpu",
            "-t", candidate, "--build-arg", f"PYTHON_IMAGE={base}",
            "--build-arg", f"GIT_COMMIT={commit}{'-dirty' if dirty else ''}",
            "--build-arg", "IMAGE_TAG=snnbench:cpu"]
    if engine == "podman":
        argv += ["--format", "docker"]  # else SHELL is ignored and RUN steps use /bin/sh
    wheels = local_torch_wheels()
    if wheels:
        argv += ["--build-arg", "TORCH_INDEX=", "--build-arg", f"PIP_FIND_LINKS={wheels}",
                 "-v" if engine == "podman" else "--volume", f"{wheels}:{wheels}:ro"]
        say(f"torch's CPU wheel from the local folder {wheels}")
    iid = Path(tempfile.mkdtemp(prefix="snnbench-iid-")) / "iid"
    argv += ["--iidfile", str(iid), str(REPO)]
    start = time.monotonic()
    log = Path(tempfile.gettempdir()) / "snnbench-image-build.log"
    with log.open("w") as out:
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=engine_env(engine),
                              stdin=subprocess.DEVNULL, timeout=3600)
    took = time.monotonic() - start
    if proc.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-40:])
        raise Failed(f"{shlex.join(argv)} exited {proc.returncode} (log: {log})\n{tail}")
    image_id = iid.read_text().strip()
    shutil.rmtree(iid.parent, ignore_errors=True)
    return image_id, took


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


def use(box: Container, scratch: Path) -> None:
    """What a user does with the image, each step checked."""
    out, took = box.run("--version")
    say(f"--version: {out.strip()} ({took:.1f} s)")

    out, took = box.run("list", "--json")
    listed = json.loads(out)
    missing = [f"{a['name']} ({a.get('reason')})" for a in listed
               if not a.get("available") and "CUDA only" not in (a.get("reason") or "")]
    if missing:
        raise Failed("unavailable in the image (and not CUDA only): " + "; ".join(missing))
    available = sorted(a["name"] for a in listed if a.get("available"))
    if "fused" not in available:
        raise Failed("fused is not available in the image")
    say(f"list: {len(available)} adapters available ({', '.join(available)}); "
        f"the rest CUDA only ({took:.1f} s)")

    out, took = box.run("verify", "--adapters", SMOKE_ADAPTERS)
    if "OK" not in out:
        raise Failed(f"verify --adapters {SMOKE_ADAPTERS} printed:\n{out}")
    say(f"verify --adapters {SMOKE_ADAPTERS}: {out.strip().splitlines()[-1]} ({took:.1f} s)")

    # results on a mounted host folder, written as the calling user
    host = scratch / "results"
    host.mkdir()
    me = f"{os.getuid()}:{os.getgid()}"
    # the image's identity, passed at run time as docker/docker.mk does
    identity = ["-e", "SNNBENCH_IMAGE_TAG=snnbench:cpu", "-e", f"SNNBENCH_IMAGE_DIGEST={box.image}"]
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("podman", "docker"))
    parser.add_argument("--base", help=f"the python:3.11 base image (default: {LOCAL_BASE}, "
                                       "made locally from the Debian mirror)")
    parser.add_argument("--tag", default="snnbench:cpu", help="tag given once every check passed")
    args = parser.parse_args(argv)
    candidate = f"{args.tag}-candidate"
    try:
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
        image_id, took = build(engine, base, candidate)
        size = run([engine, "image", "inspect", "--format", "{{.Size}}", image_id], env=env)
        say(f"built {candidate} ({image_id[:12]}): {int(size) / 1e9:.2f} GB in {took:.0f} s")
        with tempfile.TemporaryDirectory(prefix="snnbench-image-check-") as scratch:
            use(Container(engine, image_id), Path(scratch))
        run([engine, "tag", image_id, args.tag], env=env)
        say(f"passed: tagged {args.tag} ({image_id[:12]})")
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

"""``make dist-check``: snnbench built and installed the way users install it, then used.

    python scripts/dist_check.py [--work DIR] [--keep]

1. ``python -m build`` makes the sdist, then the wheel from the sdist (so a file the sdist
   forgets is missing from the wheel too); ``packaging`` validates their core metadata.
2. The wheel must hold every module and data file git tracks under ``snnbench/``.
3. The wheel is installed, not editable, into a fresh venv outside the checkout. That venv
   sees the development venv's heavy libraries (torch, JAX, the SNN libraries) through a
   ``.pth`` path line, which adds the folder without running its ``.pth`` hooks, so the
   checkout's editable snnbench stays invisible.
4. From a scratch folder that is not the checkout, the installed ``snnbench`` runs
   ``--version``, ``list``, ``verify``, a tiny ``run``, ``report``, ``compare``, ``merge``,
   ``env`` and ``python -m snnbench.gpu_setup --dry-run``.

Each step prints one line. The first failure prints the command that broke, its output, and
exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

from packaging.metadata import InvalidMetadata, Metadata
from packaging.specifiers import SpecifierSet
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
#: what git tracks under snnbench/ and the wheel must therefore carry
SHIPPED_SUFFIXES = (".py", ".toml", ".txt", ".json")
#: the tiny sweep of the smoke run: two adapters, a few seconds each
SMOKE = ("--config", "ci-smoke", "--adapters", "torch,fused", "--neurons", "64",
         "--steps", "10", "--batch-size", "2")


class CheckFailed(Exception):
    """One step failed; the message says which command and why."""


def step(name: str) -> _Step:
    return _Step(name)


class _Step:
    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        self.start = time.monotonic()

    def __exit__(self, kind: object, value: object, tb: object) -> None:
        took = time.monotonic() - self.start
        if kind is None:
            print(f"dist-check: {self.name}: ok ({took:.1f} s)", flush=True)


def run(argv: Sequence[str], *, cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 900, ok_codes: tuple[int, ...] = (0,)) -> str:
    """Run ``argv``; return its stdout, or raise naming the command and its output."""
    try:
        proc = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise CheckFailed(f"{shlex.join(argv)} (in {cwd}) ran over {timeout:g} s") from exc
    if proc.returncode not in ok_codes or "Traceback (most recent call last)" in proc.stderr:
        raise CheckFailed(f"{shlex.join(argv)} (in {cwd}) exited {proc.returncode}\n"
                          f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")
    return proc.stdout


def tracked_package_files() -> set[str]:
    """Paths (``snnbench/...``) git tracks that the wheel must hold."""
    out = run(["git", "ls-files", "-z", "snnbench"], cwd=REPO)
    return {p for p in out.split("\0") if p.endswith(SHIPPED_SUFFIXES)}


def build(out: Path) -> tuple[Path, Path]:
    """The sdist and the wheel built from it."""
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)],
        cwd=REPO)
    sdists, wheels = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    if len(sdists) != 1 or len(wheels) != 1:
        raise CheckFailed(f"python -m build left {[p.name for p in out.iterdir()]}")
    for found in (sdists[0], wheels[0]):
        check_metadata(found)
    return sdists[0], wheels[0]


def _core_metadata(dist: Path) -> bytes:
    """The core metadata file of an sdist (PKG-INFO) or a wheel (METADATA)."""
    if dist.suffix == ".whl":
        with zipfile.ZipFile(dist) as zf:
            name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            return zf.read(name)
    with tarfile.open(dist) as tf:
        member = next(m for m in tf.getmembers() if m.name.count("/") == 1
                      and m.name.endswith("/PKG-INFO"))
        extracted = tf.extractfile(member)
        assert extracted is not None
        return extracted.read()


def check_metadata(dist: Path) -> None:
    """The core metadata validates (packaging's own validator) and says what users need."""
    try:
        meta = Metadata.from_email(_core_metadata(dist), validate=True)
    except (InvalidMetadata, ExceptionGroup) as exc:
        raise CheckFailed(f"{dist.name}: invalid core metadata: {exc}") from exc
    missing = [field for field in ("summary", "requires_python", "description")
               if not getattr(meta, field)]
    if missing or not meta.provides_extra:
        raise CheckFailed(f"{dist.name}: core metadata lacks {missing or ['extras']}")


def check_contents(wheel: Path) -> str:
    """Every tracked module and data file is in the wheel; returns its Requires-Python."""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = zf.read(metadata).decode()
    missing = sorted(tracked_package_files() - names)
    if missing:
        raise CheckFailed(f"{wheel.name} lacks {len(missing)} tracked file(s): "
                          + ", ".join(missing[:10]))
    for line in meta.splitlines():
        if line.startswith("Requires-Python:"):
            return line.split(":", 1)[1].strip()
    raise CheckFailed(f"{wheel.name} declares no Requires-Python")


def check_python(requires: str) -> str:
    """This interpreter satisfies Requires-Python and is the lowest minor it names."""
    spec = SpecifierSet(requires)
    here = Version(f"{sys.version_info[0]}.{sys.version_info[1]}")
    if here not in spec:
        raise CheckFailed(f"Python {here} does not satisfy the wheel's Requires-Python {requires}")
    lowest = min((Version(s.version) for s in spec if s.operator in (">=", "~=", "==")),
                 default=None)
    if lowest is not None and Version(f"{lowest.major}.{lowest.minor}") != here:
        return f"Python {here}, not the lowest that Requires-Python {requires} names"
    return f"Python {here}, the lowest that Requires-Python {requires} names"


def make_venv(where: Path, wheel: Path) -> Path:
    """A fresh venv with the wheel installed (no deps), seeing the dev venv's libraries."""
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    interpreter = str(base if base.exists() else sys.executable)
    run([interpreter, "-m", "venv", str(where)], cwd=where.parent)
    python = where / "bin" / "python"
    purelib = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                  cwd=where.parent).strip()
    # a plain path line: the dev venv's site-packages is searched after this venv's own, and
    # its .pth hooks (the editable snnbench's finder among them) are not run
    dev = sysconfig.get_paths()["purelib"]
    Path(purelib, "_snnbench_dev_libraries.pth").write_text(dev + "\n")
    run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--disable-pip-version-check", str(wheel)], cwd=where.parent)
    return python


def use(python: Path, scratch: Path, wheel_version: str) -> dict[str, float]:
    """The commands a new user runs, from a folder that is not the checkout."""
    bindir = python.parent
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONSAFEPATH")}
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    snn = [str(bindir / "snnbench")]
    times: dict[str, float] = {}

    def timed(name: str, argv: Sequence[str], **kw: object) -> str:
        with step(name):
            start = time.monotonic()
            out = run(argv, cwd=scratch, env=env, **kw)  # type: ignore[arg-type]
            times[name] = time.monotonic() - start
        return out

    where = timed("import", [str(python), "-c", "import snnbench, snnbench.cli; "
                             "print(snnbench.__file__)"]).strip()
    if not where.startswith(str(python.parent.parent)) or where.startswith(str(REPO)):
        raise CheckFailed(f"snnbench imports from {where}, not from the installed wheel")
    version = timed("--version", [*snn, "--version"])
    if wheel_version not in version:
        raise CheckFailed(f"snnbench --version printed {version.strip()!r}, the wheel is "
                          f"{wheel_version}")

    # list: every adapter the development venv can use is available from the wheel too
    dev = subprocess.Popen([str(Path(sys.executable).parent / "snnbench"), "list", "--json"],
                           cwd=scratch, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    listed = json.loads(timed("list", [*snn, "list", "--json"]))
    dev_out, dev_err = dev.communicate(timeout=900)
    if dev.returncode != 0:
        raise CheckFailed(f"the dev venv's snnbench list --json exited {dev.returncode}: "
                          f"{dev_err[-2000:]}")
    available = {a["name"] for a in listed if a.get("available")}
    dev_available = {a["name"] for a in json.loads(dev_out) if a.get("available")}
    if dev_available - available:
        raise CheckFailed("available in the dev venv but not from the wheel: "
                          + ", ".join(sorted(dev_available - available)))
    print(f"dist-check: list: {len(available)} adapters available, as in the dev venv: "
          + ", ".join(sorted(available)), flush=True)

    verified = timed("verify", [*snn, "verify", "--adapters", "torch,fused"])
    if "OK" not in verified:
        raise CheckFailed(f"snnbench verify --adapters torch,fused printed:\n{verified}")
    first, second = scratch / "run-a", scratch / "run-b"
    timed("run", [*snn, "run", *SMOKE, "--out", str(first)])
    timed("run (second)", [*snn, "run", *SMOKE, "--out", str(second)])
    timed("report", [*snn, "report", str(first)])
    if not (first / "report" / "report.md").exists():
        raise CheckFailed(f"snnbench report {first} wrote no report/report.md")
    # two timing runs of sub-millisecond cases may pass, fail or be inconclusive (exit 0, 1
    # or 3: noise, not a packaging fault); 2 (unusable input) or a crash is the failure here
    compared = timed("compare", [*snn, "compare", str(first), str(second)],
                     ok_codes=(0, 1, 3))
    if not compared.startswith(("PASS", "FAIL", "INCONCLUSIVE")):
        raise CheckFailed(f"snnbench compare printed no verdict:\n{compared[:2000]}")
    # the typed JSON validates against the schema the wheel ships (read from the install)
    shown = scratch / "show.json"
    shown.write_text(timed("show --format json", [*snn, "show", str(first), "-f", "json"]))
    timed("show schema", [str(python), "-c",
                          "import json, sys, jsonschema; from importlib.resources import files; "
                          "schema = json.loads(files('snnbench.schemas').joinpath("
                          "'show.schema.json').read_text()); "
                          "jsonschema.Draft202012Validator(schema).validate("
                          "json.loads(open(sys.argv[1]).read()))", str(shown)])
    timed("merge", [*snn, "merge", str(first)])
    timed("env", [*snn, "env"])
    timed("gpu_setup --dry-run", [str(python), "-m", "snnbench.gpu_setup", "--dry-run"])
    return times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="scratch folder (default: a new temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="snnbench-dist-check-"))
    work.mkdir(parents=True, exist_ok=True)
    if work.resolve().is_relative_to(REPO):
        print(f"dist-check: --work {work} is inside the checkout; choose a folder outside it",
              file=sys.stderr)
        return 2
    try:
        with step("build sdist and wheel, validate their metadata"):
            sdist, wheel = build(work / "dist")
        with step("wheel holds every tracked module and data file"):
            requires = check_contents(wheel)
        print(f"dist-check: {wheel.name}: {wheel.stat().st_size / 1024:.0f} KiB, "
              f"{sdist.name}: {sdist.stat().st_size / 1024:.0f} KiB", flush=True)
        print(f"dist-check: tested on {check_python(requires)}", flush=True)
        with step("install the wheel into a fresh venv"):
            python = make_venv(work / "venv", wheel)
        scratch = work / "user"
        scratch.mkdir()
        use(python, scratch, wheel.name.split("-")[1])
    except CheckFailed as exc:
        print(f"dist-check: FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print("dist-check: passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Library environments: a virtual environment per library version, layered over the base one.

``--adapters snntorch@0.9.4`` runs the snnTorch adapter with snnTorch 0.9.4, while torch, JAX,
CUDA and snnbench itself come from the environment snnbench runs in (the *base*). The overlay
is a plain virtual environment of the base interpreter whose ``site-packages`` holds

* the pinned library and whatever it needs that the base lacks, and
* ``_snnbench_base.pth``, which adds the base's ``site-packages`` with :func:`site.addsitedir`
  (so the base's own ``.pth`` files, snnbench's editable install among them, work too).

The overlay's directory comes first on ``sys.path``, so its packages shadow the base's.
(``--system-site-packages`` would not do: a venv made from a venv sees the *system* packages.)

Building is split in two, both done by uv in the parent, never in a worker:

:func:`resolve`
    ``uv pip compile`` of the requirements with every base distribution *excluded*: the answer
    is the requested packages plus what they need that the base lacks, so the resolver can
    never pull a second torch. "No solution" (an unknown version, a package missing from the
    wheelhouse) is the user's input: :class:`EnvironmentSpecError`, exit 2, before any case runs.
:func:`build`
    ``uv venv`` + ``uv pip install --no-deps`` of the resolved pins, under a lock in the cache
    folder. A failed install is returned as :attr:`BuiltEnvironment.error` (the installer's last
    lines): the cases of that environment become ``unavailable`` rows, every other case runs.

A built environment lives in ``<cache>/<key>/``, where the key hashes the requirements and the
base's identity (interpreter, its ``site-packages`` path, torch/JAX/NumPy versions). A folder
with its ``snnbench-environment.json`` is complete and is reused without calling uv at all, so
a second run needs no network. A machine without network builds from a folder of wheels
(``wheelhouse``: ``uv --offline --no-index --find-links``), or from uv's own cache with
``UV_OFFLINE=1``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from snnbench.errors import UserError
from snnbench.host.processes import run_captured

#: environment variable naming the cache folder (the ``[run] env_cache`` key wins over it)
CACHE_ENV_VAR = "SNNBENCH_ENV_CACHE"
#: environment variable naming a wheelhouse (the ``[run] wheelhouse`` key / ``--wheelhouse`` win)
WHEELHOUSE_ENV_VAR = "SNNBENCH_WHEELHOUSE"
#: the file that marks a built environment as complete (written last)
MARKER_FILE = "snnbench-environment.json"
#: the ``.pth`` file that layers the overlay over the base
BASE_PTH = "_snnbench_base.pth"
#: distributions an environment may never pin: they always come from the base
BASE_ONLY: frozenset[str] = frozenset({"torch", "triton", "jax", "jaxlib", "snnbench"})
#: base packages whose versions are part of an environment's identity
IDENTITY_PACKAGES: tuple[str, ...] = ("torch", "triton", "jax", "jaxlib", "numpy")
#: names a config environment may take (no '@', ':' or ',': they delimit selections)
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
#: what ``--adapters name`` without an environment is called in ``compare --envs``
BASE_NAME = "base"
#: seconds allowed for one uv command (a large download on a slow link)
UV_TIMEOUT_S = 1800.0


class EnvironmentSpecError(UserError, ValueError):
    """An environment's requirements are malformed or cannot be resolved; one line."""


# ---------------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class EnvironmentRequest:
    """What a selection asks for: a named set of requirements to layer over the base."""

    #: ``snntorch@0.9.4`` for ``--adapters snntorch@0.9.4``, else the config table's name
    name: str
    requirements: tuple[str, ...]


def parse_requirement(text: str, where: str) -> Requirement:
    """A PEP 508 requirement, or :class:`EnvironmentSpecError` naming ``where`` it came from."""
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        reason = str(exc).splitlines()[0]
        raise EnvironmentSpecError(f"{where}: malformed requirement {text!r}: {reason}") from exc
    if canonicalize_name(req.name) in BASE_ONLY:
        raise EnvironmentSpecError(
            f"{where}: {req.name} always comes from the base environment (snnbench's own); an "
            "environment pins a library over it"
        )
    return req


def check_requirements(requirements: Iterable[str], where: str) -> tuple[str, ...]:
    """Validate requirement strings (non-empty, well-formed, nothing base-only)."""
    reqs = tuple(str(r).strip() for r in requirements)
    if not reqs or any(not r for r in reqs):
        raise EnvironmentSpecError(f"{where}: requirements must be a non-empty list of "
                                   "requirement strings")
    for text in reqs:
        parse_requirement(text, where)
    return reqs


def check_name(name: str, where: str) -> None:
    """A config environment's name: letters first, no delimiters, not a version, not 'base'."""
    if not NAME_RE.match(name) or name == BASE_NAME:
        raise EnvironmentSpecError(
            f"{where}: environment name {name!r} must start with a letter and hold only letters, "
            f"digits, '.', '_' or '-' (and not be {BASE_NAME!r})"
        )
    if looks_like_version(name):
        raise EnvironmentSpecError(
            f"{where}: environment name {name!r} reads as a version (write e.g. 'env-{name}'): "
            "'adapter@VERSION' already means that version of the adapter's library"
        )


def looks_like_version(text: str) -> bool:
    """True when ``text`` is a PEP 440 version."""
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def version_request(adapter: str, library: str, version: str) -> EnvironmentRequest:
    """The environment ``adapter@version`` stands for: ``library==version`` over the base."""
    where = f"{adapter}@{version}"
    if not looks_like_version(version):
        raise EnvironmentSpecError(f"{where}: {version!r} is not a version")
    if not library:
        raise EnvironmentSpecError(f"{where}: adapter {adapter!r} names no library to pin")
    requirement = f"{library}=={version}"
    check_requirements((requirement,), where)
    return EnvironmentRequest(name=where, requirements=(requirement,))


# ------------------------------------------------------------------------------------ base


@dataclass(frozen=True)
class Base:
    """The environment snnbench runs in, over which overlays are layered."""

    python: str
    python_version: str
    #: the base's site-packages folders (purelib, then platlib when it differs)
    site_dirs: tuple[str, ...]
    #: canonical distribution name → version, for every distribution the base has
    packages: dict[str, str] = field(default_factory=dict)

    @classmethod
    def current(cls) -> Base:
        """This interpreter's environment."""
        paths = sysconfig.get_paths()
        site_dirs = tuple(dict.fromkeys(str(Path(paths[k]).resolve())
                                        for k in ("purelib", "platlib")))
        packages: dict[str, str] = {}
        for dist in importlib.metadata.distributions():
            name = dist.metadata["Name"]
            if name and canonicalize_name(name) not in packages:
                packages[canonicalize_name(name)] = dist.version
        return cls(python=sys.executable, python_version=".".join(map(str, sys.version_info[:3])),
                   site_dirs=site_dirs, packages=packages)

    def identity(self) -> dict[str, Any]:
        """What an overlay built over this base depends on (part of its cache key)."""
        return {
            "python": self.python_version,
            "site_dirs": list(self.site_dirs),
            "packages": {n: self.packages.get(n) for n in IDENTITY_PACKAGES},
        }


def environment_key(requirements: tuple[str, ...], base: Base) -> str:
    """The cache folder name of an environment: a hash of its requirements and the base."""
    normal = sorted(str(Requirement(r)) for r in requirements)
    text = json.dumps({"requirements": normal, "base": base.identity()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def default_cache_dir() -> Path:
    """``$SNNBENCH_ENV_CACHE``, else ``$XDG_CACHE_HOME/snnbench/envs`` (``~/.cache/...``)."""
    if os.environ.get(CACHE_ENV_VAR):  # absolute: the manifest records where it built
        return Path(os.environ[CACHE_ENV_VAR]).expanduser().absolute()
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return (Path(root) / "snnbench" / "envs").absolute()


@dataclass(frozen=True)
class BuildSettings:
    """Where environments are cached and where their wheels come from."""

    cache_dir: Path
    #: a folder of wheels: resolve and install from it alone, offline
    wheelhouse: Path | None = None

    @classmethod
    def from_run(cls, env_cache: str = "", wheelhouse: str = "") -> BuildSettings:
        """Settings from the ``[run]`` keys, falling back to the environment variables."""
        cache = Path(env_cache).expanduser().absolute() if env_cache else default_cache_dir()
        house = wheelhouse or os.environ.get(WHEELHOUSE_ENV_VAR, "")
        return cls(cache_dir=cache,
                   wheelhouse=Path(house).expanduser().absolute() if house else None)


# ------------------------------------------------------------------------------------- uv


def uv_binary() -> str:
    """The uv executable installed with snnbench (the ``uv`` PyPI package), else on PATH."""
    with contextlib.suppress(ImportError, FileNotFoundError):
        from uv import find_uv_bin

        return str(find_uv_bin())
    found = shutil.which("uv")
    if found:
        return found
    raise EnvironmentSpecError("uv is not installed: library environments need it "
                               "(pip install uv, or reinstall snnbench)")


def _index_flags(settings: BuildSettings) -> list[str]:
    if settings.wheelhouse is None:
        return []
    return ["--offline", "--no-index", "--find-links", str(settings.wheelhouse)]


#: runs uv (argv[2:]) with the kernel's SIGKILL due when this process dies (PR_SET_PDEATHSIG,
#: kept across exec), unless this process is gone already: a killed sweep leaves no uv behind
_UV_LAUNCHER = (
    "import ctypes, os, sys\n"
    "try:\n    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)\n"
    "except (OSError, AttributeError):\n    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n    os._exit(137)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


@contextlib.contextmanager
def _text_files(*texts: str) -> Iterator[list[str]]:
    """Each text as a ``/dev/fd/N`` path that uv reads like a file: nothing on disk, so a
    killed sweep leaves no temporary folder. A thread fills each pipe: a text larger than
    the pipe's buffer must not block before uv reads it."""
    fds: list[int] = []
    writers: list[threading.Thread] = []
    try:
        for text in texts:
            read_end, write_end = os.pipe()
            fds.append(read_end)

            def fill(fd: int = write_end, data: bytes = text.encode()) -> None:
                with contextlib.suppress(OSError), open(fd, "wb") as pipe:
                    pipe.write(data)

            writer = threading.Thread(target=fill, name="snnbench-uv-input", daemon=True)
            writer.start()
            writers.append(writer)
        yield [f"/dev/fd/{fd}" for fd in fds]
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)  # a writer still blocked (uv failed early) gets EPIPE and ends
        for writer in writers:
            writer.join(timeout=5)


def _run_uv(args: list[str], timeout_s: float = UV_TIMEOUT_S,
            inputs: Iterable[str] = ()) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)  # uv must act on the interpreter it is given, not this one
    env.setdefault("UV_NO_PROGRESS", "1")
    fds = tuple(int(path.rsplit("/", 1)[1]) for path in inputs)
    command = [sys.executable, "-I", "-S", "-c", _UV_LAUNCHER, str(os.getpid()), uv_binary(),
               *args]
    try:
        return run_captured(command, timeout_s, env=env, pass_fds=fds)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, 124, "",
                                           f"uv took longer than {timeout_s:g} s; stopped")


def installer_error(text: str, lines: int = 8) -> str:
    """The last meaningful lines of uv's output, on one line."""
    kept = [line.strip() for line in text.splitlines()
            if line.strip() and not line.strip().startswith(("Using Python", "Resolved",
                                                              "Prepared", "Installed"))]
    return " | ".join(kept[-lines:])[-1200:]


# ------------------------------------------------------------------------------ resolution


def resolve(request: EnvironmentRequest, settings: BuildSettings, base: Base) -> tuple[str, ...]:
    """The pins to install: the requirements plus what they need that the base lacks.

    Every base distribution the requirements do not name is excluded from the resolution (it
    is provided by the base). Raises :class:`EnvironmentSpecError` when nothing satisfies the
    requirements (unknown version or package, not in the wheelhouse), and
    :class:`EnvironmentBuildError` for anything else (network, a package whose metadata does
    not build).
    """
    named = {canonicalize_name(Requirement(r).name) for r in request.requirements}
    excluded = sorted(n for n in base.packages if n not in named)
    with _text_files("\n".join(request.requirements) + "\n",
                     "\n".join(excluded) + "\n") as (req_file, exclude_file):
        proc = _run_uv(["pip", "compile", "--python", base.python, "--quiet", "--no-header",
                        "--no-annotate", "--excludes", exclude_file,
                        *_index_flags(settings), req_file], inputs=(req_file, exclude_file))
    if proc.returncode != 0:
        message = installer_error(proc.stderr or proc.stdout)
        if "No solution found" in proc.stderr:
            hint = (f" (wheelhouse {settings.wheelhouse})" if settings.wheelhouse else "")
            reason = " ".join(message.replace(" | ", " ").split())
            for noise in ("error: ", "No solution found when resolving dependencies: ",
                          "No solution found when resolving dependencies ", "cause: "):
                reason = reason.replace(noise, "")
            raise EnvironmentSpecError(
                f"environment {request.name}: cannot be resolved{hint}: {reason[:600]}")
        raise EnvironmentBuildError(f"resolving failed: {message}")
    pins = tuple(line.strip() for line in proc.stdout.splitlines()
                 if line.strip() and not line.lstrip().startswith("#"))
    if not pins:  # check_installable refuses what leads here; uv may still find nothing
        raise EnvironmentSpecError(f"environment {request.name}: resolving gave no packages")
    return pins


class EnvironmentBuildError(Exception):
    """uv could not resolve or install an environment (not the user's input): its error."""


# ---------------------------------------------------------------------------------- builds


@dataclass(frozen=True)
class BuiltEnvironment:
    """An environment ready for workers, or the reason it could not be built."""

    request: EnvironmentRequest
    key: str
    path: Path
    #: the pins installed in the overlay (``name==version`` or a direct reference)
    resolved: tuple[str, ...] = ()
    #: "" when usable; else the installer's error, reported in every row of this environment
    error: str = ""
    #: True when the cache already held it (no uv call)
    reused: bool = False
    #: requirements of overlay packages that the base's versions do not satisfy
    warnings: tuple[str, ...] = ()
    build_s: float = 0.0

    @property
    def python(self) -> str:
        """The overlay's interpreter ("" when the build failed)."""
        return "" if self.error else str(self.path / "bin" / "python")

    def to_dict(self) -> dict[str, Any]:
        """What the run manifest records about the environment."""
        return {"name": self.request.name, "requirements": list(self.request.requirements),
                "key": self.key, "path": str(self.path), "resolved": list(self.resolved),
                "error": self.error, "reused": self.reused, "warnings": list(self.warnings),
                "build_s": round(self.build_s, 3)}


def read_marker(path: Path) -> dict[str, Any] | None:
    """The marker of a complete environment folder, or None."""
    try:
        data = json.loads((path / MARKER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and (path / "bin" / "python").exists() else None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (two runs never build one environment at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def cached(request: EnvironmentRequest, settings: BuildSettings,
           base: Base) -> BuiltEnvironment | None:
    """The environment when the cache already holds it complete, else None (no uv call)."""
    key = environment_key(request.requirements, base)
    path = settings.cache_dir / key
    marker = read_marker(path)
    if marker is None:
        return None
    return BuiltEnvironment(request=request, key=key, path=path,
                            resolved=tuple(marker.get("resolved", ())), reused=True,
                            warnings=tuple(marker.get("warnings", ())))


def build(request: EnvironmentRequest, settings: BuildSettings, base: Base,
          resolved: tuple[str, ...]) -> BuiltEnvironment:
    """Build (or reuse) the environment of ``request`` with the pins :func:`resolve` gave.

    Never raises for an install that fails: the result carries the installer's error.
    """
    key = environment_key(request.requirements, base)
    path = settings.cache_dir / key
    start = time.perf_counter()
    try:
        settings.cache_dir.mkdir(parents=True, exist_ok=True)
        with _locked(settings.cache_dir / f"{key}.lock"):
            found = cached(request, settings, base)  # another run may have built it meanwhile
            if found is not None:
                return found
            shutil.rmtree(path, ignore_errors=True)  # a build killed half-way
            _install(path, base, resolved, settings)
            warnings = base_conflicts(_overlay_site(path), base)
            marker = {"requirements": list(request.requirements), "resolved": list(resolved),
                      "base": base.identity(), "warnings": list(warnings),
                      "built_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            (path / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n")
    except EnvironmentBuildError as exc:
        shutil.rmtree(path, ignore_errors=True)
        return BuiltEnvironment(request=request, key=key, path=path, resolved=resolved,
                                error=str(exc), build_s=time.perf_counter() - start)
    except OSError as exc:
        shutil.rmtree(path, ignore_errors=True)
        return BuiltEnvironment(request=request, key=key, path=path, resolved=resolved,
                                error=f"cannot build in {settings.cache_dir}: {exc}",
                                build_s=time.perf_counter() - start)
    return BuiltEnvironment(request=request, key=key, path=path, resolved=resolved,
                            warnings=warnings, build_s=time.perf_counter() - start)


def _overlay_site(path: Path) -> Path:
    major, minor = sys.version_info[:2]
    return path / "lib" / f"python{major}.{minor}" / "site-packages"


def _install(path: Path, base: Base, resolved: tuple[str, ...], settings: BuildSettings) -> None:
    proc = _run_uv(["venv", "--quiet", "--python", base.python, str(path)])
    if proc.returncode != 0:
        raise EnvironmentBuildError(f"uv venv failed: {installer_error(proc.stderr)}")
    site = _overlay_site(path)
    if not site.is_dir():
        raise EnvironmentBuildError(f"uv venv made no {site}")
    # addsitedir, not a bare path: the base's own .pth files (editable installs) must run too
    lines = [f"import site; site.addsitedir({d!r})" for d in base.site_dirs]
    (site / BASE_PTH).write_text("\n".join(lines) + "\n")
    with _text_files("\n".join(resolved) + "\n") as (pins,):
        proc = _run_uv(["pip", "install", "--python", str(path / "bin" / "python"), "--quiet",
                        "--no-deps", *_index_flags(settings), "-r", pins], inputs=(pins,))
    if proc.returncode != 0:
        raise EnvironmentBuildError(f"installing failed: {installer_error(proc.stderr)}")


def base_conflicts(site: Path, base: Base) -> tuple[str, ...]:
    """Requirements of the overlay's packages that the base's versions do not satisfy.

    Those packages come from the base all the same (the overlay never holds a second torch):
    the equivalence check before timing is what shows whether the library copes.
    """
    overlay = {canonicalize_name(d.metadata["Name"]): d
               for d in importlib.metadata.distributions(path=[str(site)]) if d.metadata["Name"]}
    markers: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
    found: list[str] = []
    for name, dist in sorted(overlay.items()):
        for text in dist.requires or ():
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate({**markers, "extra": ""}):
                continue
            dep = canonicalize_name(req.name)
            if dep in overlay or dep not in base.packages:
                continue
            if not req.specifier.contains(base.packages[dep], prereleases=True):
                found.append(f"{name} {dist.version} requires {req.name}{req.specifier}, the "
                             f"base has {base.packages[dep]}")
    return tuple(found)


@dataclass(frozen=True)
class Plan:
    """What :func:`prepare` decided for one environment."""

    request: EnvironmentRequest
    #: the pins to install; empty when the cache holds the environment or resolving failed
    pins: tuple[str, ...] = ()
    #: why resolving failed for a reason that is not the user's input (network, a build)
    error: str = ""


def prepare(requests: Iterable[EnvironmentRequest], settings: BuildSettings,
            base: Base | None = None) -> dict[str, Plan]:
    """Resolve every request the cache lacks: the step that turns bad input into exit 2.

    Raises :class:`EnvironmentSpecError` for requirements nothing satisfies. Returns a plan
    per environment name.
    """
    base = base or Base.current()
    plans: dict[str, Plan] = {}
    requests = list(requests)
    if requests:
        # the user's input, checked whether or not a build needs it: a wheelhouse that is
        # not there is a mistake also when every environment is cached already
        check_wheelhouse(settings, requests[0].name)
    for request in requests:
        if request.name in plans:
            continue
        if cached(request, settings, base) is not None:
            plans[request.name] = Plan(request)
            continue
        check_installable(request, settings)
        try:
            plans[request.name] = Plan(request, pins=resolve(request, settings, base))
        except EnvironmentBuildError as exc:  # reported in the rows of this environment
            plans[request.name] = Plan(request, error=str(exc))
    return plans


def check_wheelhouse(settings: BuildSettings, name: str) -> None:
    """Refuse a wheelhouse that is not a folder (exit 2, before anything is written)."""
    house = settings.wheelhouse
    if house is not None and not house.is_dir():
        why = "is not a folder" if house.exists() else "does not exist"
        raise EnvironmentSpecError(f"environment {name}: the wheelhouse {house} {why}")


def check_installable(request: EnvironmentRequest, settings: BuildSettings) -> None:
    """Refuse, as the user's input (exit 2, before anything is written), what uv would turn
    into an ``unavailable`` row: a wheelhouse that is not a folder, a ``file://`` requirement
    whose file is missing, and requirements whose markers all exclude this interpreter (an
    environment with nothing to install)."""
    check_wheelhouse(settings, request.name)
    markers: dict[str, str] = {**{k: str(v) for k, v in default_environment().items()},
                               "extra": ""}
    applies = []
    for text in request.requirements:
        req = Requirement(text)
        if req.url and req.url.startswith("file:"):
            path = Path(url2pathname(urlparse(req.url).path))
            if not path.exists():
                raise EnvironmentSpecError(
                    f"environment {request.name}: {text!r} names a file that does not exist: "
                    f"{path}")
        if req.marker is None or req.marker.evaluate(markers):
            applies.append(text)
    if not applies:
        listed = ", ".join(map(repr, request.requirements))
        raise EnvironmentSpecError(
            f"environment {request.name}: the markers of {listed} exclude this Python "
            f"({platform.python_version()} on {sys.platform}): the environment would install "
            "nothing")


def build_all(plans: dict[str, Plan], settings: BuildSettings,
              base: Base | None = None) -> dict[str, BuiltEnvironment]:
    """Build every planned environment (cached ones are reused); name → result."""
    base = base or Base.current()
    built: dict[str, BuiltEnvironment] = {}
    for name, plan in plans.items():
        found = cached(plan.request, settings, base)
        if found is not None:
            built[name] = found
        elif plan.error or not plan.pins:
            key = environment_key(plan.request.requirements, base)
            built[name] = BuiltEnvironment(request=plan.request, key=key,
                                           path=settings.cache_dir / key,
                                           error=plan.error or "nothing was resolved")
        else:
            built[name] = build(plan.request, settings, base, plan.pins)
    return built


def pin_names(pins: Iterable[str]) -> tuple[str, ...]:
    """Distribution names of resolved pins (``name==version`` or direct references)."""
    names = []
    for pin in pins:
        with contextlib.suppress(InvalidRequirement):
            names.append(Requirement(pin).name)
    return tuple(names)

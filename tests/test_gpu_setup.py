"""snnbench/gpu_setup/ (``make gpu-setup``) on a CPU machine: its decisions from machine facts
(which CuPy, which arch list, which commands, with which sources), its execution against a
fault-injecting command runner, a real offline install into a scratch venv from a local
wheelhouse, and the claim its install lists rest on: each adapter imports and runs with only
what its step installs (plus the machine's torch/JAX and the harness) visible."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from snnbench import gpu_setup as gs

REPO = Path(__file__).resolve().parents[1]
LOCK = gs.parse_lock((REPO / "snnbench" / "locks" / "requirements-gpu.txt").read_text())
SCRIPT = ("-m", "snnbench.gpu_setup")  # run from the checkout root, as make gpu-setup does

#: the H100 box of the first GPU run (shared/evidence/gpu-h100-2026-11-23): Python 3.12, torch
#: 2.11 cu130, nvcc 13.0, jax 0.11.2 with its plugin, cupy-cuda13x, SpikingJelly's wheel (no
#: native ops), flax 0.12.10, and no portpicker (spyx's import failed on it)
H100: dict[str, Any] = {
    "python": "/opt/torch/.venv/bin/python", "python_version": "3.12.3",
    "torch": "2.11.0+cu130", "torch_cuda": "13.0", "nvcc": "13.0", "cxx": "/usr/bin/c++",
    "cuda_home": "/usr/local/cuda", "jaxlib": "0.11.2", "scripts": "/opt/torch/.venv/bin",
    "gpus": [{"name": "NVIDIA H100 80GB HBM3", "capability": "9.0"}],
    "installed": {
        "torch": "2.11.0+cu130", "triton": "3.6.0", "jax": "0.11.2", "jaxlib": "0.11.2",
        "jax-cuda13-plugin": "0.11.2", "jax-cuda13-pjrt": "0.11.2", "flax": "0.12.10",
        "cupy-cuda13x": "14.2.0", "numpy": "2.5.2", "spikingjelly": "2.0.0", "snntorch": "1.0.0",
        "norse": "1.1.0", "sinabs": "3.1.3", "rockpool": "3.1.0", "dm-haiku": "0.0.17",
        "spyx": "1.0.0", "lava-dl": "0.6.0", "setuptools": "80.9.0", "nvidia-ml-py": "13.610.43",
        "nvidia-cublas": "13.0.0.19",
    },
}


def machine(**changes: Any) -> gs.Machine:
    facts = {**H100, **changes}
    return gs.Machine.from_dict(facts)


def context(m: gs.Machine | None = None, environ: Mapping[str, str] | None = None,
            **options: Any) -> gs.Context:
    return gs.Context(m or machine(), LOCK, gs.Options(**options), environ=dict(environ or {}))


def step(ctx: gs.Context, name: str) -> gs.Step:
    (found,) = [s for s in gs.plan(replace_only(ctx, name)) if s.name == name]
    return found


def replace_only(ctx: gs.Context, name: str) -> gs.Context:
    from dataclasses import replace

    return replace(ctx, options=replace(ctx.options, only=(name,)))


def requirements(command: gs.Command) -> list[str]:
    argv = list(command.argv)
    return [a for i, a in enumerate(argv[4:], 4) if not a.startswith("-")
            and argv[i - 1] not in ("--find-links", "--no-binary")]


# ------------------------------------------------------------------------ the lock's graph


def test_parse_lock_reads_pins_parents_and_the_outside_section() -> None:
    lock = gs.parse_lock(textwrap.dedent("""\
        # header
        absl-py==2.5.1
            # via
            #   chex
            #   dm-haiku
        Chex==0.1.92
            # via jax-tqdm
        jax-tqdm==0.4.0
            # via spyx
        spyx==1.0.0
            # via -r docker/requirements-gpu.in

        # >>> installed outside the resolver by docker/install-stack.sh
        lava-dl==0.6.0
        """))
    assert lock.pins == {"absl-py": "2.5.1", "chex": "0.1.92", "jax-tqdm": "0.4.0",
                         "spyx": "1.0.0", "lava-dl": "0.6.0"}
    assert lock.parents["absl-py"] == {"chex", "dm-haiku"}
    assert lock.children("spyx") == {"jax-tqdm"}
    assert lock.closure(["spyx"]) == ["absl-py", "chex", "jax-tqdm", "spyx"]
    assert lock.outside == {"lava-dl"}
    assert lock.pin("Jax_TQDM") == "jax-tqdm==0.4.0" and lock.pin("nope") == "nope"


def test_closure_of_spyx_has_what_the_h100_lacked_and_never_the_machines_stack() -> None:
    spyx = LOCK.closure(gs.ROOTS["spyx"])
    assert {"spyx", "grain", "portpicker", "nir", "optax", "flax", "jax-tqdm"} <= set(spyx)
    assert "jax" not in spyx and "jaxlib" not in spyx
    norse = LOCK.closure(gs.ROOTS["norse"])
    assert "torch" not in norse and "torchvision" not in norse  # the machine's own
    assert "nvidia-ml-py" in LOCK.closure(gs.ROOTS["harness"])  # not a CUDA wheel
    assert not [n for n in LOCK.closure(gs.ROOTS["harness"]) if gs.provided_by_machine(n)]


def test_every_root_is_pinned_by_the_gpu_lock() -> None:
    roots = {root for names in gs.ROOTS.values() for root in names}
    assert sorted(r for r in roots if gs.canonical(r) not in LOCK.pins) == []
    for name in ("spikingjelly", "sinabs-exodus", "lava-dl", "cupy-cuda13x"):
        assert name in LOCK.pins


# ---------------------------------------------------------------------------- decisions


@pytest.mark.parametrize(("facts", "expected"), [
    ({}, "cupy-cuda13x"),
    ({"torch_cuda": "12.8", "nvcc": "12.8"}, "cupy-cuda12x"),
    ({"torch": "2.11.0+cpu", "torch_cuda": None, "nvcc": "12.6"}, "cupy-cuda12x"),
    ({"torch_cuda": None, "nvcc": None}, None),
])
def test_cupy_follows_torchs_cuda_then_nvccs(facts: dict[str, Any], expected: str | None) -> None:
    assert gs.cupy_distribution(machine(**facts)) == expected


def test_arch_list_precedence() -> None:
    two = machine(gpus=[{"name": "B", "capability": "9.0"}, {"name": "A", "capability": "8.6"},
                        {"name": "C", "capability": "9.0"}])
    assert gs.arch_list(two, None, {}) == "8.6;9.0"
    assert gs.arch_list(two, None, {"TORCH_CUDA_ARCH_LIST": "8.9"}) == "8.9"
    assert gs.arch_list(two, "7.5;12.0", {"TORCH_CUDA_ARCH_LIST": "8.9"}) == "7.5;12.0"
    assert gs.arch_list(machine(gpus=[]), None, {}) is None


@pytest.mark.parametrize(("facts", "arch", "reason"), [
    ({"torch": None, "torch_error": "ModuleNotFoundError: torch"}, "9.0", "does not import"),
    ({"torch": "2.13.0+cpu", "torch_cuda": None}, "9.0", "is a CPU build"),
    ({"nvcc": None}, "9.0", "nvcc not found"),
    ({"nvcc": "12.8"}, "9.0", "nvcc is CUDA 12.8 but torch is built for CUDA 13.0"),
    ({"cxx": None}, "9.0", "no C++ compiler"),
    ({"gpus": []}, None, "pass --arch-list"),
    ({}, "9.0", None),
])
def test_build_blockers(facts: dict[str, Any], arch: str | None, reason: str | None) -> None:
    found = gs.build_blocker(machine(**facts), arch)
    assert (found is None) if reason is None else (found is not None and reason in found)


def test_h100_plan_from_a_wheelhouse(tmp_path: Path) -> None:
    exodus = tmp_path / "sinabs-exodus-2.0.0"
    exodus.mkdir()
    (exodus / "setup.py").write_text("")
    ctx = context(wheelhouse=tmp_path, max_jobs=16)
    steps = {s.name: s for s in gs.plan(ctx)}
    assert list(steps) == list(gs.PLANNERS)
    commands = [c for s in steps.values() for c in s.commands]
    for command in commands:  # offline, one environment's pip, never a resolver
        argv = list(command.argv)
        assert argv[:4] == [H100["python"], "-m", "pip", "install"]
        assert "--no-deps" in argv and "--no-index" in argv
        assert argv[argv.index("--find-links") + 1] == str(tmp_path)
        assert not [r for r in requirements(command) if gs.provided_by_machine(r.split("==")[0])]
    assert not [s.name for s in steps.values() if s.blocked]
    # SpikingJelly: its sdist, native ops for the visible H100, against the installed torch
    *deps, sj = steps["spikingjelly"].commands
    assert [r.split("==")[0] for d in deps for r in requirements(d)] == sorted(
        ["loguru", "tqdm", "h5py", "scipy", "matplotlib", "packaging"] + [
            n for n in LOCK.closure(gs.ROOTS["spikingjelly"]) if n not in gs.ROOTS["spikingjelly"]
            and n not in H100["installed"]])
    assert {"--no-build-isolation", "--force-reinstall"} <= set(sj.argv)
    assert requirements(sj) == ["spikingjelly==2.0.0"] and "--no-binary" in sj.argv
    assert sj.env["SJ_BUILD_NATIVE_CUDA"] == "1" and sj.env["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert sj.env["MAX_JOBS"] == "16" and sj.env["CUDA_HOME"] == "/usr/local/cuda"
    # sinabs-exodus: the source folder found in the wheelhouse (a git checkout of v2.0.0)
    (ex,) = steps["sinabs-exodus"].commands
    assert requirements(ex) == [str(exodus)] and "SJ_BUILD_NATIVE_CUDA" not in ex.env
    assert "--no-build-isolation" in ex.argv and ex.env["TORCH_CUDA_ARCH_LIST"] == "9.0"
    # spyx: what its import lacked (portpicker...), never flax, jax or jaxlib (kept)
    (spyx,) = steps["spyx"].commands
    assert {"portpicker==1.6.0", "grain==0.2.18", "nir==1.0.4"} <= set(requirements(spyx))
    assert not {r.split("==")[0] for r in requirements(spyx)} & {"flax", "jax", "jaxlib", "spyx"}
    assert steps["spyx"].note == "flax: kept as installed"
    # already there: lava-dl itself, the JAX plugin at jaxlib's version, CuPy for CUDA 13
    assert "lava-dl==0.6.0" not in [r for c in steps["lava-dl"].commands for r in requirements(c)]
    assert steps["jax-cuda"].commands == () and steps["cupy"].commands == ()
    assert steps["cupy"].note == "cupy-cuda13x (CUDA 13.0 from torch)"
    # setuptools 80.9 is new enough for SpikingJelly (77.0.3); wheel and ninja are missing
    assert [requirements(c) for c in steps["build-tools"].commands] == [
        ["wheel==0.48.0", "ninja==1.13.2"]]
    assert requirements(steps["harness"].commands[-1]) == [str(REPO)]
    assert "-e" in steps["harness"].commands[-1].argv


def test_a_bare_machine_gets_lava_alone_the_plugin_and_cupy() -> None:
    bare = machine(installed={"torch": "2.11.0+cu130", "jax": "0.11.2", "jaxlib": "0.11.2",
                              "setuptools": "70.0.0"})
    steps = {s.name: s for s in gs.plan(context(bare))}
    lava = steps["lava-dl"].commands[0]
    assert requirements(lava) == ["lava-dl==0.6.0"] and "--ignore-requires-python" in lava.argv
    assert [requirements(c) for c in steps["jax-cuda"].commands] == [
        ["jax-cuda13-plugin==0.11.2", "jax-cuda13-pjrt==0.11.2"]]  # jaxlib's, not the lock's
    assert requirements(steps["cupy"].commands[0]) == ["cupy-cuda13x==14.2.0"]
    assert "setuptools==84.2.1" in requirements(steps["build-tools"].commands[0])  # too old
    assert "--no-index" not in lava.argv  # no wheelhouse: pip's configured index


def test_blocked_steps_say_why() -> None:
    cpu = machine(torch="2.13.0+cpu", torch_cuda=None, nvcc=None, gpus=[])
    steps = {s.name: s for s in gs.plan(context(cpu))}
    assert "CPU build" in (steps["sinabs-exodus"].blocked or "")
    assert "CPU build" in (steps["spikingjelly"].blocked or "")
    assert "no CUDA found" in (steps["cupy"].blocked or "")
    wrong = machine(installed={**H100["installed"], "cupy-cuda12x": "13.6.0"})
    assert "uninstall cupy-cuda12x" in (step(context(wrong), "cupy").blocked or "")
    no_jax = machine(jaxlib=None)
    assert "not installed" in (step(context(no_jax), "jax-cuda").blocked or "")
    legacy = machine(installed={**H100["installed"], "spikingjelly": "0.0.0.0.14"})
    assert "legacy release" in (step(context(legacy), "spikingjelly").blocked or "")


def test_path_env_puts_the_environments_bin_first() -> None:
    m = machine()
    assert gs.path_env(m, {"PATH": "/usr/bin"}) == {"PATH": "/opt/torch/.venv/bin:/usr/bin"}
    assert gs.path_env(m, {"PATH": "/opt/torch/.venv/bin:/usr/bin"}) == {}


def test_download_plans_only_what_the_target_lacks(tmp_path: Path) -> None:
    commands, notes = gs.download_commands(context(), tmp_path, "3.12",
                                           ["manylinux_2_28_x86_64"])
    wanted = [c.argv[-1] for c in commands]
    assert "portpicker==1.6.0" in wanted and "lava-dl==0.6.0" in wanted
    assert not [w for w in wanted if w.split("==")[0] in ("torch", "jax", "flax", "spyx")]
    assert "cupy-cuda13x==14.2.0" not in wanted  # the box has it
    wheel = next(c for c in commands if c.argv[-1] == "portpicker==1.6.0").argv
    assert {"--only-binary=:all:", "--no-deps"} <= set(wheel)
    assert wheel[wheel.index("--python-version") + 1] == "3.12"
    sdist = next(c for c in commands if c.argv[-1] == "spikingjelly==2.0.0").argv
    assert "--no-binary=:all:" in sdist and "--only-binary=:all:" not in sdist
    # sinabs-exodus: its sdist from the package index, unbuilt; nothing from a Git repository
    exodus = next(c for c in commands if c.argv[-1] == "sinabs-exodus==2.0.0")
    assert exodus.argv[1:5] == ("-m", "snnbench.gpu_setup.sdist", "--dest", str(tmp_path))
    assert not [c for c in commands if "git" in c.shell()]
    assert not [n for n in notes if "git" in n] and "sinabs-exodus==2.0.0" in notes[0]


# ---------------------------------------------------------------------------- execution


class FakeRunner:
    """Answers checks from ``checks`` (step name → list of (ok, detail), one per call) and
    commands with ``codes`` (a substring of the command → exit status, default 0)."""

    def __init__(self, checks: dict[str, list[tuple[bool, str]]],
                 codes: dict[str, int] | None = None) -> None:
        self.checks = checks
        self.codes = codes or {}
        self.ran: list[gs.Command] = []

    def __call__(self, command: gs.Command, log: Path) -> tuple[int, str]:
        self.ran.append(command)
        if command.argv[1] == "-c":
            ok, detail = self.checks[log.stem].pop(0)
            return 0, gs.MARKER + json.dumps({"ok": ok, "detail": detail})
        for text, code in self.codes.items():
            if text in command.shell():
                return code, "Collecting x\nERROR: Could not find a version that satisfies x\n"
        return 0, "Successfully installed x"


def _steps() -> list[gs.Step]:
    install = gs.Command(("py", "-m", "pip", "install", "thing==1"))
    return [gs.Step("ready", "code"), gs.Step("fixed", "code", (install,)),
            gs.Step("broken", "code", (gs.Command(("py", "-m", "pip", "install", "bad==1")),)),
            gs.Step("blocked", "code", (install,), blocked="nvcc not found"),
            gs.Step("crashes", "code", (install,))]


def test_execute_install_runs_only_what_is_needed(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    runner = FakeRunner({"ready": [(True, "1.0")], "fixed": [(False, "no"), (True, "2.0")],
                         "broken": [(False, "no")], "blocked": [(False, "no")],
                         "crashes": [(False, "no")]}, codes={"bad==1": 1})
    runner.checks["crashes"].append((False, "ImportError: libcudart.so.13"))
    outcomes = gs.execute(_steps(), "py", tmp_path, "install", runner=runner,
                          progress=lambda _: None, env={"PATH": "/env/bin"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "ready          ok: 1.0 (already set up)"
    assert lines[1] == "fixed          ok: 2.0"
    assert lines[2].startswith("broken         FAILED: ERROR: Could not find a version")
    assert f"log: {tmp_path / 'broken.log'}" in lines[2]
    assert lines[3] == "blocked        FAILED: nvcc not found"
    assert lines[4].startswith("crashes        FAILED: ImportError: libcudart.so.13")
    assert [o.ok for o in outcomes] == [True, True, False, False, False]
    installs = [c.argv[-1] for c in runner.ran if c.argv[1] != "-c"]
    assert installs == ["thing==1", "bad==1", "thing==1"]  # not for ready/blocked
    assert all(c.env["PATH"] == "/env/bin" for c in runner.ran)
    assert all(not v for v in runner.checks.values())  # every planned check ran, no more


def test_execute_check_mode_installs_nothing(tmp_path: Path) -> None:
    runner = FakeRunner({s.name: [(s.name == "ready", "x")] for s in _steps()})
    outcomes = gs.execute(_steps(), "py", tmp_path, "check", runner=runner)
    assert [o.ok for o in outcomes] == [True, False, False, False, False]
    assert all(c.argv[1] == "-c" for c in runner.ran)
    assert outcomes[1].line() == "fixed          FAILED: x"


def test_a_check_that_prints_no_answer_reads_as_crashed(tmp_path: Path) -> None:
    def runner(command: gs.Command, log: Path) -> tuple[int, str]:
        return -11, "Fatal Python error: Segmentation fault\n"

    outcome = gs.run_check("py", gs.Step("x", "code"), tmp_path / "x.log", runner)
    assert not outcome.ok and "exit -11" in outcome.detail and "Segmentation" in outcome.detail


def test_tail_prefers_the_last_error_line() -> None:
    text = "Building wheel\nerror: command 'nvcc' failed\nnote: see above\n"
    assert gs.tail(text) == "error: command 'nvcc' failed"
    assert gs.tail("just\nlines\n") == "lines"
    assert len(gs.tail("x" * 1000)) == 300


def test_checks_are_valid_python_that_report_through_the_marker(tmp_path: Path) -> None:
    # every check compiles; run here, each answers with the marker (ok or not), never crashes
    ctx = context()
    for s in gs.plan(ctx):
        compile(s.check, f"<check {s.name}>", "exec")
    code = gs.check_code("import definitely_not_a_module_xyz\ndone(True, 'no')")
    outcome = gs.run_check(sys.executable, gs.Step("x", code), tmp_path / "x.log")
    assert outcome == gs.Outcome("x", False,
                                 "ModuleNotFoundError: No module named 'definitely_not_a_module_xyz'")


@pytest.mark.slow
def test_checks_on_this_cpu_venv(tmp_path: Path) -> None:
    """The real checks in this venv: the CPU libraries are ok, the CUDA-only parts say why."""
    ctx = context(gs.probe(sys.executable))
    outcomes = {o.name: o for o in gs.execute(
        gs.plan(replace_only_many(ctx, ("snntorch", "spyx", "sinabs-exodus", "jax-cuda",
                                        "spikingjelly"))),
        sys.executable, tmp_path, "check")}
    assert outcomes["snntorch"].ok and outcomes["snntorch"].detail == "1.0.0"
    assert outcomes["spyx"].ok
    assert not outcomes["sinabs-exodus"].ok and "exodus" in outcomes["sinabs-exodus"].detail
    assert not outcomes["jax-cuda"].ok and "no JAX CUDA plugin" in outcomes["jax-cuda"].detail
    assert not outcomes["spikingjelly"].ok
    assert "no native CUDA operators" in outcomes["spikingjelly"].detail


def replace_only_many(ctx: gs.Context, names: tuple[str, ...]) -> gs.Context:
    from dataclasses import replace

    return replace(ctx, options=replace(ctx.options, only=names))


# ---------------------------------------------------- the command line, for real, offline


def _wheel(tmp_path: Path, name: str, version: str, body: str = "") -> Path:
    """Build a tiny wheel (offline: this venv's setuptools) into ``tmp_path/wheelhouse``."""
    src = tmp_path / f"src-{name}"
    (src / name).mkdir(parents=True)
    (src / name / "__init__.py").write_text(f"__version__ = {version!r}\n{body}")
    (src / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "{name}"
        version = "{version}"
        """))
    house = tmp_path / "wheelhouse"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "-w", str(house), str(src)], check=True, timeout=300)
    return house


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return subprocess.run([sys.executable, *SCRIPT, *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)


@pytest.mark.slow
def test_offline_install_into_a_scratch_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    house = _wheel(tmp_path, "snntorch", "1.0.0")
    lock = tmp_path / "lock.txt"
    lock.write_text("snntorch==1.0.0\n")
    logs = tmp_path / "logs"
    args = ("--python", python, "--lock", str(lock), "--only", "snntorch",
            "--wheelhouse", str(house), "--log-dir", str(logs))

    before = _cli("check", *args)
    assert before.returncode == 0, before.stderr
    assert "snntorch       FAILED: ModuleNotFoundError: No module named 'snntorch'" in before.stdout
    assert "no torch" in before.stdout.splitlines()[0]  # the probe ran in the scratch venv

    first = _cli("install", *args)
    assert first.returncode == 0, first.stderr
    assert "snntorch       ok: 1.0.0\n" in first.stdout
    assert "--no-index --find-links" in first.stderr  # progress: the pip command, offline
    assert "Successfully installed snntorch-1.0.0" in (logs / "snntorch.log").read_text()

    again = _cli("install", *args)
    assert "snntorch       ok: 1.0.0 (already set up)" in again.stdout
    assert "pip install" not in again.stderr

    # a library whose wheel is not in the folder: a FAILED line with pip's reason, exit 0;
    # with --strict, exit 1
    lock.write_text("snntorch==1.0.0\nnorse==1.1.0\nnir==1.0.4\nnirtorch==2.0.2\n"
                    "    # via norse\n")
    other = ("--python", python, "--lock", str(lock), "--only", "norse",
             "--wheelhouse", str(house), "--log-dir", str(logs))
    missing = _cli("install", *other)
    assert missing.returncode == 0
    assert "norse          FAILED: ERROR: " in missing.stdout
    assert _cli("install", *other, "--strict").returncode == 1


@pytest.mark.slow
def test_runs_on_a_bare_box_with_only_the_standard_library_and_pip(tmp_path: Path) -> None:
    """A GPU box before anything is installed: a venv without site packages (pip only, so
    ``packaging`` is pip's vendored copy), snnbench not installed, run from the checkout root."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    bare = subprocess.run([python, "-c", "import packaging"], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=60)
    assert "No module named 'packaging'" in bare.stderr  # really bare
    assert subprocess.run([python, "-c", "import snnbench"], cwd=tmp_path, env=env,
                          capture_output=True, timeout=60).returncode == 1

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([python, "-m", "snnbench.gpu_setup", *args], capture_output=True,
                              text=True, cwd=REPO, env=env, timeout=300)

    helped = run("--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: python -m snnbench.gpu_setup")
    assert "{install,check,probe,download}" in helped.stdout
    facts = tmp_path / "h100.json"
    facts.write_text(json.dumps(H100))
    planned = run("install", "--dry-run", "--machine", str(facts), "--arch-list", "9.0")
    assert planned.returncode == 0, planned.stderr
    assert "cupy           cupy-cuda13x (CUDA 13.0 from torch)" in planned.stdout
    checked = run("check", "--only", "snntorch", "--log-dir", str(tmp_path / "logs"))
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines()[0].startswith("# gpu-setup: python ")
    assert "no torch" in checked.stdout.splitlines()[0]  # probed in the bare venv
    assert "snntorch       FAILED: ModuleNotFoundError: No module named 'snntorch'" in (
        checked.stdout)
    assert "# 0 of 1 ok" in checked.stdout


def test_misuse_exits_2(tmp_path: Path) -> None:
    result = _cli("install", "--wheelhouse", str(tmp_path / "nowhere"), "--dry-run")
    assert result.returncode == 2
    assert result.stderr.strip() == f"gpu-setup: {tmp_path / 'nowhere'} does not exist"
    assert _cli("install", "--only", "pytorch", "--dry-run").returncode == 2
    assert _cli("install", "--lock", str(tmp_path / "none.txt")).returncode == 2
    assert _cli("frobnicate").returncode == 2
    assert _cli("download", "--dry-run").stderr.strip() == "gpu-setup: download needs --dest DIR"


def test_dry_run_for_the_h100_prints_the_decisions(tmp_path: Path) -> None:
    facts = tmp_path / "h100.json"
    facts.write_text(json.dumps(H100))
    result = _cli("install", "--dry-run", "--machine", str(facts), "--arch-list", "9.0")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "NVIDIA H100 80GB HBM3 (9.0)" in out.splitlines()[0]
    assert "spikingjelly   build spikingjelly 2.0.0 from its sdist for TORCH_CUDA_ARCH_LIST=9.0" in out
    assert "SJ_BUILD_NATIVE_CUDA=1 TORCH_CUDA_ARCH_LIST=9.0" in out
    assert "cupy           cupy-cuda13x (CUDA 13.0 from torch)" in out


# ----------------------------------------- what each step installs is what the adapter needs

_HIDDEN_RUN = r"""
import importlib.metadata as md, json, re, sys
from importlib.machinery import PathFinder
name, allowed = sys.argv[1], set(json.loads(sys.argv[2]))
canon = lambda n: re.sub(r"[-_.]+", "-", n).lower()
hidden = {top for top, dists in md.packages_distributions().items()
          if not any(canon(d) in allowed for d in dists)}

class Hide:  # PathFinder, minus every top-level module of a distribution not allowed
    find_distributions = staticmethod(PathFinder.find_distributions)
    invalidate_caches = staticmethod(PathFinder.invalidate_caches)
    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname.split(".")[0] in hidden:
            return None
        return PathFinder.find_spec(fullname, path, target)

sys.meta_path[:] = [Hide if f is PathFinder else f for f in sys.meta_path]
from snnbench.registry import get_entry
from snnbench.workload.linear_lif.spec import NetworkSpec
from snnbench.workload import LinearLif
adapter = get_entry(name).create()
adapter.version()
variant = adapter.variants[0]
caps = adapter.capabilities(variant).knobs("linear-lif")
spec = NetworkSpec(neurons=8, batch_size=2, time_steps=4, reset=caps.resets[0],
                   surrogate="sigmoid", surrogate_slope=4.0, detach_reset=caps.detach_reset[0])
adapter.check_variant(variant, "cpu")
workload = LinearLif(spec)
model = adapter.build(workload, workload.make_data(), "cpu", variant)
model.step()
model.synchronize()
print("RAN", sorted(hidden & set(sys.modules))[:3])
"""

#: adapter → (its step, its library when a step installs it apart from the roots)
ADAPTER_STEPS = {"snntorch": ("snntorch", ()), "norse": ("norse", ()),
                 "spikingjelly": ("spikingjelly", ("spikingjelly",)), "sinabs": ("sinabs", ()),
                 "rockpool": ("rockpool", ()), "haiku": ("dm-haiku", ()), "spyx": ("spyx", ()),
                 "lava-dl": ("lava-dl", ("lava-dl",))}


def _allowed(step_name: str, extra: tuple[str, ...]) -> set[str]:
    """What the machine provides (torch, JAX and their requirements, per the lock), the harness,
    the build tools, and the step's own closure."""
    provided: set[str] = set()
    todo = ["torch", "jax", "jaxlib", "triton"]
    while todo:
        name = todo.pop()
        if name not in provided:
            provided.add(name)
            todo.extend(LOCK.children(name))
    own = {gs.canonical(n) for n in (*LOCK.closure(gs.ROOTS[step_name]), *extra)}
    return (provided | own | set(LOCK.closure(gs.ROOTS["harness"]))
            | set(LOCK.closure(gs.ROOTS["build-tools"])) | {"snnbench", "pip"})


def _run_hidden(adapter: str, allowed: set[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _HIDDEN_RUN, adapter, json.dumps(sorted(allowed))],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("adapter", sorted(ADAPTER_STEPS))
def test_each_adapter_runs_with_only_what_its_step_installs(adapter: str) -> None:
    step_name, extra = ADAPTER_STEPS[adapter]
    result = _run_hidden(adapter, _allowed(step_name, extra))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "RAN" in result.stdout


@pytest.mark.slow
def test_hiding_is_live_portpicker_is_what_the_h100_lacked() -> None:
    # the check above can fail: without portpicker (grain's requirement), spyx does not
    # import, exactly as on the H100 box
    result = _run_hidden("spyx", _allowed("spyx", ()) - {"portpicker"})
    assert result.returncode != 0
    assert "No module named 'portpicker'" in result.stderr


def test_harness_counts_only_this_checkouts_snnbench(tmp_path: Path) -> None:
    here = context(gs.Machine(python=sys.executable))
    (ok,) = gs.execute([step(here, "harness")], sys.executable, tmp_path, "check")
    assert ok.ok and ok.detail == "0.1.0"
    from dataclasses import replace

    other = replace(here, root=tmp_path)  # another checkout: this venv's snnbench is not its own
    (tmp_path / "pyproject.toml").write_text("")
    (not_ours,) = gs.execute([step(other, "harness")], sys.executable, tmp_path, "check")
    assert not not_ours.ok
    assert not_ours.detail == (f"snnbench imports from {REPO / 'snnbench'}, not from this "
                               "checkout")
    assert requirements(step(other, "harness").commands[-1]) == [str(tmp_path)]


def test_the_harness_step_installs_every_runtime_dependency_of_snnbench() -> None:
    """The first H100 lease after uv, packaging and ruptures became dependencies found them
    missing from the harness step: the step must follow pyproject, not a second list."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    needed = {gs.canonical(Requirement(r).name) for r in project["project"]["dependencies"]}
    covered = {gs.canonical(n) for n in gs.ROOTS["harness"]}
    assert needed - covered == set()


def test_each_library_step_installs_what_its_adapter_imports() -> None:
    """brainstate's adapter imports braintools, which brainstate itself does not require."""
    assert "braintools" in gs.ROOTS["brainstate"]
    assert "brainstate" in gs.PLANNERS


# ------------------------------------------ issue 33 item 24: misuse is one line and exit 2


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = gs.main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_usage_error_is_one_line_not_the_usage() -> None:
    for args in (("--frobnicate",), ("frobnicate",), ("install", "--max-jobs", "x")):
        result = _cli(*args)
        assert result.returncode == 2, args
        assert result.stderr.startswith("gpu-setup: ") and result.stderr.count("\n") == 1, (
            args, result.stderr)
        assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("jobs", ["-3", "-1"])
def test_a_negative_max_jobs_is_refused(capsys: pytest.CaptureFixture[str], jobs: str) -> None:
    code, out, err = _main(capsys, "install", "--dry-run", "--max-jobs", jobs)
    assert code == 2 and out == ""
    assert err == (f"gpu-setup: argument --max-jobs: {jobs} is negative: give a number of jobs, "
                   "or 0 for MAX_JOBS or the CPU count (see --help)\n")
    assert gs._arguments(["--max-jobs", "0"]).max_jobs == 0
    assert gs._arguments(["--max-jobs", "16"]).max_jobs == 16


@pytest.mark.parametrize("mode", ["check", "install", "probe"])
def test_a_python_that_does_not_exist_is_one_line(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path, mode: str) -> None:
    code, out, err = _main(capsys, mode, "--python", str(tmp_path / "nonexistent"),
                           "--log-dir", str(tmp_path / "logs"))
    assert code == 2 and out == ""
    assert err == (f"gpu-setup: cannot run --python {tmp_path / 'nonexistent'}: "
                   "No such file or directory\n")


@pytest.mark.parametrize(("facts", "says"), [
    ("[1, 2]", "expected a JSON object (the output of `probe`), not list"),
    ('{"python": 3}', "'python' must be the interpreter's path, not 3"),
    ('{"installed": {}}', "'python' must be the interpreter's path, not None"),
    ('{"python": "/p", "python_version": 3.12}', "'python_version' must be a string, not 3.12"),
    ('{"python": "/p", "torch_cuda": 13}', "'torch_cuda' must be a string or null, not 13"),
    ('{"python": "/p", "nvcc": "thirteen"}', "'nvcc' must be a version, not 'thirteen'"),
    ('{"python": "/p", "installed": ["torch"]}', "'installed' must map names to version"),
    ('{"python": "/p", "installed": {"torch": null}}', "'installed' must map names to version"),
    ('{"python": "/p", "gpus": {"name": "x"}}', "'gpus' must be a list of objects"),
    ('{"python": "/p", "gpus": [{"name": "H100"}]}', "'gpus' must be a list of objects"),
    ('{"python": "/p", "gpus": [{"name": "H100", "capability": "nine"}]}',
     "a GPU's capability must be a version, not 'nine'"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"python": "/p", "installed": ' + "[" * 100_000 + "]" * 100_000 + "}",
     "nested too deeply"),
    ("{not json", "Expecting property name"),
])
@pytest.mark.parametrize("mode", ["install", "download"])
def test_machine_facts_that_are_not_probes_output_are_one_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, facts: str, says: str,
        mode: str) -> None:
    path = tmp_path / "box.json"
    path.write_text(facts)
    code, out, err = _main(capsys, mode, "--dry-run", "--machine", str(path),
                           "--dest", str(tmp_path / "house"))
    assert code == 2 and out == ""
    assert err.startswith(f"gpu-setup: cannot read machine facts from {path}: ")
    assert says in err and err.count("\n") == 1 and len(err) < 400
    assert not (tmp_path / "house").exists()


def test_the_h100s_facts_still_read() -> None:
    assert gs.Machine.from_dict(H100).gpus == ({"name": "NVIDIA H100 80GB HBM3",
                                               "capability": "9.0"},)
    assert gs.Machine.from_dict({"python": "/p"}) == gs.Machine(python="/p")


# ----------------------------------------- issue 33 item 24: download --only fetches only that


class FakeDownloads:
    """Records each download command instead of running it; all succeed."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, ...]] = []

    def __call__(self, argv: Any, env: Mapping[str, str]) -> tuple[int, str]:
        self.ran.append(tuple(argv))
        return 0, ""


def test_download_only_fetches_the_chosen_libraries(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    bare = gs.bare_machine(LOCK, "3.12")
    fake = FakeDownloads()
    ctx = gs.Context(bare, LOCK, gs.Options(only=("snntorch",)), environ={})
    assert gs.fill_wheelhouse(ctx, tmp_path, "3.12", ["manylinux_2_28_x86_64"],
                              runner=fake) == 0
    fetched = sorted(argv[-1] for argv in fake.ran)
    assert fetched == sorted(LOCK.pin(n) for n in LOCK.closure(["snntorch"]))
    assert "snntorch==1.0.0" in fetched
    # everything, for comparison: the sources, lava-dl, the JAX plugin and CuPy too
    every = FakeDownloads()
    gs.fill_wheelhouse(gs.Context(bare, LOCK, gs.Options(), environ={}), tmp_path, "3.12",
                       ["manylinux_2_28_x86_64"], runner=every)
    wanted = {argv[-1].split("==")[0] for argv in every.ran}
    assert {"spikingjelly", "sinabs-exodus", "lava-dl", "jax-cuda13-plugin", "cupy-cuda13x",
            "snntorch"} <= wanted
    skipped = FakeDownloads()
    gs.fill_wheelhouse(gs.Context(bare, LOCK, gs.Options(skip=("sinabs-exodus", "lava-dl")),
                                  environ={}), tmp_path, "3.12", ["x"], runner=skipped)
    left = {argv[-1].split("==")[0] for argv in skipped.ran}
    assert not left & {"sinabs-exodus", "lava-dl", "opencv-python-headless"}
    assert {"spikingjelly", "snntorch", "cupy-cuda13x", "jax-cuda13-plugin"} <= left
    capsys.readouterr()
    # the command line, for real: --only reaches the download plan
    code, out, err = _main(capsys, "download", "--dry-run", "--only", "sinabs-exodus",
                           "--dest", str(tmp_path / "house"))
    assert code == 0, err
    (line,) = [ln for ln in out.splitlines() if ln.startswith("$ ")]
    assert line.endswith(f"-m snnbench.gpu_setup.sdist --dest {tmp_path / 'house'} "
                         "sinabs-exodus==2.0.0")


# ------------------------------- issue 31 A3: sinabs-exodus from the package index, as an sdist


def _index(files: dict[str, bytes], page: str = "json",
           listed_sha: dict[str, str] | None = None) -> tuple[Any, list[str]]:
    """A fake ``urlopen`` serving one project page of a simple index and its files."""
    import email.message
    import hashlib
    import io
    import urllib.response

    asked: list[str] = []
    shas = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    shas.update(listed_sha or {})

    def opener(request: Any, timeout: float) -> Any:
        url = request.full_url
        asked.append(url)
        headers = email.message.Message()
        if url.endswith("/"):
            if page == "json":
                body = json.dumps({"meta": {"api-version": "1.1"}, "files": [
                    {"filename": n, "url": f"../../files/{n}", "hashes": {"sha256": shas[n]}}
                    for n in files]}).encode()
                headers["Content-Type"] = "application/vnd.pypi.simple.v1+json"
            else:
                body = "".join(f'<a href="../../files/{n}#sha256={shas[n]}">{n}</a><br/>'
                               for n in files).encode()
                headers["Content-Type"] = "text/html"
        else:
            body = files[url.rsplit("/", 1)[1]]
        return urllib.response.addinfourl(io.BytesIO(body), headers, url)

    return opener, asked


@pytest.mark.parametrize("page", ["json", "html"])
def test_an_sdist_is_fetched_unbuilt_and_its_hash_checked(tmp_path: Path, page: str) -> None:
    from snnbench.gpu_setup import sdist

    files = {"sinabs_exodus-9.9.9.tar.gz": b"the source", "sinabs_exodus-9.9.9-py3-none-any.whl":
             b"a wheel", "sinabs-exodus-1.0.0.tar.gz": b"old"}
    opener, asked = _index(files, page)
    got = sdist.fetch_sdist("sinabs-exodus==9.9.9", tmp_path / "house", "https://idx/simple",
                            opener=opener)
    assert got == tmp_path / "house" / "sinabs_exodus-9.9.9.tar.gz"
    assert got.read_bytes() == b"the source"
    assert asked == ["https://idx/simple/sinabs-exodus/",
                     "https://idx/files/sinabs_exodus-9.9.9.tar.gz"]
    assert [p.name for p in (tmp_path / "house").iterdir()] == [got.name]  # no partial file
    # already there with the right hash: not fetched again
    asked.clear()
    sdist.fetch_sdist("sinabs-exodus==9.9.9", tmp_path / "house", "https://idx/simple",
                      opener=opener)
    assert asked == ["https://idx/simple/sinabs-exodus/"]


def test_an_sdist_with_other_bytes_than_published_is_refused(tmp_path: Path) -> None:
    from snnbench.gpu_setup import sdist

    # 2.0.0's sha256 is pinned (PyPI's): an index serving other bytes under its name is refused
    opener, _ = _index({"sinabs-exodus-2.0.0.tar.gz": b"tampered"})
    with pytest.raises(sdist.FetchError, match=r"lists sinabs-exodus-2\.0\.0\.tar\.gz with sha256"):
        sdist.fetch_sdist("sinabs-exodus==2.0.0", tmp_path, "https://idx/simple", opener=opener)
    # the index's hash agrees with the pin, the bytes do not: nothing is left in the folder
    opener, _ = _index({"sinabs-exodus-2.0.0.tar.gz": b"tampered"}, listed_sha={
        "sinabs-exodus-2.0.0.tar.gz": sdist.KNOWN_SHA256["sinabs-exodus==2.0.0"]})
    with pytest.raises(sdist.FetchError, match="expected 4d4e61da"):
        sdist.fetch_sdist("sinabs-exodus==2.0.0", tmp_path, "https://idx/simple", opener=opener)
    assert list(tmp_path.iterdir()) == []
    opener, _ = _index({"sinabs-exodus-1.0.0.tar.gz": b"old"})
    with pytest.raises(sdist.FetchError, match=r"no sdist of sinabs-exodus 2\.0\.0"):
        sdist.fetch_sdist("sinabs-exodus==2.0.0", tmp_path, "https://idx/simple", opener=opener)


def test_the_sdist_command_reports_one_error_line(tmp_path: Path) -> None:
    index = tmp_path / "simple"
    (index / "sinabs-exodus").mkdir(parents=True)
    (index / "sinabs-exodus" / "index.html").write_text("<html></html>")
    result = subprocess.run([sys.executable, "-m", "snnbench.gpu_setup.sdist", "--dest",
                             str(tmp_path / "house"), "--index-url", index.as_uri(),
                             "sinabs-exodus==2.0.0"], capture_output=True, text=True,
                            cwd=REPO, timeout=120)
    assert result.returncode == 1
    assert result.stderr == (f"ERROR: no sdist of sinabs-exodus 2.0.0 on {index.as_uri()}"
                             "/sinabs-exodus/\n")


def test_install_builds_exodus_from_the_sdist_in_the_wheelhouse(tmp_path: Path) -> None:
    (tmp_path / "sinabs-exodus-2.0.0.tar.gz").write_bytes(b"")
    (ex,) = step(context(wheelhouse=tmp_path), "sinabs-exodus").commands
    assert requirements(ex) == ["sinabs-exodus==2.0.0"]
    assert ex.argv[ex.argv.index("--no-binary") + 1] == "sinabs-exodus"
    assert {"--no-index", "--no-build-isolation"} <= set(ex.argv)
    assert ex.argv[ex.argv.index("--find-links") + 1] == str(tmp_path)


def test_nothing_in_the_gpu_set_up_comes_from_git() -> None:
    texts = [p.read_text() for p in (REPO / "snnbench" / "gpu_setup").glob("*.py")]
    texts += [(REPO / "docs" / "gpu-check.md").read_text(), (REPO / "Makefile").read_text()]
    texts += [p.read_text() for p in (REPO / "snnbench" / "locks").glob("requirements-*.txt")]
    for text in texts:
        assert "git+" not in text and "git clone" not in text

"""snnbench/gpu_check.py (``make gpu-check``) on a CPU machine: its plan, the time budget shared
between steps, interrupting a step that overruns, the folder's README, bad input, and
configs/gpu-check.toml being opennm-2024's comparison. No GPU has run it yet."""

from __future__ import annotations

import subprocess
import sys
import time
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import pytest

from snnbench import gpu_check as gc
from snnbench.sweep.config import RunConfig

REPO = Path(__file__).resolve().parents[1]


def test_gpu_slug_and_default_folder() -> None:
    assert gc.gpu_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert gc.gpu_slug("NVIDIA GeForce RTX 4090") == "rtx-4090"
    assert gc.gpu_slug("  ") == "gpu"
    when = datetime(2026, 11, 23, 7, 5, tzinfo=UTC)
    assert gc.default_out("NVIDIA H200", when) == Path(
        "results/gpu-check-20261123-0705-h200")


def test_plan_runs_setup_verify_run_report_in_order(tmp_path: Path) -> None:
    steps = gc.plan_steps(tmp_path / "out", python="py")
    assert [s.name for s in steps] == ["setup", "env", "verify-float32", "verify-bfloat16",
                                       "run", "compile", "report", "report-compile"]
    by = {s.name: s.argv for s in steps}
    assert by["setup"][:4] == ("py", "-m", "snnbench.gpu_setup", "check")
    assert by["verify-float32"][:6] == ("py", "-m", "snnbench", "verify", "--device", "cuda")
    assert by["verify-float32"][by["verify-float32"].index("--adapters") + 1] == "all"
    assert "bfloat16" in by["verify-bfloat16"] and "spyx:bf16" in by["verify-bfloat16"][-3]
    run = by["run"]
    assert run[run.index("--config") + 1] == "gpu-check"
    assert run[run.index("--out") + 1] == str(tmp_path / "out" / "run")
    compiled = by["compile"]
    assert compiled[compiled.index("--adapters") + 1] == "torch-compile,norse-compile"
    assert compiled[compiled.index("--neurons") + 1] == "512"
    assert by["report"][-1] == str(tmp_path / "out" / "run")


def test_budget_slices_hold_time_for_the_steps_after() -> None:
    steps = gc.plan_steps(Path("o"))
    index = [s.name for s in steps].index("run")
    held = sum(s.reserve_s for s in steps[index + 1:])
    assert held == 360
    assert gc.step_limits(steps, index, 1500) == 1140  # 25 min, nothing used yet
    assert gc.step_limits(steps, index, 600) == 240
    assert gc.step_limits(steps, index, 300) == 0
    assert gc.step_limits(steps, 0, 1500) == 300  # a step's own limit caps it
    assert gc.step_limits(steps, len(steps) - 1, 45) == 45


class FakeLauncher:
    """Each step "takes" a set time on a fake clock; a step longer than its limit is cut."""

    def __init__(self, clock: list[float], takes: dict[str, float], codes: dict[str, int]):
        self.clock, self.takes, self.codes = clock, takes, codes

    def __call__(self, step: gc.CheckStep, limit_s: float, log: IO[str]) -> tuple[str, int | None]:
        took = self.takes.get(step.name, 10.0)
        log.write(f"output of {step.name}\n")
        if took > limit_s:
            self.clock[0] += limit_s
            return "cut", -2
        self.clock[0] += took
        code = self.codes.get(step.name, 0)
        return ("ok" if code == 0 else "failed"), code


def test_run_steps_within_the_budget(tmp_path: Path) -> None:
    now = [0.0]
    steps = gc.plan_steps(tmp_path)
    launcher = FakeLauncher(now, {"verify-float32": 500, "run": 2000}, {"verify-float32": 1})
    (tmp_path / "run").mkdir()  # what the run and compile steps would have made
    (tmp_path / "compile").mkdir()
    results = gc.run_steps(steps, tmp_path, 1500, launcher, clock=lambda: now[0])
    by = {r.step.name: r for r in results}
    assert by["verify-float32"].status == "failed" and by["verify-float32"].exit_code == 1
    # setup 10 + env 10 + verify 500 + bf16 10 = 530 s used; 970 left, 360 held for later
    assert by["run"].status == "cut" and by["run"].limit_s == pytest.approx(610)
    assert [by[n].status for n in ("compile", "report", "report-compile")] == ["ok"] * 3
    assert now[0] <= 1500
    assert (tmp_path / "run.txt").read_text().startswith("$ ")
    assert "output of run" in (tmp_path / "run.txt").read_text()
    text = gc.readme(results, tmp_path, "NVIDIA H100 80GB HBM3", 1500,
                     datetime(2026, 11, 23, tzinfo=UTC))
    assert "| run | cut | -2 | 610 | 610 |" in text
    assert f"snnbench run --resume --out {tmp_path / 'run'}" in text
    assert f"git mv {tmp_path} results/reference/gpu-h100-80gb-hbm3" in text


def test_steps_without_time_left_are_not_run(tmp_path: Path) -> None:
    now = [0.0]
    steps = gc.plan_steps(tmp_path)
    (tmp_path / "compile").mkdir()
    results = gc.run_steps(steps, tmp_path, 400, FakeLauncher(now, {"setup": 300}, {}),
                           clock=lambda: now[0])
    status = {r.step.name: r.status for r in results}
    assert status["setup"] == "cut"  # 40 s available once 360 s are held for later steps
    assert status["run"] == "not run" and status["report-compile"] == "ok"
    assert status["report"] == "not run"  # its run was not made: nothing to report
    assert not (tmp_path / "run.txt").exists()
    text = gc.readme(results, tmp_path, "GPU", 400, datetime(2026, 1, 1, tzinfo=UTC))
    run = next(s for s in steps if s.name == "run")
    assert f"    {' '.join(run.argv)}" in text  # the whole command: there is nothing to resume


def test_launch_copies_output_and_interrupts_an_overrunning_step(tmp_path: Path) -> None:
    code = ("import sys, time\nprint('started', flush=True)\n"
            "try:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n"
            "    print('interrupted: cases kept', flush=True)\n    sys.exit(130)\n")
    step = gc.CheckStep("slow", (sys.executable, "-c", code), limit_s=60)
    with open(tmp_path / "slow.txt", "w") as log:
        start = time.monotonic()
        status, exit_code = gc.launch(step, 2.0, log)
    assert time.monotonic() - start < 30
    assert (status, exit_code) == ("cut", 130)  # SIGINT: the step stops cleanly
    text = (tmp_path / "slow.txt").read_text()
    assert "started" in text and "interrupted: cases kept" in text
    assert "[gpu-check: interrupted after 2 s]" in text
    with open(tmp_path / "quick.txt", "w") as log:
        assert gc.launch(gc.CheckStep("quick", (sys.executable, "-c", "exit(3)"), 5), 5, log) == (
            "failed", 3)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "snnbench.gpu_check", *args],
                          capture_output=True, text=True, timeout=300, cwd=REPO)


def test_dry_run_and_bad_input(tmp_path: Path) -> None:
    dry = _cli("--dry-run", "--out", str(tmp_path / "o"))
    assert dry.returncode == 0, dry.stderr
    assert [line.split()[0] for line in dry.stdout.splitlines()][:3] == [
        "setup", "env", "verify-float32"]
    assert not (tmp_path / "o").exists()  # a dry run writes nothing
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "kept.txt").write_text("x")
    busy = _cli("--dry-run", "--out", str(tmp_path / "full"))
    assert busy.returncode == 2
    assert busy.stderr.strip() == (f"gpu-check: {tmp_path / 'full'} exists and is not empty: "
                                   "give another --out")
    assert (tmp_path / "full" / "kept.txt").read_text() == "x"
    assert _cli("--budget-min", "0", "--dry-run").returncode == 2


@pytest.mark.slow
def test_without_a_gpu_it_says_so(tmp_path: Path) -> None:
    result = _cli("--out", str(tmp_path / "o"))
    assert result.returncode == 2
    assert result.stderr.strip().startswith("gpu-check: no CUDA GPU is visible to torch here")
    assert not (tmp_path / "o").exists()


def test_gpu_check_config_is_opennm_2024_lightly_sampled() -> None:
    check = tomllib.loads((REPO / "configs" / "gpu-check.toml").read_text())
    anchor = tomllib.loads((REPO / "configs" / "opennm-2024.toml").read_text())
    assert check["network"] == anchor["network"]
    (sweep,) = check["sweep"]
    (anchor_sweep,) = anchor["sweep"]
    assert set(sweep) == set(anchor_sweep)
    for key, values in sweep.items():
        assert set(values) <= set(anchor_sweep[key])
    assert check["run"]["device"] == "cuda"
    assert check["run"]["repeats"] < anchor["run"]["repeats"]
    # every adapter but the compiled ones (run apart by gpu_check), so none is forgotten
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    entry_points = set(pyproject["project"]["entry-points"]["snnbench.adapters"])
    # the null probe is not named: overhead_probe adds it once, at the smallest case
    assert set(check["run"]["adapters"]) == (entry_points - set(gc.COMPILED_ADAPTERS.split(","))
                                             - {"null"})
    assert check["run"]["overhead_probe"] is True
    RunConfig.from_dict(check)  # valid


def test_a_step_hears_the_cut_when_gpu_check_was_started_deaf_to_sigint(tmp_path: Path) -> None:
    """Started as a background job of a script (SIGINT ignored, inherited through exec), the
    check still interrupts an overrunning step with SIGINT, which then stops cleanly (130)
    rather than 30 s later by SIGKILL."""
    code = ("import sys, time\nprint('started', flush=True)\n"
            "try:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n"
            "    print('interrupted: cases kept', flush=True)\n    sys.exit(130)\n")
    driver = ("import signal, sys\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
              "import snnbench.gpu_check as gc\n"
              f"step = gc.CheckStep('slow', (sys.executable, '-c', {code!r}), limit_s=60)\n"
              f"with open({str(tmp_path / 'slow.txt')!r}, 'w') as log:\n"
              "    print(gc.launch(step, 2.0, log))\n"
              "print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)\n")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True,
                          timeout=60)
    assert time.monotonic() - start < 25
    assert "('cut', 130)" in done.stdout, done.stdout + done.stderr
    assert done.stdout.strip().endswith("True")  # its own SIGINT is ignored again after
    assert "interrupted: cases kept" in (tmp_path / "slow.txt").read_text()

"""One way to supervise a child: a timeout or an interrupt stops its whole process group."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from snnbench.host.processes import run_captured, stop_group


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie waiting for its parent counts as gone
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(")")[-1].split()[0] != "Z"


def _gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_timeout_kills_the_child_and_what_it_started() -> None:
    script = "sleep 60 & echo $!; wait"
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        run_captured(["sh", "-c", script], timeout_s=1.0)
    grandchild = int(str(caught.value.stdout).split()[0])
    assert _gone(grandchild)


def test_output_and_exit_code_come_back() -> None:
    done = run_captured([sys.executable, "-c", "import sys; print('out'); "
                         "print('err', file=sys.stderr); sys.exit(3)"], timeout_s=60)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


def test_stop_group_interrupts_then_kills() -> None:
    # ignores SIGINT: it must still be gone once the grace has passed
    proc = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                             "signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(60)"],
                            start_new_session=True)
    time.sleep(0.3)
    stop_group(proc, grace_s=0.5)
    assert proc.returncode is not None

"""``local``: cases on this machine; one at a time by default (the reference for timing).

With several :class:`~snnbench.executors.placement.Slot` s (``--jobs N``: N CPU sets;
``--gpus 0,1``: one GPU each) one thread per slot runs one case at a time in that slot, so at
most N cases run side by side, each pinned to its own cores or GPU. Timings taken side by side
are not comparable with sequential ones (shared caches, memory bandwidth, clocks): every row
records its concurrency.

Each case's worker is forked from a zygote that imported its library once per sweep
(``[executor] start = "fork"``, the default on Linux: :mod:`snnbench.executors.forkserver`), or
started as a new interpreter (``"spawn"``); every row records which (``start``).
"""

from __future__ import annotations

import dataclasses
import queue
import shutil
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from snnbench.executors.base import Executor, JobStarted
from snnbench.executors.forkserver import Zygotes, fork_unsupported
from snnbench.executors.launch import Cancelled, run_worker
from snnbench.executors.placement import Slot, cpu_slots, gpu_slots, hostname
from snnbench.executors.settings import ExecutorError, ExecutorSettings
from snnbench.records.contract import CaseRecord, Job, Placement

#: how often the collecting thread wakes up (an interrupt is handled within this time)
POLL_S = 0.1


def job_folder(work_dir: Path, job: Job) -> Path:
    """A fresh folder for ``job``'s files under ``work_dir``."""
    folder = work_dir / job.key
    shutil.rmtree(folder, ignore_errors=True)  # a leftover of a killed earlier attempt
    folder.mkdir(parents=True)
    return folder


def place(job: Job, slot: Slot, executor: str, concurrency: int, engine_job_id: str = "") -> Job:
    """``job`` pinned to ``slot``: its CPUs, its GPU's environment, and the placement recorded."""
    placement = Placement(
        executor=executor, host=hostname(), gpu_uuid=slot.gpu_uuid, cpus=slot.cpus,
        concurrency=concurrency, engine_job_id=engine_job_id, attempt=job.placement.attempt,
    )
    env = dict(job.env)
    env.update(slot.env)
    return dataclasses.replace(job, placement=placement, env=tuple(sorted(env.items())))


class LocalExecutor(Executor):
    """Runs the jobs on this machine, one per slot at a time, each in a fresh worker process."""

    name = "local"
    runs_on_this_machine = True

    @classmethod
    def from_settings(cls, settings: ExecutorSettings, device: str, threads: int,
                      nvml: Any | None = None) -> LocalExecutor:
        """One slot, or ``--jobs N`` CPU slots, or one slot per ``--gpus`` GPU."""
        why = fork_unsupported()
        if settings.start == "fork" and why:
            raise ExecutorError(f"--start fork: {why}")
        if settings.gpus:
            if device == "cpu":
                raise ExecutorError("--gpus runs CUDA cases: use it with --device cuda")
            return cls(gpu_slots(settings.gpus, settings.bind_cpus, nvml), settings.start)
        if settings.jobs > 1:
            if device == "cuda":
                raise ExecutorError("--jobs runs CPU cases side by side; for GPUs use --gpus")
            return cls(cpu_slots(settings.jobs), settings.start)
        return cls(start=settings.start)

    def __init__(self, slots: Sequence[Slot] | None = None, start: str = "spawn") -> None:
        self.slots = list(slots) if slots else [Slot(0)]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        #: how workers start: "fork" (from a zygote per library, where this machine can) or
        #: "spawn" (a new interpreter each)
        self.start = "spawn" if start == "spawn" or fork_unsupported() else "fork"
        self._zygotes: Zygotes | None = Zygotes() if self.start == "fork" else None

    @property
    def concurrency(self) -> int:
        return len(self.slots)

    def threads_per_case(self) -> int | None:
        if all(s.cpus for s in self.slots) and not any(s.gpu_uuid for s in self.slots):
            return min(len(s.cpus) for s in self.slots)
        return None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "concurrency": self.concurrency, "start": self.start,
                "slots": [{"cpus": list(s.cpus), "gpu_uuid": s.gpu_uuid} for s in self.slots]}

    def run(self, jobs: Iterable[Job], work_dir: Path, log_dir: Path,
            on_start: JobStarted | None = None) -> Iterator[CaseRecord]:
        if len(self.slots) == 1:
            for job in jobs:
                placed = place(job, self.slots[0], self.name, 1)
                if on_start is not None:
                    on_start(placed)
                yield run_in_folder(placed, work_dir, log_dir, self._stop,
                                    zygotes=self._zygotes)
            return
        yield from self._run_side_by_side(list(jobs), work_dir, log_dir, on_start)

    def _run_side_by_side(self, jobs: list[Job], work_dir: Path, log_dir: Path,
                          on_start: JobStarted | None) -> Iterator[CaseRecord]:
        todo: queue.SimpleQueue[Job] = queue.SimpleQueue()
        for job in jobs:
            todo.put(job)
        # events from the slot threads; progress callbacks run here, in the caller's thread
        events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()

        def serve(slot: Slot) -> None:
            while not self._stop.is_set():
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                placed = place(job, slot, self.name, len(self.slots))
                events.put(("start", placed))
                try:
                    events.put(("done", run_in_folder(placed, work_dir, log_dir, self._stop,
                                                      zygotes=self._zygotes)))
                except Cancelled:
                    return
                except BaseException as exc:  # handed to the caller's thread, never lost
                    events.put(("raise", exc))
                    return

        self._threads = [threading.Thread(target=serve, args=(slot,), daemon=True,
                                          name=f"snnbench-slot-{slot.index}")
                         for slot in self.slots]
        for thread in self._threads:
            thread.start()
        done = 0
        try:
            while done < len(jobs):
                try:
                    kind, item = events.get(timeout=POLL_S)
                except queue.Empty:
                    if not any(t.is_alive() for t in self._threads) and events.empty():
                        break
                    continue
                if kind == "start":
                    if on_start is not None:
                        on_start(item)
                elif kind == "done":
                    done += 1
                    yield item
                else:
                    raise item
        finally:
            self.close()

    def close(self) -> None:
        """Kill running workers (each slot thread kills its own) and wait for the threads."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads = []
        if self._zygotes is not None:
            self._zygotes.close()


def run_in_folder(job: Job, work_dir: Path, log_dir: Path,
                  stop: threading.Event | None = None,
                  prefix: Sequence[str] = (), zygotes: Zygotes | None = None) -> CaseRecord:
    """Run ``job`` in its own folder under ``work_dir`` and remove that folder afterwards
    (its worker forked from one of ``zygotes`` when given)."""
    folder = job_folder(work_dir, job)
    try:
        return run_worker(job.with_result_in(folder), folder, log_dir / f"{job.key}.log",
                          stop, prefix, zygotes)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

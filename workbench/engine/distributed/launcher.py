"""devices > 1: spawn one process per device on this machine and yield their run as one run's events.

torch.multiprocessing starts the ranks (spawn, never fork: CUDA and threads do not survive a fork);
they meet at a FileStore in a fresh temporary folder (no port to race for). Each rank sends its
events through one queue; the parent merges them (workbench.engine.distributed.aggregate) and
yields the same event types a one-process run yields, per-rank figures inside.

Faults: a rank that fails sends its RunEnded and exits 1; one that dies sends nothing and is
seen by its exit code. Either ends the run at once as failed, naming the rank; the others are
ended (END_RANK_SIGNAL, then SIGKILL after a grace period: a rank stuck in a collective cannot run Python).
Stop is passed on to every rank, which agree on the step to stop at. Nothing outlives the run:
every rank is joined, or ended, before the generator finishes, however it finishes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import queue
import shutil
import signal
import sys
import tempfile
import time
import traceback
from typing import Any, Callable, Iterator, Optional

import torch.multiprocessing

from workbench.config import RunConfig
from workbench.engine.device import probe_device
from workbench.engine.distributed.aggregate import RankEventMerger
from workbench.engine.distributed.launched import run_launched
from workbench.engine.distributed.rank import END_RANK_SIGNAL, spawned_rank_main
from workbench.engine.distributed.world import (
    World,
    backend_for,
    distributed_notes,
    launched_world,
    lost_a_peer,
    world_size_for,
)
from workbench.engine.events import DeviceInfo, Event, RunEnded, RunStarted, StatusChanged
from workbench.engine.one_process import run_one
from workbench.engine.requests import THE_USER, stopped_by
from workbench.engine.summary import SummaryBuilder

POLL_SECONDS = 0.05  # how often the parent looks at Stop and the ranks' health between events
STOP_GRACE_SECONDS = 20.0  # after Stop, how long the ranks have to agree and end before they are ended
EXIT_GRACE_SECONDS = 10.0  # after its RunEnded, how long a rank has to leave the group and exit
TERMINATE_GRACE_SECONDS = 3.0  # between END_RANK_SIGNAL and SIGKILL
SETTLE_SECONDS = 2.0  # after a rank fails for a lost peer, how long to look for the rank that caused it

RankEntry = Callable[..., None]  # (rank, world, config, events, stop_requested), as spawned_rank_main


def run_distributed(config: RunConfig, stop: Callable[[], bool]) -> Iterator[Event]:
    """engine.run for devices ≠ 1 or under torchrun (see workbench.engine.trainer.run)."""
    world = launched_world()
    if world is not None:
        yield from run_launched(config, stop, world)
        return
    try:
        device = probe_device(config.device)
    except Exception as error:
        reason = f"could not query the device: {type(error).__name__}: {error}"
        yield RunEnded(status="failed", summary=SummaryBuilder().build("failed", reason, "error"), reason=reason, kind="error")
        return
    problems = config.validate(device)
    if problems:
        reason = "; ".join(problems)
        yield RunEnded(status="failed", summary=SummaryBuilder().build("failed", reason, "config"), reason=reason, kind="config")
        return
    world_size = world_size_for(config, device)
    if world_size == 1:  # devices=0 on a one-GPU machine: the one-process run, nothing to spawn
        yield from run_one(config, stop)
        return
    yield from spawn_run(config, stop, world_size, device)


def spawn_run(
    config: RunConfig,
    stop: Callable[[], bool],
    world_size: int,
    device: Optional[DeviceInfo] = None,
    rank_entry: RankEntry = spawned_rank_main,
    wrap_one_process: bool = False,
) -> Iterator[Event]:
    """Run ``config`` in ``world_size`` spawned ranks (1 is allowed: the distributed path on one device,
    without DDP's wrapper unless ``wrap_one_process``).

    ``rank_entry`` is what each spawned process runs (tests wrap spawned_rank_main to provoke faults).
    """
    device = device or probe_device(config.device)
    backend = backend_for(device)
    summary = SummaryBuilder(world_size)
    notes = tuple(distributed_notes(config, device, world_size, backend, world_size > 1 or wrap_one_process))
    merger = RankEventMerger(world_size, started=lambda event: _started(event, notes))
    context = multiprocessing.get_context("spawn")
    events: Any = context.Queue()
    stop_requested: Any = context.Event()
    folder = tempfile.mkdtemp(prefix="workbench-rendezvous-")
    world = World(0, world_size, 0, backend, "file://" + os.path.join(folder, "store"),
                  wrap_one_process=wrap_one_process)
    processes: list = []
    exit_wait = 0.0  # unless every rank ended on its own terms, end the rest at once
    try:
        where = f"{world_size} GPUs" if device.type == "cuda" else "the CPU"
        yield StatusChanged(message=f"Starting {world_size} processes on {where} ({backend})…")
        spawned = torch.multiprocessing.start_processes(
            _rank_process, args=(rank_entry, world, config, events, stop_requested), nprocs=world_size,
            join=False, start_method="spawn",
        )
        processes = spawned.processes
        follower = _Follower(world_size, processes, events, stop_requested, stop, merger)
        for event in follower.events():
            summary.add(event)
            yield event
        if len(follower.ended) == world_size and follower.failure is None:
            exit_wait = EXIT_GRACE_SECONDS
        yield follower.end(summary)
    finally:
        _shut_down(processes, exit_wait)
        events.close()
        events.cancel_join_thread()
        shutil.rmtree(folder, ignore_errors=True)


def _rank_process(index: int, rank_entry: RankEntry, *args: Any) -> None:
    """What each spawned process runs: the rank's entry, then an immediate exit with its status.

    By then the rank has sent its last event, left the process group and shut its loader workers
    down; what remains is the interpreter unloading torch's libraries, seconds of nothing on a busy
    machine that the user would wait through after every run (and after Stop).
    """
    code = 0
    try:
        rank_entry(index, *args)
    except SystemExit as leaving:
        code = leaving.code if isinstance(leaving.code, int) else 1
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # the entry reports its own failures; this is the last word for any other
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def _started(event: RunStarted, notes: tuple[str, ...]) -> RunStarted:
    return dataclasses.replace(event, notes=(*notes, *event.notes))


class _Follower:
    """Reads the ranks' events until every rank has ended, one fails or dies, or Stop runs out of time."""

    def __init__(self, world_size, processes, events, stop_requested, stop, merger: RankEventMerger):
        self.world_size, self.processes, self.queue = world_size, processes, events
        self.stop_requested, self.stop, self.merger = stop_requested, stop, merger
        self.ended: dict[int, RunEnded] = {}
        self.started: set[int] = set()
        self.heard: set[int] = set()  # ranks that have sent anything
        self.failure: Optional[tuple[int, str, str]] = None  # rank, reason, kind
        self.stop_deadline: Optional[float] = None
        self.stopped_early: Optional[str] = None

    def events(self) -> Iterator[Event]:
        while len(self.ended) < self.world_size and self.failure is None and self.stopped_early is None:
            self._watch_stop()
            try:
                rank, event = self.queue.get(timeout=POLL_SECONDS)
            except queue.Empty:
                self._watch_processes()
                continue
            yield from self._take(rank, event)

    def _take(self, rank: int, event: Event) -> Iterator[Event]:
        self.heard.add(rank)
        if isinstance(event, RunEnded):
            self.ended[rank] = event
            if event.status == "failed" and self.failure is None:
                self.failure = self._root_cause(rank, event)
            return
        if isinstance(event, RunStarted):
            self.started.add(rank)
        yield from self.merger.add(rank, event)

    def _watch_stop(self) -> None:
        if self.stop_deadline is None and self.stop():
            self.stop_requested.set()
            self.stop_deadline = time.monotonic() + STOP_GRACE_SECONDS
            if len(self.started) < self.world_size:  # still starting (imports, data): nothing to agree on yet
                self.stopped_early = f"stopped by {stopped_by(self.stop)} before training started"
        elif self.stop_deadline is not None and time.monotonic() > self.stop_deadline:
            missing = sorted(set(range(self.world_size)) - set(self.ended))
            self.stopped_early = (
                f"stopped by {stopped_by(self.stop)}; rank{'s' if len(missing) > 1 else ''} {_listed(missing)} "
                f"did not end within {STOP_GRACE_SECONDS:.0f} s and {'were' if len(missing) > 1 else 'was'} ended"
            )

    def _root_cause(self, rank: int, event: RunEnded) -> tuple[int, str, str]:
        """The failure to report: when one rank dies or fails, the others soon fail too, having lost their
        peer in a collective. A rank that lost its peer is not the cause: wait a moment for the one that
        died (no message, an exit code) or failed on its own."""
        first = (rank, event.reason or "no reason given", event.kind or "error")
        if not lost_a_peer(first[1]):
            return first
        deadline = time.monotonic() + SETTLE_SECONDS
        while time.monotonic() < deadline:
            for other, process in enumerate(self.processes):
                if other not in self.ended and process.exitcode not in (None, 0):
                    return (other, _exit_words(process.exitcode), "error")
            try:
                other, late = self.queue.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue
            if isinstance(late, RunEnded):
                self.ended[other] = late
                if late.status == "failed" and not lost_a_peer(late.reason or ""):
                    return (other, late.reason or "no reason given", late.kind or "error")
        return first

    def _watch_processes(self) -> None:
        for rank, process in enumerate(self.processes):
            if process.exitcode is None or rank in self.ended:
                continue
            # Its last events may still be in the pipe: read them first (a failing rank's reason).
            for late_rank, event in self._drain():
                list(self._take(late_rank, event))
            if self.failure is None and rank not in self.ended:
                words = _exit_words(process.exitcode)
                if rank not in self.heard and process.exitcode > 0:
                    # Most often the spawned process could not even import the program that started it:
                    # Python's spawn re-imports the main script, which must guard what it runs.
                    words = (f"the process ended with exit code {process.exitcode} before sending anything: a "
                             "script that starts runs must do so under `if __name__ == \"__main__\":` (each new "
                             "process imports it again)")
                self.failure = (rank, words, "error")
            return

    def _drain(self) -> list:
        items = []
        while True:
            try:
                items.append(self.queue.get(timeout=0.2))
            except queue.Empty:
                return items

    def end(self, summary: SummaryBuilder) -> RunEnded:
        def ended(status, reason=None, kind=None, traceback=None) -> RunEnded:
            return RunEnded(status=status, summary=summary.build(status, reason, kind), reason=reason, kind=kind, traceback=traceback)

        if self.failure is not None:
            rank, reason, kind = self.failure
            failed = self.ended.get(rank)  # its traceback, when the rank reported one
            # Bad settings or data fail every rank alike: no rank to name.
            return ended("failed", reason if kind in ("config", "data") else f"rank {rank}: {reason}", kind,
                         failed.traceback if failed is not None else None)
        if self.stopped_early is not None:
            return ended("stopped", self.stopped_early)
        statuses = {event.status for event in self.ended.values()}
        if statuses == {"finished"}:
            return ended("finished")
        # The ranks stopped on the launcher's word, and say "by the user": say who asked the launcher.
        reason = (self.ended[0].reason or "").replace(f"by {THE_USER}", f"by {stopped_by(self.stop)}", 1)
        return ended("stopped", reason or None)


# How gloo and NCCL say that the other end of a collective went away.
def _exit_words(exitcode: int) -> str:
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (out of host memory? the kernel's OOM killer sends it)" if name == "SIGKILL" else ""
        return f"the process died: killed by {name}{hint}"
    return f"the process ended with exit code {exitcode} before its run ended"


def _listed(ranks: list[int]) -> str:
    return ", ".join(str(rank) for rank in ranks)


def _shut_down(processes: list, wait_seconds: float) -> None:
    """Join every rank: those still alive after ``wait_seconds`` get END_RANK_SIGNAL, then SIGKILL."""
    deadline = time.monotonic() + wait_seconds
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    alive = [process for process in processes if process.is_alive()]
    for process in alive:
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            os.kill(process.pid, END_RANK_SIGNAL)
    deadline = time.monotonic() + TERMINATE_GRACE_SECONDS
    for process in alive:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in alive:
        if process.is_alive():
            process.kill()
        process.join()

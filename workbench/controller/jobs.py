"""The jobs the window starts, each ONE generator on the one training thread (no Qt, no torch here): a run, a
sweep, a search, max-batch, a verification of a finding, the ceiling probe.

A lone run and every member of a sequence are recorded the same way as the CLI's sweep, tune and
max-batch record theirs: a recorder from the factory, fed each event in the thread that iterates
them (``record_events``; a history that fails never stops the run). A
job opens its recorder factory itself and closes it when it ends, in that thread: a SQLite
connection belongs to the thread that made it.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Generator, Iterator, Optional, Union

from workbench.config import RunConfig
from workbench.controller.driving import Job, JobKind
from workbench.device_info import Probe
from workbench.engine.ceiling_cache import ProbeStopped
from workbench.engine.events import RunEnded, StatusChanged
from workbench.engine.requests import JobRequests, RunFunction
from workbench.engine.run_summary import RunSummary
from workbench.experiments.max_batch import MaxBatchPlan, run_max_batch
from workbench.experiments.members import started_on_use
from workbench.experiments.recording import (
    NoRecording,
    RecorderFactory,
    open_record,
    record_events,
)
from workbench.experiments.sweep import SweepPlan, run_sweep
from workbench.experiments.tune import TunePlan, run_tune
from workbench.experiments.verify import VerifyPlan, run_verify
from workbench.image_check import ImageCheck, checking, run_images

PROGRESS_INTERVAL_S = 0.2  # the image check's count on the progress bar: five times a second is plenty

# A fresh recorder factory per job (e.g. a HistoryRecording); it is used, then closed, on the training thread.
Recordings = Callable[[], RecorderFactory]
MeasureCeiling = Callable[[RunConfig, Callable[[], bool]], Any]  # → the engine's Ceiling


@dataclass(frozen=True)
class CeilingMeasured:
    config: RunConfig
    images_per_sec: float
    steady: bool  # the timed chunks settled (engine.ceiling.steady_chunks); False when the time budget ran out first
    not_kept: str = ""  # why the cache could not keep it for later runs (a read-only or full home); "" when kept


@dataclass(frozen=True)
class CeilingFailed:
    config: RunConfig
    reason: str


@dataclass(frozen=True)
class CeilingStopped:
    """The user stopped the probe (Stop, or closing the window): no ceiling, and nothing failed."""

    config: RunConfig
    reason: str  # how far it got: "stopped while warming up (2 of 5 warm-up steps done)"


def no_recording() -> RecorderFactory:
    return NoRecording()


@contextlib.contextmanager
def _opened(recordings: Recordings) -> Iterator[RecorderFactory]:
    recorders = recordings()
    try:
        yield recorders
    finally:
        close = getattr(recorders, "close", None)
        if close is not None:
            close()


def run_job(config: RunConfig, run_function: RunFunction, recordings: Recordings = no_recording) -> Job:
    """One run of ``config``, recorded as the CLI records one (named by the history: data + what changed)."""

    def events(controls: JobRequests) -> Iterator[Any]:
        refusal = yield from images_checked(config, controls)
        if refusal is not None:  # before anything is recorded, as the CLI refuses it
            yield refusal
            return
        with _opened(recordings) as recorders:
            recorder, problem = open_record(recorders, config, None, None)
            yield from record_events(started_on_use(run_function, config, controls), recorder, problem)

    return Job("run", "run", events)


def images_checked(config: RunConfig, stop: Callable[[], bool],
                   clock: Callable[[], float] = time.monotonic) -> Generator[Any, None, Optional[RunEnded]]:
    """An image folder's files checked on the training thread before the run is recorded, the count on the
    progress bar (StatusChanged, at most every PROGRESS_INTERVAL_S); Stop cancels it. The run's end when the run
    must not start (unreadable files and skip_bad_images off: every one listed; cancelled), else None."""
    paths = run_images(config)
    if not paths:
        return None
    yield StatusChanged(message=f"Checking {len(paths):,} images…")
    steps = checking(paths, cancelled=stop)
    last = clock()
    while True:
        try:
            done = next(steps)
        except StopIteration as end:
            check: ImageCheck = end.value
            break
        if clock() - last >= PROGRESS_INTERVAL_S:
            last = clock()
            yield StatusChanged(message=f"Checking images: {done:,} of {len(paths):,}…")
    if check.cancelled:
        reason = f"stopped while checking the images ({check.checked:,} of {check.total:,} checked)"
        return RunEnded(status="stopped", reason=reason, summary=RunSummary(status="stopped", reason=reason))
    if not check.bad or config.skip_bad_images:
        return None
    reason = check.report()
    return RunEnded(status="failed", reason=reason, kind="data",
                    summary=RunSummary(status="failed", reason=reason, failure_kind="data"))


# Every sequence the window starts: its kind (the Job's, the history's) and its generator, by its plan's type.
SEQUENCES: dict[type, tuple[JobKind, Callable[..., Iterator[Any]]]] = {
    SweepPlan: ("sweep", run_sweep), TunePlan: ("tune", run_tune), MaxBatchPlan: ("max_batch", run_max_batch),
    VerifyPlan: ("verify", run_verify),
}
SequencePlan = Union[SweepPlan, TunePlan, MaxBatchPlan, VerifyPlan]


def sequence_job(plan: SequencePlan, run_function: RunFunction, recordings: Recordings, probe: Probe) -> Job:
    """A sweep, a search, max-batch or a verification, its runs recorded in a factory of its own."""
    kind, run_sequence = SEQUENCES[type(plan)]

    def events(controls: JobRequests) -> Iterator[Any]:
        with _opened(recordings) as recorders:
            yield from run_sequence(plan, controls, recorders, run_function, probe)

    return Job(kind, plan.display_name, events)


def ceiling_job(config: RunConfig, measure: MeasureCeiling) -> Job:
    """The compute ceiling for ``config``: the model alone on on-device batches (stopped by the stop flag)."""

    def events(controls: JobRequests) -> Iterator[Any]:
        # No StatusChanged: that is a run's event, and the probe is no run (the controller says what it does).
        try:
            ceiling = measure(config, controls)
        except ProbeStopped as stopped:
            yield CeilingStopped(config, str(stopped))
            return
        except Exception as error:  # out of memory, bad data: said in words
            yield CeilingFailed(config, f"{type(error).__name__}: {error}")
            return
        yield CeilingMeasured(config, ceiling.images_per_sec, ceiling.steady, getattr(ceiling, "not_kept", ""))

    return Job("ceiling", "ceiling", events)

"""Iterating a job on the training thread (no Qt): the loop the GUI's worker runs, and tests run in place.

A job is a generator over a stop flag (``Job``). ``drive`` passes its events on, adding three things:
step windows batched into lists at most every ``step_interval_s`` (a fast GPU run cannot flood the GUI's
event loop), a failed ``RunEnded`` for a run the job left without one (an exception escaping, or a
generator that just stops), built from what that run had measured and with the traceback (and a failed
``SequenceEnded`` for a sequence left without one), and the job closed at the end, also when it was left early (that shuts DataLoader workers down).
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Optional

from workbench.engine.events import RunEnded, RunStarted, StatusChanged, StepStats
from workbench.engine.requests import JobRequests
from workbench.engine.summary import SummaryBuilder
from workbench.experiments.events import MemberStarted, RunRecorded, SequenceEnded, SequenceStarted

JobKind = Literal["run", "sweep", "tune", "max_batch", "ceiling", "verify"]


@dataclass(frozen=True)
class Job:
    """What the training thread runs: ``events(controls)`` is ONE generator for the whole job (a run,
    or every member of a sequence), stopped by the one stop flag in ``controls``."""

    kind: JobKind
    name: str  # what the window calls it: "run", "sweep num_workers", …
    events: Callable[[JobRequests], Iterator[Any]]

    @property
    def lone_run(self) -> bool:
        return self.kind == "run"

# The plots redraw at 20 Hz: batching steps any finer buys nothing. A step that arrives sooner than
# this after the last emit waits for the next event (the next step, an epoch, the end), which in that
# regime comes within a few milliseconds.
STEP_EMIT_INTERVAL_S = 0.05
NO_END = "the engine stopped without saying how the run ended"

# Events that open a run: after one of them, the job owes that run a RunEnded (steps open one too,
# where the loop takes them apart).
_OPENS_A_RUN = (StatusChanged, RunStarted, RunRecorded)


def drive(
    job: Job,
    controls: JobRequests,
    emit_steps: Callable[[list[StepStats]], None],
    emit: Callable[[Any], None],
    step_interval_s: float = STEP_EMIT_INTERVAL_S,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Run ``job`` to its end, passing its events to ``emit`` (steps to ``emit_steps``, as lists), in order."""
    pending: list[StepStats] = []
    last_emit = 0.0
    run_open = job.lone_run  # a lone run owes its RunEnded from the start; a sequence's runs open as they come
    open_sequence: Optional[SequenceStarted] = None  # owes its SequenceEnded
    failure = NO_END
    failure_traceback: Optional[str] = None
    seen = SummaryBuilder()  # what the open run had measured, should it end without a RunEnded
    events: Optional[Iterator[Any]] = None
    try:
        events = job.events(controls)
        for event in events:
            if isinstance(event, StepStats):
                seen.add(event)
                run_open = True
                pending.append(event)
                now = clock()
                if now - last_emit >= step_interval_s:
                    emit_steps(pending)
                    pending, last_emit = [], now
                continue
            if pending:  # keep the order: steps before the epoch or end that follows them
                emit_steps(pending)
                pending = []
            if isinstance(event, SequenceStarted):
                open_sequence, run_open = event, False
            elif isinstance(event, MemberStarted):
                seen, run_open = SummaryBuilder(), True
            elif isinstance(event, RunEnded):
                seen, run_open = SummaryBuilder(), False
            elif isinstance(event, SequenceEnded):
                open_sequence, run_open = None, False
            elif isinstance(event, _OPENS_A_RUN):
                run_open = True
            seen.add(event)
            emit(event)
    except Exception as error:  # anything escaping the job must reach the window as a failed run
        failure = f"{type(error).__name__}: {error}"
        failure_traceback = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    finally:
        try:
            close = getattr(events, "close", None)
            if close is not None:
                close()  # shuts DataLoader workers down, also when we left the loop early
        except Exception as error:
            failure = f"{type(error).__name__} while shutting the run down: {error}"
            failure_traceback = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        events = None
        if pending:
            emit_steps(pending)
        if run_open:
            summary = seen.build("failed", failure, "error")
            emit(RunEnded(status="failed", summary=summary, reason=failure, kind="error", traceback=failure_traceback))
        if open_sequence is not None:
            emit(SequenceEnded(kind=open_sequence.kind, sequence_id=open_sequence.sequence_id, status="failed", result=None, reason=failure))

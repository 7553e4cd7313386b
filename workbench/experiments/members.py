"""One member of a sequence: an ordinary engine run, recorded, between MemberStarted and MemberEnded.

Every sequence runs its members through ``run_member``, so each is a normal run in the history
(tagged with the sequence), its engine events reach the caller unchanged (the GUI plots them live),
and the stop flag the caller passed reaches the engine. No Qt; torch only inside the engine.
"""

from __future__ import annotations

from typing import Any, Generator, Iterator, Optional, Sequence

from workbench.config import RunConfig
from workbench.device_info import DeviceInfo
from workbench.engine.events import Event, RunEnded
from workbench.engine.requests import RunFunction, StopFlag
from workbench.engine.run_summary import RunSummary
from workbench.experiments.events import (
    AnyEvent,
    MemberEnded,
    MemberStarted,
    SequenceEnded,
    SequenceKind,
    SequenceStarted,
    Values,
)
from workbench.experiments.model_check import model_build_problems
from workbench.experiments.recording import NoRecording, RecorderFactory, open_record, record_events
from workbench.history.naming import dataset_label


def default_run_function() -> RunFunction:
    """The real engine's ``run`` (imported on use: it imports torch)."""
    from workbench.engine import run

    return run


def probe_device(requested: str) -> DeviceInfo:
    """The engine's device probe (imported on use: it imports torch)."""
    from workbench.engine import probe_device as probe

    return probe(requested)


def started_on_use(run_function: RunFunction, config: RunConfig, stop: StopFlag) -> Iterator[Event]:
    """``run_function(config, stop)``'s events, the call made on the first ``next``: an exception from the
    call itself then reaches the recording loop like one from the run (recorded as the run's failure).
    Closed at the end, also when left early, where the iterator can be (a generator: the run's own cleanup)."""
    events = run_function(config, stop)
    try:
        yield from events
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


def member_name(config: RunConfig, label: str) -> str:
    """A member's run name: its data, then what distinguishes it ("synthetic: num_workers=2")."""
    return f"{dataset_label(config)}: {label}"


class MemberRunner:
    """Runs the members of one sequence: numbers them, names them, records them."""

    def __init__(self, run_function: RunFunction, recorders: RecorderFactory, sequence_id: Optional[int]):
        self.run_function = run_function
        self.recorders = recorders
        self.sequence_id = sequence_id
        self.count = 0

    def run(
        self, config: RunConfig, values: Values, stop: StopFlag, label: str, purpose: str = ""
    ) -> Generator[AnyEvent, None, MemberEnded]:
        """Yield MemberStarted, the run's engine events, MemberEnded; return the MemberEnded."""
        index, self.count = self.count, self.count + 1
        recorder, problem = open_record(self.recorders, config, member_name(config, label), self.sequence_id)
        run_id = recorder.run_id if recorder is not None else None
        yield MemberStarted(index=index, config=config, values=values, run_id=run_id, purpose=purpose)
        ended = yield from record_events(started_on_use(self.run_function, config, stop), recorder, problem,
                                         "the sequence was closed before this run ended")
        if ended is None:  # a run function that ends without saying how is a failed run, never a silent one
            reason = "the run stopped without saying how it ended"
            ended = RunEnded(status="failed", summary=RunSummary(status="failed", reason=reason, failure_kind="error"), reason=reason,
                             kind="error")
        if recorder is not None and recorder.discarded:
            run_id = None  # refused before it started: not history
        member = MemberEnded(
            index=index,
            config=config,
            values=values,
            run_id=run_id,
            status=ended.status,
            summary=ended.summary,
            reason=ended.reason,
            kind=ended.kind,
            purpose=purpose,
        )
        yield member
        return member


def plan_dict(base: RunConfig, **extra: Any) -> dict[str, Any]:
    """What a sequence stores as its plan: the base settings and what it was asked to do."""
    return {"base": base.to_dict(), **extra}


def open_sequence(
    kind: SequenceKind,
    name: str,
    base: RunConfig,
    problems: list[str],
    plan: dict[str, Any],
    recorders: Optional[RecorderFactory],
    run_function: Optional[RunFunction],
    members: Sequence[RunConfig] = (),
    **started: Any,
) -> Generator[AnyEvent, None, Optional[MemberRunner]]:
    """Every sequence's opening: refused with its ``problems`` (a failed SequenceEnded, nothing recorded; None),
    or recorded and started (SequenceStarted with ``started``'s fields), with the runner its members run by.
    The models of ``members`` (``base``'s where none are known yet) are built and checked first: a spec that gives
    no model is one of the problems."""
    if not problems:
        problems = model_build_problems(members or [base])
    if problems:
        yield SequenceEnded(kind=kind, sequence_id=None, status="failed", result=None, reason="; ".join(problems),
                            problems=tuple(problems))
        return None
    recorders = recorders or NoRecording()
    sequence_id = recorders.begin_sequence(kind, name, plan)
    yield SequenceStarted(kind=kind, sequence_id=sequence_id, name=name, base=base, **started)
    return MemberRunner(run_function or default_run_function(), recorders, sequence_id)

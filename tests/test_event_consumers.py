"""Every consumer of the events dispatches by type: each known event has its handler, and an event of another type is
a TypeError, never dropped in silence (the CLI's progress and sequence output, the history's recorder)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import get_args

import pytest
from builders import started

from workbench.cli.progress_line import ProgressLine
from workbench.cli.sequence_output import SequenceProgress
from workbench.config import RunConfig
from workbench.engine.events import Event
from workbench.experiments.events import AnyEvent
from workbench.experiments.recording import record_events
from workbench.history.recorder import RunRecorder, UnknownEvent
from workbench.history.store import HistoryStore


@dataclass(frozen=True)
class NewEvent:
    """An event type no consumer knows yet."""

    message: str = "new"


def handled_types(cls: type, method: str) -> set[type]:
    """The event types a singledispatchmethod of ``cls`` has a handler of its own for."""
    dispatcher = cls.__dict__[method].dispatcher
    fallback = dispatcher.dispatch(object)
    return {kind for kind in dispatcher.registry if dispatcher.dispatch(kind) is not fallback}


def test_each_consumer_handles_every_event_it_is_given():
    assert set(get_args(Event)) <= handled_types(ProgressLine, "show")
    assert set(get_args(AnyEvent)) <= handled_types(SequenceProgress, "show")
    assert set(get_args(Event)) <= handled_types(RunRecorder, "_take")


def test_the_progress_line_refuses_an_unknown_event():
    with pytest.raises(TypeError, match="NewEvent"):
        ProgressLine(io.StringIO()).show(NewEvent())


def test_the_sequence_output_refuses_an_unknown_event():
    with pytest.raises(TypeError, match="NewEvent"):
        SequenceProgress(io.StringIO()).show(NewEvent())


def test_the_recorder_refuses_an_unknown_event_and_the_run_does_not_pass_it_off_as_a_history_failure(tmp_path):
    with HistoryStore.open(tmp_path / "home") as store:
        recorder = store.start_run(RunConfig())
        with pytest.raises(TypeError, match="NewEvent"):
            recorder.record(NewEvent())  # once a status change: it flushed and went on
        # In use: a recorder's write errors are caught and the run goes on without it; this one is raised.
        events = record_events(iter([started(RunConfig()), NewEvent()]), store.start_run(RunConfig()))
        with pytest.raises(UnknownEvent):
            list(events)


def test_the_epoch_line_says_its_rate_is_the_whole_epochs():
    """The epoch's img/s counts its start (workers, warm-up); the run's leaves the first window out: the same name
    for two figures read 401 against 964 img/s."""
    from builders import epoch

    stream = io.StringIO()
    ProgressLine(stream).show(epoch(10))
    assert "990 img/s, data wait 25% (the whole epoch, its start included" in stream.getvalue()


def test_the_terminals_eta_takes_the_latest_windows_pace_once_the_first_window_is_past():
    """The first window holds the loader's start and the warm-up: the mean since the start charged them to every
    step left, as the window's bar did."""
    import dataclasses

    from builders import step

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    line = ProgressLine(stream)
    first = dataclasses.replace(step(5, total=100), elapsed_seconds=10.0, window_seconds=10.0)
    second = dataclasses.replace(step(10, total=100), elapsed_seconds=11.0, window_seconds=1.0)
    line.show(first)
    assert stream.getvalue().endswith("ETA 3:10")  # only the first window: 2 s a step since the start
    line.show(second)
    assert stream.getvalue().endswith("ETA 0:18")  # 90 steps left at 0.2 s each (since the start: 1:39)

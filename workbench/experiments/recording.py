"""Where runs are recorded: one factory, so the CLI and the GUI record them the same way (and keep, and read
back, what a verification measured).

A sequence asks its factory once for a sequence id (``begin_sequence``) and then for one recorder per
member (``start_run``); each recorder takes that member's engine events in order, in the thread that
iterates them (``record_events``; a lone GUI run goes through the same two calls). ``NoRecording``
keeps nothing (``--no-history``, tests). ``HistoryRecording`` writes to the run history; it opens
its store on first use, in the thread that uses it (a SQLite connection belongs to one thread), so
a GUI can hand one to the training thread that iterates the sequence.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generator, Iterator, Optional, Protocol, Union

from workbench.config import RunConfig
from workbench.engine.events import Event, RunEnded
from workbench.experiments.events import RecordingFailed, RunRecorded
from workbench.history.errors import HistoryError
from workbench.history.recorder import UnknownEvent

if TYPE_CHECKING:
    from workbench.history.measured_changes import MeasuredChangeRecord
    from workbench.history.store import HistoryStore


class Recorder(Protocol):
    run_id: int
    discarded: bool

    @property
    def label(self) -> str:
        """"#7 synthetic: num_workers=2", as every view names the run."""

    def record(self, event: Event) -> None: ...

    def fail(self, reason: str, kind: str = "error", traceback: Optional[str] = None) -> None: ...


class RecorderFactory(Protocol):
    def begin_sequence(self, kind: str, name: str, plan: dict[str, Any]) -> Optional[int]:
        """The new sequence's id (None when nothing is recorded)."""

    def start_run(self, config: RunConfig, name: Optional[str], sequence_id: Optional[int]) -> Optional[Recorder]:
        """A recorder for one run (None when nothing is recorded); ``name`` None: the history names it."""

    def add_measured_change(self, change: MeasuredChangeRecord) -> None:
        """Keep what a change measured against its baseline (a measured change)."""

    def measured_changes(self, config: RunConfig, device_type: str, device_name: str) -> list[MeasuredChangeRecord]:
        """The changes measured on this device from ``config``'s speed settings, oldest first ([] when nothing
        is kept): what the findings of a run with these settings read."""


class NoRecording:
    """Records nothing: every id is None."""

    def begin_sequence(self, kind: str, name: str, plan: dict[str, Any]) -> Optional[int]:
        return None

    def start_run(self, config: RunConfig, name: Optional[str], sequence_id: Optional[int]) -> Optional[Recorder]:
        return None

    def add_measured_change(self, change: MeasuredChangeRecord) -> None:
        pass

    def measured_changes(self, config: RunConfig, device_type: str, device_name: str) -> list[MeasuredChangeRecord]:
        return []

    def close(self) -> None:
        pass

    def __enter__(self) -> NoRecording:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class HistoryRecording:
    """Records every member in the run history, tagged with its sequence."""

    def __init__(self, source: str = "cli", home: Optional[Path] = None):
        self.source = source
        self.home = home
        self._store: Optional[HistoryStore] = None

    @property
    def store(self) -> HistoryStore:
        if self._store is None:
            from workbench.history.store import HistoryStore

            self._store = HistoryStore.open(self.home)
        return self._store

    def begin_sequence(self, kind: str, name: str, plan: dict[str, Any]) -> Optional[int]:
        return self.store.create_sequence(kind, name, plan)

    def start_run(self, config: RunConfig, name: Optional[str], sequence_id: Optional[int]) -> Optional[Recorder]:
        return self.store.start_run(config, name=name, source=self.source, sequence_id=sequence_id)

    def add_measured_change(self, change: MeasuredChangeRecord) -> None:
        self.store.add_measured_change(change)

    def measured_changes(self, config: RunConfig, device_type: str, device_name: str) -> list[MeasuredChangeRecord]:
        return self.store.measured_changes(config, device_type, device_name)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> HistoryRecording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_record(recorders: RecorderFactory, config: RunConfig, name: Optional[str],
                sequence_id: Optional[int]) -> tuple[Optional[Recorder], Optional[str]]:
    """A recorder for one run, or (None, why not): a history that cannot take the run never stops it."""
    try:
        return recorders.start_run(config, name, sequence_id), None
    except Exception as error:  # a full disk, a locked or damaged database: said, and the run goes on
        return None, _error_text(error)


def record_events(
    events: Iterator[Event], recorder: Optional[Recorder], problem: Optional[str] = None,
    closed_reason: str = "the run was closed before it ended",
) -> Generator[Union[Event, RunRecorded, RecordingFailed], None, Optional[RunEnded]]:
    """Pass one run's events on, each recorded first; return its RunEnded (None if it never said).

    Yields ``RunRecorded`` first when the run has a record (``RecordingFailed`` when it could not get
    one). A recorder that fails mid-run ends its record as failed (as far as the history allows) and is
    dropped with one ``RecordingFailed``; the run goes on. An
    exception from the run itself is recorded as the run's failure, with its traceback, and re-raised.
    """
    if recorder is not None:
        yield RunRecorded(run_id=recorder.run_id, label=recorder.label)
    elif problem is not None:
        yield RecordingFailed(run_id=None, reason=problem)
    ended: Optional[RunEnded] = None
    try:
        for event in events:
            if recorder is not None:
                try:
                    recorder.record(event)
                except UnknownEvent:
                    raise  # the code's mistake, not the history's: it must not pass as a history that stopped
                except Exception as error:
                    # Its record is ended as failed, with why (if the history still takes that much), so it
                    # does not stay "running" while this process lives; the run itself goes on.
                    _fail(recorder, f"the history stopped taking this run ({_error_text(error)}); the run went on "
                          "without it")
                    failed_id, recorder = recorder.run_id, None
                    yield RecordingFailed(run_id=failed_id, reason=_error_text(error))
            if isinstance(event, RunEnded):
                ended = event
            yield event
    except Exception as error:
        if recorder is not None and ended is None:
            _fail(recorder, _error_text(error), "".join(traceback.format_exception(error)))
            recorder = None  # its end is written: the reason below must not replace this one
        raise
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()  # now, not when the generator is collected: it shuts the run's DataLoader workers down
        if recorder is not None and ended is None:  # closed early (a stopped sequence, a closed window)
            _fail(recorder, closed_reason)
    return ended


def _fail(recorder: Recorder, reason: str, trace: Optional[str] = None) -> None:
    try:
        recorder.fail(reason, "error", trace)
    except Exception:  # the history is the trouble already; the run's own outcome goes on to the caller
        pass


def _error_text(error: BaseException) -> str:
    if isinstance(error, HistoryError):  # already in words, with what to do
        return str(error)
    return f"{type(error).__name__}: {error}"

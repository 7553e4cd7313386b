"""Training in a QThread: a thin worker iterates ``engine.run`` and emits its events as signals.

The engine never knows Qt exists; the worker adds only three things: a stop flag the GUI thread
can set, throttled step emission (StepStats are batched into lists at most ~20 times a second so a
fast GPU run cannot flood the event loop), and a failed RunEnded for any exception that escapes
the generator, so a crash is always shown and never silent. That RunEnded carries the summary of
every event the worker passed on (a failed run keeps its figures) and the traceback.
"""

from __future__ import annotations

import threading
import time
import traceback
from typing import Callable, Iterator, Optional

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot

from workbench.config import RunConfig
from workbench.engine.events import EpochStats, Event, RunEnded, RunStarted, StatusChanged, StepStats
from workbench.engine.summary import SummaryBuilder
from workbench.gui.engine_calls import engine_run

RunFunction = Callable[[RunConfig, Callable[[], bool]], Iterator[Event]]

# The plots redraw at 20 Hz: batching steps any finer buys nothing. A step that arrives sooner than
# this after the last emit waits for the next event (the next step, an epoch, the end), which in that
# regime comes within a few milliseconds.
STEP_EMIT_INTERVAL_S = 0.05


class RunWorker(QObject):
    """Lives on a QThread; ``work()`` runs one training run to its end."""

    status_changed = Signal(object)  # StatusChanged
    run_started = Signal(object)  # RunStarted
    steps = Signal(object)  # list[StepStats], oldest first
    epoch_ended = Signal(object)  # EpochStats
    run_ended = Signal(object)  # RunEnded, exactly once per run
    finished = Signal()  # after run_ended: the thread may quit

    def __init__(self, config: RunConfig, run_function: RunFunction = engine_run):
        super().__init__()
        self._config = config
        self._run_function = run_function
        self._stop = threading.Event()

    def request_stop(self) -> None:
        """Thread-safe: called from the GUI thread while ``work`` loops; the engine checks between steps."""
        self._stop.set()

    @Slot()
    def work(self) -> None:
        pending: list[StepStats] = []
        last_emit = 0.0
        ended = False
        failure = "the engine stopped without saying how the run ended"
        failure_traceback: Optional[str] = None
        seen = SummaryBuilder()  # what this run had measured, should it end without a RunEnded
        events: Optional[Iterator[Event]] = None
        try:
            events = self._run_function(self._config, self._stop.is_set)
            for event in events:
                seen.add(event)
                if isinstance(event, StepStats):
                    pending.append(event)
                    now = time.monotonic()
                    if now - last_emit >= STEP_EMIT_INTERVAL_S:
                        self.steps.emit(pending)
                        pending, last_emit = [], now
                    continue
                if pending:  # keep the order: steps before the epoch or end that follows them
                    self.steps.emit(pending)
                    pending = []
                ended = self._emit(event) or ended
        except Exception as error:  # anything escaping the generator must reach the GUI as a failed run
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
                self.steps.emit(pending)
            if not ended:
                summary = seen.build("failed", failure, "error")
                self.run_ended.emit(RunEnded("failed", summary, failure, "error", failure_traceback))
            self.finished.emit()

    def _emit(self, event: Event) -> bool:
        """Emit a non-step event promptly; True when it was the run's end."""
        if isinstance(event, RunEnded):
            self.run_ended.emit(event)
            return True
        if isinstance(event, RunStarted):
            self.run_started.emit(event)
        elif isinstance(event, EpochStats):
            self.epoch_ended.emit(event)
        elif isinstance(event, StatusChanged):
            self.status_changed.emit(event)
        return False


class RunSession(QObject):
    """One run at a time: owns the QThread and the worker, and re-emits the worker's signals.

    Every signal arrives on the GUI thread (queued, in the order the engine yielded), so slots may
    touch widgets, and a history recorder fed from them sees the run's events in order: steps come
    as lists, run_ended exactly once. ``finished`` fires after the thread has quit, when it is safe
    to start the next run or to close the window.
    """

    status_changed = Signal(object)
    run_started = Signal(object)
    steps = Signal(object)
    epoch_ended = Signal(object)
    run_ended = Signal(object)
    finished = Signal()

    def __init__(self, run_function: RunFunction = engine_run, parent: Optional[QObject] = None):
        super().__init__(parent)
        self._run_function = run_function
        self._thread: Optional[QThread] = None
        self._worker: Optional[RunWorker] = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self, config: RunConfig) -> None:
        if self.running:
            raise RuntimeError("a run is already in progress")
        thread = QThread()
        thread.setObjectName("trainingThread")
        worker = RunWorker(config, self._run_function)
        worker.moveToThread(thread)
        thread.started.connect(worker.work)
        worker.status_changed.connect(self.status_changed)
        worker.run_started.connect(self.run_started)
        worker.steps.connect(self.steps)
        worker.epoch_ended.connect(self.epoch_ended)
        worker.run_ended.connect(self.run_ended)
        # Direct: quit() is thread-safe, and the thread must end even while the GUI thread is busy.
        worker.finished.connect(thread.quit, Qt.ConnectionType.DirectConnection)
        thread.finished.connect(self._on_thread_finished)
        self._thread, self._worker = thread, worker
        thread.start()

    def request_stop(self) -> None:
        if self._worker is not None:
            self._worker.request_stop()

    def wait(self, timeout_ms: int = -1) -> bool:
        """Block until the thread has ended (tests, shutdown); True when it has.

        The queued signals still arrive afterwards, in order, when the event loop next runs.
        """
        if self._thread is None:
            return True
        return self._thread.wait() if timeout_ms < 0 else self._thread.wait(timeout_ms)

    @Slot()
    def _on_thread_finished(self) -> None:
        thread = self._thread
        if thread is None:
            return
        thread.wait()  # returns at once (the thread has quit): dropping our references is now safe
        self._thread = self._worker = None
        self.finished.emit()

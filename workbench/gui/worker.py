"""Training in a QThread: a thin worker iterates a job (``engine.run``, or a whole sequence of runs) and
emits its events as signals.

The engine never knows Qt exists; how a job is iterated (steps batched, a crash turned into a failed
run, the job closed) is ``workbench.controller.driving.drive``, which the worker runs on its thread.
"""

from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot

from workbench.config import RunConfig
from workbench.controller.driving import Job, drive
from workbench.engine.requests import THE_USER, JobRequests, RunFunction
from workbench.gui.engine_calls import engine_run


class RunWorker(QObject):
    """Lives on a QThread; ``work()`` runs one job to its end."""

    steps = Signal(object)  # list[StepStats], oldest first
    event = Signal(object)  # every other event the job yields, in order (each run's RunEnded exactly once)
    finished = Signal()  # after the last event: the thread may quit

    def __init__(self, job: Job):
        super().__init__()
        self._job = job
        self.controls = JobRequests()  # thread-safe: stop and "sample now" from the GUI thread

    def request_stop(self, by: str = THE_USER) -> None:
        """Thread-safe: called from the GUI thread while ``work`` loops; the engine checks between steps.
        ``by``: who asked (a signal's name), as the stopped run's reason will say."""
        self.controls.stop(by)

    @Slot()
    def work(self) -> None:
        try:
            drive(self._job, self.controls, self.steps.emit, self.event.emit)
        finally:
            self.finished.emit()


class TrainingThread(QObject):
    """One job at a time: owns the QThread and the worker, and re-emits the worker's signals.

    Every signal arrives on the GUI thread (queued, in the order the job yielded), so slots may touch
    widgets: steps come as lists, every other event on ``event`` (each run's RunEnded exactly once).
    ``finished`` fires after the thread has quit, when it is safe to start the next job or to close the window.
    """

    steps = Signal(object)
    event = Signal(object)
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
        """One run of ``config`` with the thread's run function (unrecorded)."""
        run_function = self._run_function
        self.start_job(Job("run", "run", lambda stop: run_function(config, stop)))

    def start_job(self, job: Job) -> None:
        if self.running:
            raise RuntimeError("a run is already in progress")
        thread = QThread()
        thread.setObjectName("trainingThread")
        worker = RunWorker(job)
        worker.moveToThread(thread)
        thread.started.connect(worker.work)
        worker.steps.connect(self.steps)
        worker.event.connect(self.event)
        # Direct: quit() is thread-safe, and the thread must end even while the GUI thread is busy.
        worker.finished.connect(thread.quit, Qt.ConnectionType.DirectConnection)
        thread.finished.connect(self._on_thread_finished)
        self._thread, self._worker = thread, worker
        thread.start()

    def request_stop(self, by: str = THE_USER) -> None:
        if self._worker is not None:
            self._worker.request_stop(by)

    def request_sample(self) -> None:
        """Ask the running job's engine for a profiler sample as soon as one fits."""
        if self._worker is not None:
            self._worker.controls.profile_requests.request()

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

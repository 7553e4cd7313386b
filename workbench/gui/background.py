"""Run one slow call (importing torch, probing the device, loading a preview) off the GUI thread.

Qt's global thread pool runs it; the result or the exception comes back as a queued signal, so
connected slots run on the GUI thread. Give it no parent: the pool's reference keeps it alive
until it has reported, even if the widget that asked is gone by then (its slots are then simply
disconnected). Connect bound methods of widgets, not lambdas, for that reason.

Why not superqt's ``create_worker``: it runs generator workers on a QThread of their own and would bring a
dependency for these thirty lines; a one-shot call on the shared pool, with ``wait_for_background_calls`` for
tests and shutdown, is all the window needs. Likewise the two debounce timers (sample view, sweep view) are one
single-shot QTimer each, where superqt's ``qdebounced`` would wrap the same timer.
"""

from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import QObject, QThreadPool, Signal


class BackgroundCall(QObject):
    succeeded = Signal(object)  # the function's return value
    failed = Signal(object)  # the Exception it raised

    def __init__(self, function: Callable[[], Any]):
        super().__init__()
        self._function = function
        self.running = False

    def start(self) -> None:
        self.running = True
        QThreadPool.globalInstance().start(self._call)

    def _call(self) -> None:
        try:
            result = self._function()
        except Exception as error:  # reported to the GUI, which says what went wrong
            self.running = False
            self.failed.emit(error)
            return
        self.running = False
        self.succeeded.emit(result)


def wait_for_background_calls(timeout_ms: int = -1) -> bool:
    """Join the pool's threads (at exit, and in tests) so none outlives the application object."""
    return QThreadPool.globalInstance().waitForDone(timeout_ms)

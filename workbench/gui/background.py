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

from PySide6.QtCore import QObject, QThreadPool, Signal, Slot


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
            self._report(self.failed, error)
            return
        self.running = False
        self._report(self.succeeded, result)

    @staticmethod
    def _report(signal: Any, value: Any) -> None:
        try:
            signal.emit(value)
        except RuntimeError as error:
            # A call that outlives the application (torchvision's model list while the app quits): its QObject
            # went with the application, and nobody is left to tell.
            if "has been deleted" not in str(error):
                raise


def wait_for_background_calls(timeout_ms: int = -1) -> bool:
    """Join the pool's threads (at exit, and in tests) so none outlives the application object."""
    return QThreadPool.globalInstance().waitForDone(timeout_ms)


class _Relay(QObject):
    """Brings a background call's outcome to ``done`` or ``failed``; a child of ``parent``, so a call that ends
    after the parent is gone reaches nobody."""

    def __init__(self, parent: QObject, done: Callable[[Any], None], failed: Callable[[Exception], None]):
        super().__init__(parent)
        self._done, self._failed = done, failed

    @Slot(object)
    def done(self, result: Any) -> None:
        self._done(result)
        self.deleteLater()

    @Slot(object)
    def failed(self, error: Exception) -> None:
        self._failed(error)
        self.deleteLater()


def call_in_background(parent: QObject, function: Callable[[], Any], done: Callable[[Any], None],
                       failed: Callable[[Exception], None]) -> None:
    """Call ``function`` off the GUI thread; ``done(result)`` or ``failed(error)`` back on it while ``parent``
    lives (any callables: the relay, not they, is what the queued signal reaches)."""
    call = BackgroundCall(function)
    relay = _Relay(parent, done, failed)
    call.succeeded.connect(relay.done)
    call.failed.connect(relay.failed)
    call.start()

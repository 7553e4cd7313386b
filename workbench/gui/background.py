"""Run one slow call (importing torch, probing the device, loading a preview) off the GUI thread.

Qt's global thread pool runs it; the result or the exception comes back as a queued signal, so
connected slots run on the GUI thread. Give it no parent: the pool's reference keeps it alive
until it has reported, even if the widget that asked is gone by then (its slots are then simply
disconnected). Connect bound methods of widgets, not lambdas, for that reason. ``call_in_background`` (any
callables, back while a parent lives) makes no QObject per call: it reports through one that lives as long as the
application (_Reports says why).

Why not superqt's ``create_worker``: it runs generator workers on a QThread of their own and would bring a
dependency for these thirty lines; a one-shot call on the shared pool, with ``wait_for_background_calls`` for
tests and shutdown, is all the window needs. Likewise the two debounce timers (sample view, sweep view) are one
single-shot QTimer each, where superqt's ``qdebounced`` would wrap the same timer.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Optional

import shiboken6
from PySide6.QtCore import QCoreApplication, QObject, Qt, QThreadPool, Signal, Slot


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
    after the parent is gone reaches nobody. No signal is connected to it: its end disconnects nothing."""

    def __init__(self, parent: QObject, done: Callable[[Any], None], failed: Callable[[Exception], None]):
        super().__init__(parent)
        self._done, self._failed = done, failed

    def deliver(self, succeeded: bool, value: Any) -> None:
        try:
            (self._done if succeeded else self._failed)(value)
        finally:
            self.deleteLater()


class _Reports(QObject):
    """The one object every call_in_background reports through, on the GUI thread, by the call's number.

    Why not a QObject per call (BackgroundCall) connected to its relay: the pool thread let go of the call, and so
    destroyed it, while the GUI thread destroyed the relay, whose end told the call's Python side of the lost
    connection: PySide read the half-destroyed object's dict and the app crashed (a segfault in
    Sbk_GetPyOverride; a Runs tab polling every 2 s met it within minutes). This one lives as long as the
    application, and a pool thread touches nothing of Qt's but its signal."""

    reported = Signal(int, bool, object)  # call number, succeeded, the return value or the Exception

    def __init__(self, application: QObject):
        super().__init__(application)
        self.relays: dict[int, _Relay] = {}
        self.reported.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    @Slot(int, bool, object)
    def _deliver(self, number: int, succeeded: bool, value: Any) -> None:
        relay = self.relays.pop(number, None)
        if relay is not None and shiboken6.isValid(relay):  # else its parent went: nobody to tell
            relay.deliver(succeeded, value)


_reports: Optional[_Reports] = None
_numbers = itertools.count()


def _reports_of_this_application() -> _Reports:
    global _reports
    if _reports is None or not shiboken6.isValid(_reports):  # (tests may make a new application)
        _reports = _Reports(QCoreApplication.instance())
    return _reports


def call_in_background(parent: QObject, function: Callable[[], Any], done: Callable[[Any], None],
                       failed: Callable[[Exception], None]) -> None:
    """Call ``function`` off the GUI thread; ``done(result)`` or ``failed(error)`` back on it while ``parent``
    lives (any callables: the relay, not they, is what the report reaches). Call it on the GUI thread."""
    reports = _reports_of_this_application()
    number = next(_numbers)
    reports.relays[number] = _Relay(parent, done, failed)
    reported = reports.reported

    def call() -> None:
        try:
            succeeded, value = True, function()
        except Exception as error:  # reported to the GUI, which says what went wrong
            succeeded, value = False, error
        try:
            reported.emit(number, succeeded, value)
        except RuntimeError as error:
            if "has been deleted" not in str(error):  # the application went first (as in BackgroundCall._report)
                raise

    QThreadPool.globalInstance().start(call)

"""SIGTERM and SIGHUP close the window as the user closing it would: a run stops at its next step and is kept
as stopped, its reason naming the signal; then the app quits.

Python runs a signal handler only when the interpreter runs, and Qt's event loop runs no Python while it waits:
left alone, a SIGTERM would wait for the next mouse move. The signal's number, written to a socket by Python's
C-level handler (``signal.set_wakeup_fd``), wakes the loop (QSocketNotifier), which acts on it at once.
"""

from __future__ import annotations

import signal
import socket
from typing import Any, Callable, Optional

from PySide6.QtCore import QObject, QSocketNotifier

# What a session manager or service manager (SIGTERM) or a closed terminal (SIGHUP) sends.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def _noted(signum: int, frame: Any) -> None:
    """The Python-level handler: nothing to do, the wake-up socket has the signal's number."""


class StopSignals(QObject):
    """While it lives, each stop signal calls ``on_signal`` with its name ("SIGTERM") on the GUI thread.
    Create and close it on the main thread (Python's rule for signal handlers)."""

    def __init__(self, on_signal: Callable[[str], None], parent: Optional[QObject] = None):
        super().__init__(parent)
        self._on_signal = on_signal
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)  # the C handler must never block on a full socket
        self._previous_fd = signal.set_wakeup_fd(self._writer.fileno())
        # Started with a signal ignored (`nohup workbench`): it stays ignored.
        self._previous = {signum: signal.signal(signum, _noted) for signum in STOP_SIGNALS
                          if signal.getsignal(signum) != signal.SIG_IGN}
        self._notifier = QSocketNotifier(self._reader.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._read)

    def _read(self) -> None:
        try:
            numbers = self._reader.recv(512)
        except (BlockingIOError, InterruptedError):
            return
        for number in numbers:  # every signal Python handles writes here (SIGINT too): only ours count
            if number in self._previous:
                self._on_signal(signal.Signals(number).name)

    def close(self) -> None:
        self._notifier.setEnabled(False)
        signal.set_wakeup_fd(self._previous_fd)
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._reader.close()
        self._writer.close()

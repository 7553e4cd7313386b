"""Python's cyclic garbage collected on the GUI thread only, while a window lives.

A collection runs on whichever thread triggers it, and destroys every unreachable cycle, Qt objects
of the window included (a pyqtgraph item, a removed widget). Destroyed on the training thread, a
QObject takes Qt's connection lock and then waits for the GIL, while the GUI thread, holding the
GIL, waits for that lock to destroy another: the window hangs (seen in the suite: the engine's
``gc.collect()`` before it freed CUDA memory). pyqtgraph's ``GarbageCollector`` is the known cure:
automatic collection off, collections from a GUI-thread timer. The engine's own collections
(``workbench.engine.garbage``) are asked of the GUI thread too; the asking thread waits for them,
at most ``WAIT_S`` (a GUI thread blocked on that thread would otherwise deadlock: then it skips).
"""

from __future__ import annotations

import gc
import threading
from typing import Optional

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot

from workbench.engine import garbage as engine_garbage

INTERVAL_MS = 500  # collections at the thresholds Python would use, checked twice a second
WAIT_S = 5.0


class GuiThreadGarbageCollector(QObject):
    _asked = Signal(object)  # a threading.Event, set when the collection is done

    def __init__(self) -> None:
        super().__init__()
        self.thresholds = gc.get_threshold()
        self._asked.connect(self._collect_for, Qt.ConnectionType.QueuedConnection)
        self.timer = QTimer(self)
        self.timer.setInterval(INTERVAL_MS)
        self.timer.timeout.connect(self.check)
        self.frozen = False

    def start(self) -> None:
        gc.disable()
        engine_garbage.set_collector(self.collect)
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()
        engine_garbage.set_collector(None)
        if self.frozen:
            gc.unfreeze()  # the window's own objects among them may now be garbage
            self.frozen = False
        gc.enable()
        gc.collect()  # what waited for the timer, here, on the GUI thread

    def freeze_what_lives(self) -> None:
        """Once the engine is loaded (torch, torchvision, the window: ~380k objects), a full collection
        walks them all: 175 ms on the GUI thread of a 2-core VM, a visible stall every few seconds of a
        run. They live as long as the window: collect once, then move them out of the collector's sight
        (gc.freeze, as CPython's docs advise for long-lived processes); collections walk only what
        came later. Undone when the last window closes."""
        if not self.frozen:
            gc.collect()
            gc.freeze()
            self.frozen = True

    @Slot()
    def check(self) -> None:
        """Collect the generations whose counts passed Python's thresholds (as automatic collection would)."""
        counts = gc.get_count()
        if counts[0] > self.thresholds[0]:
            generation = 0
            if counts[1] > self.thresholds[1]:
                generation = 2 if counts[2] > self.thresholds[2] else 1
            gc.collect(generation)

    def collect(self) -> None:
        """A full collection on the GUI thread, from any thread (the caller waits for it)."""
        if threading.current_thread() is threading.main_thread():
            gc.collect()
            return
        done = threading.Event()
        self._asked.emit(done)
        done.wait(WAIT_S)

    @Slot(object)
    def _collect_for(self, done: threading.Event) -> None:
        try:
            gc.collect()
        finally:
            done.set()


_collector: Optional[GuiThreadGarbageCollector] = None
_windows = 0


def window_opened() -> GuiThreadGarbageCollector:
    """The first window turns the GUI-thread collection on; it lasts while any window lives."""
    global _collector, _windows
    if _collector is None:
        _collector = GuiThreadGarbageCollector()
        _collector.start()
    _windows += 1
    return _collector


def window_closed() -> None:
    global _collector, _windows
    _windows = max(0, _windows - 1)
    if _windows == 0 and _collector is not None:
        collector, _collector = _collector, None
        collector.stop()
        collector.deleteLater()


def freeze_what_lives() -> None:
    """See GuiThreadGarbageCollector.freeze_what_lives; nothing without a window."""
    if _collector is not None:
        _collector.freeze_what_lives()

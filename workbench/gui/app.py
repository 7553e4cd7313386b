"""`workbench` with no arguments: the QApplication, its look, the main window, and the exit code.

Nothing here imports torch: the window paints first, and the device probe (which imports torch)
starts in the background once it is shown.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Optional, Sequence

from PySide6.QtCore import QCoreApplication, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from workbench.gui.background import wait_for_background_calls
from workbench.gui.main_window import MainWindow
from workbench.gui.stop_signals import StopSignals

ORGANIZATION = "gpu-training-workbench"
APPLICATION = "workbench"
# Benchmarks set this to time launch → first paint: the app prints the time and quits.
EXIT_AFTER_SHOWN_ENV = "WORKBENCH_GUI_EXIT_AFTER_SHOWN"

STYLESHEET = """
#devicePanel { border-radius: 6px; border: 1px solid #c8c8c8; background: #f4f4f4; }
#devicePanel[state="gpu"] { background: #eaf5ea; border-color: #8cc08c; }
#devicePanel[state="cpu"] { background: #fff4dd; border-color: #e0b050; }
#devicePanel[state="error"] { background: #fde8e8; border-color: #d08080; }
/* The panel's fills are light in any palette: its text is dark in any palette (a dark one made it white on white). */
#devicePanel QLabel { color: #1a1a1a; }
#deviceTitle { font-size: 13pt; font-weight: 600; }
#devicePanel #deviceDetails { color: #404040; }
*[invalid="true"] { border: 1px solid #c62828; border-radius: 3px; }
*[outOfRange="true"] { border: 1px solid #c77700; border-radius: 3px; background: #fff4dd; }
#rangeNotice { color: #6d4c00; background: #fff4dd; border: 1px solid #e0b050; border-radius: 4px; padding: 6px; }
#problemsLabel { color: #b71c1c; background: #fdecea; border: 1px solid #f0b8b8; border-radius: 4px; padding: 6px; }
#derivedFacts { color: #303030; background: #eef3f8; border-radius: 4px; padding: 6px; }
#runMessage { border-radius: 4px; padding: 6px 8px; background: #f2f2f2; color: #404040; }
#runMessage[status="running"] { background: #eef3f8; color: #303030; }
#runMessage[status="finished"] { background: #eaf5ea; color: #1b5e20; }
#runMessage[status="stopped"] { background: #fff4dd; color: #6d4c00; }
#runMessage[status="failed"] { background: #fdecea; color: #b71c1c; font-weight: 600; }
/* Start is the window's main action: filled while it can be pressed, plain while it cannot (in a dark palette the
   two looked the same). */
#startButton { font-weight: 600; padding: 5px 18px; }
#startButton:enabled { background: #2f6fb0; color: #ffffff; border: 1px solid #24578c; border-radius: 3px; }
#startButton:enabled:hover { background: #3a7cc0; }
#startButton:enabled:pressed { background: #24578c; }
#stopButton { padding: 5px 14px; }
/* A light fill under dark text: the text reads the same on both sides of where the fill ends. */
#progressBar { border: 1px solid #a8a8a8; border-radius: 4px; background: #fbfbfb; color: #1a1a1a;
               text-align: center; min-height: 22px; }
#progressBar::chunk { background: #a8cdee; border-radius: 3px; }
#progressBar[status="finished"]::chunk { background: #b5dcb5; }
#progressBar[status="stopped"]::chunk { background: #f3dc9c; }
#progressBar[status="failed"]::chunk { background: #f4b6b2; }
#releaseResult { color: #505050; font-size: 9pt; }
#ceilingLabel { color: #303030; background: #eef3f8; border-radius: 4px; padding: 4px 6px; }
"""


def create_application(argv: Optional[Sequence[str]] = None) -> QApplication:
    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        return existing
    QCoreApplication.setOrganizationName(ORGANIZATION)
    QCoreApplication.setApplicationName(APPLICATION)
    app = QApplication(list(argv) if argv is not None else sys.argv[:1])
    app.setApplicationDisplayName("GPU Training Workbench")
    app.setStyle("Fusion")  # the same look on every platform, and in the screenshots
    app.setStyleSheet(STYLESHEET)
    return app


def main() -> int:
    app = create_application()
    store, history_problem, recording = open_history()
    window = build_window(store, recording=recording)
    if history_problem:
        # Training still works without a history; say why runs are not being kept.
        QTimer.singleShot(0, lambda: QMessageBox.warning(window, "Run history unavailable", history_problem))
    try:
        return run_window(app, window)
    finally:
        if store is not None:
            store.close()


def build_window(store, *, recording: bool = True, **window_options) -> MainWindow:
    """The main window; with a history store, GUI runs are recorded there and listed in the Runs tab. Without
    ``recording`` (a history the disk cannot write) the Runs tab lists it and nothing is recorded."""
    if store is None:
        return MainWindow(**window_options)
    from workbench.experiments.recording import HistoryRecording
    from workbench.gui.runs_view import RunsView

    if not recording:
        window = MainWindow(**window_options)
        window.set_runs_view(RunsView(store))
        return window

    home = store.path.parent
    # Each job records through its own connection to the same history, opened on the training thread.
    window = MainWindow(recordings=lambda: HistoryRecording(source="gui", home=home), history_home=home,
                        **window_options)
    window.set_runs_view(RunsView(store))
    return window


def open_history():
    """(store, why runs will not be recorded or None, whether runs are recorded): the run history shared with the
    CLI. One the disk cannot write (a read-only mount, a full disk) is still listed, read only, as `workbench runs`
    lists it; a damaged one, or one from a newer workbench, is not opened at all."""
    from workbench.history.store import HistoryError, HistoryStore, HistoryUnwritable

    try:
        return HistoryStore.open(), None, True
    except HistoryUnwritable as error:
        try:
            store = HistoryStore.open_for_reading()
        except (HistoryError, OSError):
            return None, f"Runs will not be recorded: {error}", False
        return store, (f"Runs will not be recorded: {error}. The Runs tab lists the history as it is, read only: "
                       "renaming, tags, notes and deleting need a disk that takes writes."), False
    except (HistoryError, OSError) as error:
        return None, f"Runs will not be recorded: {error}", False


def run_window(app: QApplication, window: MainWindow) -> int:
    """Show the window, run the event loop until it closes, and return the exit code.

    Closing the window mid-run stops the run and joins its thread first (MainWindow.closeEvent); SIGTERM and
    SIGHUP close it the same way. Here we only make sure nothing is left running if the loop ended some other way.
    """
    window.show()
    if os.environ.get(EXIT_AFTER_SHOWN_ENV):
        QTimer.singleShot(0, lambda: (print(f"shown_at={time.time():.6f}", flush=True), window.close()))
    stop_signals = StopSignals(lambda name: close_on_signal(app, window, name))
    try:
        code = app.exec()
    finally:
        stop_signals.close()
    window.training_thread.request_stop()
    window.training_thread.wait()
    if not wait_for_background_calls(BACKGROUND_EXIT_WAIT_MS):
        # A read or write of a file that does not come back (a hung network disk): the window is gone, and the
        # process would stay, unseen, for as long as the disk hangs. Said, and ended (no thread of ours is left
        # to finish a write the disk never took).
        print(f"workbench: a background read or write of a file did not end within "
              f"{BACKGROUND_EXIT_WAIT_MS / 1000:.0f} s of closing (a hung disk?): exiting without it",
              file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(code)
    return code


# How long the closed window's process waits for its background reads and writes (exports, the Runs tab's reads,
# a trace being read) before it leaves without them.
BACKGROUND_EXIT_WAIT_MS = 30_000


def close_on_signal(app: QApplication, window: MainWindow, name: str) -> None:
    """A stop signal closes the window as the user would: a run stops first (its reason naming the signal), then
    the window closes and the app quits. A dialog waiting for an answer would hold the close back: it goes first."""
    window.training_thread.request_stop(name)
    for _ in range(8):  # dialogs stacked on dialogs, at most a few
        dialog = app.activeModalWidget()
        if dialog is None or dialog is window:
            break
        dialog.close()
    window.close()

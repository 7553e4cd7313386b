"""Whole-process behaviour, each in a fresh interpreter: clean exit mid-run, signal storms, no torch at launch."""

import os
import subprocess
import sys
import textwrap

import pytest
from workbench.config import RunConfig
from workbench.gui.main_window import SETTINGS_CONFIG
from workbench.gui.settings_file import SettingsFile


def run_python(code: str, tmp_path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "config"), PYTHONUNBUFFERED="1")
    env["QT_QPA_PLATFORM"] = "offscreen"
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=tmp_path)


@pytest.mark.slow
def test_closing_the_window_mid_run_exits_cleanly_with_status_0(tmp_path):
    # Loader workers on: their processes must be shut down too.
    result = run_python(
        f"""
        import sys
        from pathlib import Path
        from PySide6.QtCore import QTimer
        from workbench.config import RunConfig
        from workbench.engine.events import RunEnded
        from workbench.gui.app import create_application, run_window
        from workbench.gui.main_window import MainWindow
        from workbench.gui.settings_file import SettingsFile

        app = create_application()
        settings = SettingsFile(Path({str(tmp_path / "settings.json")!r}))
        window = MainWindow(settings=settings)
        window.form.set_config(RunConfig(synthetic_size=512, batch_size=32, num_workers=2, device="cpu",
                                         epochs=1000, log_every=1))
        closing = []
        def close_once_training(_steps):
            if not closing:
                closing.append(True)
                print("closing mid-run", flush=True)
                QTimer.singleShot(0, window.close)
        window.training_thread.steps.connect(close_once_training)
        def report(event):
            if isinstance(event, RunEnded):
                print("run ended:", event.status, event.reason, flush=True)
                QTimer.singleShot(0, window.close)  # also when it ends early, so a failure cannot hang the test
        window.training_thread.event.connect(report)
        QTimer.singleShot(0, window.start_button.click)
        sys.exit(run_window(app, window))
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "closing mid-run" in result.stdout and "run ended: stopped" in result.stdout
    assert "QThread: Destroyed" not in result.stderr
    assert "Traceback" not in result.stderr
    saved, notes = SettingsFile.read(tmp_path / "settings.json")
    saved = saved.value(SETTINGS_CONFIG)
    assert RunConfig.from_json(saved).epochs == 1000  # the settings were saved on the way out


def test_ten_thousand_cross_thread_emits_of_a_frozen_dataclass_survive(tmp_path):
    # PySide6 6.12.0 on Python 3.11 aborts after a few hundred Signal.emit() calls: the reason for the pin.
    result = run_python(
        """
        import sys
        from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal, Slot
        from workbench.engine.events import MemorySnapshot, StepStats

        class Emitter(QObject):
            stats = Signal(object)
            done = Signal()

            @Slot()
            def work(self):
                for step in range(1, 10_001):
                    self.stats.emit(StepStats(step=step, total_steps=10_000, epoch=1, epochs=1,
                                              samples_seen=step * 32, loss=1.0 / step, lr=0.05,
                                              images_per_sec=1000.0, data_wait_seconds=0.001,
                                              device_span_seconds=0.004, window_seconds=0.005,
                                              elapsed_seconds=step * 0.005, memory=MemorySnapshot()))
                self.done.emit()

        class Receiver(QObject):
            def __init__(self):
                super().__init__()
                self.steps = []

            @Slot(object)
            def take(self, stats):
                self.steps.append(stats.step)

        app = QCoreApplication([])
        thread, emitter, receiver = QThread(), Emitter(), Receiver()
        emitter.moveToThread(thread)
        thread.started.connect(emitter.work)
        emitter.stats.connect(receiver.take, Qt.ConnectionType.QueuedConnection)
        emitter.done.connect(app.quit, Qt.ConnectionType.QueuedConnection)
        thread.start()
        app.exec()
        thread.quit()
        thread.wait()
        print("received", len(receiver.steps))
        sys.exit(0 if receiver.steps == list(range(1, 10_001)) else 1)
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "received 10000" in result.stdout
    assert "Fatal Python error" not in result.stderr


@pytest.mark.slow  # starts the app in a process of its own
def test_the_window_paints_before_anything_imports_torch(tmp_path):
    result = run_python(
        """
        import sys
        from PySide6.QtCore import QTimer
        from workbench.gui.app import create_application
        from workbench.gui.engine_calls import engine_probe
        from workbench.gui.main_window import MainWindow

        def probe():  # the first thing after the first paint that needs torch
            print("torch imported before the probe:", "torch" in sys.modules, flush=True)
            return engine_probe()

        def quit_once_probed():
            if window.device_panel.property("state") != "probing":
                print("device panel:", window.device_panel.title.text(), flush=True)
                app.quit()

        app = create_application()
        window = MainWindow(probe_function=probe)
        window.show()
        poll = QTimer(interval=50, timeout=quit_once_probed)
        poll.start()
        app.exec()
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "torch imported before the probe: False" in result.stdout
    assert "device panel: CPU mode" in result.stdout or "device panel: GPU" in result.stdout


@pytest.mark.slow
def test_a_background_read_that_never_ends_does_not_keep_the_closed_apps_process(tmp_path):
    """A read of a file on a hung disk: the app's exit waited for it without end, the window gone and the process
    left running, unseen. It waits a while, says so, and exits."""
    result = run_python(
        f"""
        import sys, threading
        from pathlib import Path
        from PySide6.QtCore import QTimer
        from workbench.gui import app as gui_app
        from workbench.gui.app import create_application, run_window
        from workbench.gui.background import call_in_background
        from workbench.gui.main_window import MainWindow
        from workbench.gui.settings_file import SettingsFile

        gui_app.BACKGROUND_EXIT_WAIT_MS = 1000
        app = create_application()
        window = MainWindow(settings=SettingsFile(Path({str(tmp_path / "settings.json")!r})))
        hung = threading.Event()  # never set: the disk does not answer
        def read_then_close():
            call_in_background(window, hung.wait, print, print)
            window.close()
        QTimer.singleShot(0, read_then_close)
        sys.exit(run_window(app, window))
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert ("workbench: a background read or write of a file did not end within 1 s of closing (a hung disk?): "
            "exiting without it") in result.stderr

"""Kineto's "External init callback must run in same thread as registerClient" never reaches the user's terminal.

The window imports torch on a background thread (the device probe) and trains on its run thread; the first
profiled run printed that ERROR line on every start. Each case runs in a fresh interpreter (Kineto initialises
once per process) with its file descriptor 2 read whole."""

import os
import subprocess
import sys
import textwrap

import pytest

GUI_THREADS = """
import sys
import threading
from PySide6.QtCore import QCoreApplication
from workbench.config import RunConfig
from workbench.controller.jobs import run_job
from workbench.engine.events import RunEnded
from workbench.gui.background import BackgroundCall, wait_for_background_calls
from workbench.gui.engine_calls import engine_probe, engine_run
from workbench.gui.worker import TrainingThread

app = QCoreApplication([])
# torch is imported on a pool thread, as the window's device probe does; that thread stays alive while the run
# trains on the session's thread (a thread that ended may hand its id to the next, and hide the mismatch).
imported, hold = threading.Event(), threading.Event()
probe = BackgroundCall(lambda: (engine_probe(), imported.set(), hold.wait(300)))
probe.start()
assert imported.wait(120)
session = TrainingThread(engine_run)
ended = []
session.event.connect(lambda event: isinstance(event, RunEnded) and ended.append(event))
session.finished.connect(app.quit)
config = RunConfig(dataset="synthetic", synthetic_size=512, batch_size=32, max_steps=30, log_every=5, num_workers=0,
                   device="cpu", profile=True, profile_every=20)
session.start_job(run_job(config, engine_run))
app.exec()
hold.set()
assert wait_for_background_calls(60_000)
print(f"run {ended[0].status}, samples {ended[0].summary.profile_samples}", file=sys.stderr)
"""


@pytest.mark.slow  # several seconds of processes or training: the fast tier stays under 5 minutes
def test_a_profiled_run_on_the_windows_threads_prints_no_kineto_thread_error(tmp_path):
    env = dict(os.environ, WORKBENCH_HOME=str(tmp_path), QT_QPA_PLATFORM="offscreen")
    result = subprocess.run([sys.executable, "-c", GUI_THREADS], capture_output=True, text=True, timeout=300,
                            env=env)
    assert result.returncode == 0, result.stderr
    assert "run finished, samples 1" in result.stderr
    assert "External init callback" not in result.stderr, result.stderr


def test_only_the_known_line_is_kept_out_and_everything_else_written_meanwhile_is_passed_on(tmp_path):
    code = textwrap.dedent("""
        import os, sys
        from workbench.engine.kineto_recording import KINETO_THREAD_LINE, without_stderr_line

        def call():
            os.write(2, b"before\\n")
            os.write(2, b"ERROR: " + KINETO_THREAD_LINE + b" (1 != 2)\\n")
            print("from python", file=sys.stderr)
            return 7

        assert without_stderr_line(call, KINETO_THREAD_LINE) == 7
        os.write(2, b"after\\n")
        """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "before\nfrom python\nafter\n"

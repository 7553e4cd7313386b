"""A background call that ends after the application let its QObject go says nothing, and raises nothing; thousands
in a row do not crash the app."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import shiboken6

from workbench.gui.background import BackgroundCall


@pytest.mark.parametrize("function", [lambda: "models", lambda: 1 / 0])
def test_a_call_whose_object_is_gone_ends_quietly(qapp, function):
    call = BackgroundCall(function)
    shiboken6.delete(call)  # as the application's end takes it while torchvision's import still runs
    call._call()  # before: RuntimeError "Signal source has been deleted", printed from the pool's thread
    assert not call.running


CALLS = 5000
MANY_CALLS = f"""
import sys, threading, time
from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication
app = QApplication([])
from workbench.gui.background import call_in_background, wait_for_background_calls

parent, done = QObject(), []

def next_call(_result=None):
    done.append(True)
    if len(done) == {CALLS}:
        app.quit()
    else:
        call_in_background(parent, lambda: sum(i * i for i in range(2000)), next_call, print)

def hold_the_gil():  # as a training thread does: the pool thread lets go of its call at another moment each time
    while len(done) < {CALLS}:
        sum(i for i in range(20000))
        time.sleep(0.001)

threading.Thread(target=hold_the_gil, daemon=True).start()
for _ in range(2):
    call_in_background(parent, lambda: 0, next_call, print)
app.exec()
wait_for_background_calls()
print(len(done) >= {CALLS})
"""


def test_thousands_of_calls_in_a_row_end_without_crashing_the_app(tmp_path):
    """A call's QObject, let go by the pool thread while the GUI thread deleted its relay, crashed PySide (a
    segfault in Sbk_GetPyOverride): 3,000 calls with a busy Python thread, each time; a Runs tab polling every
    2 s during a run within minutes. In a process of its own: a segfault ends it, not the tests."""
    import workbench

    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(Path(workbench.__file__).parents[1]))
    result = subprocess.run([sys.executable, "-c", MANY_CALLS], capture_output=True, text=True, timeout=240,
                            env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["True"]

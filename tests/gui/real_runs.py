"""Driving the window with the real engine as a user does: set the form, press Start (and Stop), wait for the end.

Only the window's public widgets and signals: the form, the Start and Stop buttons, the session's
steps / event / finished signals. Shared by the long tests (many runs in a row, the soak test).
"""

from __future__ import annotations

import sys
import threading
import traceback
from typing import Callable, Optional

from builders import collect
from pytestqt.exceptions import TimeoutError as SignalTimeout

from workbench.config import RunConfig
from workbench.engine.events import RunEnded
from workbench.gui.engine_calls import engine_run

RUN_TIMEOUT_MS = 60_000  # a run takes a second or two here; a hung one fails the test instead of the suite


def real_engine_window(qtbot, make_window, device: str = "auto", **options):
    """A shown window that trains with the real engine, once its device probe (of ``device``) has answered."""
    from workbench.engine import probe_device

    window = make_window(run_function=engine_run, probe_function=lambda: probe_device(device), **options)
    window.show()
    qtbot.waitUntil(lambda: window.controller.device is not None, timeout=30_000)
    return window


def run_to_end(qtbot, window, config: RunConfig, after_first_steps: Optional[Callable[[], None]] = None,
               timeout_ms: int = RUN_TIMEOUT_MS) -> RunEnded:
    """Put ``config`` in the form and press Start; once the first steps are drawn, call ``after_first_steps``
    (``window.stop_button.click`` stops the run). Returns the run's RunEnded once its thread has finished."""
    ended: list[RunEnded] = []
    keep_ended = collect(RunEnded, ended)
    window.training_thread.event.connect(keep_ended)
    try:
        window.form.set_config(config)
        if after_first_steps is not None:
            with qtbot.waitSignal(window.training_thread.steps, timeout=timeout_ms):
                window.start_button.click()
            with qtbot.waitSignal(window.training_thread.finished, timeout=timeout_ms):
                after_first_steps()
        else:
            with qtbot.waitSignal(window.training_thread.finished, timeout=timeout_ms):
                window.start_button.click()
    except SignalTimeout as error:  # a hung run: say where each thread is, so the hang can be found
        raise AssertionError(f"the run did not end ({error}); where the threads were:\n{thread_stacks()}") from None
    finally:
        window.training_thread.event.disconnect(keep_ended)
    assert len(ended) == 1, f"{len(ended)} RunEnded events for one run"
    return ended[0]


def thread_stacks() -> str:
    """Every thread's stack, by name (the training thread's says where a hung run waits)."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    return "\n".join(f"--- {names.get(ident, ident)}\n{''.join(traceback.format_stack(frame))}"
                     for ident, frame in sys._current_frames().items())

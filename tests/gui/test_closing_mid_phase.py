"""Closing the window while the real engine is in a phase that is one blocking call: the window does not wait.

Twenty runs in a row with DataLoader workers are part of the soak (test_soak.py).
"""

import pytest
from builders import TINY_RUN, collect

from workbench.engine.events import RunEnded, StatusChanged
from workbench.gui.engine_calls import engine_run


@pytest.mark.parametrize("phase", ["loading the data", "building the model"])
def test_closing_the_window_while_a_run_loads_or_builds_closes_without_waiting_for_it(qtbot, make_window,
                                                                                      monkeypatch, phase):
    """The real engine, blocked in a phase that is one call (a download, a model build) until the test lets it go:
    the window closes while the call is still blocked, so the close waited for nothing (no clock involved)."""
    import threading

    from workbench.engine import train_step as train_step_module
    from workbench.engine import one_process
    from workbench.engine.interruptible import wait_for_abandoned

    release = threading.Event()

    def blocked(call, *args):
        release.wait(120)
        return call(*args)

    if phase == "loading the data":
        real_load = one_process.load_data
        monkeypatch.setattr(one_process, "load_data", lambda config: blocked(real_load, config))
        starts_phase = "Loading"
    else:
        real_build = train_step_module.build_model
        monkeypatch.setattr(train_step_module, "build_model", lambda *args: blocked(real_build, *args))
        starts_phase = "Building"
    window = make_window(run_function=engine_run)
    window.show()
    window.form.set_config(TINY_RUN)
    ended = []
    window.training_thread.event.connect(collect(RunEnded, ended))
    with qtbot.waitSignal(window.training_thread.event, timeout=30_000,
                          check_params_cb=lambda event: isinstance(event, StatusChanged)
                          and event.message.startswith(starts_phase)):
        window.start_button.click()
    try:
        with qtbot.waitSignal(window.training_thread.finished, timeout=60_000):
            assert not window.close()  # refused until the run has stopped
        qtbot.waitUntil(lambda: not window.isVisible(), timeout=60_000)
    finally:
        release.set()  # the abandoned call ends in the background
    assert [(event.status, event.reason) for event in ended] == [("stopped", f"stopped by the user while {phase}")]
    assert wait_for_abandoned(30.0)

"""20 GUI runs in a row in one process, with DataLoader workers, pin_memory and persistent workers: none hangs.

The default worker start method (forkserver) is what makes this safe: fork() from this process would copy
Qt's thread, the training thread, the pin-memory thread and CUDA's, and a lock one of them holds stays
locked in the child (pytorch#15808, pytorch#130610). On a CUDA machine the runs use the GPU, so pin_memory
is real; here they run on the CPU.
"""

import multiprocessing
import threading

import pytest
from gui_fakes import TINY_RUN
from real_runs import real_engine_window, run_to_end

from workbench.config import DEFAULT_START_METHOD
from workbench.gui.engine_calls import engine_run

RUNS = 20


@pytest.mark.slow
def test_twenty_runs_in_a_row_with_workers_never_hang(qtbot, make_window):
    window = real_engine_window(qtbot, make_window)
    config = TINY_RUN.replace(device="auto", num_workers=2, pin_memory=True, non_blocking=True,
                              persistent_workers=True, max_steps=6, log_every=2, synthetic_size=512)
    assert config.worker_start_method == DEFAULT_START_METHOD == "forkserver"
    ended = []
    threads_before = threading.active_count()
    for number in range(1, RUNS + 1):
        ended.append(run_to_end(qtbot, window, config.replace(seed=number)))
        assert ended[-1].status == "finished", (number, ended[-1].reason)
        assert multiprocessing.active_children() == []  # each run's workers are gone when it ends
    assert len(ended) == RUNS and all(event.summary.steps == 6 for event in ended)
    assert threading.active_count() <= threads_before  # no pin-memory or helper threads left behind


@pytest.mark.parametrize("phase", ["loading the data", "building the model"])
def test_closing_the_window_while_a_run_loads_or_builds_closes_within_two_seconds(qtbot, make_window, monkeypatch,
                                                                                   phase):
    """The real engine, made slow in a phase that is one blocking call (a download, a model build)."""
    import time

    from workbench.engine import session as session_module
    from workbench.engine import trainer
    from workbench.engine.interruptible import wait_for_abandoned

    if phase == "loading the data":
        real_load = trainer.load_arrays
        monkeypatch.setattr(trainer, "load_arrays", lambda config: time.sleep(4) or real_load(config))
        starts_phase = "Loading"
    else:
        real_build = session_module.build_model
        monkeypatch.setattr(session_module, "build_model", lambda *args: time.sleep(4) or real_build(*args))
        starts_phase = "Building"
    window = make_window(run_function=engine_run)
    window.show()
    window.form.set_config(TINY_RUN)
    ended = []
    window.session.run_ended.connect(ended.append)
    with qtbot.waitSignal(window.session.status_changed, timeout=30_000,
                          check_params_cb=lambda event: event.message.startswith(starts_phase)):
        window.start_button.click()
    asked = time.perf_counter()
    with qtbot.waitSignal(window.session.finished, timeout=2_000):
        assert not window.close()  # refused until the run has stopped
    assert time.perf_counter() - asked < 2.0
    qtbot.waitUntil(lambda: not window.isVisible())
    assert [(event.status, event.reason) for event in ended] == [("stopped", f"stopped by the user while {phase}")]
    assert wait_for_abandoned(30.0)

"""A data-parallel run started from the window: two gloo processes on this CPU, the real engine and
history; the plots fill, the run is recorded with its world size, and the window takes the next run."""

import pytest
from builders import TINY_RUN, collect
from process_tree import descendants, leftovers

from workbench.engine import probe_device
from workbench.engine.events import RunStarted
from workbench.gui.app import build_window
from workbench.gui.engine_calls import engine_run
from workbench.history.store import HistoryStore


def curve_points(curve) -> int:
    x, _ = curve.getData()
    return 0 if x is None else len(x)


@pytest.mark.slow  # spawns two ranks that each import torch
def test_two_process_run_from_the_window_plots_records_and_leaves_the_window_ready(
    qtbot, settings, isolated_workbench_home
):
    before = descendants()
    store = HistoryStore.open()
    window = build_window(store, settings=settings, run_function=engine_run,
                          probe_function=lambda: probe_device("auto"))
    qtbot.addWidget(window)
    try:
        window.show()
        qtbot.waitUntil(lambda: window.controller.device is not None, timeout=30_000)
        window.form.set_config(TINY_RUN.replace(devices=2, batch_size=16))
        assert window.start_button.isEnabled(), window.start_button.toolTip()
        assert "Effective batch 32 (16 × 2 devices)" in window.form.findChild(object, "derivedFacts").text()
        started = []
        window.training_thread.event.connect(collect(RunStarted, started))
        running_messages = []  # connected after the controller: the message as it drew it
        window.training_thread.event.connect(lambda event: isinstance(event, RunStarted)
                                     and running_messages.append(window.run_message.text()))
        with qtbot.waitSignal(window.training_thread.finished, timeout=120_000):
            window.start_button.click()
        window.plots.redraw()

        assert window.status_line.text().startswith("Finished: test accuracy"), window.status_line.text()
        assert curve_points(window.plots.throughput_curve) == 4  # 256 / 2 ranks / 16 = 8 steps, every 2
        assert curve_points(window.plots.raw_loss_curve) == 4
        # One memory line per process (on this CPU: each rank's resident memory), named at its end.
        assert window.plots.memory.rank_lines.ranks == [0, 1]
        assert all(curve_points(curve) == 4 for curve in window.plots.memory.rank_lines._curves.values())
        assert "2 processes" in window.plots.memory.caption.text()
        assert "effective batch 32 (16 × 2 devices)" in running_messages[0]  # while it ran
        assert started[0].world_size == 2 and started[0].effective_batch_size == 32
        (record,) = store.list_runs()
        assert (record.source, record.status, record.summary.world_size, record.summary.steps) == ("gui", "finished", 2, 8)
        assert record.config.devices == 2 and len(record.summary.rank_peak_allocated_bytes) == 2
        assert not leftovers(before), "a rank outlived its run"

        # The window is ready for the next run, here a one-process one.
        assert window.start_button.isEnabled() and window.form.editable
        window.form.set_config(TINY_RUN)
        with qtbot.waitSignal(window.training_thread.finished, timeout=60_000):
            window.start_button.click()
        assert [run.status for run in store.list_runs()] == ["finished", "finished"]
    finally:
        window.training_thread.request_stop()
        window.training_thread.wait(30_000)
        window.close()
        store.close()

"""PlotsPanel: buffers to curves on the timer, past-run overlays, the release marker."""

import numpy as np
import pytest
from gui_fakes import GPU_MEMORY, FakeRun

from workbench.engine.events import MemoryRelease, StepStats
from workbench.gui.plots import PlotsPanel
from workbench.gui.series import SERIES_KEYS, SeriesBuffer


@pytest.fixture
def panel(qtbot):
    widget = PlotsPanel()
    qtbot.addWidget(widget)
    return widget


def steps(count: int, memory=GPU_MEMORY) -> list[StepStats]:
    events = FakeRun(steps=count, memory=memory)(None, lambda: False)
    return [event for event in events if isinstance(event, StepStats)]


def points(curve) -> int:
    x, _ = curve.getData()
    return 0 if x is None else len(x)


def test_buffer_grows_and_keeps_rows():
    buffer = SeriesBuffer(capacity=2)
    for step in range(1, 6):
        buffer.append({"step": step, "loss": 1.0 / step, "torch_reserved": None})
    assert len(buffer) == 5
    assert list(buffer.column("step")) == [1, 2, 3, 4, 5]
    assert np.isnan(buffer.column("torch_reserved")).all()
    with pytest.raises(ValueError):
        buffer.column("step")[0] = 9  # views are read-only: the plots must not write into the run's data


def test_timer_redraws_one_changed_plot_per_tick(qtbot, panel):
    panel.begin_run("#1")
    panel.redraw_timer.stop()
    panel.add_steps(steps(10))
    assert points(panel.raw_loss_curve) == 0  # nothing is drawn per step
    panel._redraw_next()
    assert points(panel.raw_loss_curve) == 10 and points(panel.throughput_curve) == 0
    for _ in range(3):
        panel._redraw_next()
    assert points(panel.throughput_curve) == points(panel.data_wait_curve) == 10
    assert points(panel.memory_curves["nvml_used"]) == 10


def test_rerun_turns_the_previous_run_into_an_overlay(panel):
    panel.begin_run("#1 first")
    panel.add_steps(steps(5))
    panel.begin_run("#2 second")
    assert panel.overlay_labels() == ["#1 first"]
    panel.redraw()
    assert points(panel.raw_loss_curve) == 0  # the new run starts empty
    assert panel.clear_button.isEnabled()


def test_overlay_api_takes_history_series_and_refuses_unknown_keys(panel):
    series = {key: np.arange(4, dtype=float) for key in SERIES_KEYS}
    panel.add_overlay("run 7", series)
    panel.add_overlay("run 8", {"step": np.arange(3), "loss": np.array([2.0, np.nan, 1.0])})
    assert panel.overlay_labels() == ["run 7", "run 8"]
    with pytest.raises(ValueError, match="step"):
        panel.add_overlay("bad", {"loss": np.arange(3)})
    with pytest.raises(ValueError, match="accuracy"):
        panel.add_overlay("bad", {"step": np.arange(3), "accuracy": np.arange(3)})
    panel.clear_overlays()
    assert panel.overlay_labels() == [] and not panel.clear_button.isEnabled()


def test_history_overlays_replace_each_other_but_keep_this_sessions_runs(panel):
    panel.begin_run("#1")
    panel.add_steps(steps(3))
    panel.begin_run("#2")
    series = {"step": np.arange(3), "loss": np.ones(3)}
    panel.set_overlays([("history A", series), ("history B", series)])
    panel.set_overlays([("history C", series)])
    assert panel.overlay_labels() == ["#1", "history C"]


def test_release_marks_the_plot_and_drops_the_reserved_curve(panel):
    panel.begin_run("#1")
    panel.add_steps(steps(4))
    panel.mark_release(MemoryRelease(3 * 2**30, 2**30, "reserved 3.0 GiB → 1.0 GiB"))
    panel.redraw()
    _, reserved = panel.memory_curves["torch_reserved"].getData()
    assert list(reserved[-2:]) == [3.0, 1.0]
    assert "reserved 3.0 GiB → 1.0 GiB" in panel._release_markers[0].label.format


def test_memory_title_and_range_follow_the_device_total(panel):
    panel.set_memory_context(80 * 2**30, None)
    panel.begin_run("#1")
    panel.add_steps(steps(4))
    panel.redraw()
    assert "peak 4.0 GiB of 80.0 GiB (5%)" in panel.memory_plot.plotItem.titleLabel.text
    assert panel.memory_plot.viewRange()[1][1] < 10  # far below the total: the curves fill the plot


def test_cpu_memory_note_explains_the_empty_plot(panel):
    panel.set_memory_context(None, "CPU mode: no GPU memory to plot.")
    assert not panel.memory_note.isHidden() and panel.memory_note.text() == "CPU mode: no GPU memory to plot."
    assert not panel.device_total_line.isVisible()

"""PlotsPanel: buffers to curves on the timer, one entry per run, colours, smoothing, x-axes, memory."""

import itertools

import numpy as np
import pyqtgraph as pg
import pytest
from builders import GPU_MEMORY, FakeRun
from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QColor

from workbench.engine.events import EpochStats, MemoryRelease, MemorySnapshot, StepStats
from workbench.gui.plots import CURRENT_WIDTH, PlotsPanel
from workbench.gui.run_legend import OVERLAY_ALPHA
from workbench.gui.series import SERIES_KEYS, SeriesBuffer

CPU_MEMORY = MemorySnapshot(process_rss=3 * 2**29, torch_unavailable_reason="CPU", nvml_unavailable_reason="CPU")


@pytest.fixture
def panel(qtbot):
    widget = PlotsPanel()
    qtbot.addWidget(widget)
    return widget


def steps(count: int, memory=GPU_MEMORY) -> list[StepStats]:
    events = FakeRun(steps=count, memory=memory)(None, lambda: False)
    return [event for event in events if isinstance(event, StepStats)]


def losses(values, batch_size: int = 32) -> list[StepStats]:
    """Steps whose loss is ``values``, each one batch further."""
    return [StepStats(step=step, total_steps=len(values), epoch=1, epochs=1, samples_seen=batch_size * step,
                      loss=float(loss), lr=0.1, images_per_sec=1000.0, data_wait_seconds=0.0,
                      device_span_seconds=0.01, window_seconds=0.01, elapsed_seconds=0.5 * step)
            for step, loss in enumerate(values, start=1)]


def points(curve) -> int:
    x, _ = curve.getData()
    return 0 if x is None else len(x)


def curves_on(plot) -> list[pg.PlotDataItem]:
    return [item for item in plot.getPlotItem().items if isinstance(item, pg.PlotDataItem) and points(item)]


def box(widget, ancestor) -> QRect:
    """The widget's rectangle in the ancestor's coordinates."""
    return QRect(widget.mapTo(ancestor, QPoint(0, 0)), widget.size())


def series(count: int = 3, **columns) -> dict:
    values = {"step": np.arange(1, count + 1, dtype=float), "loss": np.linspace(2.0, 1.0, count)}
    values.update(columns)
    return values


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
    assert points(panel.memory.curves["nvml_device_used"]) == 10


def test_rerun_turns_the_previous_run_into_an_overlay(panel):
    panel.begin_run("#1 first")
    panel.add_steps(steps(5))
    panel.begin_run("#2 second")
    assert panel.overlay_labels() == ["#1 first"]
    panel.redraw()
    assert points(panel.raw_loss_curve) == 0  # the new run starts empty
    assert panel.clear_button.isEnabled()


def test_overlay_api_takes_history_series_and_refuses_unknown_keys(panel):
    panel.add_overlay("run 7", {key: np.arange(4, dtype=float) for key in SERIES_KEYS})
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
    panel.set_overlays([("history A", series()), ("history B", series())])
    panel.set_overlays([("history C", series())])
    assert panel.overlay_labels() == ["#1", "history C"]


def test_a_run_also_selected_in_the_runs_tab_is_drawn_and_named_once(panel):
    """The live run #2 and the history's run 2 are one run: one curve per plot, one legend entry."""
    panel.begin_run("#2 synthetic: num_workers=0", key=2)
    panel.add_steps(steps(6))
    panel.begin_run("#3 synthetic: epochs=6", key=3)
    panel.add_steps(steps(4))
    panel.set_overlays([(2, "#2 synthetic: num_workers=0", series(6)), (1, "#1 synthetic: small-cnn", series(5)),
                        (3, "#3 synthetic: epochs=6", series(4))])  # the current run, selected too
    panel.redraw()
    assert panel.legend_labels() == ["#2 synthetic: num_workers=0", "#1 synthetic: small-cnn",
                                     "#3 synthetic: epochs=6"]
    assert len(curves_on(panel.loss_plot)) == 3  # runs 1, 2 and the live 3, each once
    assert panel.colour_of(2) != panel.colour_of(1) != panel.colour_of(3)

    panel.set_overlays([])  # the selection cleared: run 2 stays as this window's earlier run, run 1 goes
    assert panel.legend_labels() == ["#2 synthetic: num_workers=0", "#3 synthetic: epochs=6"]


def test_a_run_without_data_takes_no_legend_entry(panel):
    panel.begin_run("#1 failed at once", key=1)
    panel.redraw()
    assert panel.legend_labels() == [] and panel.legend.isHidden()
    panel.begin_run("#2 works", key=2)
    assert panel.overlay_keys() == []  # the failed run left nothing to draw
    panel.set_overlays([(1, "#1 failed at once", {"step": np.array([]), "loss": np.array([])}),
                        (5, "#5 no figures", {"step": np.arange(3.0), "loss": np.full(3, np.nan)})])
    assert panel.legend_labels() == []
    panel.add_steps(steps(2))
    assert panel.legend_labels() == ["#2 works"]


def test_the_legend_sits_outside_every_plot_and_folds_away(qtbot, panel):
    panel.resize(900, 600)
    panel.show()
    qtbot.waitExposed(panel)
    for number in range(1, 6):
        panel.begin_run(f"#{number} a long run name that says what changed: num_workers={number}", key=number)
        panel.add_steps(steps(8))
    panel.redraw()
    plots = (panel.loss_plot, panel.throughput_plot, panel.memory_plot, panel.data_wait_plot)
    for plot in plots:  # no legend box drawn over the curves
        assert not [item for item in plot.scene().items() if isinstance(item, pg.LegendItem)]
    assert not panel.legend.isHidden() and len(panel.legend_labels()) == 5
    for plot in plots:
        assert not box(panel.legend, panel).intersects(box(plot, panel))
    panel.legend.toggle.click()
    assert not panel.legend.expanded and panel.legend.entries_label.isHidden()


def lab(colour: QColor, alpha: float) -> tuple[float, float, float]:
    """CIE L*a*b* of the colour drawn at ``alpha`` over white."""
    def linear(channel: float) -> float:
        channel = alpha * channel + (1 - alpha)
        return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(value) for value in (colour.redF(), colour.greenF(), colour.blueF()))
    x, y, z = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b,
               (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def test_eight_earlier_runs_and_the_current_one_have_distinguishable_colours(panel):
    for number in range(1, 10):
        panel.begin_run(f"#{number}", key=number)
        panel.add_steps(steps(3))
    panel.redraw()
    assert len(panel.overlay_keys()) == 8
    drawn = [item.opts["pen"].color() for item in curves_on(panel.throughput_plot) if item is not panel.throughput_curve]
    assert len(drawn) == 8 and all(colour.alpha() == OVERLAY_ALPHA for colour in drawn)
    colours = [QColor(panel.colour_of(key)) for key in [*panel.overlay_keys(), 9]]
    assert len({colour.name() for colour in colours}) == 9
    for first, second in itertools.combinations(drawn, 2):  # as drawn for earlier runs, over white
        delta_e = np.linalg.norm(np.subtract(lab(first, first.alphaF()), lab(second, second.alphaF())))
        assert delta_e >= 20, (first.name(), second.name(), delta_e)


def test_smoothed_loss_follows_the_data_without_lag(panel):
    """A falling loss: a trailing average draws it above the data (1.57 where the loss was 1.45)."""
    trend = 1.4 + 0.9 * np.exp(-np.arange(60) / 15)
    panel.begin_run("#1")
    panel.add_steps(losses(trend))
    panel.redraw()
    _, drawn = panel.smooth_loss_curve.getData()
    assert panel.smooth_loss_curve.isVisible()
    assert np.max(np.abs(drawn - trend)) < 0.01 * (trend.max() - trend.min())
    assert drawn[-1] == pytest.approx(trend[-1])

    noise = np.random.default_rng(0).normal(0, 0.05, 60)
    panel.begin_run("#2")
    panel.add_steps(losses(trend + noise))
    panel.redraw()
    _, drawn = panel.smooth_loss_curve.getData()
    assert np.std(drawn[5:-5] - trend[5:-5]) < 0.6 * np.std(noise)  # it does smooth


def test_with_too_few_points_the_raw_loss_is_the_bold_line(panel):
    panel.begin_run("#1")
    panel.add_steps(losses([2.3, 2.0, 1.8, 1.7]))
    panel.redraw()
    assert not panel.smooth_loss_curve.isVisible() and points(panel.smooth_loss_curve) == 0
    raw_pen = panel.raw_loss_curve.opts["pen"]
    assert raw_pen.widthF() == CURRENT_WIDTH and raw_pen.color().alpha() == 255
    panel.add_steps(losses(np.linspace(1.6, 1.0, 20)))
    panel.redraw()
    assert panel.smooth_loss_curve.isVisible()
    assert panel.raw_loss_curve.opts["pen"].color().alpha() < 255  # faint under the smoothed line


@pytest.mark.parametrize("axis, expected", [("samples_seen", [64.0, 128.0, 192.0]), ("elapsed_seconds", [0.5, 1.0, 1.5])])
def test_the_x_axis_can_be_samples_seen_or_wall_time(panel, axis, expected):
    panel.begin_run("#1 batch 32", key=1)
    panel.add_steps(losses([2.0, 1.5, 1.2], batch_size=32))
    panel.begin_run("#2 batch 64", key=2)
    panel.add_steps(losses([2.0, 1.5, 1.2], batch_size=64))
    panel.add_epoch(EpochStats(epoch=1, epochs=1, step=2, train_loss=1.5, train_accuracy=0.5, test_loss=1.4,
                               test_accuracy=0.5, images_per_sec=1.0, data_wait_fraction=0.0, train_seconds=1.0,
                               eval_seconds=0.1))
    panel.set_x_axis(axis)
    panel.redraw()
    x, _ = panel.throughput_curve.getData()
    assert list(x) == expected
    earlier = [item for item in curves_on(panel.throughput_plot) if item is not panel.throughput_curve]
    assert list(earlier[0].getData()[0]) == [value * (0.5 if axis == "samples_seen" else 1.0) for value in expected]
    assert list(panel.test_loss_points.getData()[0]) == [expected[1]]  # the epoch's step, on this axis
    assert panel.data_wait_plot.getAxis("bottom").labelText.startswith("samples" if axis == "samples_seen" else "wall")


def test_a_window_that_read_no_rate_is_a_gap_in_the_throughput_plot(panel):
    """A window of 0 s on the clock has no img/s and no data wait (None): no point, where 0.0 drew a drop to
    nothing (and a data wait of 0 %)."""
    import dataclasses

    windows = losses([2.0, 1.5, 1.2, 1.1])
    windows[2] = dataclasses.replace(windows[2], images_per_sec=None, window_seconds=0.0)
    panel.begin_run("#1")
    panel.add_steps(windows)
    panel.redraw()
    x, rates = panel.throughput_curve.getData()
    assert list(x) == [1, 2, 4] and list(rates) == [1000.0] * 3
    assert list(panel.data_wait_curve.getData()[0]) == [1, 2, 4]
    assert points(panel.raw_loss_curve) == 4


def test_release_marks_the_plot_and_drops_the_reserved_curve(panel):
    panel.begin_run("#1")
    panel.add_steps(steps(4))
    panel.mark_release(MemoryRelease(reserved_before=3 * 2**30, reserved_after=2**30, message="reserved 3.0 GiB → 1.0 GiB"))
    panel.redraw()
    _, reserved = panel.memory.curves["torch_reserved"].getData()
    assert list(reserved[-2:]) == [3.0, 1.0]
    marker, _ = panel.memory.release_markers[0]
    assert "reserved 3.0 GiB → 1.0 GiB" in marker.label.format


def test_memory_title_and_range_follow_the_device_total(panel):
    panel.set_memory_context(80 * 2**30)
    panel.begin_run("#1")
    panel.add_steps(steps(4))
    panel.redraw()
    assert "peak 4.0 GiB of 80.0 GiB (5%)" in panel.memory_plot.plotItem.titleLabel.text
    assert panel.memory_plot.viewRange()[1][1] < 10  # far below the total: the curves fill the plot
    assert "NVML used (device-wide: all processes" in panel.memory.caption.text()


def test_on_a_cpu_the_memory_plot_shows_the_processs_resident_memory_and_the_note(qtbot, panel):
    panel.resize(900, 600)
    panel.show()
    qtbot.waitExposed(panel)
    panel.set_memory_context(None, "CPU mode: the GPU figures need a CUDA GPU.")
    panel.begin_run("#1")
    panel.add_steps(steps(5, memory=CPU_MEMORY))
    panel.redraw()
    assert points(panel.memory.curves["process_rss"]) == 5
    assert panel.memory.curves["process_rss"].getData()[1][0] == pytest.approx(1.5)  # GiB
    assert all(points(panel.memory.curves[key]) == 0 for key in ("torch_reserved", "torch_allocated", "nvml_device_used"))
    assert "Process memory (RSS) · peak 1.5 GiB" in panel.memory_plot.plotItem.titleLabel.text
    caption = panel.memory.caption
    assert "resident memory (RSS) of this process" in caption.text()
    assert "CPU mode: the GPU figures need a CUDA GPU." in caption.text()
    assert caption.isVisible()
    plot = panel.memory_plot
    assert not box(caption, panel).intersects(box(plot, panel))  # the note is beside the curve, never over it
    assert not [item for item in plot.scene().items() if isinstance(item, pg.LegendItem)]


def test_where_resident_memory_cannot_be_read_the_caption_says_why(panel):
    panel.set_memory_context(None, "CPU mode.")
    panel.begin_run("#1")
    memory = MemorySnapshot(process_rss_unavailable_reason="resident memory is read from /proc/self/statm, "
                                                           "which this system does not have")
    panel.add_steps(steps(3, memory=memory))
    panel.redraw()
    assert "Not measured here: resident memory is read from /proc/self/statm" in panel.memory.caption.text()


def rank_steps(count: int, reserved_gib: tuple[float, ...]) -> list[StepStats]:
    """A multi-process run's windows: rank r holds ``reserved_gib[r]`` GiB (+ 0.1 GiB per step)."""
    from dataclasses import replace

    from workbench.engine.events import RankStepStats

    windows = []
    for stats in steps(count):
        ranks = tuple(RankStepStats(rank=rank, samples=32, images_per_sec=500.0, data_wait_seconds=0.0,
                                    device_span_seconds=0.01, window_seconds=0.01,
                                    memory=MemorySnapshot(torch_reserved=int((gib + 0.1 * stats.step) * 2**30)))
                      for rank, gib in enumerate(reserved_gib))
        windows.append(replace(stats, ranks=ranks))
    return windows


def test_a_multi_process_run_draws_one_memory_line_per_gpu(panel):
    panel.set_memory_context(80 * 2**30)
    panel.begin_run("#1")
    panel.add_steps(rank_steps(4, (2.0, 5.0)))
    panel.redraw()
    lines = panel.memory.rank_lines
    assert lines.ranks == [0, 1]
    last = [lines._curves[rank].getData()[1][-1] for rank in (0, 1)]
    assert last == pytest.approx([2.4, 5.4])  # each GPU's own reserved memory, in GiB
    assert [lines._labels[rank].textItem.toPlainText() for rank in (0, 1)] == ["GPU 0", "GPU 1"]
    assert "5.4 GiB" in panel.memory_plot.plotItem.titleLabel.text  # the range takes the ranks' lines
    assert "2 processes" in panel.memory.caption.text() and "one per GPU" in panel.memory.caption.text()
    # The next run (one process) draws no rank lines.
    panel.begin_run("#2")
    panel.add_steps(steps(3))
    panel.redraw()
    assert panel.memory.rank_lines.ranks == [] and not panel.memory.rank_lines._curves
    assert "one per GPU" not in panel.memory.caption.text()


def marked(curve) -> bool:
    return curve.opts["symbol"] is not None


def test_a_curve_of_one_point_is_marked_and_one_of_many_is_a_plain_line(panel):
    """A run that logged once (max_steps=4, log_every=4), or a short run from the history, was on no plot: a line
    through one point draws nothing."""
    panel.set_memory_context(80 * 2**30)
    panel.begin_run("#1")
    panel.add_steps(rank_steps(1, (2.0, 5.0)))
    panel.add_overlay("#0 short", {"step": np.array([4.0]), "loss": np.array([2.0]),
                                   "images_per_sec": np.array([900.0]), "torch_reserved": np.array([2.0**30])})
    panel.redraw()
    run = [panel.raw_loss_curve, panel.throughput_curve, panel.data_wait_curve, panel.memory.curves["torch_reserved"],
           *panel.memory.rank_lines._curves.values()]
    assert all(points(curve) == 1 and marked(curve) for curve in run)
    overlay = [curve for _, curve in panel._overlays["#0 short"].items]
    assert len(overlay) == 3 and all(points(curve) == 1 and marked(curve) for curve in overlay)
    assert panel.raw_loss_curve.opts["symbolBrush"].color().name() == panel.raw_loss_curve.opts["pen"].color().name()

    panel.add_steps(rank_steps(3, (2.0, 5.0))[1:])  # more points: the plain line again
    panel.add_overlay("#9 long", series(5, images_per_sec=np.full(5, 800.0)))
    panel.redraw()
    assert all(points(curve) > 1 and not marked(curve) for curve in run)
    assert not any(marked(curve) for _, curve in panel._overlays["#9 long"].items)


def test_a_one_process_run_has_no_rank_lines(panel):
    panel.begin_run("#1")
    panel.add_steps(steps(3))
    panel.redraw()
    assert panel.memory.rank_lines.ranks == []


def drawn_colours(plot) -> set[str]:
    """The colours (alpha aside) of every visible curve and point set on a plot that holds data."""
    colours = set()
    for item in plot.getPlotItem().items:
        if not item.isVisible():
            continue
        if isinstance(item, pg.PlotDataItem) and points(item):
            colours.add(item.opts["pen"].color().name())
        elif isinstance(item, pg.ScatterPlotItem) and len(item.data):
            colours.add(item.opts["pen"].color().name())
    return colours


@pytest.mark.parametrize("smooth", [True, False])
@pytest.mark.parametrize("counts", [(4, 6, 3, 5, 7), (4, 30, 5, 12, 3)])
def test_every_line_on_every_plot_is_in_its_runs_legend_colour(panel, smooth, counts):
    """Issue 22: a new run's loss line kept the previous run's pen when the smoothing state did not change
    (every run under 10 points, or Smooth loss off)."""
    panel.smooth_check.setChecked(smooth)
    for number, count in enumerate(counts, start=1):
        panel.begin_run(f"#{number}", key=number)
        panel.add_steps(steps(count, memory=CPU_MEMORY))
        panel.add_epoch(EpochStats(epoch=1, epochs=1, step=count, train_loss=1.0, train_accuracy=0.5, test_loss=1.1,
                                   test_accuracy=0.5, images_per_sec=100.0, data_wait_fraction=0.1,
                                   train_seconds=1.0, eval_seconds=0.1))
        panel.set_memory_context(None, "CPU")
        panel.redraw()
        legend = {entry.label: QColor(entry.colour).name() for entry in panel.legend.entries()}
        assert len(legend) == number and len(set(legend.values())) == number
        for plot in (panel.loss_plot, panel.throughput_plot, panel.data_wait_plot, panel.memory_plot):
            assert drawn_colours(plot) == set(legend.values()), plot.objectName()
        current = legend[f"#{number}"]
        assert panel.raw_loss_curve.opts["pen"].color().name() == current
        assert panel.test_loss_points.opts["pen"].color().name() == current

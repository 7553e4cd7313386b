"""Live plots: loss, images/sec, data-wait share and memory, with earlier runs drawn beside the current one.

Steps are appended to growable buffers as they arrive; the curves (made once) are redrawn from
those buffers by a ~20 Hz timer, one changed plot per tick, so a fast run never costs a redraw
per step and no single tick holds the GUI thread for long.

Every run on the plots is keyed (by its history run id when it is recorded), so a run is drawn
once, named once in the legend strip above the plots, and keeps one colour on all four plots:
the runs of this window and those selected in the Runs tab are the same runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Optional, Sequence, Union

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.events import EpochStats, MemoryRelease, StepStats
from workbench.gui.curves import draw_points
from workbench.gui.memory_plot import LINE_STYLES, MEMORY_KEYS, MemoryPlot, pen
from workbench.gui.run_legend import OVERLAY_ALPHA, RUN_COLOURS, ColourBook, LegendEntry, RunLegend
from workbench.gui.series import (
    GIB,
    SERIES_KEYS,
    X_AXES,
    SeriesBuffer,
    finite_xy,
    has_data,
    smoothed,
    smoothing_half_width,
    step_row,
)

REDRAW_INTERVAL_MS = 50
MAX_OVERLAYS = 8
PLOTS = ("loss", "throughput", "data_wait", "memory")  # the redraw order
CURRENT_WIDTH = 2.4
OVERLAY_WIDTH = 1.4

PLOTTED_KEYS = ("loss", "images_per_sec", "data_wait_fraction", *MEMORY_KEYS)

# An overlay: (key, label, series), or (label, series) keyed by its label.
OverlaySpec = Union[tuple[Hashable, str, dict], tuple[str, dict]]

pg.setConfigOptions(background="w", foreground="#303030", antialias=True)


@dataclass
class _Overlay:
    key: Hashable
    label: str
    series: dict[str, np.ndarray]
    colour: str
    sources: set[str]  # "session": an earlier run in this window; "history": chosen in the Runs tab
    items: list = field(default_factory=list)  # (plot, curve) drawn for it, removed on clear


class PlotsPanel(QWidget):
    """Four plots in a grid, the run legend above them, display choices below."""

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("plotsPanel")
        self._buffer = SeriesBuffer(SERIES_KEYS)
        self._test_points: list[tuple[float, float]] = []  # (step, test loss)
        self._overlays: dict[Hashable, _Overlay] = {}  # oldest first
        self._colours = ColourBook()
        self._run_key: Optional[Hashable] = None
        self._run_label = ""
        self._run_colour = RUN_COLOURS[0]
        self._run_has_data = False
        self._x_key = "step"
        self._drawn_memory_mode = ""
        self._loss_pens_shown: Optional[tuple[bool, str]] = None  # (smoothing, colour) the loss curves have
        self._dirty: set[str] = set()  # the plots (PLOTS) whose curves are behind their buffers

        self.legend = RunLegend()
        self.loss_plot = self._make_plot("lossPlot", "Training loss", "loss", "")
        self.throughput_plot = self._make_plot("throughputPlot", "Throughput", "images/s", "")
        self.memory_plot = self._make_plot("memoryPlot", "Memory", "memory", "GiB")
        self.data_wait_plot = self._make_plot("dataWaitPlot", "Time waiting for data", "share of step time", "%")
        self.data_wait_plot.setYRange(0, 100, padding=0.02)
        self.data_wait_plot.enableAutoRange(axis="y", enable=False)

        self.raw_loss_curve = self.loss_plot.plot()
        self.smooth_loss_curve = self.loss_plot.plot()
        self.test_loss_points = pg.ScatterPlotItem(symbol="o", size=9, brush=pg.mkBrush(255, 255, 255))
        self.loss_plot.addItem(self.test_loss_points)
        self.throughput_curve = self.throughput_plot.plot()
        self.data_wait_curve = self.data_wait_plot.plot()
        for curve in (self.raw_loss_curve, self.smooth_loss_curve, self.test_loss_points, self.throughput_curve,
                      self.data_wait_curve):
            curve.setZValue(10)  # the current run over the earlier ones
        self.memory = MemoryPlot(self.memory_plot)
        self.smooth_check = QCheckBox("Smooth loss")
        self.smooth_check.setObjectName("smoothLossCheck")
        self.smooth_check.setChecked(True)
        self.smooth_check.setToolTip(
            "Draw a centred moving average of the loss (about a tenth of the points wide, narrower at the ends, "
            "so it does not lag the data) over the faint raw values. Runs with fewer than 10 logged "
            "points are drawn raw.")
        self.smooth_check.toggled.connect(self._on_display_changed)
        self.x_axis_combo = QComboBox()
        self.x_axis_combo.setObjectName("xAxisCombo")
        for key, label in X_AXES.items():
            self.x_axis_combo.addItem(label.split(" since")[0], key)
        self.x_axis_combo.setToolTip(
            "What the plots' x-axis counts. Runs with different batch sizes or accumulation line up on "
            "samples seen, not on steps; wall time shows what a setting costs in time.")
        self.x_axis_combo.currentIndexChanged.connect(self._on_x_axis_changed)
        x_axis_label = QLabel("x-axis:")
        x_axis_label.setBuddy(self.x_axis_combo)
        self.clear_button = QPushButton("Clear past runs")
        self.clear_button.setObjectName("clearOverlaysButton")
        self.clear_button.setToolTip("Remove the earlier runs' curves from every plot.")
        self.clear_button.clicked.connect(self.clear_overlays)
        self.clear_button.setEnabled(False)

        grid = QGridLayout()
        grid.setSpacing(8)
        grid.addWidget(self.loss_plot, 0, 0)
        grid.addWidget(self.throughput_plot, 0, 1)
        grid.addWidget(self.memory_plot, 1, 0)
        grid.addWidget(self.data_wait_plot, 1, 1)
        grid.addWidget(self.memory.caption, 2, 0)  # a row of its own: the four plots keep one size
        for index in (0, 1):
            grid.setRowStretch(index, 1)
            grid.setColumnStretch(index, 1)
        grid.setVerticalSpacing(4)
        controls = QHBoxLayout()
        controls.addWidget(self.smooth_check)
        controls.addSpacing(16)
        controls.addWidget(x_axis_label)
        controls.addWidget(self.x_axis_combo)
        controls.addStretch(1)
        controls.addWidget(self.clear_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.legend)
        layout.addLayout(grid, 1)
        layout.addLayout(controls)

        for plot in self._bottom_row():  # the top row shares their x-axis: its label is said once, below
            plot.setLabel("bottom", X_AXES[self._x_key])
        self._apply_run_pens()
        self._update_memory_caption()
        self.redraw_timer = QTimer(self)
        self.redraw_timer.setInterval(REDRAW_INTERVAL_MS)
        self.redraw_timer.timeout.connect(self._redraw_next)
        self.redraw_timer.start()

    def _make_plot(self, object_name: str, title: str, y_label: str, y_units: str) -> pg.PlotWidget:
        plot = pg.PlotWidget()
        plot.setObjectName(object_name)
        plot.setMinimumSize(240, 150)
        plot.setTitle(title, size="10pt")
        plot.setLabel("left", y_label, units=y_units or None)
        for side in ("left", "bottom"):
            plot.getAxis(side).enableAutoSIPrefix(False)
            plot.getAxis(side).setTickFont(QFont(self.font().family(), 8))
        plot.showGrid(x=True, y=True, alpha=0.15)
        plot.setDownsampling(mode="peak", auto=True)
        plot.setClipToView(True)
        plot.setMouseEnabled(x=True, y=True)
        return plot

    # -- the current run ---------------------------------------------------------------------
    def begin_run(self, label: str, key: Optional[Hashable] = None) -> None:
        """A new run, keyed by ``key`` (its history run id; default: its label). The previous run, if
        it drew anything, stays on the plots as an earlier run, in its colour."""
        previous, self._run_key = self._run_key, None
        if previous is not None and len(self._buffer):
            self.add_overlay(self._run_label, self.current_series(), colour=self._run_colour, key=previous)
        if previous is not None and previous not in self._overlays:
            self._colours.release(previous)  # it drew nothing: its colour is free again
        self._run_key = key if key is not None else label
        existing = self._overlays.get(self._run_key)
        if existing is not None:  # e.g. selected in the Runs tab before: it is drawn live now
            self._remove_overlay(existing)
        self._buffer = SeriesBuffer(SERIES_KEYS)
        self._test_points = []
        self._run_label = label
        self._run_colour = self._colours.colour(self._run_key)
        self._run_has_data = False
        self.memory.begin_run()
        self._apply_run_pens()
        self._update_legend()
        self._update_memory_caption()
        self._dirty.update(PLOTS)

    def add_steps(self, steps: Sequence[StepStats]) -> None:
        for stats in steps:
            self._buffer.append(step_row(stats))
        if self.memory.add_steps(steps):
            self._update_memory_caption()
        self._dirty.update(PLOTS)
        if not self._run_has_data and any(has_data(self._buffer.column(key)) for key in PLOTTED_KEYS):
            self._run_has_data = True
            self._update_legend()
            self._update_memory_caption()

    def add_epoch(self, stats: EpochStats) -> None:
        if not stats.evaluated:
            return
        self._test_points.append((stats.step, stats.test_loss))
        self._dirty.add("loss")
        self._update_legend()

    def set_memory_context(self, total_bytes: Optional[int], cpu_note: Optional[str] = None) -> None:
        """The device total (the limit line) on a GPU; on a CPU (``total_bytes`` None with a note) the
        plot shows this process's resident memory and the note says what only a GPU would show."""
        self.memory.set_context(total_bytes, cpu_note)
        self._sync_memory_mode()
        self._update_memory_caption()
        self.memory.fit_range(self._buffer)

    def mark_release(self, release: MemoryRelease) -> None:
        """Show a release-cached-memory click: a marked line and the reserved figure's drop."""
        self.memory.mark_release(self._buffer, self._x_key, release)
        self._dirty.add("memory")

    def current_series(self) -> dict[str, np.ndarray]:
        """The current run's SERIES_KEYS columns (copies), in the form add_overlay takes."""
        return self._buffer.to_dict()

    # -- earlier runs --------------------------------------------------------------------------
    def add_overlay(self, label: str, series: dict[str, np.ndarray], colour: Optional[str] = None,
                    source: str = "session", key: Optional[Hashable] = None) -> None:
        """Draw an earlier run beside the current one. ``series`` holds "step" and any of the other
        SERIES_KEYS (loss, images_per_sec, data_wait_fraction as 0..1, memory in bytes); NaN = gap.
        A run already on the plots (same ``key``) is not drawn twice; a run with no data is not drawn."""
        unknown = set(series) - set(SERIES_KEYS)
        if unknown or "step" not in series:
            raise ValueError(f"overlay series needs 'step' and only {', '.join(SERIES_KEYS)}; got {sorted(series)}")
        key = key if key is not None else label
        if key == self._run_key:  # the current run: drawn live already (a rename still shows)
            if label != self._run_label:
                self._run_label = label
                self._update_legend()
            return
        existing = self._overlays.get(key)
        if existing is not None:
            existing.sources.add(source)
            if existing.label != label:
                existing.label = label
                self._update_legend()
            return
        arrays = {name: np.asarray(value, dtype=float) for name, value in series.items()}
        if not any(has_data(arrays[name]) for name in PLOTTED_KEYS if name in arrays):
            return  # e.g. a run that failed before its first step: nothing to draw, nothing to name
        while len(self._overlays) >= MAX_OVERLAYS:
            session_only = [overlay for overlay in self._overlays.values() if overlay.sources == {"session"}]
            self._remove_overlay(session_only[0] if session_only else next(iter(self._overlays.values())))
        overlay = _Overlay(key, label, arrays, colour or self._colours.colour(key), {source})
        self._overlays[key] = overlay
        self._draw_overlay(overlay)
        self._update_legend()
        self.clear_button.setEnabled(True)

    def set_overlays(self, overlays: Sequence[OverlaySpec], source: str = "history") -> None:
        """Make the runs from one source (e.g. those selected in the Runs tab) exactly these."""
        wanted = [spec if len(spec) == 3 else (spec[0], spec[0], spec[1]) for spec in overlays]
        keys = {key for key, _, _ in wanted}
        for overlay in list(self._overlays.values()):
            if source in overlay.sources and overlay.key not in keys:
                overlay.sources.discard(source)
                if not overlay.sources:
                    self._remove_overlay(overlay)
        for key, label, series in wanted:
            self.add_overlay(label, series, source=source, key=key)
        self.clear_button.setEnabled(bool(self._overlays))

    def clear_overlays(self) -> None:
        for overlay in list(self._overlays.values()):
            self._remove_overlay(overlay)
        self.clear_button.setEnabled(False)

    def overlay_labels(self) -> list[str]:
        return [overlay.label for overlay in self._overlays.values()]

    def overlay_keys(self) -> list[Hashable]:
        return list(self._overlays)

    def legend_labels(self) -> list[str]:
        """The runs the legend names, earlier runs first, the current run last."""
        return self.legend.labels()

    def colour_of(self, key: Hashable) -> Optional[str]:
        if key == self._run_key:
            return self._run_colour
        overlay = self._overlays.get(key)
        return overlay.colour if overlay is not None else None

    def _remove_overlay(self, overlay: _Overlay) -> None:
        self._undraw_overlay(overlay)
        self._overlays.pop(overlay.key, None)
        if overlay.key != self._run_key:
            self._colours.release(overlay.key)
        self._update_legend()
        self.clear_button.setEnabled(bool(self._overlays))

    def _undraw_overlay(self, overlay: _Overlay) -> None:
        for plot, curve in overlay.items:
            plot.removeItem(curve)
        overlay.items.clear()

    def _draw_overlay(self, overlay: _Overlay) -> None:
        x_values = overlay.series.get(self._x_key)
        if x_values is None:
            return  # this run has no such axis (an overlay given only steps)

        def add(plot: pg.PlotWidget, values: Optional[np.ndarray], style: Qt.PenStyle = Qt.PenStyle.SolidLine) -> None:
            if values is None:
                return
            x, y = finite_xy(x_values, values)
            if len(x) == 0:
                return
            curve = pg.PlotDataItem(pen=pen(overlay.colour, width=OVERLAY_WIDTH, alpha=OVERLAY_ALPHA, style=style))
            draw_points(curve, x, y)
            curve.setZValue(-10)  # under the current run
            plot.addItem(curve)
            overlay.items.append((plot, curve))

        series = overlay.series
        loss = series.get("loss")
        if loss is not None and self._smoothing_applies(loss):
            loss = smoothed(loss)
        add(self.loss_plot, loss)
        add(self.throughput_plot, series.get("images_per_sec"))
        wait = series.get("data_wait_fraction")
        add(self.data_wait_plot, None if wait is None else wait * 100.0)
        for figure in self._memory_figures():
            values = series.get(figure.key)
            add(self.memory_plot, None if values is None else values / GIB, LINE_STYLES[figure.line])

    def _redraw_overlays(self) -> None:
        for overlay in self._overlays.values():
            self._undraw_overlay(overlay)
            self._draw_overlay(overlay)

    def _update_legend(self) -> None:
        entries = [LegendEntry(overlay.label, overlay.colour) for overlay in self._overlays.values()]
        if self._run_has_data:
            entries.append(LegendEntry(self._run_label, self._run_colour, current=True))
        hint = "○ test loss (each epoch)" if self._test_points and self._run_has_data else ""
        self.legend.set_entries(entries, hint)

    # -- display choices -------------------------------------------------------------------------
    @property
    def x_axis(self) -> str:
        return self._x_key

    def set_x_axis(self, key: str) -> None:
        index = self.x_axis_combo.findData(key)
        if index < 0:
            raise ValueError(f"unknown x-axis {key!r}; choose {', '.join(X_AXES)}")
        self.x_axis_combo.setCurrentIndex(index)

    def _bottom_row(self) -> tuple[pg.PlotWidget, pg.PlotWidget]:
        return self.memory_plot, self.data_wait_plot

    def _on_x_axis_changed(self) -> None:
        self._x_key = self.x_axis_combo.currentData()
        for plot in self._bottom_row():
            plot.setLabel("bottom", X_AXES[self._x_key])
        for plot in (self.loss_plot, self.throughput_plot, self.memory_plot, self.data_wait_plot):
            plot.enableAutoRange(axis="x", enable=True)
        self.memory.move_markers(self._x_key)
        self._redraw_overlays()
        self._dirty.update(PLOTS)

    def _on_display_changed(self) -> None:
        self._redraw_overlays()
        self._dirty.add("loss")

    def _smoothing_applies(self, loss: np.ndarray) -> bool:
        return self.smooth_check.isChecked() and smoothing_half_width(int(np.isfinite(loss).sum())) > 0

    def _apply_run_pens(self) -> None:
        self._set_loss_pens(False)
        self.throughput_curve.setPen(pen(self._run_colour, width=CURRENT_WIDTH))
        self.data_wait_curve.setPen(pen(self._run_colour, width=CURRENT_WIDTH))
        self.test_loss_points.setPen(pen(self._run_colour, width=1.5))
        self.memory.set_pens(self._run_colour)

    def _set_loss_pens(self, smoothing: bool) -> None:
        """The smoothed line is the bold one only when it is drawn; otherwise the raw values are. Both are
        in the run's colour: a new run with the previous run's smoothing still needs its own pens."""
        if (smoothing, self._run_colour) == self._loss_pens_shown:
            return
        self._loss_pens_shown = (smoothing, self._run_colour)
        if smoothing:
            self.raw_loss_curve.setPen(pen(self._run_colour, width=1.2, alpha=80))
        else:
            self.raw_loss_curve.setPen(pen(self._run_colour, width=CURRENT_WIDTH))
        self.smooth_loss_curve.setPen(pen(self._run_colour, width=CURRENT_WIDTH))
        self.smooth_loss_curve.setVisible(smoothing)

    # -- memory ------------------------------------------------------------------------------------
    def memory_mode(self) -> str:
        """"gpu" (torch and NVML figures) or "cpu" (this process's resident memory)."""
        return self.memory.mode(self._buffer)

    def _memory_figures(self):
        return self.memory.figures(self._buffer)

    def _sync_memory_mode(self) -> None:
        mode = self.memory_mode()
        if mode != self._drawn_memory_mode:
            self._drawn_memory_mode = mode
            self._redraw_overlays()
            self._update_memory_caption()
            self._dirty.add("memory")

    def _update_memory_caption(self) -> None:
        self.memory.update_caption(self._buffer, self._run_has_data)

    # -- drawing -----------------------------------------------------------------------------------
    def redraw(self) -> None:
        """Bring every plot up to date now (tests, screenshots); the timer does it one plot per tick."""
        for plot in PLOTS:
            self._redraw_plot(plot)
        self._dirty.clear()

    def _redraw_next(self) -> None:
        """One dirty plot per tick: Qt paints each tick's changes in one pass, and four plots repainted
        together hold the GUI thread (while training competes for the cores and the GIL) two to four
        times longer than one does, which a user feels as a stutter."""
        for plot in PLOTS:
            if plot in self._dirty:
                self._dirty.discard(plot)
                self._redraw_plot(plot)
                return

    def _redraw_plot(self, plot: str) -> None:
        buffer = self._buffer
        x = buffer.column(self._x_key)
        if plot == "loss":
            loss = buffer.column("loss")
            smoothing = self._smoothing_applies(loss)
            self._set_loss_pens(smoothing)
            self._set(self.raw_loss_curve, x, loss)
            if smoothing:
                self._set(self.smooth_loss_curve, x, smoothed(loss))
            else:
                self.smooth_loss_curve.clear()
            self._draw_test_points()
        elif plot == "throughput":
            self._set(self.throughput_curve, x, buffer.column("images_per_sec"))
        elif plot == "data_wait":
            self._set(self.data_wait_curve, x, buffer.column("data_wait_fraction") * 100.0)
        else:
            self._sync_memory_mode()
            self.memory.redraw(buffer, self._x_key, self._run_colour)

    def _draw_test_points(self) -> None:
        steps, x = finite_xy(self._buffer.column("step"), self._buffer.column(self._x_key))
        points = [(step, loss) for step, loss in self._test_points if loss == loss]
        if not points or not len(steps):
            self.test_loss_points.clear()
            return
        at_steps, losses = zip(*points)
        # Epochs end on a step; on another axis the point sits where that step is on it.
        self.test_loss_points.setData(x=list(np.interp(at_steps, steps, x)), y=list(losses))

    @staticmethod
    def _set(curve: pg.PlotDataItem, x: np.ndarray, y: np.ndarray) -> None:
        draw_points(curve, *finite_xy(x, y))


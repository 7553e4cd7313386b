"""Live plots: loss, images/sec, memory and data-wait share, with past runs dimmed underneath.

Steps are appended to growable buffers as they arrive; the curves (made once) are redrawn from
those buffers by a ~20 Hz timer, one changed plot per tick, so a fast run never costs a redraw
per step and no single tick holds the GUI thread for long. Past runs stay as overlays: same colour as when they were live, dimmed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QCheckBox, QGridLayout, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from workbench.engine.events import EpochStats, MemoryRelease, StepStats
from workbench.formatting import format_bytes
from workbench.gui.series import SERIES_KEYS, Ema, SeriesBuffer, finite_xy, smoothed, step_row

REDRAW_INTERVAL_MS = 50
SMOOTHING_WEIGHT = 0.8
MAX_OVERLAYS = 8
BUFFER_KEYS = SERIES_KEYS + ("loss_smoothed",)
PLOTS = ("loss", "throughput", "data_wait", "memory")  # the redraw order
GIB = float(2**30)
RUN_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
MEMORY_SERIES = {  # key → legend name, colour
    "torch_allocated": ("torch allocated", "#1f77b4"),
    "torch_reserved": ("torch reserved", "#ff7f0e"),
    "nvml_used": ("NVML device used", "#2ca02c"),
}
DIM_ALPHA = 90
NEAR_LIMIT = 0.5  # above this share of the device total, the memory plot shows the total's line

pg.setConfigOptions(background="w", foreground="#303030", antialias=True)


def _pen(colour: str, width: float = 2.0, alpha: int = 255, dashed: bool = False) -> pg.QtGui.QPen:
    qcolour = QColor(colour)
    qcolour.setAlpha(alpha)
    pen = pg.mkPen(qcolour, width=width)
    if dashed:
        pen.setStyle(Qt.PenStyle.DashLine)
    return pen


@dataclass
class _Overlay:
    label: str
    series: dict[str, np.ndarray]
    colour: str
    source: str  # "session": an earlier run in this window; "history": chosen in the Runs tab
    items: list = field(default_factory=list)  # the curves drawn for it, removed on clear


class PlotsPanel(QWidget):
    """Four plots in a grid plus a smoothing toggle; fed by the GUI thread, redrawn on a timer."""

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("plotsPanel")
        self._buffer = SeriesBuffer(BUFFER_KEYS)
        self._ema = Ema(SMOOTHING_WEIGHT)
        self._test_points: list[tuple[float, float]] = []
        self._overlays: list[_Overlay] = []
        self._run_label = ""
        self._run_colour = RUN_COLOURS[0]
        self._runs_begun = 0
        self._dirty: set[str] = set()  # the plots (PLOTS) whose curves are behind their buffers

        self.loss_plot = self._make_plot("lossPlot", "Training loss", "loss", "")
        self.throughput_plot = self._make_plot("throughputPlot", "Throughput", "images/s", "")
        self.memory_plot = self._make_plot("memoryPlot", "Device memory", "memory", "GiB")
        self.data_wait_plot = self._make_plot("dataWaitPlot", "Time waiting for data", "share of step time", "%")
        self.data_wait_plot.setYRange(0, 100, padding=0.02)
        self.data_wait_plot.enableAutoRange(axis="y", enable=False)

        self.loss_legend = self.loss_plot.addLegend(offset=(-8, 8), labelTextSize="9pt")
        self.throughput_legend = self.throughput_plot.addLegend(offset=(-8, -8), labelTextSize="9pt")
        self.memory_legend = self.memory_plot.addLegend(offset=(8, 8), labelTextSize="9pt")
        for legend in (self.loss_legend, self.throughput_legend, self.memory_legend):
            legend.setBrush(pg.mkBrush(255, 255, 255, 210))

        self.raw_loss_curve = self.loss_plot.plot()
        self.smooth_loss_curve = self.loss_plot.plot()
        self.test_loss_points = pg.ScatterPlotItem(symbol="o", size=9, brush=pg.mkBrush(255, 255, 255))
        self.loss_plot.addItem(self.test_loss_points)
        self.throughput_curve = self.throughput_plot.plot()
        self.data_wait_curve = self.data_wait_plot.plot()
        self.memory_curves = {
            key: self.memory_plot.plot(name=name, pen=_pen(colour)) for key, (name, colour) in MEMORY_SERIES.items()
        }
        self.device_total_line = pg.InfiniteLine(
            angle=0, movable=False, pen=_pen("#b00020", width=1.5, dashed=True),
            label="", labelOpts=dict(position=0.98, color="#b00020", anchors=[(1, 1), (1, 1)]),
        )
        self.device_total_line.setVisible(False)
        self.memory_plot.addItem(self.device_total_line, ignoreBounds=True)
        self._release_markers: list[pg.InfiniteLine] = []
        self._device_total_bytes: Optional[int] = None

        self.smooth_check = QCheckBox("Smooth loss")
        self.smooth_check.setObjectName("smoothLossCheck")
        self.smooth_check.setChecked(True)
        self.smooth_check.setToolTip(
            "Show an exponential moving average of the loss over the raw, noisy per-window values "
            f"(weight {SMOOTHING_WEIGHT}); the raw curve stays, faint.")
        self.smooth_check.toggled.connect(self._on_smoothing_toggled)
        self.clear_button = QPushButton("Clear past runs")
        self.clear_button.setObjectName("clearOverlaysButton")
        self.clear_button.setToolTip("Remove the dimmed curves of earlier runs from every plot.")
        self.clear_button.clicked.connect(self.clear_overlays)
        self.clear_button.setEnabled(False)

        self.memory_note = QLabel("Memory figures appear here during a run.")
        self.memory_note.setObjectName("memoryNote")
        self.memory_note.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.memory_note.setWordWrap(True)
        self.memory_note.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.memory_note.setMinimumWidth(300)
        self.memory_note.setMaximumWidth(420)
        self.memory_note.setStyleSheet(
            "color: #505050; background: rgba(255, 255, 255, 235); border: 1px solid #d0d0d0; border-radius: 6px;"
            "padding: 12px;")

        grid = QGridLayout()
        grid.setSpacing(8)
        grid.addWidget(self.loss_plot, 0, 0)
        grid.addWidget(self.throughput_plot, 0, 1)
        grid.addWidget(self.memory_plot, 1, 0)
        # Same cell, centred: the note sits over the middle of the empty plot.
        grid.addWidget(self.memory_note, 1, 0, Qt.AlignmentFlag.AlignCenter)
        grid.addWidget(self.data_wait_plot, 1, 1)
        controls = QHBoxLayout()
        controls.addWidget(self.smooth_check)
        controls.addStretch(1)
        controls.addWidget(self.clear_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(grid, 1)
        layout.addLayout(controls)

        self._apply_run_pens()
        self.redraw_timer = QTimer(self)
        self.redraw_timer.setInterval(REDRAW_INTERVAL_MS)
        self.redraw_timer.timeout.connect(self._redraw_next)
        self.redraw_timer.start()

    def _make_plot(self, object_name: str, title: str, y_label: str, y_units: str) -> pg.PlotWidget:
        plot = pg.PlotWidget()
        plot.setObjectName(object_name)
        plot.setMinimumSize(280, 200)
        plot.setTitle(title, size="11pt")
        plot.setLabel("bottom", "step")
        plot.setLabel("left", y_label, units=y_units or None)
        for side in ("left", "bottom"):
            plot.getAxis(side).enableAutoSIPrefix(False)
            plot.getAxis(side).setTickFont(QFont(self.font().family(), 9))
        plot.showGrid(x=True, y=True, alpha=0.15)
        plot.setDownsampling(mode="peak", auto=True)
        plot.setClipToView(True)
        plot.setMouseEnabled(x=True, y=True)
        return plot

    # -- the current run ---------------------------------------------------------------------
    def begin_run(self, label: str) -> None:
        """A new run: the previous one (if it drew anything) becomes a dimmed overlay."""
        if len(self._buffer):
            self.add_overlay(self._run_label, self.current_series(), colour=self._run_colour)
        self._buffer = SeriesBuffer(BUFFER_KEYS)
        self._ema = Ema(SMOOTHING_WEIGHT)
        self._test_points = []
        self._run_label = label
        self._run_colour = RUN_COLOURS[self._runs_begun % len(RUN_COLOURS)]
        self._runs_begun += 1
        for marker in self._release_markers:
            self.memory_plot.removeItem(marker)
        self._release_markers.clear()
        self._apply_run_pens()
        self._dirty.update(PLOTS)

    def add_steps(self, steps: Sequence[StepStats]) -> None:
        for stats in steps:
            row = step_row(stats)
            row["loss_smoothed"] = self._ema.update(stats.loss)
            self._buffer.append(row)
        self._dirty.update(("loss", "throughput", "data_wait"))
        if any(stats.memory.torch_reserved is not None or stats.memory.nvml_used is not None for stats in steps):
            self._dirty.add("memory")  # on a CPU it stays empty: no repaint for nothing

    def add_epoch(self, stats: EpochStats) -> None:
        self._test_points.append((stats.step, stats.test_loss))
        self._dirty.add("loss")

    def set_memory_context(self, total_bytes: Optional[int], empty_reason: Optional[str]) -> None:
        """The device total (the limit line) and, when the plot must stay empty, why (CPU mode)."""
        self._device_total_bytes = total_bytes
        if total_bytes:
            self.device_total_line.setPos(total_bytes / GIB)
            self.device_total_line.label.setFormat(f"device total {format_bytes(total_bytes)}")
        self.device_total_line.setVisible(bool(total_bytes))
        self._fit_memory_range()
        self.memory_note.setText(empty_reason or "")
        self.memory_note.setVisible(bool(empty_reason))
        for side in ("left", "bottom"):  # no scale for nothing
            self.memory_plot.getAxis(side).setStyle(showValues=not empty_reason)
        self.memory_legend.setVisible(not empty_reason)  # a legend of curves that cannot exist only confuses

    def mark_release(self, release: MemoryRelease) -> None:
        """Show a release-cached-memory click: a marked line and the reserved figure's drop."""
        step = self._buffer.last("step") if len(self._buffer) else 0.0
        if step != step:  # NaN: the last row was itself a release
            step = 0.0
        if release.reserved_before is not None and release.reserved_after is not None:
            self._buffer.append({"step": step, "torch_reserved": release.reserved_before})
            self._buffer.append({"step": step, "torch_reserved": release.reserved_after})
        marker = pg.InfiniteLine(
            pos=step, angle=90, movable=False, pen=_pen("#6b6b6b", width=1, dashed=True),
            label=release.message, labelOpts=dict(position=0.5, color="#303030", rotateAxis=(1, 0)),
        )
        self.memory_plot.addItem(marker, ignoreBounds=True)
        self._release_markers.append(marker)
        self._dirty.add("memory")

    @property
    def run_label(self) -> str:
        return self._run_label

    def current_series(self) -> dict[str, np.ndarray]:
        """The current run's SERIES_KEYS columns (copies), in the form add_overlay takes."""
        columns = self._buffer.to_dict()
        return {key: columns[key] for key in SERIES_KEYS}

    # -- past runs ---------------------------------------------------------------------------
    def add_overlay(self, label: str, series: dict[str, np.ndarray], colour: Optional[str] = None,
                    source: str = "session") -> None:
        """Draw a past run dimmed under the current one. ``series`` holds "step" and any of the other
        SERIES_KEYS (loss, images_per_sec, data_wait_fraction as 0..1, memory in bytes); NaN = gap."""
        unknown = set(series) - set(SERIES_KEYS)
        if unknown or "step" not in series:
            raise ValueError(f"overlay series needs 'step' and only {', '.join(SERIES_KEYS)}; got {sorted(series)}")
        colour = colour or RUN_COLOURS[(self._runs_begun + len(self._overlays)) % len(RUN_COLOURS)]
        overlay = _Overlay(label, {key: np.asarray(value, dtype=float) for key, value in series.items()}, colour,
                           source)
        if len(self._overlays) >= MAX_OVERLAYS:
            self._remove_overlay(self._overlays.pop(0))
        self._overlays.append(overlay)
        self._draw_overlay(overlay)
        self.clear_button.setEnabled(True)

    def set_overlays(self, overlays: Sequence[tuple[str, dict[str, np.ndarray]]], source: str = "history") -> None:
        """Replace the overlays of one source (e.g. the runs selected in the Runs tab) with these."""
        for overlay in [overlay for overlay in self._overlays if overlay.source == source]:
            self._remove_overlay(overlay)
            self._overlays.remove(overlay)
        for label, series in overlays:
            self.add_overlay(label, series, source=source)
        self.clear_button.setEnabled(bool(self._overlays))

    def clear_overlays(self) -> None:
        for overlay in self._overlays:
            self._remove_overlay(overlay)
        self._overlays.clear()
        self.clear_button.setEnabled(False)

    def overlay_labels(self) -> list[str]:
        return [overlay.label for overlay in self._overlays]

    def _draw_overlay(self, overlay: _Overlay) -> None:
        steps = overlay.series["step"]
        pen = _pen(overlay.colour, width=1.5, alpha=DIM_ALPHA)

        def add(plot: pg.PlotWidget, key: str, scale: float = 1.0, name: Optional[str] = None,
                pen: pg.QtGui.QPen = pen, transform=None) -> None:
            if key not in overlay.series:
                return
            values = overlay.series[key] * scale
            if transform is not None:
                values = transform(values)
            x, y = finite_xy(steps, values)
            if len(x) == 0:
                return
            curve = pg.PlotDataItem(x, y, pen=pen, name=name)
            curve.setZValue(-10)  # under the current run
            plot.addItem(curve)
            overlay.items.append((plot, curve))

        loss_transform = (lambda values: smoothed(values, SMOOTHING_WEIGHT)) if self.smooth_check.isChecked() else None
        add(self.loss_plot, "loss", name=overlay.label, transform=loss_transform)
        add(self.throughput_plot, "images_per_sec", name=overlay.label)
        add(self.data_wait_plot, "data_wait_fraction", scale=100.0)
        for key, (name, colour) in MEMORY_SERIES.items():
            add(self.memory_plot, key, scale=1 / GIB, pen=_pen(colour, width=1.5, alpha=DIM_ALPHA, dashed=True),
                name=f"{name}: {overlay.label}" if key == "torch_reserved" else None)

    def _remove_overlay(self, overlay: _Overlay) -> None:
        for plot, curve in overlay.items:
            plot.removeItem(curve)  # also drops its legend entry
        overlay.items.clear()

    def _on_smoothing_toggled(self) -> None:
        for overlay in self._overlays:  # overlays are drawn once; redraw them with the new loss transform
            self._remove_overlay(overlay)
            self._draw_overlay(overlay)
        self._apply_run_pens()
        self._dirty.add("loss")

    def _apply_run_pens(self) -> None:
        smooth = self.smooth_check.isChecked()
        self.raw_loss_curve.setPen(_pen(self._run_colour, width=1.2 if smooth else 2, alpha=80 if smooth else 255))
        self.smooth_loss_curve.setPen(_pen(self._run_colour, width=2.2))
        self.smooth_loss_curve.setVisible(smooth)
        self.throughput_curve.setPen(_pen(self._run_colour))
        self.data_wait_curve.setPen(_pen(self._run_colour))
        self.test_loss_points.setPen(_pen(self._run_colour, width=1.5))
        # The legend names the run by the curve that stands out: the smoothed one when smoothing.
        for curve in (self.raw_loss_curve, self.smooth_loss_curve, self.test_loss_points):
            self.loss_legend.removeItem(curve)
        self.throughput_legend.removeItem(self.throughput_curve)
        if self._run_label:
            self.loss_legend.addItem(self.smooth_loss_curve if smooth else self.raw_loss_curve, self._run_label)
            self.loss_legend.addItem(self.test_loss_points, "test loss after each epoch")
            self.throughput_legend.addItem(self.throughput_curve, self._run_label)

    # -- drawing -----------------------------------------------------------------------------
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
        steps = buffer.column("step")
        if plot == "loss":
            self._set(self.raw_loss_curve, steps, buffer.column("loss"))
            if self.smooth_check.isChecked():
                self._set(self.smooth_loss_curve, steps, buffer.column("loss_smoothed"))
            if self._test_points:
                x, y = zip(*self._test_points)
                self.test_loss_points.setData(x=list(x), y=list(y))
            else:
                self.test_loss_points.clear()
        elif plot == "throughput":
            self._set(self.throughput_curve, steps, buffer.column("images_per_sec"))
        elif plot == "data_wait":
            self._set(self.data_wait_curve, steps, buffer.column("data_wait_fraction") * 100.0)
        else:
            for key, curve in self.memory_curves.items():
                self._set(curve, steps, buffer.column(key) / GIB)
            self._fit_memory_range()

    def _fit_memory_range(self) -> None:
        """Show the device total only when usage comes near it: far below, the curves would be flat
        lines at the bottom. The title always says how much of the device the run has used."""
        total = self._device_total_bytes
        columns = [self._buffer.column(key) for key in MEMORY_SERIES]
        values = np.concatenate(columns) if len(self._buffer) else np.empty(0)
        peak = float(np.nanmax(values)) if np.isfinite(values).any() else None
        title = "Device memory"
        if peak is not None and total:
            title += f" · peak {format_bytes(peak)} of {format_bytes(total)} ({peak / total:.0%})"
        self.memory_plot.setTitle(title, size="11pt")
        if total and (peak is None or peak > NEAR_LIMIT * total):
            self.memory_plot.setYRange(0, total / GIB * 1.08, padding=0)
        elif peak is not None:
            self.memory_plot.setYRange(0, peak / GIB * 1.25, padding=0)

    @staticmethod
    def _set(curve: pg.PlotDataItem, x: np.ndarray, y: np.ndarray) -> None:
        x, y = finite_xy(x, y)
        if len(x):
            curve.setData(x, y)
        else:
            curve.clear()

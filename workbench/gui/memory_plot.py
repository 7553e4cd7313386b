"""The memory plot's own parts: the current run's memory curves (GPU figures or the process's RSS), the
device total's line, release markers, one line per GPU of a multi-process run, and the caption below.

PlotsPanel owns the run's buffer and the x-axis and hands them in; this class decides which figures
are shown (``mode``), draws them and says in words what they are.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel

from workbench.engine.events import MemoryRelease, StepStats
from workbench.formatting import format_bytes
from workbench.gui import memory_figures
from workbench.gui.curves import draw_points
from workbench.gui.rank_memory import RankMemoryLines
from workbench.gui.run_bar import MUTED_TEXT
from workbench.gui.series import GIB, X_AXES, SeriesBuffer, finite_xy, has_data

NEAR_LIMIT = 0.5  # above this share of the device total, the memory plot shows the total's line
LINE_STYLES = {"solid": Qt.PenStyle.SolidLine, "dash": Qt.PenStyle.DashLine, "dot": Qt.PenStyle.DotLine}
MEMORY_KEYS = tuple(figure.key for figure in memory_figures.ALL_FIGURES)
GPU_MEMORY_KEYS = tuple(figure.key for figure in memory_figures.GPU_FIGURES)


def pen(colour: str, width: float = 2.0, alpha: int = 255,
        style: Qt.PenStyle = Qt.PenStyle.SolidLine) -> pg.QtGui.QPen:
    qcolour = QColor(colour)
    qcolour.setAlpha(alpha)
    result = pg.mkPen(qcolour, width=width)
    result.setStyle(style)
    return result


class MemoryPlot:
    def __init__(self, plot: pg.PlotWidget):
        self.plot = plot
        self.curves = {key: plot.plot() for key in MEMORY_KEYS}
        for curve in self.curves.values():
            curve.setZValue(10)  # the current run over the earlier ones
        self.device_total_line = pg.InfiniteLine(
            angle=0, movable=False, pen=pen("#b00020", width=1.5, style=Qt.PenStyle.DashLine),
            label="", labelOpts=dict(position=0.98, color="#b00020", anchors=[(1, 1), (1, 1)]),
        )
        self.device_total_line.setVisible(False)
        plot.addItem(self.device_total_line, ignoreBounds=True)
        self.rank_lines = RankMemoryLines(plot)  # a multi-process run: one line per GPU
        self.release_markers: list[tuple[pg.InfiniteLine, dict[str, float]]] = []
        self.context: Optional[str] = None  # "gpu" or "cpu" once the device is known
        self.device_total_bytes: Optional[int] = None
        self.cpu_note = ""
        self.rss_reason: Optional[str] = None
        # What the memory plot's lines are, and why a figure is missing: below the plot, never over it.
        self.caption = QLabel()
        self.caption.setObjectName("memoryCaption")
        self.caption.setWordWrap(True)
        self.caption.setTextFormat(Qt.TextFormat.RichText)
        self.caption.setStyleSheet(MUTED_TEXT)

    # -- what is shown --------------------------------------------------------------------------
    def mode(self, buffer: SeriesBuffer) -> str:
        """"gpu" (torch and NVML figures) or "cpu" (this process's resident memory)."""
        if self.context is not None:
            return self.context
        return "gpu" if any(has_data(buffer.column(key)) for key in GPU_MEMORY_KEYS) else "cpu"

    def figures(self, buffer: SeriesBuffer) -> tuple[memory_figures.MemoryFigure, ...]:
        return memory_figures.figures(self.mode(buffer))

    def set_context(self, total_bytes: Optional[int], cpu_note: Optional[str]) -> None:
        self.device_total_bytes = total_bytes
        self.context = "gpu" if total_bytes else ("cpu" if cpu_note else None)
        self.cpu_note = cpu_note or ""
        if total_bytes:
            self.device_total_line.setPos(total_bytes / GIB)
            self.device_total_line.label.setFormat(f"device total {format_bytes(total_bytes)}")
        self.device_total_line.setVisible(bool(total_bytes))

    # -- the current run ------------------------------------------------------------------------
    def begin_run(self) -> None:
        self.rss_reason = None
        self.rank_lines.clear()
        for marker, _ in self.release_markers:
            self.plot.removeItem(marker)
        self.release_markers.clear()

    def set_pens(self, colour: str) -> None:
        """The run's colour; the line style says which figure it is."""
        for figure in memory_figures.ALL_FIGURES:
            self.curves[figure.key].setPen(pen(colour, width=2.0, style=LINE_STYLES[figure.line]))

    def add_steps(self, steps: Sequence[StepStats]) -> bool:
        """Take the windows' per-rank figures and why RSS is missing; True when the caption must change."""
        reason, ranks_before = self.rss_reason, len(self.rank_lines.ranks)
        for stats in steps:
            self.rank_lines.add(stats)
            if stats.memory.process_rss is None and stats.memory.process_rss_unavailable_reason:
                reason = stats.memory.process_rss_unavailable_reason
        changed = reason != self.rss_reason or len(self.rank_lines.ranks) != ranks_before
        self.rss_reason = reason
        return changed

    def mark_release(self, buffer: SeriesBuffer, x_key: str, release: MemoryRelease) -> None:
        """A release-cached-memory click: a marked line, and the reserved figure's drop in the buffer."""
        at = {key: buffer.last(key) if len(buffer) else 0.0 for key in X_AXES}
        at = {key: 0.0 if value != value else value for key, value in at.items()}  # NaN: nothing yet
        if release.reserved_before is not None and release.reserved_after is not None:
            buffer.append({**at, "torch_reserved": release.reserved_before})
            buffer.append({**at, "torch_reserved": release.reserved_after})
        marker = pg.InfiniteLine(
            pos=at[x_key], angle=90, movable=False, pen=pen("#6b6b6b", width=1, style=Qt.PenStyle.DashLine),
            label=release.message, labelOpts=dict(position=0.5, color="#303030", rotateAxis=(1, 0)),
        )
        self.plot.addItem(marker, ignoreBounds=True)
        self.release_markers.append((marker, at))

    def move_markers(self, x_key: str) -> None:
        for marker, at in self.release_markers:
            marker.setPos(at[x_key])

    # -- drawing --------------------------------------------------------------------------------
    def redraw(self, buffer: SeriesBuffer, x_key: str, colour: str) -> None:
        x = buffer.column(x_key)
        shown = {figure.key for figure in self.figures(buffer)}
        for key, curve in self.curves.items():
            values = buffer.column(key) / GIB if key in shown else np.full(len(x), np.nan)  # not shown: no points
            draw_points(curve, *finite_xy(x, values))
        self.rank_lines.redraw(x_key, self.mode(buffer), colour)
        self.fit_range(buffer)

    def fit_range(self, buffer: SeriesBuffer) -> None:
        """Show the device total only when usage comes near it: far below, the curves would be flat
        lines at the bottom. The title always says how much the run has used."""
        total, mode = self.device_total_bytes, self.mode(buffer)
        keys = [figure.key for figure in self.figures(buffer)]
        columns = [buffer.column(key) for key in keys] + self.rank_lines.values(mode)
        values = np.concatenate(columns) if len(buffer) else np.empty(0)
        peak = float(np.nanmax(values)) if has_data(values) else None
        self.plot.setTitle(memory_figures.title(mode, peak, total), size="10pt")
        if total and mode == "gpu" and (peak is None or peak > NEAR_LIMIT * total):
            self.plot.setYRange(0, total / GIB * 1.08, padding=0)
        elif peak is not None:
            self.plot.setYRange(0, peak / GIB * 1.25, padding=0)

    def update_caption(self, buffer: SeriesBuffer, run_has_data: bool) -> None:
        if self.context is None and not run_has_data:
            self.caption.setText(memory_figures.BEFORE_A_RUN)
            self.caption.setToolTip("")
            return
        mode = self.mode(buffer)
        self.caption.setText(memory_figures.caption_html(mode, self.cpu_note, self.rss_reason,
                                                         len(self.rank_lines.ranks)))
        self.caption.setToolTip(memory_figures.TOOLTIPS[mode])

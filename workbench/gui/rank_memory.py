"""One memory line per GPU (per process) of a multi-process run, on the memory plot.

A data-parallel run's merged memory figures are the highest rank's (``StepStats.memory``); each rank's
own snapshot comes in ``StepStats.ranks``. Beside the merged lines, each rank draws one thin line of
its headline figure (torch reserved on a GPU, the process's resident memory on a CPU), in the run's
colour, lighter for higher ranks, named at its end ("GPU 1"), so an uneven rank stands out.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor

from workbench.engine.events import StepStats
from workbench.gui.curves import draw_points
from workbench.gui.series import GIB, X_AXES, SeriesBuffer, finite_xy

X_KEYS = tuple(X_AXES)
# The figure each rank draws: what a user compares across GPUs first (what each process holds).
RANK_FIGURE = {"gpu": "torch_reserved", "cpu": "process_rss"}
KEYS = (*X_KEYS, *RANK_FIGURE.values())


class RankMemoryLines:
    def __init__(self, plot: pg.PlotWidget):
        self._plot = plot
        self._buffers: dict[int, SeriesBuffer] = {}
        self._curves: dict[int, pg.PlotDataItem] = {}
        self._labels: dict[int, pg.TextItem] = {}
        self._styles: dict[int, tuple[str, str]] = {}  # rank → (colour, mode) its pen and label were set for

    @property
    def ranks(self) -> list[int]:
        return sorted(self._buffers)

    def clear(self) -> None:
        for item in (*self._curves.values(), *self._labels.values()):
            self._plot.removeItem(item)
        self._buffers, self._curves, self._labels, self._styles = {}, {}, {}, {}

    def add(self, stats: StepStats) -> None:
        """A window's per-rank figures; a one-process run has none and draws nothing here."""
        if len(stats.ranks) < 2:
            return
        for rank in stats.ranks:
            buffer = self._buffers.get(rank.rank)
            if buffer is None:
                buffer = self._buffers[rank.rank] = SeriesBuffer(KEYS, capacity=64)
            buffer.append({"step": stats.step, "samples_seen": stats.samples_seen,
                           "elapsed_seconds": stats.elapsed_seconds,
                           "torch_reserved": rank.memory.torch_reserved, "process_rss": rank.memory.process_rss})

    def values(self, mode: str) -> list[np.ndarray]:
        """Every rank's drawn figure (bytes), for the plot's range."""
        key = RANK_FIGURE[mode]
        return [buffer.column(key) for buffer in self._buffers.values()]

    def redraw(self, x_key: str, mode: str, colour: str) -> None:
        key = RANK_FIGURE[mode]
        count = len(self._buffers)
        for position, rank in enumerate(self.ranks):
            x, y = finite_xy(self._buffers[rank].column(x_key), self._buffers[rank].column(key) / GIB)
            curve, label = self._items(rank, _shade(colour, position, count), mode)
            draw_points(curve, x, y)
            if len(x):
                label.setPos(float(x[-1]), float(y[-1]))
                label.setVisible(True)
            else:
                label.setVisible(False)

    def _items(self, rank: int, colour: QColor, mode: str) -> tuple[pg.PlotDataItem, pg.TextItem]:
        curve: Optional[pg.PlotDataItem] = self._curves.get(rank)
        if curve is None:
            curve = self._curves[rank] = self._plot.plot()
            curve.setZValue(9)  # under the merged lines of the current run, over earlier runs
            label = self._labels[rank] = pg.TextItem(anchor=(1, 1))  # above its end, inside the plot
            self._plot.addItem(label, ignoreBounds=True)
        label = self._labels[rank]
        style = (colour.name(), mode)
        if self._styles.get(rank) != style:  # a new run or mode: not on every redraw
            self._styles[rank] = style
            curve.setPen(pg.mkPen(colour, width=1.3))
            label.setText(f"{'GPU' if mode == 'gpu' else 'rank'} {rank}", color=colour)
        return curve, label


def _shade(colour: str, position: int, count: int) -> QColor:
    """The run's colour, lighter for each further rank (rank 0 the run's own)."""
    shade = QColor(colour)
    return shade.lighter(100 + int(90 * position / max(1, count - 1))) if position else shade

"""A curve's points drawn: its line, and a dot where it has one point only (a line through one point draws
nothing, so a run that logged once, 4 steps with log_every=4, was on no plot at all)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

ONE_POINT_SYMBOL = "o"
ONE_POINT_SIZE = 8


def draw_points(curve: pg.PlotDataItem, x: np.ndarray, y: np.ndarray) -> None:
    """Show ``x``, ``y`` (finite numbers) on ``curve``: cleared when empty, marked in its pen's colour when single."""
    if len(x):
        curve.setData(x, y)
    else:
        curve.clear()
    if len(x) == 1:
        colour = pg.mkPen(curve.opts["pen"]).color()
        curve.setSymbol(ONE_POINT_SYMBOL)
        curve.setSymbolSize(ONE_POINT_SIZE)
        curve.setSymbolPen(pg.mkPen(colour))
        curve.setSymbolBrush(pg.mkBrush(colour))
    elif curve.opts["symbol"] is not None:
        curve.setSymbol(None)

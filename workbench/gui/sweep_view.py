"""The sweep view: one bar per value for steady-state images/sec, data-wait share, peak memory and
(when the members ran whole epochs) test accuracy, above a table of the members (every run).

A value run several times (a sweep with repeats) is one bar: the median of its runs, with error bars
for the interval of that median (experiments/rate_over_runs.py); a value run once shows its run's own
interval, from the spread of its steady windows. The other charts show the median of a value's runs
(memory: the highest).

The charts are small multiples: horizontal bars, one row per member in the same order in every
chart, the members' values written once down the left of the first. Each bar's figure is written just
past its end (inside a bar that fills a percent chart), clear of the axis: no tick marks reach into a
chart, where a tick beside "1 %" read as "-1 %". Percent charts run from 0 to 100. On a CPU the memory
chart shows each member's peak resident memory (RSS), the figure a CPU run has.

A view only: it is fed the events a sequence generator yields (``handle``), in order, on the GUI
thread, and draws them. The running member's bar grows from its live step windows; a failed member
shows as failed, without a bar. Redraws are coalesced on a short timer, never one per event.
"""

from __future__ import annotations

import functools
import typing
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.controller.messages import SEQUENCE_NAMES
from workbench.engine.events import Event, StepStats
from workbench.engine.run_summary import IMAGES_PER_SEC_MEANS
from workbench.engine.spread import median_of_known
from workbench.experiments.events import (
    BatchTrial,
    BestSoFar,
    MemberEnded,
    MemberStarted,
    RecordingFailed,
    RunRecorded,
    SequenceEnded,
    SequenceStarted,
    TrialResult,
    values_label,
)
from workbench.experiments.rate_over_runs import (
    RateOverRuns,
    ValueResult,
    against_baseline_text,
    fastest_text,
    rate_over,
)
from workbench.formatting import format_setting
from workbench.gui.series import GIB
from workbench.history.metrics import format_metric

REDRAW_DELAY_MS = 100
BAR_COLOUR = "#1f77b4"
BEST_COLOUR = "#0b4f8a"
RUNNING_COLOUR = "#9ecae1"
FAILED_COLOUR = "#c62828"
ERROR_BAR_COLOUR = "#303030"
ERROR_BARS_COVER = ("Error bars: a value run several times, the interval of its runs' median (run-to-run); a value run "
                    "once, that run's own interval, within it (its windows): the next run may differ by more.")
CHARTS = (  # key → title, unit
    ("images_per_sec", "Img/s (steady state)", ""),
    ("data_wait", "Time waiting for data", "%"),
    ("peak_memory", "Peak allocated (torch)", "GiB"),
    ("test_accuracy", "Test accuracy", "%"),
)
PERCENT_CHARTS = ("data_wait", "test_accuracy")
RSS_TITLE = "Peak RSS (process)"  # the memory chart's title when no member has torch's CUDA figures
LABEL_INSIDE_ABOVE = 80.0  # % a bar fills before its figure is written inside it
LABEL_GAP = "\u2002"  # an en space between a bar's end (or the axis) and its figure
COLUMNS_AFTER_VALUES = ("Run", "Status", "Img/s", "Data wait", "Peak alloc", "Peak reserved", "Peak RSS", "Test acc")

pg.setConfigOptions(background="w", foreground="#303030", antialias=True)  # as the main window's plots


@dataclass
class _Member:
    label: str
    values: tuple
    run_id: Optional[int] = None
    status: str = "running"
    live_images_per_sec: Optional[float] = None
    windows: int = 0
    ended: Optional[MemberEnded] = None


@dataclass
class _Value:
    """One value (or combination) of the sweep: a row of every chart, over its repeats."""

    label: str
    values: tuple
    members: list[_Member]

    @property
    def finished(self) -> list[MemberEnded]:
        return [m.ended for m in self.members if m.ended is not None and m.ended.status == "finished"]

    @property
    def failed(self) -> bool:
        return all(member.status == "failed" for member in self.members)

    @property
    def running(self) -> Optional[_Member]:
        return next((member for member in self.members if member.ended is None), None)

    def rate(self) -> RateOverRuns:
        return rate_over([member.summary for member in self.finished])


class SweepView(QWidget):
    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("sweepView")
        self._members: list[_Member] = []
        self._values: list[_Value] = []
        self._fields: tuple[str, ...] = ()
        self._planned: Optional[int] = None
        self._ended: Optional[SequenceEnded] = None
        self._name = ""
        self._kind = ""
        self._started = False  # a SequenceStarted came, and its SequenceEnded not yet

        self.title = QLabel("No sweep yet")
        self.title.setObjectName("sweepTitle")
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.status = QLabel("")
        self.status.setObjectName("sweepStatus")
        self.status.setWordWrap(True)

        self.plots: dict[str, pg.PlotWidget] = {}
        charts = QWidget()
        row = QHBoxLayout(charts)
        row.setContentsMargins(0, 0, 0, 0)
        for key, title, unit in CHARTS:
            plot = pg.PlotWidget()
            plot.setObjectName(f"sweep_{key}_plot")
            plot.setTitle(title, size="10pt")
            if key == "images_per_sec":  # what a bar is, and what its error bar covers
                plot.setToolTip(f"{IMAGES_PER_SEC_MEANS}.\n{ERROR_BARS_COVER}")
            plot.setMenuEnabled(False)
            plot.setMouseEnabled(x=False, y=False)
            plot.hideButtons()
            plot.showGrid(x=True, alpha=0.2)
            plot.invertY(True)  # the first member on top, as in the table
            if unit:
                plot.setLabel("bottom", units=unit)
            plot.getAxis("left").setStyle(tickLength=0)  # a tick mark beside a short bar's "1 %" reads "-1 %"
            if key != CHARTS[0][0]:
                plot.getAxis("left").setStyle(showValues=False)  # the rows are the first chart's
                plot.getAxis("left").setWidth(4)
            row.addWidget(plot, stretch=2 if key == "images_per_sec" else 1)
            self.plots[key] = plot
        self.plots["test_accuracy"].hide()  # shown once a member has run whole epochs

        self.table = QTableWidget(0, 0)
        self.table.setObjectName("sweepTable")
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)

        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(charts)
        splitter.addWidget(self.table)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.status)
        layout.addWidget(splitter, stretch=1)

        self._redraw_timer = QTimer(self)
        self._redraw_timer.setSingleShot(True)
        self._redraw_timer.setInterval(REDRAW_DELAY_MS)
        self._redraw_timer.timeout.connect(self.redraw)

    # -- feeding -----------------------------------------------------------------------------------
    @functools.singledispatchmethod
    def handle(self, event: object) -> None:
        """Take each event of a sequence, in order (engine events of members included), by its type."""
        raise TypeError(f"the sequence view has no handler for {type(event).__name__} events")

    def _drawn_elsewhere(self, event: object) -> None:
        """The Live tab draws each member's run; a member's figures come with MemberEnded."""

    for _kind in (*typing.get_args(Event), RunRecorded, RecordingFailed, TrialResult, BestSoFar, BatchTrial):
        handle.register(_kind, _drawn_elsewhere)  # the handlers below take some of these back
    del _kind

    @handle.register(SequenceStarted)
    def _(self, event: SequenceStarted) -> None:
        self._begin(event)
        self._schedule()

    @handle.register(MemberStarted)
    def _(self, event: MemberStarted) -> None:
        if self._fields:  # a sweep: the values under the columns that name their settings
            label = ", ".join(format_setting(value) for _, value in event.values) or f"#{event.index + 1}"
        else:  # a verification or a search: each side named by its settings
            label = values_label(event.values) or f"#{event.index + 1}"
        member = _Member(label, event.values, event.run_id)
        self._members.append(member)
        value = next((value for value in self._values if value.values == event.values), None)
        if value is None:
            self._values.append(_Value(label, event.values, [member]))
        else:
            value.members.append(member)
        self._add_row(member)
        self._schedule()

    @handle.register(StepStats)
    def _(self, event: StepStats) -> None:
        if self._members and self._members[-1].ended is None:
            member = self._members[-1]
            member.windows += 1
            # The first window is the warm-up, as in the run's summary; a window of 0 s on the clock read no rate.
            if member.windows > 1 and event.images_per_sec is not None:
                member.live_images_per_sec = event.images_per_sec
            self._schedule()

    @handle.register(MemberEnded)
    def _(self, event: MemberEnded) -> None:
        if self._members:
            member = self._members[-1]
            member.ended, member.status, member.run_id = event, event.status, event.run_id
            self._fill_row(len(self._members) - 1, member)
            self._schedule()

    @handle.register(SequenceEnded)
    def _(self, event: SequenceEnded) -> None:
        if not self._started:  # refused before it started: the last sequence's title, bars and table go
            self._clear(event.kind, f"{SEQUENCE_NAMES.get(event.kind, event.kind)}: nothing ran")
        self._started = False
        self._ended = event
        if event.problems:
            self.status.setText("Nothing ran: " + "; ".join(event.problems))
        self._schedule()

    def _begin(self, event: SequenceStarted) -> None:
        where = f" (sequence {event.sequence_id})" if event.sequence_id is not None else ""
        self._clear(event.kind, event.name + where, event.fields, event.planned_members, event.name)
        self._started = True

    def _clear(self, kind: str, title: str, fields: tuple[str, ...] = (), planned: Optional[int] = None,
               name: str = "") -> None:
        self._members, self._values, self._ended = [], [], None
        self._fields, self._planned, self._name, self._kind = fields, planned, name, kind
        self.title.setText(title)
        headers = [*self._fields, *COLUMNS_AFTER_VALUES] if self._fields else ["Member", *COLUMNS_AFTER_VALUES]
        self.table.clear()
        self.table.setRowCount(0)
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)

    # -- table -------------------------------------------------------------------------------------
    def _add_row(self, member: _Member) -> None:
        row = self.table.rowCount()
        self.table.insertRow(row)
        values = [format_setting(value) for _, value in member.values] if self._fields else [member.label]
        for column, text in enumerate(values):
            self.table.setItem(row, column, QTableWidgetItem(text))
        self._fill_row(row, member)

    def _fill_row(self, row: int, member: _Member) -> None:
        first = len(self._fields) if self._fields else 1
        summary = member.ended.summary if member.ended else None
        status = member.status + (f" ({member.ended.kind})" if member.ended and member.ended.kind else "")
        cells = [
            f"#{member.run_id}" if member.run_id is not None else "",
            status,
            format_metric("rate", summary.images_per_sec if summary else member.live_images_per_sec),
            format_metric("fraction", summary.data_wait_fraction if summary else None),
            format_metric("bytes", summary.peak_allocated_bytes if summary else None),
            format_metric("bytes", summary.peak_reserved_bytes if summary else None),
            format_metric("bytes", summary.peak_process_rss_bytes if summary else None),
            format_metric("fraction", summary.test_accuracy if summary else None),
        ]
        for offset, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if offset >= 2:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if offset == 1 and member.status == "failed":
                item.setForeground(QBrush(QColor(FAILED_COLOUR)))
                if member.ended and member.ended.reason:
                    item.setToolTip(member.ended.reason)
            self.table.setItem(row, first + offset, item)

    # -- charts ------------------------------------------------------------------------------------
    def _schedule(self) -> None:
        if not self._redraw_timer.isActive():
            self._redraw_timer.start()

    def bar_heights(self, key: str) -> list[Optional[float]]:
        """Each value's figure on chart ``key`` (None: no bar), as drawn: over its finished runs, the median
        (memory: the highest); images/sec of a value with none finished yet, its running member's live rate."""
        heights: list[Optional[float]] = []
        rss = self._memory_is_rss()
        for value in self._values:
            finished = value.finished
            if value.failed:
                heights.append(None)
            elif key == "images_per_sec":
                running = value.running
                live = running.live_images_per_sec if running is not None else None
                heights.append(value.rate().images_per_sec if finished else live)
            elif key == "data_wait":
                heights.append(median_of_known([m.summary.data_wait_fraction * 100 for m in finished
                                        if m.summary.data_wait_fraction is not None]))
            elif key == "peak_memory":
                peaks = [m.summary.peak_process_rss_bytes if rss else m.summary.peak_allocated_bytes for m in finished]
                known = [peak for peak in peaks if peak is not None]
                heights.append(max(known) / GIB if known else None)
            else:
                heights.append(median_of_known([m.summary.test_accuracy * 100 for m in finished
                                        if m.whole_epochs and m.summary.test_accuracy is not None]))
        return heights

    def error_bars(self) -> list[Optional[tuple[float, float]]]:
        """Each value's images/sec interval (low, high) as drawn: of the median over its repeats, or one run's
        own from its steady windows; None where there is none."""
        bars: list[Optional[tuple[float, float]]] = []
        for value in self._values:
            rate = value.rate()
            low, high = rate.images_per_sec_low, rate.images_per_sec_high
            bars.append((low, high) if low is not None and high is not None and not value.failed else None)
        return bars

    def value_results(self) -> list[ValueResult]:
        """The values with a finished run, as experiments/rate_over_runs.py reads them (for the status line)."""
        return [ValueResult(value.values, tuple(value.finished), value.rate()) for value in self._values
                if value.finished]

    def _memory_is_rss(self) -> bool:
        """No member has torch's CUDA figures (a CPU sweep): the memory chart shows the process's RSS."""
        summaries = [member.ended.summary for member in self._members if member.ended is not None]
        return bool(summaries) and all(summary.peak_allocated_bytes is None for summary in summaries)

    def redraw(self) -> None:
        self._redraw_timer.stop()
        memory_title = RSS_TITLE if self._memory_is_rss() else dict((k, t) for k, t, _ in CHARTS)["peak_memory"]
        self.plots["peak_memory"].setTitle(memory_title, size="10pt")
        ticks = [[(index, value.label) for index, value in enumerate(self._values)]]
        rates = [h for h in self.bar_heights("images_per_sec") if h is not None]
        best = max(rates) if rates else None
        whole_epochs = any(m.ended is not None and m.ended.whole_epochs for m in self._members)
        bars = self.error_bars()
        self.plots["test_accuracy"].setVisible(whole_epochs)
        for key, _, _ in CHARTS:
            plot = self.plots[key]
            plot.clear()
            plot.getAxis("left").setTicks(ticks)
            heights = self.bar_heights(key)
            rows = [i for i, h in enumerate(heights) if h is not None]
            percent = key in PERCENT_CHARTS
            if percent:
                top = 100.0
            else:
                top = max([h for h in heights if h is not None], default=1.0) or 1.0
            whiskers = [i for i in rows if key == "images_per_sec" and bars[i] is not None]
            if key == "images_per_sec":
                top = max([top, *(bars[i][1] for i in whiskers)])  # type: ignore[index]
            if rows:
                brushes = [self._brush(key, self._values[i], heights[i], best) for i in rows]
                plot.addItem(pg.BarGraphItem(x0=0, y=rows, width=[heights[i] for i in rows], height=0.6,
                                             brushes=brushes, pen=pg.mkPen(None)))
                if whiskers:
                    centre = np.array([heights[i] for i in whiskers], dtype=float)
                    plot.addItem(pg.ErrorBarItem(
                        x=centre, y=np.array(whiskers, dtype=float),
                        left=centre - np.array([bars[i][0] for i in whiskers]),  # type: ignore[index]
                        right=np.array([bars[i][1] for i in whiskers]) - centre,  # type: ignore[index]
                        beam=0.3, pen=pg.mkPen(ERROR_BAR_COLOUR, width=1.5)))
                for i in rows:
                    end = max(heights[i], bars[i][1]) if i in whiskers else heights[i]  # type: ignore[index]
                    plot.addItem(self._label(key, heights[i], i, inside=percent and heights[i] > LABEL_INSIDE_ABOVE,
                                             at=end))
            for index, value in enumerate(self._values):
                if value.failed:
                    text = pg.TextItem(LABEL_GAP + "failed", color=FAILED_COLOUR, anchor=(0.0, 0.5))
                    text.setPos(0, index)
                    plot.addItem(text)
            if key == "peak_memory" and not rows and self._members and self._members[0].ended is not None:
                note = pg.TextItem("memory could\nnot be read", color="#707070", anchor=(0.5, 0.5))
                note.setPos(0.5, (len(self._values) - 1) / 2)
                plot.addItem(note)
            plot.setYRange(-0.6, max(0, len(self._values) - 1) + 0.6, padding=0)
            # A percent chart is 0–100 (a long bar's figure sits inside it); others leave room past the longest bar.
            plot.setXRange(0, top if percent else top * 1.3, padding=0)
        self.status.setText(self._status_text())

    def _brush(self, key: str, value: _Value, height: float, best: Optional[float]) -> QBrush:
        if not value.finished:
            return pg.mkBrush(RUNNING_COLOUR)
        if key == "images_per_sec" and best is not None and height == best and len(self._values) > 1:
            return pg.mkBrush(BEST_COLOUR)
        return pg.mkBrush(BAR_COLOUR)

    def _label(self, key: str, height: float, row: int, inside: bool = False,
               at: Optional[float] = None) -> pg.TextItem:
        """The bar's figure, just past ``at`` (its end, or its error bar's end), or inside a long percent bar."""
        text = {
            "images_per_sec": f"{height:,.0f}",
            "data_wait": f"{height:.0f} %",
            "peak_memory": f"{height:.2f}",
            "test_accuracy": f"{height:.1f} %",
        }[key]
        if inside:  # right-aligned inside the bar's end, light on the bar
            label = pg.TextItem(text + LABEL_GAP, color="#ffffff", anchor=(1.0, 0.5))
        else:
            label = pg.TextItem(LABEL_GAP + text, color="#303030", anchor=(0.0, 0.5))
        label.setPos(height if inside or at is None else at, row)
        return label

    def _status_text(self) -> str:
        done = sum(member.ended is not None for member in self._members)
        planned = f" of {self._planned}" if self._planned else ""
        failed = sum(member.status == "failed" for member in self._members)
        text = f"{done}{planned} members done" + (f", {failed} failed" if failed else "")
        if self._ended is not None:
            if self._ended.problems:
                return "Nothing ran: " + "; ".join(self._ended.problems)
            text = f"Sweep {self._ended.status}: " + text + (f" ({self._ended.reason})" if self._ended.reason else "")
        elif self._members and self._members[-1].ended is None:
            text += f"; running {self._members[-1].label}"
        labels = {value.values: value.label for value in self._values}
        if self._kind == "verify" and self._values:  # every change against the baseline, in the findings' direction
            fastest = against_baseline_text(self.value_results(), self._values[0].values,
                                            lambda result: labels[result.values])
        else:
            fastest = fastest_text(self.value_results(), lambda result: labels[result.values])
        return text + (f". {fastest}" if fastest else "")

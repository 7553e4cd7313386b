"""The search for faster settings as it goes: every trial as it lands, the best settings so far and their
speed-up over the start, and "Apply best settings". A view only, fed the sequence's events in order."""

from __future__ import annotations

import functools
import typing
from typing import Optional

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.controller.messages import SEQUENCE_NAMES, sequence_ended_text
from workbench.engine.events import Event
from workbench.experiments.events import (
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
from workbench.formatting import speedup_text
from workbench.history.metrics import format_metric

# Each row's figures come from its own comparison: change img/s ÷ best img/s is the "vs. best" ratio.
COLUMNS = ("Trial", "Setting", "Change", "Best img/s", "Change img/s", "Vs. best (90 % interval)", "Runs", "Outcome")
OUTCOME_COLOURS = {"kept": "#2e7d32", "failed": "#c62828", "slower": "#6b6b6b", "within_noise": "#8a6d00"}


class TuneView(QWidget):
    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("tuneView")
        self._started = False  # a SequenceStarted came, and its SequenceEnded not yet
        self.title = QLabel("No search yet")
        self.title.setObjectName("tuneTitle")
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.best_label = QLabel("")
        self.best_label.setObjectName("tuneBest")
        self.best_label.setWordWrap(True)
        self.best_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.apply_button = QPushButton("Apply best settings")
        self.apply_button.setObjectName("applyBestButton")
        self.apply_button.setToolTip("Put the fastest settings found into the form")
        self.apply_button.setEnabled(False)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("tuneTable")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        best = QHBoxLayout()
        best.addWidget(self.best_label, 1)
        best.addWidget(self.apply_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addLayout(best)
        layout.addWidget(self.table, 1)

    @functools.singledispatchmethod
    def handle(self, event: object) -> None:
        """Take each event of a search, in order (engine events of its runs included), by its type."""
        raise TypeError(f"the search view has no handler for {type(event).__name__} events")

    def _drawn_elsewhere(self, event: object) -> None:
        """The Live tab draws each run; a trial's figures come with its TrialResult."""

    for _kind in (*typing.get_args(Event), RunRecorded, RecordingFailed, MemberStarted, MemberEnded):
        handle.register(_kind, _drawn_elsewhere)  # the handlers below take some of these back
    del _kind

    @handle.register(SequenceStarted)
    def _(self, event: SequenceStarted) -> None:
        self.title.setText(event.name + (f" (sequence {event.sequence_id})" if event.sequence_id is not None else ""))
        self.table.setRowCount(0)
        self.best_label.setText("Measuring the start settings against the first change…")
        self.apply_button.setEnabled(False)
        self._started = True

    @handle.register(TrialResult)
    def _(self, event: TrialResult) -> None:
        self._add_trial(event)

    @handle.register(BestSoFar)
    def _(self, event: BestSoFar) -> None:
        self.best_label.setText(f"Best so far: {values_label(tuple(event.changes.items())) or 'the start settings'}"
                                f" at {event.images_per_sec:,.0f} images/s, {event.speedup:.2f}× the start")
        self.apply_button.setEnabled(bool(event.changes))

    @handle.register(SequenceEnded)
    def _(self, event: SequenceEnded) -> None:
        if not self._started:  # refused before it started: the last search's title and trials go
            self.title.setText(f"{SEQUENCE_NAMES.get(event.kind, event.kind)}: nothing ran")
            self.table.setRowCount(0)
        self._started = False
        self.best_label.setText(sequence_ended_text(event))  # the words the status line says
        changes = getattr(event.result, "best_changes", None)
        self.apply_button.setEnabled(bool(changes) and not event.problems)

    def _add_trial(self, trial: TrialResult) -> None:
        row = self.table.rowCount()
        self.table.insertRow(row)
        cells = (
            str(trial.trial),
            trial.knob,
            values_label(tuple(trial.changes.items())),
            format_metric("rate", trial.baseline_images_per_sec),
            format_metric("rate", trial.images_per_sec),
            speedup_text(trial.speedup, trial.speedup_low, trial.speedup_high),
            ", ".join(f"#{run_id}" for run_id in trial.run_ids if run_id is not None),
            trial.outcome.replace("_", " "),
        )
        best_runs = ", ".join(f"#{run_id}" for run_id in trial.baseline_run_ids if run_id is not None)
        for column, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if column in (0, 3, 4, 5):
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if column == 3 and trial.comparison is not None:
                item.setToolTip(f"the best so far's median in this comparison, runs {best_runs}")
            if column == 5 and trial.comparison is not None:
                item.setToolTip(trial.comparison.describe() + "; the best so far's runs: " + best_runs)
            if column == 7:
                item.setForeground(QBrush(QColor(OUTCOME_COLOURS.get(trial.outcome, "#303030"))))
                if trial.reason:
                    item.setToolTip(trial.reason)
            self.table.setItem(row, column, item)
        self.table.scrollToBottom()

    def trial_rows(self) -> list[tuple[str, ...]]:
        return [tuple(self.table.item(row, column).text() for column in range(len(COLUMNS)))
                for row in range(self.table.rowCount())]

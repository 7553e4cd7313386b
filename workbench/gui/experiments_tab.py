"""The "Experiments" tab: the actions that start a sequence of runs (a sweep, the search for faster
settings, the largest batch that fits), each with why it is unavailable said beside it, and the view of
the sequence that is running or ran last (the sweep view, or the search's trials)."""

from __future__ import annotations

from typing import Any, Optional

from PySide6.QtWidgets import QGridLayout, QLabel, QPushButton, QStackedWidget, QVBoxLayout, QWidget

from workbench.controller.controls import Action
from workbench.experiments.events import SequenceEnded, SequenceStarted
from workbench.gui.run_bar import MUTED_TEXT, apply_action
from workbench.gui.sweep_view import SweepView
from workbench.gui.tune_view import TuneView


class ExperimentsTab(QWidget):
    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("experimentsTab")
        self.sweep_button = QPushButton("Sweep…")
        self.sweep_button.setObjectName("sweepButton")
        self.tune_button = QPushButton("Find faster settings…")
        self.tune_button.setObjectName("tuneButton")
        self.max_batch_button = QPushButton("Largest batch…")
        self.max_batch_button.setObjectName("maxBatchButton")
        self.sweep_note, self.tune_note, self.max_batch_note = QLabel(), QLabel(), QLabel()
        self.max_batch_note.setObjectName("maxBatchNote")
        actions = QGridLayout()
        actions.setHorizontalSpacing(6)
        actions.setVerticalSpacing(0)
        for column, (button, note) in enumerate(((self.sweep_button, self.sweep_note),
                                                 (self.tune_button, self.tune_note),
                                                 (self.max_batch_button, self.max_batch_note))):
            note.setStyleSheet(MUTED_TEXT)
            note.setWordWrap(True)
            actions.addWidget(button, 0, column)
            actions.addWidget(note, 1, column)
            actions.setColumnStretch(column, 1)

        self.sweep_view = SweepView()
        self.tune_view = TuneView()
        self.views = QStackedWidget()
        self.views.addWidget(self.sweep_view)
        self.views.addWidget(self.tune_view)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(actions)
        layout.addWidget(self.views, 1)

    def show_actions(self, sweep: Action, tune: Action, max_batch: Action) -> None:
        apply_action(self.sweep_button, sweep, self.sweep_note)
        apply_action(self.tune_button, tune, self.tune_note)
        apply_action(self.max_batch_button, max_batch, self.max_batch_note)

    def handle(self, event: Any) -> None:
        """A sequence's events, in order (its members' step windows included)."""
        # A sequence refused before it started sends only its end: shown in the view of its kind all the same.
        if isinstance(event, (SequenceStarted, SequenceEnded)):
            self.views.setCurrentWidget(self.tune_view if event.kind == "tune" else self.sweep_view)
        self.views.currentWidget().handle(event)

"""The "GPU time" tab: the breakdown of each profiler sample and the run's findings, with the actions that
feed them: "Sample now" (while a run trains) and "Measure ceiling" (between runs)."""

from __future__ import annotations

from typing import Optional

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QScrollArea, QVBoxLayout, QWidget

from workbench.controller.controls import Action
from workbench.gui.breakdown_view import BreakdownView
from workbench.gui.run_bar import MUTED_TEXT, apply_action


class GpuTimeTab(QWidget):
    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("gpuTimeTab")
        self.sample_button = QPushButton("Sample now")
        self.sample_button.setObjectName("sampleNowButton")
        self.sample_note = QLabel()
        self.sample_note.setObjectName("sampleNowNote")
        self.ceiling_button = QPushButton("Measure ceiling")
        self.ceiling_button.setObjectName("measureCeilingButton")
        self.ceiling_note = QLabel()
        self.ceiling_note.setObjectName("measureCeilingNote")
        self.ceiling_label = QLabel("No ceiling measured in this window: “Measure ceiling” times the model alone "
                                    "on batches already on the device.")
        self.ceiling_label.setObjectName("ceilingLabel")
        self.ceiling_label.setWordWrap(True)
        self.ceiling_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        for note in (self.sample_note, self.ceiling_note):
            note.setStyleSheet(MUTED_TEXT)

        actions = QHBoxLayout()
        actions.addWidget(self.sample_button)
        actions.addWidget(self.sample_note)
        actions.addSpacing(16)
        actions.addWidget(self.ceiling_button)
        actions.addWidget(self.ceiling_note)
        actions.addStretch(1)

        self.breakdown = BreakdownView()
        scroll = QScrollArea()
        scroll.setObjectName("breakdownScroll")
        scroll.setWidget(self.breakdown)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(actions)
        layout.addWidget(self.ceiling_label)
        layout.addWidget(scroll, 1)

    def show_actions(self, sample_now: Action, ceiling: Action) -> None:
        apply_action(self.sample_button, sample_now, self.sample_note)
        apply_action(self.ceiling_button, ceiling, self.ceiling_note)

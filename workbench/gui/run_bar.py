"""The controls under the window: Start, Stop and the progress bar; and the release control that sits
with the device. Views only: the controller (workbench.controller) says what is enabled and why."""

from __future__ import annotations

from typing import Optional

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from workbench.controller.controls import Action
from workbench.controller.view import Progress


def apply_action(button: QPushButton, action: Action, note: Optional[QLabel] = None) -> None:
    """Enable or disable a control as the controller says; the reason shows beside it and in its tooltip."""
    button.setEnabled(action.enabled)
    button.setToolTip(action.tooltip)
    if note is not None:
        note.setText(action.note)
        note.setToolTip(action.tooltip if action.note else "")


def set_style_state(widget: QWidget, name: str, value: str) -> None:
    """Set a property the stylesheet selects on, and re-apply the style (only when it changed)."""
    if widget.property(name) != value:
        widget.setProperty(name, value)
        widget.style().unpolish(widget)
        widget.style().polish(widget)


# Small notes beside controls and under plots: the palette's muted text, readable in a light or a dark palette alike
# (a fixed grey was invisible on a dark window).
MUTED_TEXT = "color: palette(placeholder-text); font-size: 9pt;"
# The window's keys for Start and Stop: bound in main_window.py, and said beside the buttons (a tooltip alone hid them).
START_KEYS = "Ctrl+Return"
STOP_KEYS = "Ctrl+."


class RunBar(QWidget):
    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.start_button = QPushButton("Start")
        self.start_button.setObjectName("startButton")
        self.start_button.setDefault(True)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stopButton")
        self.stop_button.setToolTip(f"Stop after the current step ({STOP_KEYS}): the run is kept as stopped")
        self.progress = QProgressBar()
        self.progress.setObjectName("progressBar")
        self.progress.setTextVisible(True)
        self.progress.setFormat("No run yet")
        self.progress.setValue(0)
        self.progress.setToolTip("Epoch, step, estimated time left and the latest images/sec of the current run")
        self.progress.setProperty("status", "idle")
        native = QKeySequence.SequenceFormat.NativeText
        self.keys_hint = QLabel(f"{QKeySequence(START_KEYS).toString(native)} starts · "
                                f"{QKeySequence(STOP_KEYS).toString(native)} stops")
        self.keys_hint.setObjectName("keysHint")
        self.keys_hint.setStyleSheet(MUTED_TEXT)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.start_button)
        layout.addWidget(self.stop_button)
        layout.addWidget(self.progress, 1)
        layout.addWidget(self.keys_hint)

    def show_progress(self, progress: Progress) -> None:
        bar = self.progress
        if progress.maximum == 0:
            bar.setRange(0, 0)  # busy until the run knows its length
        else:
            bar.setRange(0, progress.maximum)
            bar.setValue(progress.value)  # a value below the range would hide the text: 0 is the least
        bar.setFormat(progress.text)
        set_style_state(bar, "status", progress.status)  # the stylesheet colours the fill by it


class ReleaseBox(QWidget):
    """"Release cached memory" and, under it, why it is disabled or what it last did."""

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("releaseBox")
        self.button = QPushButton("Release cached memory")
        self.button.setObjectName("releaseMemoryButton")
        self.result = QLabel()
        self.result.setObjectName("releaseResult")
        self.result.setWordWrap(True)
        self.result.setMaximumWidth(190)
        self.result.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.button)
        layout.addWidget(self.result)
        layout.addStretch(1)

    def show_action(self, action: Action) -> None:
        self.button.setEnabled(action.enabled)
        self.button.setToolTip(action.tooltip)
        self.result.setText(action.note)
        self.result.setToolTip(action.tooltip if not action.enabled else "")

"""The Live tab: one line of news about the run above its plots, and the failed run's traceback on request."""

from __future__ import annotations

from typing import Optional

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from workbench.engine.events import IMAGES_PER_SEC_MEANS, WITHIN_ONE_RUN
from workbench.gui.plots import PlotsPanel
from workbench.gui.run_bar import set_style_state
from workbench.gui.text_dialog import TextDialog

QWIDGETSIZE_MAX = 16_777_215


class LiveTab(QWidget):
    def __init__(self, plots: PlotsPanel, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.plots = plots
        # What is running (and the engine's notes), then the outcome. Its height stays fixed while a run goes:
        # a relayout would repaint every plot at once.
        self.run_message = QLabel("Press Start to train with these settings; the plots fill in as the run goes.")
        self.run_message.setObjectName("runMessage")
        self.run_message.setProperty("status", "idle")
        self.run_message.setWordWrap(True)
        self.run_message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._message_height = 2 * self.run_message.fontMetrics().lineSpacing() + 14
        self.run_message.setMinimumHeight(self._message_height)
        self.details_button = QPushButton("Traceback…")
        self.details_button.setObjectName("tracebackButton")
        self.details_button.setToolTip("Read and copy the failed run's traceback (also kept in the history "
                                       "and in failures.log in the workbench home)")
        self.details_button.setVisible(False)
        self.details_button.clicked.connect(self.show_details)
        self._details: Optional[str] = None
        message_row = QHBoxLayout()
        message_row.addWidget(self.run_message, 1)
        message_row.addWidget(self.details_button, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.addLayout(message_row)
        layout.addWidget(plots, 1)

    def show_message(self, status: str, text: str, details: Optional[str] = None) -> None:
        set_style_state(self.run_message, "status", status)  # the stylesheet colours it by status
        self.run_message.setText(text)
        # A run's outcome gives its img/s: what that figure is, and what its interval covers, one hover away.
        outcome = status in ("finished", "stopped")
        self.run_message.setToolTip(text + (f"\n\n{IMAGES_PER_SEC_MEANS}.\nIts interval is {WITHIN_ONE_RUN}."
                                             if outcome else ""))
        self._details = details
        self.details_button.setVisible(bool(details))

    def hold_message_height(self) -> None:
        """While a run goes: the line keeps its height whatever it says."""
        self.run_message.setFixedHeight(self._message_height)

    def free_message_height(self) -> None:
        """After a run: a long failure reason may wrap."""
        self.run_message.setMaximumHeight(QWIDGETSIZE_MAX)
        self.run_message.setMinimumHeight(self._message_height)

    def show_details(self) -> None:
        if self._details:
            TextDialog("Traceback", "Where the run failed (select, or Copy):", self._details, self).exec()

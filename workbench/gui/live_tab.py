"""The Live tab: one line of news about the run above its plots, and the failed run's traceback on request."""

from __future__ import annotations

from typing import Any, Optional

from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from workbench.engine.run_summary import IMAGES_PER_SEC_MEANS, WITHIN_ONE_RUN
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
        self._text = ""  # the message whole (the label may show it cut to its two lines)
        message_row = QHBoxLayout()
        message_row.addWidget(self.run_message, 1)
        message_row.addWidget(self.details_button, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.addLayout(message_row)
        layout.addWidget(plots, 1)

    def show_message(self, status: str, text: str, details: Optional[str] = None) -> None:
        set_style_state(self.run_message, "status", status)  # the stylesheet colours it by status
        self._text = text
        self.run_message.setText(self._fitted(text))
        # A run's outcome gives its img/s: what that figure is, and what its interval covers, one hover away.
        outcome = status in ("finished", "stopped")
        self.run_message.setToolTip(text + (f"\n\n{IMAGES_PER_SEC_MEANS}.\nIts interval is {WITHIN_ONE_RUN}."
                                             if outcome else ""))
        self._details = details
        self.details_button.setVisible(bool(details))

    def hold_message_height(self) -> None:
        """While a run goes: the line keeps its height whatever it says."""
        self.run_message.setFixedHeight(self._message_height)
        self.run_message.setText(self._fitted(self._text))

    def _fitted(self, text: str) -> str:
        """While the height is held: the text cut to its two lines at a whole note (" · ") or word, saying how
        much more the tooltip holds; a label of fixed height cut it mid-sentence. Otherwise the text whole."""
        if self.run_message.maximumHeight() != self._message_height:
            return text
        margins = self.run_message.contentsMargins()
        width = max(80, self.run_message.width() - margins.left() - margins.right() - 16)  # 16: the style's padding
        metrics = self.run_message.fontMetrics()

        def fits(candidate: str) -> bool:
            bounds = metrics.boundingRect(QRect(0, 0, width, 10_000), int(Qt.TextFlag.TextWordWrap), candidate)
            return bounds.height() <= 2 * metrics.lineSpacing()

        if fits(text):
            return text
        head, said, notes_text = text.partition(" Notes: ")  # the controller's "Running …. Notes: a · b · c"
        notes = notes_text.split(" · ") if said else []
        for kept in range(len(notes) - 1, -1, -1):
            candidate = (f"{head} Notes: " + " · ".join(notes[:kept]) + f" · (+{len(notes) - kept} more: hover)"
                         if kept else f"{head} Notes: {len(notes)} (hover)")
            if fits(candidate):
                return candidate
        words = text.split(" ")
        while len(words) > 1 and not fits(" ".join(words) + "… (hover)"):
            words.pop()
        return " ".join(words) + "… (hover)"

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        if self._text:
            self.run_message.setText(self._fitted(self._text))

    def free_message_height(self) -> None:
        """After a run: a long failure reason may wrap."""
        self.run_message.setMaximumHeight(QWIDGETSIZE_MAX)
        self.run_message.setMinimumHeight(self._message_height)
        self.run_message.setText(self._text)  # whole again: it was cut to two lines while the height was held

    def show_details(self) -> None:
        if self._details:
            TextDialog("Traceback", "Where the run failed (select, or Copy):", self._details, self).exec()

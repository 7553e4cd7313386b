"""The Runs tab: a placeholder until the run-history view is hosted in it."""

from __future__ import annotations

from typing import Callable, Optional

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from workbench.config import RunConfig


class RunsTab(QWidget):
    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("runsTab")
        self.view: Optional[QWidget] = None
        placeholder = QLabel("The run history appears here.")
        placeholder.setObjectName("runsPlaceholder")
        placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        QVBoxLayout(self).addWidget(placeholder)

    def host(self, view: QWidget, draw_overlays: Callable[[list], None],
             load_settings: Callable[[RunConfig], None]) -> None:
        """Show ``view`` instead of what the tab held.

        If the view offers them, its ``overlayRequested([(run id, label, series), …])`` draws the selected runs on
        the plots, its ``loadSettingsRequested(RunConfig)`` fills the form, and its ``refresh()`` is called
        whenever a run's record appears or changes (``refresh``)."""
        layout = self.layout()
        while layout.count():
            item = layout.takeAt(0)
            if item.widget() is not None:
                item.widget().deleteLater()
        layout.addWidget(view)
        self.view = view
        if hasattr(view, "overlayRequested"):
            view.overlayRequested.connect(draw_overlays)
        if hasattr(view, "loadSettingsRequested"):
            view.loadSettingsRequested.connect(load_settings)

    def refresh(self) -> None:
        refresh = getattr(self.view, "refresh", None)
        if refresh is not None:
            refresh()

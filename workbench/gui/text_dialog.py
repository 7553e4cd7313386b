"""A long text to read and copy (a failed run's traceback): read-only, monospaced, with a Copy button."""

from __future__ import annotations

from typing import Optional

from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout, QWidget


class TextDialog(QDialog):
    def __init__(self, title: str, intro: str, text: str, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("textDialog")
        self.setWindowTitle(title)
        self.resize(760, 460)
        self.text = QPlainTextEdit(text)
        self.text.setObjectName("detailsText")
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = buttons.addButton("Copy", QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.setObjectName("copyDetailsButton")
        self.copy_button.clicked.connect(self.copy)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        label = QLabel(intro)
        label.setWordWrap(True)
        layout.addWidget(label)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text.toPlainText())

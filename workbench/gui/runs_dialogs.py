"""The questions the Runs tab asks: confirm a delete, a name or note, where to save a CSV.

Plain functions over Qt's standard dialogs; RunsView calls them through small methods that tests replace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QWidget


def confirm(parent: QWidget, title: str, text: str) -> bool:
    """Yes or Cancel, Cancel by default (what a slip of the Enter key should pick)."""
    answer = QMessageBox.question(parent, title, text,
                                  QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
                                  QMessageBox.StandardButton.Cancel)
    return answer == QMessageBox.StandardButton.Yes


def ask_text(parent: QWidget, title: str, label: str, text: str, multiline: bool = False) -> Optional[str]:
    """The text entered, or None when cancelled."""
    if multiline:
        value, ok = QInputDialog.getMultiLineText(parent, title, label, text)
    else:
        value, ok = QInputDialog.getText(parent, title, label, text=text)
    return value if ok else None


def ask_save_path(parent: QWidget, title: str, folder: Path, default_name: str) -> Optional[str]:
    """A CSV path to write, or None when cancelled."""
    path, _ = QFileDialog.getSaveFileName(parent, title, str(folder / default_name), "CSV files (*.csv);;All files (*)")
    return path or None

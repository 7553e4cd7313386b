"""Issue 30 §8: with a dark palette the device panel's title was white on its light fill, the notes under the plots
dark grey on the dark window, and Start looked the same enabled or disabled. Read off the rendered pixels."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QWidget

from workbench.gui.app import STYLESHEET

DARK = {QPalette.ColorRole.Window: "#2b2b2b", QPalette.ColorRole.WindowText: "#e6e6e6",
        QPalette.ColorRole.Base: "#1e1e1e", QPalette.ColorRole.Text: "#e6e6e6", QPalette.ColorRole.Button: "#3a3a3a",
        QPalette.ColorRole.ButtonText: "#e6e6e6", QPalette.ColorRole.PlaceholderText: "#9a9a9a"}


@pytest.fixture
def dark_app():
    app = QApplication.instance()
    before_palette, before_sheet = app.palette(), app.styleSheet()
    palette = QPalette()
    for role, colour in DARK.items():
        palette.setColor(role, QColor(colour))
    app.setPalette(palette)
    app.setStyleSheet(STYLESHEET)
    yield app
    app.setStyleSheet(before_sheet)
    app.setPalette(before_palette)


def lightness_range(widget: QWidget) -> tuple[int, int]:
    """The darkest and the lightest pixel of the widget as drawn on its window, fills included (HSL lightness)."""
    window = widget.window()
    image = window.grab(QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())).toImage()
    values = [image.pixelColor(x, y).lightness() for x in range(0, image.width(), 2) for y in range(image.height())]
    return min(values), max(values)


def test_in_a_dark_palette_the_device_title_notes_and_start_read(qtbot, make_window, dark_app):
    window = make_window()
    window.show()
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: bool(window.device_panel.title.text()))
    darkest, lightest = lightness_range(window.device_panel.title)
    assert lightest - darkest > 120, (darkest, lightest)  # text against its fill, not white on white
    caption = window.plots.memory.caption
    darkest, lightest = lightness_range(caption)
    assert lightest - darkest > 80, (darkest, lightest)  # the note against the dark window
    enabled = window.start_button.grab().toImage().pixelColor(6, window.start_button.height() // 2)
    window.start_button.setEnabled(False)
    disabled = window.start_button.grab().toImage().pixelColor(6, window.start_button.height() // 2)
    assert abs(enabled.hue() - disabled.hue()) > 30 or abs(enabled.lightness() - disabled.lightness()) > 40

"""The sample-batch view: a grid of the images the current pipeline feeds the model.

``engine.preview_batch`` returns them after augmentation and before normalisation, so switching
augment between none, cpu and gpu shows what each does. It loads data (and imports torch), so
it runs in the background, and only while the tab is visible: a settings change marks the grid
stale and the next showing refreshes it.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QScrollArea, QVBoxLayout, QWidget

from workbench.config import RunConfig
from workbench.gui.background import BackgroundCall
from workbench.gui.engine_calls import engine_preview

PreviewFunction = Callable[[RunConfig, int], np.ndarray]
SAMPLE_COUNT = 32
COLUMNS = 8
SCALE = 3  # 32-pixel images at 3× (nearest neighbour: the pixels are what the model sees)
GAP = 4
REFRESH_DELAY_MS = 300  # settle typing before reloading

AUGMENT_WORDS = {
    "none": "no augmentation",
    "cpu": "random crop + flip per image in the DataLoader workers (augment=cpu)",
    "gpu": "random crop + flip on the whole batch on the device (augment=gpu)",
}


def mosaic(images: np.ndarray, columns: int = COLUMNS, scale: int = SCALE, gap: int = GAP) -> np.ndarray:
    """uint8 (N, H, W, 3) → one uint8 RGB image, the N images in rows of ``columns``, scaled up."""
    count, height, width, _ = images.shape
    rows = -(-count // columns)
    cell_h, cell_w = height * scale + gap, width * scale + gap
    canvas = np.full((rows * cell_h - gap, columns * cell_w - gap, 3), 255, dtype=np.uint8)
    scaled = images.repeat(scale, axis=1).repeat(scale, axis=2)
    for index, image in enumerate(scaled):
        top, left = (index // columns) * cell_h, (index % columns) * cell_w
        canvas[top : top + height * scale, left : left + width * scale] = image
    return canvas


def to_pixmap(rgb: np.ndarray) -> QPixmap:
    rgb = np.ascontiguousarray(rgb)
    height, width, _ = rgb.shape
    image = QImage(rgb.data, width, height, 3 * width, QImage.Format.Format_RGB888)
    return QPixmap.fromImage(image.copy())  # copy: the QImage must not outlive the numpy buffer


class SampleView(QWidget):
    def __init__(self, preview_function: PreviewFunction = engine_preview, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("sampleView")
        self._preview_function = preview_function
        self._config: Optional[RunConfig] = None
        self._shown_config: Optional[RunConfig] = None
        self._call: Optional[BackgroundCall] = None

        self.caption = QLabel("The images the pipeline feeds the model appear here.")
        self.caption.setObjectName("sampleCaption")
        self.caption.setWordWrap(True)
        self.refresh_button = QPushButton("New sample")
        self.refresh_button.setObjectName("sampleRefreshButton")
        self.refresh_button.setToolTip("Load the batch again with the current settings (another seed draws "
                                       "other images; augmentation differs with every epoch in a run).")
        self.refresh_button.clicked.connect(self.refresh)
        self.image = QLabel()
        self.image.setObjectName("sampleImage")
        self.image.setAlignment(Qt.AlignmentFlag.AlignCenter)
        scroll = QScrollArea()
        scroll.setWidget(self.image)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)

        header = QHBoxLayout()
        header.addWidget(self.caption, 1)
        header.addWidget(self.refresh_button)
        layout = QVBoxLayout(self)
        layout.addLayout(header)
        layout.addWidget(scroll, 1)

        self._refresh_timer = QTimer(self)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(REFRESH_DELAY_MS)
        self._refresh_timer.timeout.connect(self.refresh)

    def set_config(self, config: RunConfig) -> None:
        self._config = config
        if self.isVisible() and config != self._shown_config:
            self._refresh_timer.start()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        if self._config is not None and self._config != self._shown_config:
            self._refresh_timer.start()

    def refresh(self) -> None:
        if self._config is None:
            return
        if self._call is not None and self._call.running:
            self._refresh_timer.start()  # one load at a time: try again once this one is done
            return
        config = self._config
        self.caption.setText(f"Loading a sample batch of {config.dataset} data…")
        preview = self._preview_function
        self._call = BackgroundCall(lambda: (config, preview(config, SAMPLE_COUNT)))
        self._call.succeeded.connect(self._show)
        self._call.failed.connect(self._show_error)
        self._call.start()

    def _show(self, result: tuple[RunConfig, np.ndarray]) -> None:
        config, images = result
        self._shown_config = config
        self.image.setPixmap(to_pixmap(mosaic(images)))
        self.caption.setText(
            f"What the model sees: {len(images)} {config.dataset} training images (seed {config.seed}) after "
            f"{AUGMENT_WORDS.get(config.augment, config.augment)}, before normalisation. "
            "Shown 3× with no smoothing."
        )

    def _show_error(self, error: Exception) -> None:
        self._shown_config = self._config
        self.image.clear()
        self.caption.setText(f"No sample batch: {error}")

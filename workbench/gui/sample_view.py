"""The sample-batch view: a grid of the images the current pipeline feeds the model.

``engine.preview_batch`` returns them after augmentation and before normalisation, so switching
augment between none, cpu and gpu shows what each does; each image is captioned with its class name
(the data's, where it names its classes; else the class index). It loads data (and imports torch), so
it runs in the background, and only while the tab is visible: a settings change marks the grid
stale and the next showing refreshes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional, Sequence

import numpy as np
from PySide6.QtCore import QRect, Qt, QTimer
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter, QPixmap
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QScrollArea, QVBoxLayout, QWidget

from workbench.config import RunConfig
from workbench.gui.background import BackgroundCall
from workbench.gui.engine_calls import engine_preview

if TYPE_CHECKING:
    from workbench.engine.data import SampleBatch

PreviewFunction = Callable[[RunConfig, int], "SampleBatch"]
SAMPLE_COUNT = 32
COLUMNS = 8  # at most: fewer where the view is narrower, so the grid never needs a horizontal scroll bar
SCALE = 3  # 32-pixel images at 3× (nearest neighbour: the pixels are what the model sees)
SHOWN_SIDE = 96  # larger images are scaled by whole numbers towards this side, never below 1×
GAP = 4
CAPTION_HEIGHT = 16  # under each image: its class
REFRESH_DELAY_MS = 300  # settle typing before reloading

AUGMENT_WORDS = {
    "none": "no augmentation",
    "cpu": "random crop + flip per image in the DataLoader workers (augment=cpu)",
    "gpu": "random crop + flip on the whole batch on the device (augment=gpu)",
}


def mosaic(images: np.ndarray, columns: int = COLUMNS, scale: int = SCALE, gap: int = GAP,
           caption_height: int = 0) -> np.ndarray:
    """uint8 (N, H, W, 3) → one uint8 RGB image, the N images in rows of ``columns``, scaled up, with
    ``caption_height`` white rows under each for its caption."""
    count, height, width, _ = images.shape
    rows = -(-count // columns)
    cell_h, cell_w = height * scale + caption_height + gap, width * scale + gap
    canvas = np.full((rows * cell_h - gap, columns * cell_w - gap, 3), 255, dtype=np.uint8)
    scaled = images.repeat(scale, axis=1).repeat(scale, axis=2)
    for index, image in enumerate(scaled):
        top, left = (index // columns) * cell_h, (index % columns) * cell_w
        canvas[top : top + height * scale, left : left + width * scale] = image
    return canvas


def captioned(pixmap: QPixmap, names: Sequence[str], columns: int = COLUMNS, side: int = 32 * SCALE,
              gap: int = GAP, caption_height: int = CAPTION_HEIGHT, font: Optional[QFont] = None) -> QPixmap:
    """The mosaic's pixmap with each image's name written under it (elided to the image's width)."""
    painter = QPainter(pixmap)
    try:
        font = QFont(font) if font is not None else QFont()
        font.setPointSize(8)
        painter.setFont(font)
        painter.setPen(QColor("#303030"))
        metrics = QFontMetrics(font)
        for index, name in enumerate(names):
            left = (index % columns) * (side + gap)
            top = (index // columns) * (side + caption_height + gap) + side
            text = metrics.elidedText(name, Qt.TextElideMode.ElideRight, side)
            painter.drawText(QRect(left, top, side, caption_height), int(Qt.AlignmentFlag.AlignCenter), text)
    finally:
        painter.end()
    return pixmap


def display_scale(side: int) -> int:
    """The whole-number scale an image of ``side`` pixels is shown at: 3× for CIFAR's 32, 2× for 64, 1× from
    96 on (224×224 images are shown as they are)."""
    return max(1, round(SHOWN_SIDE / side))


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
        self._batch: Optional[SampleBatch] = None  # the one shown: drawn again when the view's width changes
        self._columns = 0  # the grid's columns as drawn
        self.names: list[str] = []  # each shown image's class, as captioned

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
        self.image.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignHCenter)
        self._scroll = scroll = QScrollArea()
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

    def _show(self, result: tuple[RunConfig, SampleBatch]) -> None:
        config, batch = result
        self._shown_config = config
        self.names = batch.names()
        self._batch = batch
        self._draw()
        side = batch.images.shape[2]
        scale = display_scale(side)
        labels = ("each under its class name" if batch.class_names
                  else "each under its class index (the data names no classes)")
        self.caption.setText(
            f"What the model sees: {len(batch.images)} {config.dataset} training images (seed {config.seed}) after "
            f"{AUGMENT_WORDS.get(config.augment, config.augment)}, before normalisation, {labels}. "
            f"{side}×{side} pixels, shown {scale}× with no smoothing."
        )

    def _fitting_columns(self, batch: SampleBatch) -> int:
        shown = batch.images.shape[2] * display_scale(batch.images.shape[2])
        # The room beside a vertical scroll bar, shown or not: the bar coming with a taller grid takes no column.
        room = self._scroll.width() - self._scroll.verticalScrollBar().sizeHint().width()
        fitting = (room + GAP) // (shown + GAP)
        return max(1, min(COLUMNS, len(batch.images), fitting))

    def _draw(self) -> None:
        batch = self._batch
        if batch is None:
            return
        self._columns = columns = self._fitting_columns(batch)
        side = batch.images.shape[2]
        scale = display_scale(side)  # the captions go under images of the size they are shown at
        grid = to_pixmap(mosaic(batch.images, columns=columns, scale=scale, caption_height=CAPTION_HEIGHT))
        self.image.setPixmap(captioned(grid, self.names, columns=columns, side=side * scale, font=self.font()))

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        if self._batch is not None and self._fitting_columns(self._batch) != self._columns:
            self._draw()

    def _show_error(self, error: Exception) -> None:
        self._shown_config = self._config
        self._batch = None
        self.names = []
        self.image.clear()
        self.caption.setText(f"No sample batch: {error}")

"""The sample-batch grid: real pipeline images, stale-until-shown refresh, readable errors."""

import numpy as np
import pytest
from conftest import blank_preview
from builders import TINY_RUN

from workbench.engine.data import DataError
from workbench.gui.background import wait_for_background_calls
from workbench.gui.engine_calls import engine_preview
from workbench.gui.sample_view import SampleView, mosaic


@pytest.fixture
def make_view(qtbot):
    def make(preview_function):
        view = SampleView(preview_function)
        view.resize(1400, 800)  # room for the grid's 8 columns
        qtbot.addWidget(view)
        return view

    yield make
    wait_for_background_calls(30_000)


def test_mosaic_places_each_image_scaled_in_rows():
    images = np.zeros((10, 32, 32, 3), np.uint8)
    images[9] = 200
    grid = mosaic(images, columns=4, scale=2, gap=4)
    assert grid.shape == (3 * 64 + 2 * 4, 4 * 64 + 3 * 4, 3)
    row, column = divmod(9, 4)
    assert (grid[row * 68 : row * 68 + 64, column * 68 : column * 68 + 64] == 200).all()
    assert (grid[:64, 64:68] == 255).all()  # the gap between images is white


def test_the_real_pipeline_fills_the_grid_and_says_what_it_shows(qtbot, make_view):
    view = make_view(engine_preview)
    view.show()
    view.set_config(TINY_RUN.replace(augment="gpu"))
    qtbot.waitUntil(lambda: view.image.pixmap() is not None and not view.image.pixmap().isNull(), timeout=30_000)
    assert (view.image.pixmap().width(), view.image.pixmap().height()) == (8 * 96 + 7 * 4, 4 * (96 + 16) + 3 * 4)
    assert "32 synthetic training images" in view.caption.text()
    assert "on the whole batch on the device (augment=gpu)" in view.caption.text()


def test_settings_changes_wait_until_the_view_is_shown(qtbot, make_view):
    calls = []

    def preview(config, count):
        calls.append(config)
        return blank_preview(config, count)

    view = make_view(preview)
    view.set_config(TINY_RUN)
    qtbot.wait(400)
    assert calls == []  # hidden: loading data for a view nobody sees would only cost time
    view.show()
    qtbot.waitUntil(lambda: len(calls) == 1)
    view.set_config(TINY_RUN.replace(augment="none"))
    qtbot.waitUntil(lambda: len(calls) == 2)
    assert calls[-1].augment == "none"
    qtbot.waitUntil(lambda: "after no augmentation" in view.caption.text())


def test_a_data_error_is_shown_instead_of_the_grid(qtbot, make_view):
    def preview(config, count):
        raise DataError("npz file /nowhere.npz does not exist")

    view = make_view(preview)
    view.show()
    view.set_config(TINY_RUN)
    qtbot.waitUntil(lambda: view.caption.text() == "No sample batch: npz file /nowhere.npz does not exist")


def test_the_real_cifar_subset_previews(qtbot, make_view, subset_npz):
    view = make_view(engine_preview)
    view.show()
    view.set_config(TINY_RUN.replace(dataset="npz", data_path=str(subset_npz), augment="cpu"))
    qtbot.waitUntil(lambda: "32 npz training images" in view.caption.text(), timeout=30_000)
    assert len(view.names) == 32 and all(name for name in view.names)


def test_each_image_is_captioned_with_its_class_name_or_index(qtbot, make_view, tmp_path):
    """Issue 22: the Sample batch tab's images had no class names."""
    from workbench.npz.make import ImageSet

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (40, 32, 32, 3), dtype=np.uint8)
    labels = np.arange(40, dtype=np.int64) % 2
    path = ImageSet(images, labels, images[:8], labels[:8], ("cat", "dog"), "test").save(tmp_path / "pets.npz")
    view = make_view(engine_preview)
    view.show()
    view.set_config(TINY_RUN.replace(dataset="npz", data_path=str(path), augment="none", batch_size=8))
    qtbot.waitUntil(lambda: len(view.names) == 32, timeout=30_000)
    assert set(view.names) == {"cat", "dog"} and "each under its class name" in view.caption.text()
    pixmap = view.image.pixmap()
    assert pixmap.height() == 4 * (96 + 16) + 3 * 4  # a caption row under each image

    view.set_config(TINY_RUN.replace(augment="none"))  # synthetic data names no classes: the index
    qtbot.waitUntil(lambda: "class index" in view.caption.text(), timeout=30_000)
    assert set(view.names) <= {str(label) for label in range(10)} and len(view.names) == 32


def test_images_larger_than_cifars_are_captioned_under_each_image(qtbot, make_view):
    # A 64×64 folder's images were shown at 3× (192 px) with captions on the 32×32 grid (every 96 px),
    # written across the images. Now: 2× (128 px), each caption in the white row under its image.
    from workbench.engine.data import SampleBatch

    white = SampleBatch(np.full((32, 64, 64, 3), 255, np.uint8), np.zeros(32, np.int64), ("cat",))
    view = make_view(lambda config, count: white)
    view.show()
    view.set_config(TINY_RUN.replace(image_size=64))
    qtbot.waitUntil(lambda: view.names == ["cat"] * 32, timeout=30_000)
    image = view.image.pixmap().toImage()
    assert (image.width(), image.height()) == (8 * 128 + 7 * 4, 4 * (128 + 16) + 3 * 4)

    def dark_pixels(top, bottom):
        return sum(image.pixelColor(x, y).lightness() < 128 for y in range(top, bottom) for x in range(0, 128))

    assert dark_pixels(0, 128) == 0  # the first image: white, no text over it
    assert dark_pixels(128, 144) > 0  # its caption, under it
    assert "64×64 pixels, shown 2×" in view.caption.text()


def test_the_grid_takes_the_columns_the_view_has_room_for(qtbot, make_view):
    """Eight columns of 64×64 images at 2× needed 1,052 px: a narrower tab scrolled sideways, the last column cut."""
    from PySide6.QtWidgets import QScrollArea

    from workbench.engine.data import SampleBatch

    batch = SampleBatch(np.full((32, 64, 64, 3), 255, np.uint8), np.zeros(32, np.int64), ("cat",))
    view = make_view(lambda config, count: batch)
    view.resize(700, 600)
    view.show()
    view.set_config(TINY_RUN.replace(image_size=64))
    qtbot.waitUntil(lambda: view.names == ["cat"] * 32, timeout=30_000)
    scroll = view.findChild(QScrollArea)
    width = view.image.pixmap().width()
    assert (width + 4) % 132 == 0 and (width + 4) // 132 < 8  # whole columns of 128 px and their gaps, fewer than 8
    assert width <= scroll.viewport().width() < width + 132  # as many as fit
    assert not scroll.horizontalScrollBar().isVisible()
    view.resize(1400, 600)  # wider: the grid is drawn again with more columns, 8 at most
    qtbot.waitUntil(lambda: view.image.pixmap().width() == 8 * 128 + 7 * 4)

"""What a new user meets in the window's first hour: names, the progress bar, the release button's
reasons, a window that fits a small screen, the device probe, and settings kept with the home."""

import csv
import re
import threading
from types import SimpleNamespace

import numpy as np
import pytest
from builders import CPU, GPU, TINY_RUN, FakeRun, run_once, window_probe
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QColor

from workbench.config import RunConfig
from workbench.engine.events import RunEnded, StatusChanged
from workbench.engine.run_summary import RunSummary
from workbench.gui.app import STYLESHEET, build_window
from workbench.gui.background import wait_for_background_calls
from workbench.gui.runs_view import RunsView
from workbench.history.export import export_runs_csv
from workbench.history.store import HistoryStore


@pytest.fixture
def app_look(qapp):
    """The app's own style and stylesheet, as `workbench` sets them (create_application)."""
    style = qapp.style().name()
    qapp.setStyle("Fusion")
    qapp.setStyleSheet(STYLESHEET)
    yield
    qapp.setStyleSheet("")
    qapp.setStyle(style)


# -- names ---------------------------------------------------------------------------------------


def test_a_run_is_named_once_and_the_same_in_the_plots_the_runs_tab_and_the_csv(qtbot, settings, tmp_path):
    store = HistoryStore.open()
    window = build_window(store, settings=settings, run_function=FakeRun(steps=12), probe_function=window_probe())
    qtbot.addWidget(window)
    try:
        run_once(qtbot, window, TINY_RUN)
        run_once(qtbot, window, TINY_RUN.replace(batch_size=64))
        first, second = sorted(store.list_runs(), key=lambda record: record.id)
        assert (first.label, second.label) == (f"#{first.id} synthetic: small-cnn, batch 32, fp32",
                                               f"#{second.id} synthetic: batch_size=64")
        assert window.plots.legend_labels() == [first.label, second.label]
        assert window.run_message.text().startswith("Finished")

        view = window.findChild(RunsView)
        view.refresh()
        qtbot.waitUntil(lambda: not view.is_reading(), timeout=10_000)  # read off the GUI thread
        with qtbot.waitSignal(view.overlayRequested, timeout=10_000):  # the curves are read off the GUI thread
            view.select_runs([first.id, second.id])  # selecting this window's runs draws nothing twice
        window.plots.redraw()
        assert window.plots.legend_labels() == [first.label, second.label]
        assert window.plots.overlay_keys() == [first.id]
        drawn = [item for item in window.plots.throughput_plot.getPlotItem().items
                 if getattr(item, "getData", None) and item.getData()[0] is not None]
        assert len(drawn) == 2
        header = view.comparison.tree.headerItem()
        assert [header.text(column) for column in (1, 2)] == [first.label, second.label]
        names = [view.proxy.index(row, 1).data() for row in range(view.proxy.rowCount())]
        assert sorted(names) == sorted([first.name, second.name])
        export_runs_csv(store, tmp_path / "runs.csv")
        with open(tmp_path / "runs.csv", newline="", encoding="utf-8") as file:
            assert sorted(row["name"] for row in csv.DictReader(file)) == sorted([first.name, second.name])

        view.select_runs([])
        assert view.comparison.tree.columnCount() == 1
        assert window.plots.legend_labels() == [first.label, second.label]  # still this window's runs
    finally:
        window.training_thread.request_stop()
        window.training_thread.wait(10_000)
        window.close()
        wait_for_background_calls(10_000)  # the Runs tab's reads, off the GUI thread
        store.close()


# -- the progress bar ------------------------------------------------------------------------------


def fails_before_training(config, stop):
    yield StatusChanged(message="Loading data…")
    reason = "data.npz is not a valid npz archive"
    yield RunEnded(status="failed", summary=RunSummary(status="failed", reason=reason, failure_kind="data"), reason=reason, kind="data")


def test_an_early_failure_ends_the_progress_bar_on_failed(qtbot, make_window):
    runs = [FakeRun(steps=4), fails_before_training]
    window = make_window(run_function=lambda config, stop: runs.pop(0)(config, stop))
    run_once(qtbot, window, TINY_RUN)
    assert window.progress.text() == "Finished"
    run_once(qtbot, window, TINY_RUN)  # the busy bar reset the value the last run left: -1 shows no text
    assert window.progress.text() == "Failed"
    assert window.progress.property("status") == "failed"
    assert window.run_message.text() == "Run failed: data.npz is not a valid npz archive"


def luminance(colour: QColor) -> float:
    def linear(channel: float) -> float:
        return channel / 12.92 if channel <= 0.03928 else ((channel + 0.055) / 1.055) ** 2.4

    return 0.2126 * linear(colour.redF()) + 0.7152 * linear(colour.greenF()) + 0.0722 * linear(colour.blueF())


def contrast(first: QColor, second: QColor) -> float:
    light, dark = sorted((luminance(first), luminance(second)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def best_text_contrast(image, left: int, right: int) -> float:
    """The strongest contrast between a glyph pixel and the background in a column range of the bar."""
    height = image.height()
    background = image.pixelColor((left + right) // 2, 4)  # above the text, inside the bar
    return max(contrast(image.pixelColor(x, y), background)
               for x in range(left, right) for y in range(height // 4, 3 * height // 4))


def test_the_progress_text_reads_on_both_sides_of_where_the_fill_ends(qtbot, make_window, app_look):
    window = make_window()
    window.resize(1024, 700)
    window.show()
    qtbot.waitExposed(window)
    bar = window.progress
    bar.setRange(0, 100)
    bar.setValue(50)
    bar.setFormat("Epoch 1/3 · step 450/1,000 · ETA 0:12 · 1,234 images/s · Epoch 1/3 · step 450/1,000")
    image = bar.grab().toImage()
    middle = image.width() // 2
    assert best_text_contrast(image, middle - 150, middle - 6) >= 4.5  # on the fill
    assert best_text_contrast(image, middle + 6, middle + 150) >= 4.5  # past it


# -- the release button ----------------------------------------------------------------------------


def test_release_is_disabled_during_a_run_with_the_reason_on_screen(qtbot, make_window):
    gate = threading.Event()

    class HeldRun(FakeRun):
        def _events(self, config, stop):
            for event in super()._events(config, stop):
                yield event
                if not gate.is_set() and type(event).__name__ == "StepStats":
                    gate.wait(60)

    window = make_window(run_function=HeldRun(steps=5, device=GPU), probe_function=window_probe(GPU))
    window.show()
    qtbot.waitUntil(lambda: window.controller.device is not None, timeout=10_000)
    assert window.release_button.isEnabled() and window.release_result.text() == ""
    window.form.set_config(TINY_RUN.replace(device="auto"))
    try:
        with qtbot.waitSignal(window.training_thread.steps, timeout=10_000):
            window.start_button.click()
        assert not window.release_button.isEnabled()
        assert window.release_result.isVisible() and window.release_result.text() == "Disabled while training"
        assert "synchronises the GPU" in window.release_button.toolTip()
        assert "would not mean what they say" in window.release_result.toolTip()
    finally:
        gate.set()
    qtbot.waitUntil(lambda: not window.training_thread.running, timeout=10_000)
    assert window.release_button.isEnabled() and window.release_result.text() == ""


# -- the window and the form -----------------------------------------------------------------------


def test_the_window_fits_1024_by_700_with_the_run_settings_in_view(qtbot, make_window):
    window = make_window()
    hint = window.minimumSizeHint()
    assert hint.width() <= 1024 and hint.height() <= 700, hint
    window.resize(1024, 700)
    window.show()
    qtbot.waitExposed(window)
    assert (window.width(), window.height()) == (1024, 700)
    viewport = window.form.findChild(object, "settingsScroll").viewport()
    seen = QRect(QPoint(0, 0), viewport.size())
    for name in ("epochs", "batch_size", "device"):
        editor = window.form.editor(name)
        where = QRect(editor.mapTo(viewport, QPoint(0, 0)), editor.size())
        assert seen.contains(where), f"{name} is below the fold"
    for plot in (window.plots.loss_plot, window.plots.throughput_plot, window.plots.memory_plot):
        assert plot.height() >= 140 and plot.width() >= 240


def test_a_bad_npz_disables_start_before_anything_runs(qtbot, make_window, tmp_path):
    path = tmp_path / "grey.npz"
    np.savez(path, train_images=np.zeros((8, 28, 28), np.uint8), train_labels=np.zeros(8, np.int64),
             test_images=np.zeros((2, 28, 28), np.uint8), test_labels=np.zeros(2, np.int64))
    run = FakeRun()
    window = make_window(run_function=run)
    window.form.set_config(RunConfig(dataset="npz", data_path=str(path), batch_size=4, device="cpu"))
    assert not window.start_button.isEnabled()
    assert "shape (N, 32, 32, 3)" in window.start_button.toolTip()
    window.start_button.click()
    assert run.configs == []


def test_the_device_probe_says_what_it_is_doing_and_the_form_works_meanwhile(qtbot, make_window):
    gate = threading.Event()

    def slow_probe():
        gate.wait(10)
        return CPU

    window = make_window(probe_function=slow_probe)
    panel = window.device_panel
    try:
        window.show()
        qtbot.waitUntil(lambda: window._probe_call is not None)
        assert panel.property("state") == "probing" and panel.busy.isVisible()
        assert "Importing PyTorch and looking for a CUDA GPU" in panel.details.text()
        assert window.form.editable
        window.form.editor("batch_size").setValue(64)
        assert window.form.config().batch_size == 64
        # Visibly alive: the seconds count up while the probe works.
        qtbot.waitUntil(lambda: bool(re.search(r"\(\d+ s\)", panel.details.text())), timeout=30_000)
    finally:
        gate.set()
    qtbot.waitUntil(lambda: window.controller.device is not None, timeout=10_000)
    assert panel.property("state") == "cpu" and not panel.busy.isVisible()
    assert window.form.config().batch_size == 64


def test_gui_settings_are_kept_in_the_workbench_home(qtbot, make_window, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "first"))
    first = make_window(settings=None)
    first.form.set_config(TINY_RUN.replace(batch_size=48))
    first.show()
    first.close()
    assert (tmp_path / "first" / "gui-settings.json").is_file()

    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "second"))  # a fresh home starts fresh
    assert make_window(settings=None).form.config() == RunConfig()

    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "first"))
    assert make_window(settings=None).form.config().batch_size == 48


# -- issue 22: the second first hour ------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["measured", "failed", "stopped"])
def test_the_progress_bar_ends_with_the_ceiling_probe(qtbot, make_window, outcome):
    """Issue 22: after Measure ceiling the bar stayed busy (range 0..0) while Start was enabled again. A stopped probe
    ends the bar as a stopped run does, not red: "failed" read as a fault for the user's own Stop."""
    from workbench.engine.ceiling_cache import ProbeStopped

    def measure(config, stop):
        if outcome == "failed":
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        if outcome == "stopped":
            raise ProbeStopped("stopped while warming up (0 of 5 warm-up steps done)")
        return SimpleNamespace(images_per_sec=1234.0, steady=True)

    window = make_window(measure_ceiling=measure)
    window.show()
    qtbot.waitUntil(lambda: window.controller.device is not None, timeout=10_000)
    window.form.set_config(TINY_RUN)
    with qtbot.waitSignal(window.training_thread.finished, timeout=10_000):
        window.gpu_time.ceiling_button.click()
    qtbot.waitUntil(lambda: not window.controller.running)
    assert window.start_button.isEnabled()
    bar = window.progress
    assert bar.maximum() > 0, "the bar is still busy"
    if outcome == "measured":
        assert (bar.value(), bar.format(), bar.property("status")) == (1, "Ceiling measured", "finished")
    elif outcome == "failed":
        assert (bar.value(), bar.format(), bar.property("status")) == (0, "Ceiling not measured", "failed")
    else:
        assert (bar.value(), bar.format(), bar.property("status")) == (0, "Ceiling stopped", "stopped")


def test_an_image_folder_in_the_data_field_is_pointed_to_make_npz(qtbot, make_window, tmp_path):
    folder = tmp_path / "pets"
    (folder / "cat").mkdir(parents=True)
    window = make_window()
    window.form.set_config(TINY_RUN.replace(dataset="npz", data_path=str(folder)))
    assert not window.start_button.isEnabled()
    shown = window.form.problems_label.text()
    assert "is a folder" in shown and f"workbench make-npz {folder} --out {folder}.npz" in shown


def test_the_runs_tab_shows_the_figures_people_compare_and_the_forms_words_at_1400_px(qtbot, settings):
    """Issue 22: Img/s and Test acc sat off-screen at 1400 px; the comparison showed field names; pin_memory read
    "yes" on CPU runs."""
    from workbench.gui.runs_table import COLUMN_TITLES

    store = HistoryStore.open()
    window = build_window(store, settings=settings, run_function=FakeRun(steps=6), probe_function=window_probe())
    qtbot.addWidget(window)
    try:
        run_once(qtbot, window, TINY_RUN)
        run_once(qtbot, window, TINY_RUN.replace(pipeline="gpu-resident", num_workers=2))
        window.resize(1400, 900)
        window.show()
        qtbot.waitExposed(window)
        window.tabs.setCurrentWidget(window.runs_tab)
        view = window.findChild(RunsView)
        view.refresh()
        qtbot.waitUntil(lambda: not view.is_reading(), timeout=10_000)  # read off the GUI thread
        header = view.table.horizontalHeader()
        visible = view.table.viewport().width()
        for title in ("Img/s", "Test acc", "Data wait"):
            section = COLUMN_TITLES.index(title)
            assert header.sectionViewportPosition(section) + header.sectionSize(section) <= visible, title
        workers = COLUMN_TITLES.index("Workers")
        resident_row = next(row for row in range(view.proxy.rowCount())
                            if "gpu-resident" in view.proxy.index(row, COLUMN_TITLES.index("Pipeline")).data())
        assert view.proxy.index(resident_row, workers).data() == "–"
        assert "pipeline=gpu-resident uses no DataLoader" in view.proxy.index(resident_row, workers).data(
            Qt.ItemDataRole.ToolTipRole)

        view.select_runs([record.id for record in store.list_runs()])
        comparison = view.comparison
        assert comparison.item_for("pin_memory").text(0) == "Pin memory"  # the form's label
        assert comparison.visible_rows()["pin_memory"] == ("not used", "not used")  # a CPU run pins nothing
        assert comparison.item_for("pin_memory").toolTip(1).startswith("Not used: on the CPU")
        assert comparison.visible_rows()["num_workers"] == ("0", "not used")
    finally:
        window.training_thread.request_stop()
        window.training_thread.wait(10_000)
        window.close()
        wait_for_background_calls(10_000)  # the Runs tab's reads, off the GUI thread
        store.close()

import json
import os
import tempfile

# Before any Qt import: the tests run without a display (tests/conftest.py says so too) ...
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# ... on an offscreen screen the size of a desktop monitor: the default 800×800 one is smaller than
# the main window's minimum size, so restoring a saved geometry would be clamped.
if os.environ["QT_QPA_PLATFORM"] == "offscreen":
    _SCREEN = os.path.join(tempfile.gettempdir(), "workbench-tests-screen-1920x1200.json")
    with open(_SCREEN, "w", encoding="utf-8") as _file:
        json.dump({"screens": [{"name": "test", "x": 0, "y": 0, "width": 1920, "height": 1200,
                                "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}, _file)
    os.environ["QT_QPA_PLATFORM"] = f"offscreen:configfile={_SCREEN}"

import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture
def settings(tmp_path):
    """A settings file of the test's own, so no test reads or writes the user's settings."""
    from workbench.gui.settings_file import SettingsFile

    return SettingsFile(tmp_path / "gui-settings.json")


@pytest.fixture
def make_window(qtbot, settings):
    """MainWindow factory with fakes by default; every window's run and background calls are joined."""
    from builders import FakeRun, window_probe, fake_release

    from workbench.gui.background import wait_for_background_calls
    from workbench.gui.main_window import MainWindow

    windows = []

    def make(**kwargs):
        kwargs.setdefault("settings", settings)
        kwargs.setdefault("run_function", FakeRun())
        kwargs.setdefault("probe_function", window_probe())
        kwargs.setdefault("release_function", fake_release)
        kwargs.setdefault("preview_function", blank_preview)
        kwargs.setdefault("model_names_function", lambda: ("resnet50", "vit_b_16"))
        window = MainWindow(**kwargs)
        qtbot.addWidget(window)
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.training_thread.request_stop()
        assert window.training_thread.wait(10_000), "the training thread did not end"
        qtbot.waitUntil(lambda: not window.training_thread.running)  # deliver the queued finished signal
    wait_for_background_calls(10_000)


def blank_preview(config, count):
    """A sample batch of ``count`` black images of class 0, named by index."""
    from workbench.engine.data import SampleBatch

    return SampleBatch(np.zeros((count, 32, 32, 3), np.uint8), np.zeros(count, np.int64))

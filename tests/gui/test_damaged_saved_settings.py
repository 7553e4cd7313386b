"""The window opens whatever its saved settings hold, with the damaged setting reset and named on the status line.

The settings are saved on close, so a setting that hangs or crashes the start would do it at every launch:
a FIFO as data_path blocked the form's header check on the GUI thread forever, a symlink loop raised
from Path.resolve, /dev/zero was read until memory ran out.
"""

import contextlib
import html
import json
import os
from pathlib import Path

import pytest
from hostile_paths import fifo_unblocked, make_fifo, make_symlink_loop

from workbench.config import RunConfig
from workbench.gui.main_window import SETTINGS_CONFIG


def saved_npz_path(make_path):
    def saved(tmp_path: Path) -> tuple[str, Path]:
        path = make_path(tmp_path)
        return json.dumps({"dataset": "npz", "data_path": str(path), "batch_size": 64}), path
    return saved


DAMAGED_DATA_PATHS = {
    "fifo": (saved_npz_path(lambda tmp: make_fifo(tmp / "data.npz")), "is a FIFO (named pipe)"),
    "symlink-loop": (saved_npz_path(lambda tmp: make_symlink_loop(tmp / "data.npz")), "is a symlink loop"),
    "folder": (saved_npz_path(lambda tmp: (tmp / "data.npz").mkdir() or tmp / "data.npz"), "is a folder"),
    "device": (saved_npz_path(lambda tmp: Path("/dev/zero")), "is a character device"),
    "gone": (saved_npz_path(lambda tmp: tmp / "gone.npz"), "does not exist"),
}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX")
@pytest.mark.parametrize("case", list(DAMAGED_DATA_PATHS))
def test_a_damaged_saved_data_path_is_reset_and_named(make_window, settings, tmp_path, case):
    make_saved, reason = DAMAGED_DATA_PATHS[case]
    stored, path = make_saved(tmp_path)
    settings.set_value(SETTINGS_CONFIG, stored)
    with fifo_unblocked(path) if case == "fifo" else contextlib.nullcontext():
        window = make_window()
    config = window.form.config()
    assert config.data_path == "" and config.dataset == "npz" and config.batch_size == 64  # the rest is kept
    status = window.status_line.text()
    assert "data_path reset to its default" in status and f"{path} {reason}" in status, status
    assert not window.start_button.isEnabled()  # dataset=npz still needs a file: refused, with the reason shown
    assert "dataset=npz needs data_path" in window.form.problems_label.text()


@pytest.mark.parametrize(
    "stored, field, words",
    [
        (json.dumps({"lr": float("nan"), "batch_size": 64}), "lr", "lr reset to its default (lr must be between 0 and 10 (got nan))"),
        (json.dumps({"lr": float("inf"), "batch_size": 64}), "lr", "(got inf)"),
        (json.dumps({"precision": "fp8", "batch_size": 64}), "precision",
         "precision reset to its default (precision must be one of"),
        (json.dumps({"epochs": "many", "batch_size": 64}), "epochs", "epochs must be a whole number"),
        (json.dumps({"batch_size": 64, "renamed_knob": 3}), None, "renamed_knob is not a setting of this version"),
    ],
    ids=["nan-lr", "inf-lr", "unknown-choice", "wrong-type", "unknown-setting"],
)
def test_a_bad_saved_setting_is_reset_alone_and_named(make_window, settings, stored, field, words):
    settings.set_value(SETTINGS_CONFIG, stored)
    window = make_window()
    config = window.form.config()
    assert config.batch_size == 64  # the good settings are kept
    if field is not None:
        assert getattr(config, field) == getattr(RunConfig(), field)
    assert words in window.status_line.text(), window.status_line.text()
    assert window.start_button.isEnabled(), window.start_button.toolTip()


@pytest.mark.parametrize(
    "stored, words",
    [
        ("\x00garbage{\xff", "not valid JSON"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('[["batch_size", 64]]', "a JSON list, not an object"),
        ("null", "a JSON NoneType, not an object"),
    ],
    ids=["garbage", "deep-nesting", "array-of-pairs", "null"],
)
def test_unreadable_saved_settings_reset_all_and_say_so(make_window, settings, stored, words):
    settings.set_value(SETTINGS_CONFIG, stored)
    window = make_window()
    assert window.form.config() == RunConfig()
    assert words in window.status_line.text() and "all reset to the defaults" in window.status_line.text()


@pytest.mark.parametrize(
    "contents, words",
    [(os.urandom(4000), "could not be read (not UTF-8 JSON)"), (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
     (b'["run/config"]', "holds a JSON list, not an object"), (b"x" * (1 << 20), "is larger than 1,048,576 bytes")],
    ids=["random-bytes", "deep-nesting", "a-list", "too-large"],
)
def test_garbage_in_the_settings_file_opens_the_defaults_and_says_so(make_window, contents, words):
    from workbench.paths import gui_settings_file

    path = gui_settings_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(contents)
    window = make_window(settings=None)  # the home's own settings file, as the app opens it
    assert window.form.config() == RunConfig()
    assert window.isEnabled()
    assert f"the settings file {path}" in window.status_line.text() and words in window.status_line.text()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_typing_a_fifo_as_data_path_does_not_block_the_form(make_window, tmp_path):
    fifo = make_fifo(tmp_path / "typed.npz")
    window = make_window()
    with fifo_unblocked(fifo):
        window.form.set_config(RunConfig(dataset="npz", data_path=str(fifo)))
    assert html.escape(f"data_path '{fifo}' is a FIFO (named pipe)") in window.form.problems_label.text()
    assert not window.start_button.isEnabled()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
@pytest.mark.parametrize("kind", ["fifo", "symlink-loop", "folder"])
def test_a_settings_file_that_is_not_a_file_is_left_alone_and_named(make_window, monkeypatch, tmp_path, kind):
    from workbench.paths import gui_settings_file

    path = gui_settings_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    {"fifo": make_fifo, "symlink-loop": make_symlink_loop, "folder": Path.mkdir}[kind](path)
    with fifo_unblocked(path) if kind == "fifo" else contextlib.nullcontext():
        window = make_window(settings=None)  # the home's own settings file, as the app opens it
        assert window.form.config() == RunConfig()
        assert f"The window's settings file {path} " in window.status_line.text()
        assert "neither read nor written this session" in window.status_line.text()
        window.save_settings()  # on close: kept in memory, never written through the FIFO
    assert not path.is_file()


@pytest.mark.parametrize(
    "saved",
    [{"model": "mymodels:make", "model_kwargs": '{"depth": 3}', "batch_size": 64},
     {"model": "resnet34", "model_kwargs": '{"zero_init_residual": true}', "batch_size": 64}],
    ids=["own-function", "torchvision"],
)
def test_model_arguments_come_back_with_the_model_they_were_written_for(make_window, settings, saved):
    # The kwargs were checked beside the default model (small-cnn takes none) and reset with a wrong reason: the
    # next Start would have trained another network.
    settings.set_value(SETTINGS_CONFIG, json.dumps(saved))
    window = make_window()
    config = window.form.config()
    assert (config.model, config.model_kwargs, config.batch_size) == (
        saved["model"], saved["model_kwargs"], saved["batch_size"])
    assert "reset" not in window.status_line.text(), window.status_line.text()


def test_model_arguments_saved_beside_a_built_in_model_are_kept_for_the_form_to_refuse(make_window, settings):
    # A clash of two saved settings is the form's to show (Start stays off, the reason beside it), not a reset.
    settings.set_value(SETTINGS_CONFIG, json.dumps({"model": "small-cnn", "model_kwargs": '{"depth": 3}'}))
    window = make_window()
    assert window.form.config().model_kwargs == '{"depth": 3}' and not window.start_button.isEnabled()
    assert "model_kwargs apply to a torchvision model or your own function" in window.form.problems_label.text()


def test_deeply_nested_saved_model_kwargs_are_reset_and_named(make_window, settings):
    # Before: RecursionError from json.loads, exit 1 at every launch.
    deep = "[" * 5000 + "]" * 5000
    settings.set_value(SETTINGS_CONFIG, json.dumps({"model": "resnet50", "model_kwargs": deep, "batch_size": 64}))
    window = make_window()
    config = window.form.config()
    assert (config.model, config.model_kwargs, config.batch_size) == ("resnet50", "", 64)
    assert ("model_kwargs reset to its default (model_kwargs nest 5,000 levels deep; at most 32 are read)"
            in window.status_line.text()), window.status_line.text()


def test_deeply_nested_model_kwargs_pasted_in_the_form_are_refused_inline(make_window):
    from PySide6.QtWidgets import QLineEdit

    window = make_window()
    window.form.set_config(RunConfig(model="resnet50"))
    window.form.findChild(QLineEdit, "model_kwargs").setText("[" * 5000 + "]" * 5000)  # as a paste sets it
    assert "model_kwargs nest 5,000 levels deep" in window.form.problems_label.text()
    assert not window.start_button.isEnabled()

"""The window's settings file holds text only and is read without unpickling anything (issue 28 item 3).

QSettings stores a Python object as ``@Variant(…)`` (a pickle) and unpickles it as it reads the file: a
``run/config`` whose ``__reduce__`` called os.system ran its command at every launch, and the status line then
said "the saved settings were not text (a int)". The settings are JSON now; an earlier ``gui-settings.ini`` is read
once, for its plain text values.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from workbench.config import RunConfig
from workbench.gui.main_window import SETTINGS_CONFIG
from workbench.gui.settings_file import SettingsFile, legacy_ini_values, qt_ini_text
from workbench.paths import gui_settings_file, legacy_gui_settings_file


PLANT = """
import sys
from PySide6.QtCore import QByteArray, QSettings

class Planted:  # unpickled, it creates the marker file (through open(): no shell needed to show that code ran)
    def __reduce__(self):
        return (open, (sys.argv[3], "w"))

path, key, value = sys.argv[1], sys.argv[2], sys.argv[3]
kinds = {"pickle": lambda: Planted(), "hex-bytes": lambda: QByteArray(bytes.fromhex(value))}
settings = QSettings(path, QSettings.Format.IniFormat)
settings.setValue(key, kinds[sys.argv[4]]() if len(sys.argv) > 4 else value)
settings.sync()
"""


def plant(path, key, value, kind=None) -> None:
    """Write ``value`` at ``key`` as an earlier version's QSettings would: a Python object goes in as a pickle.
    In a process of its own: QSettings caches a file's values per process, so a read here would not unpickle."""
    subprocess.run([sys.executable, "-c", PLANT, str(path), key, str(value), *([kind] if kind else [])],
                   check=True, timeout=120, env=dict(os.environ, QT_QPA_PLATFORM="offscreen"))


@pytest.mark.parametrize("key", [SETTINGS_CONFIG, "plots/x_axis", "window/geometry"])
def test_a_pickle_planted_in_the_earlier_settings_file_never_runs(make_window, tmp_path, key):
    marker = tmp_path / "the-pickle-ran"
    legacy = legacy_gui_settings_file()
    legacy.parent.mkdir(parents=True, exist_ok=True)
    plant(legacy, key, marker, "pickle")
    assert b"@Variant(" in legacy.read_bytes() and b"the-pickle-ran" in legacy.read_bytes()
    window = make_window(settings=None)  # the home's settings, as the app opens them
    assert not marker.exists()
    assert window.form.config() == RunConfig()
    status = window.status_line.text()
    if key != "window/geometry":  # (the window's byte arrays are not carried over at all)
        assert (f"the saved {key} in {legacy} was a stored Variant object, which is never decoded (it could run "
                "code): not read") in status, status
    window.close()
    assert not marker.exists()
    assert gui_settings_file().is_file() and b"@Variant" not in gui_settings_file().read_bytes()


def test_the_earlier_settings_files_plain_text_is_carried_over(make_window):
    legacy = legacy_gui_settings_file()
    legacy.parent.mkdir(parents=True, exist_ok=True)
    saved = RunConfig(batch_size=48, model="mymodels:tiny_net", model_kwargs='{"a": "x\\ty, é = 1; b"}',
                      data_path="/tmp/ä b,c")
    plant(legacy, SETTINGS_CONFIG, saved.to_json())
    plant(legacy, "plots/x_axis", "samples_seen")
    plant(legacy, "window/geometry", b"\x01\xd9\xd0\xcb\x00\x03abc=,\"".hex(), "hex-bytes")
    window = make_window(settings=None)
    assert window.form.config() == saved
    assert window.plots.x_axis == "samples_seen"


def test_qsettings_escapes_are_undone():
    assert qt_ini_text(r'"a\"b\\c\x1\x61\tz"') == 'a"b\\c\x01a\tz'
    assert qt_ini_text("plain") == "plain"


def test_an_earlier_settings_file_that_is_garbage_is_named_not_read(tmp_path):
    path = tmp_path / "gui-settings.ini"
    path.write_bytes(os.urandom(4000))
    values, notes = legacy_ini_values(path)
    assert values == {} and len(notes) == 1 and str(path) in notes[0]


def test_settings_are_written_whole_or_not_at_all(tmp_path):
    path = tmp_path / "gui-settings.json"
    settings = SettingsFile(path)
    settings.set_value(SETTINGS_CONFIG, RunConfig(batch_size=48).to_json())
    assert settings.save() is None
    assert json.loads(path.read_text()) == {SETTINGS_CONFIG: RunConfig(batch_size=48).to_json()}
    assert [entry.name for entry in tmp_path.iterdir()] == ["gui-settings.json"]  # no temporary file left
    read, notes = SettingsFile.read(path)
    assert notes == [] and read.value(SETTINGS_CONFIG) == RunConfig(batch_size=48).to_json()


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o664, 0o600], ids=oct)
def test_a_settings_file_saved_keeps_its_permissions(tmp_path, mode):
    """The settings were written to a tempfile.mkstemp file (0600) and renamed over the file: a 0644 settings file,
    or one shared with a group (0664), became private after the first save."""
    path = tmp_path / "gui-settings.json"
    path.write_text("{}")
    path.chmod(mode)
    settings = SettingsFile(path)
    settings.set_value("plots/x_axis", "samples_seen")
    assert settings.save() is None
    assert json.loads(path.read_text()) == {"plots/x_axis": "samples_seen"}
    assert oct(path.stat().st_mode & 0o7777) == oct(mode)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
@pytest.mark.parametrize("umask", [0o022, 0o027], ids=oct)
def test_a_new_settings_file_gets_the_umasks_permissions(tmp_path, umask):
    path = tmp_path / "home" / "gui-settings.json"
    settings = SettingsFile(path)
    settings.set_value("plots/x_axis", "step")
    kept_umask = os.umask(umask)
    try:
        assert settings.save() is None
    finally:
        os.umask(kept_umask)
    assert oct(path.stat().st_mode & 0o7777) == oct(0o666 & ~umask)
    assert os.listdir(path.parent) == ["gui-settings.json"]  # no temporary left


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_settings_folder_that_cannot_be_written_is_said_not_raised(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        assert "were not saved" in SettingsFile(folder / "gui-settings.json").save()
    finally:
        folder.chmod(0o700)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="symlinks")
@pytest.mark.parametrize("relative", [False, True], ids=["absolute-link", "relative-link"])
def test_a_settings_file_that_is_a_symlink_stays_one_and_its_target_is_written(tmp_path, relative):
    """Dotfiles kept in a repository and linked into place: the save renamed a plain file over the link, the
    repository's file never updated again."""
    kept = tmp_path / "dotfiles" / "gui-settings.json"
    kept.parent.mkdir()
    kept.write_text(json.dumps({"plots/x_axis": "step"}))
    home = tmp_path / "home"
    home.mkdir()
    link = home / "gui-settings.json"
    link.symlink_to(os.path.relpath(kept, home) if relative else kept)
    settings, notes = SettingsFile.read(link)
    assert notes == [] and settings.value("plots/x_axis") == "step"
    settings.set_value("plots/x_axis", "samples_seen")
    assert settings.save() is None
    assert link.is_symlink() and os.readlink(link) == (os.path.relpath(kept, home) if relative else str(kept))
    assert json.loads(kept.read_text()) == {"plots/x_axis": "samples_seen"}
    assert sorted(entry.name for entry in home.iterdir()) == ["gui-settings.json"]
    assert sorted(entry.name for entry in kept.parent.iterdir()) == ["gui-settings.json"]  # no temporary left

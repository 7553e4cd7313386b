"""What the window keeps between launches (the last run's settings, geometry, splitter, x-axis), in the
workbench home: a fresh --home or WORKBENCH_HOME starts fresh, as its history does. The file is JSON text,
read without QSettings (settings_file.py says why)."""

from __future__ import annotations

import base64
import binascii
import os
from typing import Optional

from PySide6.QtCore import QByteArray

from workbench.config import RunConfig
from workbench.gui.saved_config import describe_notes, restore_config
from workbench.gui.settings_file import SettingsFile
from workbench.paths import gui_settings_file, legacy_gui_settings_file
from workbench.regular_file import regular_file_problem

SETTINGS_CONFIG = "run/config"
SETTINGS_GEOMETRY = "window/geometry"
SETTINGS_SPLITTER = "window/splitter"
SETTINGS_X_AXIS = "plots/x_axis"


def home_settings() -> tuple[SettingsFile, Optional[str]]:
    """The home's settings file and a note on what of it could not be read (None when all could). When
    something that is not a file sits at its path (a FIFO, a folder, a symlink loop), the settings are kept in
    memory for this session and that thing is left alone."""
    path = gui_settings_file()
    problem = regular_file_problem(path) if os.path.lexists(path) else None
    if problem is not None:
        return (SettingsFile(None),
                f"The window's settings file {path} {problem}: it is neither read nor written this session "
                "(move it aside to keep settings again).")
    settings, notes = SettingsFile.read(path, legacy_ini=legacy_gui_settings_file())
    return settings, (f"Saved settings: {'; '.join(notes)}." if notes else None)


def load_config(settings: SettingsFile) -> tuple[RunConfig, Optional[str]]:
    """The last run's settings, each one that cannot be used now reset to its default; the note says which
    and why (None when every saved setting was kept)."""
    config, notes = restore_config(settings.value(SETTINGS_CONFIG))
    return config, describe_notes(notes)


def save_config(settings: SettingsFile, config: RunConfig) -> None:
    settings.set_value(SETTINGS_CONFIG, config.to_json())


def stored_bytes(settings: SettingsFile, key: str) -> Optional[QByteArray]:
    """Binary window state (geometry, splitter), saved as base64 text; None when absent or not base64."""
    value = settings.value(key)
    if not isinstance(value, str) or not value:
        return None
    try:
        return QByteArray(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        return None


def store_bytes(settings: SettingsFile, key: str, value: QByteArray) -> None:
    settings.set_value(key, base64.b64encode(value.data()).decode("ascii"))

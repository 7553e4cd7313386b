"""What the window keeps between launches (the last run's settings, geometry, splitter, x-axis), in the
workbench home: a fresh --home or WORKBENCH_HOME starts fresh, as its history does."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

from PySide6.QtCore import QByteArray, QSettings

from workbench.config import RunConfig
from workbench.gui.saved_config import describe_notes, restore_config
from workbench.paths import gui_settings_file
from workbench.regular_file import regular_file_problem

SETTINGS_CONFIG = "run/config"
SETTINGS_GEOMETRY = "window/geometry"
SETTINGS_SPLITTER = "window/splitter"
SETTINGS_X_AXIS = "plots/x_axis"


def home_settings() -> tuple[QSettings, Optional[str]]:
    """The home's settings file, or (when something that is not a file sits at its path) a stand-in in a
    fresh temporary folder and a note saying so: QSettings would block on a FIFO there (on the GUI
    thread, at every launch) and read a device without end."""
    path = gui_settings_file()
    problem = regular_file_problem(path) if os.path.lexists(path) else None
    if problem is None:
        return QSettings(str(path), QSettings.Format.IniFormat), None
    stand_in = Path(tempfile.mkdtemp(prefix="workbench-settings-")) / path.name
    return (QSettings(str(stand_in), QSettings.Format.IniFormat),
            f"The window's settings file {path} {problem}: it is neither read nor written this session "
            "(move it aside to keep settings again).")


def load_config(settings: QSettings) -> tuple[RunConfig, Optional[str]]:
    """The last run's settings, each one that cannot be used now reset to its default; the note says which
    and why (None when every saved setting was kept)."""
    config, notes = restore_config(settings.value(SETTINGS_CONFIG))
    return config, describe_notes(notes)


def save_config(settings: QSettings, config: RunConfig) -> None:
    settings.setValue(SETTINGS_CONFIG, config.to_json())


def stored_bytes(settings: QSettings, key: str) -> Optional[QByteArray]:
    value = settings.value(key)
    return value if isinstance(value, QByteArray) and not value.isEmpty() else None

"""What the window keeps between launches (the last run's settings, geometry, splitter, x-axis), in the
workbench home: a fresh --home or WORKBENCH_HOME starts fresh, as its history does."""

from __future__ import annotations

from typing import Optional

from PySide6.QtCore import QByteArray, QSettings

from workbench.config import ConfigError, RunConfig
from workbench.paths import gui_settings_file

SETTINGS_CONFIG = "run/config"
SETTINGS_GEOMETRY = "window/geometry"
SETTINGS_SPLITTER = "window/splitter"
SETTINGS_X_AXIS = "plots/x_axis"


def home_settings() -> QSettings:
    return QSettings(str(gui_settings_file()), QSettings.Format.IniFormat)


def load_config(settings: QSettings) -> tuple[RunConfig, Optional[str]]:
    """The last run's settings, or the defaults with a note when the stored ones no longer fit."""
    stored = settings.value(SETTINGS_CONFIG)
    if not stored:
        return RunConfig(), None
    try:
        return RunConfig.from_json(str(stored)), None
    except ConfigError as error:
        return RunConfig(), f"Saved settings were out of date and were reset to the defaults ({error})."


def save_config(settings: QSettings, config: RunConfig) -> None:
    settings.setValue(SETTINGS_CONFIG, config.to_json())


def stored_bytes(settings: QSettings, key: str) -> Optional[QByteArray]:
    value = settings.value(key)
    return value if isinstance(value, QByteArray) and not value.isEmpty() else None

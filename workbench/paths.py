"""Where the workbench keeps things: one home folder (platformdirs), overridable by WORKBENCH_HOME."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "gpu-training-workbench"


def workbench_home() -> Path:
    """The run history and downloaded datasets live here (the GUI and the CLI share it)."""
    override = os.environ.get("WORKBENCH_HOME")
    return Path(override).expanduser() if override else Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def default_datasets_dir() -> Path:
    return workbench_home() / "datasets"


def gui_settings_file() -> Path:
    """The desktop app's settings (last run's settings, window layout): kept with the history it belongs to."""
    return workbench_home() / "gui-settings.json"


def legacy_gui_settings_file() -> Path:
    """Where earlier versions kept them (QSettings' INI): read once, for its plain text values only."""
    return workbench_home() / "gui-settings.ini"

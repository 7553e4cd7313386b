"""The window's saved settings (last run's settings, geometry, splitter, x-axis): a JSON object of text values in
the workbench home, read and written here, without Qt.

Not QSettings: PySide6's QSettings unpickles a value stored as ``@Variant(…)`` as it reads it, so a crafted
``gui-settings.ini`` ran its code at every launch. Here a saved value is only ever JSON text (binary state is
base64). The ``gui-settings.ini`` of earlier versions is read once, with configparser, for its plain text values
alone; a ``@Variant`` in it is named on the status line and never decoded.
"""

from __future__ import annotations

import configparser
import json
import os
import re
from pathlib import Path
from typing import Any, Optional

from workbench.regular_file import NotARegularFile, read_regular_file, regular_file_problem
from workbench.replaced_file import created_temporary_beside, keep_permissions, replaced_file

MAX_BYTES = 1 << 20  # a settings file is a few KiB; a larger one is not ours
# The earlier file's keys worth keeping ("section/key", as QSettings named them); the window's byte arrays
# (geometry, splitter) are left: a window opened once at its default size is no loss.
LEGACY_TEXT_KEYS = ("run/config", "plots/x_axis")


class SettingsFile:
    """Text values by key, kept in ``path`` (None: kept in memory only, for a session that must not touch the
    file at the home's path)."""

    def __init__(self, path: Optional[Path], values: Optional[dict[str, Any]] = None):
        self.path = path
        self._values: dict[str, Any] = dict(values or {})

    @classmethod
    def read(cls, path: Path, legacy_ini: Optional[Path] = None) -> tuple["SettingsFile", list[str]]:
        """The settings saved at ``path`` (or, where there are none yet, the text values of ``legacy_ini``) and
        notes on what could not be read: the file is then read as empty, and rewritten on the next save."""
        if not os.path.lexists(path):
            if legacy_ini is None or not os.path.lexists(legacy_ini):
                return cls(path), []
            values, notes = legacy_ini_values(legacy_ini)
            return cls(path, values), notes
        try:
            data = read_regular_file(path, MAX_BYTES)
        except NotARegularFile as error:
            return cls(path), [f"the settings file {error}: not read"]
        if len(data) >= MAX_BYTES:
            return cls(path), [f"the settings file {path} is larger than {MAX_BYTES:,} bytes: not read"]
        try:
            loaded = json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
            why = "nested too deeply" if isinstance(error, RecursionError) else "not UTF-8 JSON"
            return cls(path), [f"the settings file {path} could not be read ({why}): all reset to the defaults"]
        if not isinstance(loaded, dict):
            return cls(path), [f"the settings file {path} holds a JSON {type(loaded).__name__}, not an object: "
                               "all reset to the defaults"]
        return cls(path, loaded), []

    def value(self, key: str) -> Any:
        return self._values.get(key)

    def set_value(self, key: str, value: str) -> None:
        self._values[key] = value

    def save(self) -> Optional[str]:
        """Write the settings beside their file, then rename over it (over a symlink's target: the link stays; the
        file replaced keeps its permissions, a new one gets the umask's); None, or why they were not saved (a full
        or read-only disk: the window is closing, nothing else is lost)."""
        if self.path is None:
            return None
        temporary = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            target = replaced_file(self.path)
            temporary = created_temporary_beside(target)
            with open(temporary, "w", encoding="utf-8") as stream:
                json.dump(self._values, stream, indent=1, sort_keys=True)
            keep_permissions(target, temporary)
            os.replace(temporary, target)  # a rename: the file is replaced whole, never written into
            temporary = None
        except OSError as error:
            return f"the window's settings were not saved to {self.path}: {error.strerror or error}"
        finally:
            if temporary is not None:
                try:
                    os.unlink(temporary)
                except OSError:
                    pass
        return None


def legacy_ini_values(path: Path) -> tuple[dict[str, str], list[str]]:
    """The plain text values of an earlier version's QSettings INI file, and notes on what was not read.

    configparser reads the lines; QSettings' escapes are undone here. A value QSettings stored as a Python
    object (``@Variant(…)``: a pickle) is never decoded."""
    problem = regular_file_problem(path)
    if problem is not None:
        return {}, [f"the earlier settings file {path} {problem}: not read"]
    try:
        text = read_regular_file(path, MAX_BYTES).decode("utf-8", errors="replace")
    except NotARegularFile as error:
        return {}, [f"the earlier settings file {error}: not read"]
    parser = configparser.RawConfigParser(strict=False, delimiters=("=",), comment_prefixes=(";",),
                                          inline_comment_prefixes=None, empty_lines_in_values=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  (keys keep their case, as Qt's do)
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as error:
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        return {}, [f"the earlier settings file {path} could not be read ({first_line}): all reset to the defaults"]
    values: dict[str, str] = {}
    notes = []
    for key in LEGACY_TEXT_KEYS:
        section, _, option = key.partition("/")
        if not parser.has_option(section, option):
            continue
        value = qt_ini_text(parser.get(section, option))
        if value.startswith("@") and not value.startswith("@@"):  # @Variant(…), @ByteArray(…): Qt's typed values
            kind = value[1:].partition("(")[0]
            notes.append(f"the saved {key} in {path} was a stored {kind} object, which is never decoded "
                         "(it could run code): not read")
            continue
        values[key] = value[1:] if value.startswith("@@") else value
    return values, notes


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            '"': '"', "'": "'", "?": "?", "\\": "\\", ";": ";", ",": ",", "=": "="}
_ESCAPE = re.compile(r'\\(x[0-9a-fA-F]+|[0-7]{1,3}|.)', re.DOTALL)


def qt_ini_text(raw: str) -> str:
    """A value as QSettings wrote it to an INI file (quoted where it holds , ; = or escapes), as text."""
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        raw = raw[1:-1]

    def unescape(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] == "x" and len(code) > 1:
            return chr(min(int(code[1:], 16), 0x10FFFF))
        if code[0] in "01234567":
            return chr(int(code, 8))
        return _ESCAPES.get(code, code)

    return _ESCAPE.sub(unescape, raw)

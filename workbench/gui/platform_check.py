"""Can Qt open a window here? Asked before the QApplication exists, because Qt's answer is an abort.

Without a display, or with the xcb platform plugin's system libraries missing (a minimal Linux lacks
libxcb-cursor0, libxcb-icccm4 and libxcb-keysyms1), creating the QApplication prints "Could not load
the Qt platform plugin 'xcb'" and aborts the process (exit 134). This module finds both cases first
and words them as one line: what to install, or how to run without a window. No Qt is imported: the
plugin's needed libraries are read from its ELF header and looked up as the dynamic loader would.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import struct
import sys
from pathlib import Path
from typing import Mapping, Optional

# Libraries whose Debian/Ubuntu package is not named by the usual rule (see debian_package).
_PACKAGES = {"libglib-2.0.so.0": "libglib2.0-0", "libgthread-2.0.so.0": "libglib2.0-0",
             "libgobject-2.0.so.0": "libglib2.0-0"}
OFFSCREEN_HINT = "QT_QPA_PLATFORM=offscreen runs the app without showing a window"


def platform_problem(environ: Mapping[str, str] = os.environ) -> Optional[str]:
    """Why Qt cannot open a window in this environment, as one line; None when it should (or when only Qt
    can tell: not Linux, or a platform the user chose)."""
    if not sys.platform.startswith("linux"):
        return None
    chosen = environ.get("QT_QPA_PLATFORM", "").split(":", 1)[0].strip()
    if chosen and chosen != "xcb":
        return None  # offscreen, wayland, vnc…: the user's choice
    if not chosen and environ.get("WAYLAND_DISPLAY"):
        return None  # Qt takes its wayland plugin
    if not environ.get("DISPLAY"):
        return ("workbench: no display to open the window on (neither DISPLAY nor WAYLAND_DISPLAY is set): start "
                f"it in a desktop session (or over ssh -X), or train headless with `workbench run` ({OFFSCREEN_HINT})")
    missing = missing_xcb_libraries()
    if not missing:
        return None
    packages = " ".join(dict.fromkeys(debian_package(name) for name in missing))
    return (f"workbench: the window cannot open: Qt's xcb platform needs {', '.join(missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed; on Debian/Ubuntu: sudo apt install {packages} "
            f"({OFFSCREEN_HINT})")


def xcb_plugin() -> Optional[Path]:
    """PySide6's xcb platform plugin, found without importing PySide6."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        plugin = Path(root) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
        if plugin.is_file():
            return plugin
    return None


def missing_xcb_libraries() -> list[str]:
    """The system libraries the xcb plugin (and Qt's xcb library it loads) need that cannot be loaded."""
    plugin = xcb_plugin()
    if plugin is None:
        return []
    bundled = plugin.parents[2] / "lib"  # Qt's own libraries ($ORIGIN/../../lib)
    names = needed_libraries(plugin)
    for qt_xcb in [name for name in names if "Xcb" in name and (bundled / name).is_file()]:  # libQt6XcbQpa
        names += needed_libraries(bundled / qt_xcb)
    system = [name for name in dict.fromkeys(names) if not (bundled / name).is_file()]
    return [name for name in system if not loadable(name)]


def loadable(soname: str) -> bool:
    """Whether the dynamic loader finds (and can load) the library, as it would for Qt a moment later."""
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def debian_package(soname: str) -> str:
    """"libxcb-icccm.so.4" → "libxcb-icccm4", "libX11.so.6" → "libx11-6" (Debian's library package names)."""
    if soname in _PACKAGES:
        return _PACKAGES[soname]
    base, _, version = soname.partition(".so.")
    base = base.lower()
    return f"{base}{'-' if base[-1:].isdigit() else ''}{version}" if version else base


def needed_libraries(path: Path) -> list[str]:
    """The DT_NEEDED entries of an ELF shared library ([] where it cannot be read)."""
    try:
        data = path.read_bytes()
        return _needed(data)
    except (OSError, struct.error, ValueError, IndexError):
        return []


def _needed(data: bytes) -> list[str]:
    if data[:4] != b"\x7fELF":
        return []
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    if wide:
        shoff, = struct.unpack_from(order + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(order + "HH", data, 0x3A)
        section = order + "IIQQQQIIQQ"  # name, type, flags, addr, offset, size, link, info, align, entsize
        entry = order + "qQ"
    else:
        shoff, = struct.unpack_from(order + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(order + "HH", data, 0x2E)
        section = order + "IIIIIIIIII"
        entry = order + "iI"
    sections = [struct.unpack_from(section, data, shoff + index * shentsize) for index in range(shnum)]
    names: list[str] = []
    for _, kind, _, _, offset, size, link, *_ in sections:
        if kind != 6:  # SHT_DYNAMIC
            continue
        strings = sections[link][4]
        for position in range(offset, offset + size, struct.calcsize(entry)):
            tag, value = struct.unpack_from(entry, data, position)
            if tag == 0:  # DT_NULL
                break
            if tag == 1:  # DT_NEEDED
                end = data.index(b"\0", strings + value)
                names.append(data[strings + value : end].decode())
    return names

"""`workbench` on a machine where Qt cannot open a window: one line saying what to do, exit 2, never Qt's abort.
Each case runs in a fresh interpreter: without the check, Qt aborts the whole process (exit 134)."""

import os
import subprocess
import sys
import textwrap

import pytest

from workbench.gui import platform_check

NO_DISPLAY = ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")


def launch(tmp_path, code: str = "from workbench.cli import main; raise SystemExit(main([]))",
           **environ: str) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if name not in NO_DISPLAY}
    env.update(environ, WORKBENCH_HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)


def test_without_a_display_it_says_how_to_run_and_exits_2(tmp_path):
    result = launch(tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "no display" in lines[0] and "QT_QPA_PLATFORM=offscreen" in lines[0] and "workbench run" in lines[0]


def test_missing_xcb_libraries_are_named_with_the_packages_to_install(tmp_path):
    result = launch(tmp_path, """
        from workbench.gui import platform_check
        platform_check.missing_xcb_libraries = lambda: ["libxcb-cursor.so.0", "libxcb-icccm.so.4",
                                                        "libxcb-keysyms.so.1"]
        from workbench.cli import main
        raise SystemExit(main([]))
        """, DISPLAY=":99")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "sudo apt install libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1" in lines[0]
    assert "QT_QPA_PLATFORM=offscreen" in lines[0] and "Could not load" not in result.stderr


def test_a_platform_the_user_chose_is_left_to_qt(monkeypatch):
    monkeypatch.setattr(platform_check, "missing_xcb_libraries", lambda: ["libxcb-cursor.so.0"])
    assert platform_check.platform_problem({"QT_QPA_PLATFORM": "offscreen"}) is None
    assert platform_check.platform_problem({"WAYLAND_DISPLAY": "wayland-0"}) is None
    assert "libxcb-cursor0" in platform_check.platform_problem({"QT_QPA_PLATFORM": "xcb", "DISPLAY": ":0"})
    monkeypatch.setattr(platform_check, "missing_xcb_libraries", lambda: [])
    assert platform_check.platform_problem({"DISPLAY": ":0"}) is None


@pytest.mark.skipif(platform_check.xcb_plugin() is None, reason="PySide6 has no xcb plugin here")
def test_the_plugins_own_needed_libraries_are_read_and_looked_up(monkeypatch):
    """The real plugin's ELF header lists what it needs: Qt's xcb library is followed into, its own are skipped."""
    absent = {"libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1"}
    monkeypatch.setattr(platform_check, "loadable", lambda name: name not in absent)
    assert sorted(platform_check.missing_xcb_libraries()) == sorted(absent)
    needed = platform_check.needed_libraries(platform_check.xcb_plugin())
    assert "libQt6XcbQpa.so.6" in needed and "libc.so.6" not in platform_check.missing_xcb_libraries()


def test_library_names_become_debian_package_names():
    names = ["libxcb-icccm.so.4", "libX11.so.6", "libX11-xcb.so.1", "libGL.so.1", "libxkbcommon-x11.so.0",
             "libglib-2.0.so.0", "libxcb.so.1", "libxcb-render-util.so.0"]
    assert [platform_check.debian_package(name) for name in names] == [
        "libxcb-icccm4", "libx11-6", "libx11-xcb1", "libgl1", "libxkbcommon-x11-0", "libglib2.0-0", "libxcb1",
        "libxcb-render-util0"]

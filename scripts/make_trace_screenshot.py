"""Remake assets/screenshot-trace.png: the window's Trace tab with a real profiler trace open.

    python scripts/make_trace_screenshot.py ../shared/traces/v100-training.json.gz

The trace is dropped on the window as a user would drop it; the picture is taken once it has been read. A scratch
workbench home keeps it out of your history.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path, help="a trace file, or a folder of rank traces")
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "screenshot-trace.png")
    parser.add_argument("--size", default="1400x900", help="window size, WIDTHxHEIGHT")
    args = parser.parse_args()

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    scratch = Path(tempfile.mkdtemp(prefix="workbench-screenshot-"))
    os.environ["WORKBENCH_HOME"] = str(scratch / "home")

    from PySide6.QtCore import QSettings

    from workbench.gui.app import build_window, create_application
    from workbench.gui.background import wait_for_background_calls
    from workbench.history.store import HistoryStore

    app = create_application()
    store = HistoryStore.open()
    window = build_window(store, settings=QSettings(str(scratch / "settings.ini"), QSettings.Format.IniFormat))
    window.resize(*(int(value) for value in args.size.split("x")))
    window.show()
    window.drop_paths([str(args.trace)])
    while window.trace_tab.busy or window.controller.device is None:  # the trace read, the device panel filled
        app.processEvents()
        time.sleep(0.02)
    app.processEvents()
    print(window.trace_tab.status.text())
    window.grab().save(str(args.out))
    print(f"wrote {args.out}")
    window.close()
    wait_for_background_calls()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

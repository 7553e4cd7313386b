"""Remake assets/screenshot-trace.png: the window's Trace tab with a real profiler trace open (and, given more
traces, assets/screenshot-trace-compare.png: them all selected side by side in the Runs tab).

    python scripts/make_trace_screenshot.py ../shared/traces/v100-training.json.gz
    python scripts/make_trace_screenshot.py --compare-only tests/engine/data/cpu-input-heavy-num_workers0.pt.trace.json.gz \
        tests/engine/data/cpu-loader-keeps-up-num_workers0.pt.trace.json.gz

Each trace is dropped on the window as a user would drop it; the pictures are taken once they have been read. A
scratch workbench home keeps them out of your history.
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
    parser.add_argument("traces", type=Path, nargs="+", help="trace files, or folders of rank traces")
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "screenshot-trace.png")
    parser.add_argument("--compare-out", type=Path, default=ROOT / "assets" / "screenshot-trace-compare.png")
    parser.add_argument("--compare-only", action="store_true", help="only the Runs tab picture")
    parser.add_argument("--size", default="1400x900", help="window size, WIDTHxHEIGHT")
    args = parser.parse_args()

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    scratch = Path(tempfile.mkdtemp(prefix="workbench-screenshot-"))
    os.environ["WORKBENCH_HOME"] = str(scratch / "home")

    from workbench.gui.app import build_window, create_application
    from workbench.gui.background import wait_for_background_calls
    from workbench.gui.runs_view import RunsView
    from workbench.gui.settings_file import SettingsFile
    from workbench.history.store import HistoryStore

    app = create_application()
    store = HistoryStore.open()
    window = build_window(store, settings=SettingsFile(scratch / "settings.json"))
    window.resize(*(int(value) for value in args.size.split("x")))
    window.show()
    for trace in args.traces:
        window.drop_paths([str(trace)])
        while window.trace_tab.busy or window.controller.device is None:  # read, and the device panel filled
            app.processEvents()
            time.sleep(0.02)
        print(window.trace_tab.status.text())
    for _ in range(25):  # the layout settles over a few passes (one pass grabbed the device panel's text clipped)
        app.processEvents()
        time.sleep(0.02)
    if not args.compare_only:
        window.grab().save(str(args.out))
        print(f"wrote {args.out}")
    if len(args.traces) > 1:
        view = window.findChild(RunsView)
        view.refresh()
        while view.is_reading():  # the table is read off the GUI thread
            app.processEvents()
            time.sleep(0.02)
        view.select_runs([record.id for record in store.list_runs()])
        window.tabs.setCurrentWidget(window.runs_tab)
        app.processEvents()
        window.grab().save(str(args.compare_out))
        print(f"wrote {args.compare_out}")
    window.close()
    wait_for_background_calls()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

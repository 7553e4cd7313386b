"""Make assets/sweep-view.png: the sweep view fed by a real sweep (the engine, on this machine).

    python scripts/sweep_view_screenshot.py                     # num_workers × augment on synthetic data
    python scripts/sweep_view_screenshot.py --data cifar10-subset.npz

Runs the sweep through ``run_sweep``, recorded in a scratch history (your own is untouched), feeds
every event to a SweepView as the GUI would, and saves the widget. The view is standalone (not yet
in the main window).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="an .npz dataset; default: synthetic")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "sweep-view.png")
    parser.add_argument("--size", default="1280x760")
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["WORKBENCH_HOME"] = tempfile.mkdtemp(prefix="workbench-sweep-screenshot-")

    from PySide6.QtWidgets import QApplication

    from workbench.config import RunConfig
    from workbench.experiments.recording import HistoryRecording
    from workbench.experiments.sweep import SweepAxis, SweepPlan, run_sweep
    from workbench.gui.sweep_view import SweepView

    if args.data:
        base = RunConfig(dataset="npz", data_path=str(args.data.resolve()), epochs=args.epochs, batch_size=128,
                         log_every=5)
    else:
        base = RunConfig(dataset="synthetic", synthetic_size=2048, epochs=args.epochs, batch_size=128, log_every=2)
    plan = SweepPlan(base, (SweepAxis("augment", ("cpu", "gpu")), SweepAxis("num_workers", (0, 1, 2))))

    app = QApplication.instance() or QApplication([])
    view = SweepView()
    width, height = (int(value) for value in args.size.split("x"))
    view.resize(width, height)
    view.show()
    with HistoryRecording(source="gui") as recording:
        for event in run_sweep(plan, lambda: False, recording):
            view.handle(event)
            app.processEvents()
    view.redraw()
    app.processEvents()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    view.grab().save(str(args.out))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Make assets/screenshot.png: the real app after two real short runs, the second changing one thing.

    python scripts/make_screenshot.py                                   # synthetic data
    python scripts/make_screenshot.py --data ../shared/data/cifar10-subset.npz   # real CIFAR-10 images

Run 1 loads batches in the training thread with per-image CPU augmentation; run 2 uses two loader
workers and batched augmentation: the dimmed curves of run 1 stay underneath, so the effect shows.
Uses its own settings file and workbench home, so your own settings and history are untouched.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="an .npz dataset (e.g. the CIFAR-10 subset); default: synthetic")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "screenshot.png")
    parser.add_argument("--size", default="1440x900", help="window size, WIDTHxHEIGHT")
    args = parser.parse_args()

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    scratch = Path(tempfile.mkdtemp(prefix="workbench-screenshot-"))
    os.environ["WORKBENCH_HOME"] = str(scratch / "home")

    from PySide6.QtCore import QSettings, QTimer

    from workbench.config import RunConfig
    from workbench.gui.app import create_application, run_window
    from workbench.gui.main_window import MainWindow

    if args.data:
        base = RunConfig(dataset="npz", data_path=str(args.data.resolve()), epochs=args.epochs, batch_size=64,
                         lr=0.05, log_every=5, device="auto")
    else:
        base = RunConfig(dataset="synthetic", synthetic_size=4096, epochs=args.epochs, batch_size=64, lr=0.02,
                         log_every=5, device="auto")
    runs = [base.replace(num_workers=0, augment="cpu"), base.replace(num_workers=2, augment="gpu")]

    app = create_application()
    window = MainWindow(settings=QSettings(str(scratch / "settings.ini"), QSettings.Format.IniFormat))
    width, height = (int(value) for value in args.size.split("x"))
    window.resize(width, height)
    outcomes: list[str] = []

    def start_next() -> None:
        config = runs[len(outcomes)]
        window.form.set_config(config)
        if not window.start_button.isEnabled():
            print(f"cannot start: {window.start_button.toolTip()}", file=sys.stderr)
            window.close()
            return
        window.start_button.click()

    def on_ended(event) -> None:
        outcomes.append(event.status)
        print(f"run {len(outcomes)}: {event.status} {event.reason or ''}", flush=True)

    def on_finished() -> None:  # the thread has ended: the next run may start, or the picture be taken
        if outcomes and outcomes[-1] != "finished":
            window.close()
        elif len(outcomes) < len(runs):
            QTimer.singleShot(200, start_next)
        else:
            QTimer.singleShot(300, take_screenshot)

    def take_screenshot() -> None:
        window.tabs.setCurrentIndex(0)
        window.plots.redraw()
        app.processEvents()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        window.grab().save(str(args.out))
        print(f"wrote {args.out}", flush=True)
        window.close()

    window.session.run_ended.connect(on_ended)
    window.session.finished.connect(on_finished)
    QTimer.singleShot(2500, start_next)  # after the device probe: the form knows the hardware
    code = run_window(app, window)
    return code if outcomes == ["finished"] * len(runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())

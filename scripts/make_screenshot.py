"""Make the README's screenshots: the real app after real short runs, each changing one thing, then a sweep.

    python scripts/make_screenshot.py                                           # synthetic data
    python scripts/make_screenshot.py --data cifar10-subset.npz                 # real CIFAR-10 images
    python scripts/make_screenshot.py --folder ~/pets --image-size 64 --model mymodels:tiny_net \
        --model-kwargs '{"width": 32}'                                          # your own images and model

Writes, under assets/ (or --out-dir):
  screenshot.png              the Live tab after the runs, two of them selected in the Runs tab
  screenshot-runs.png         the Runs tab: the table and the comparison of the two selected runs
  screenshot-gpu-time.png     the GPU time tab: the last run's profiler samples (stacked bars on a GPU,
                              host ops on a CPU), its top kernels / ops and its findings with Apply buttons
  screenshot-sweep.png        the Experiments tab after a sweep started from the window (batch size)
  screenshot-1024x700.png     the whole window at 1024×700 (a small laptop screen), Live tab
With --folder, only:
  screenshot-folder.png       the Live tab after two runs on the image folder at --image-size with --model
                              (augment=cpu, then augment=gpu), the form showing the folder, size and model
  screenshot-folder-samples.png  the Sample batch tab: the folder's images as the last run's settings feed them

Run 1 loads batches in the training thread with per-image CPU augmentation; the next runs change
one setting each (loader workers, where augmentation runs, the batch size, the learning rate), so
each run's name says what changed; the last run is profiled (every --profile-every steps). The plots'
x-axis is "samples seen", where runs with different batch sizes line up. On a CUDA GPU (device=auto
finds it) the memory plot shows torch reserved, torch allocated and NVML used, and the GPU time tab the
kernel timeline's breakdown. Uses its own settings file and workbench home: your settings and history
are untouched.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEEP_BATCHES = (64, 128, 256)  # the sweep's members, after the runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="an .npz dataset (e.g. the CIFAR-10 subset); default: synthetic")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--out-dir", type=Path, default=ROOT / "assets")
    parser.add_argument("--size", default="1440x900", help="window size of the first two pictures, WIDTHxHEIGHT")
    parser.add_argument("--small-size", default="1024x700", help="window size of the third picture")
    parser.add_argument("--select", default="2,3", help="the runs to select in the Runs tab (run numbers)")
    parser.add_argument("--profile-every", type=int, default=40, help="the profiled run samples every N steps")
    parser.add_argument("--sweep-steps", type=int, default=24, help="the length of each sweep member, in steps")
    parser.add_argument("--folder", type=Path, help="an image folder (one sub-folder per class): screenshot-folder.png")
    parser.add_argument("--image-size", type=int, default=64, help="the folder runs' image_size")
    parser.add_argument("--model", default="small-cnn",
                        help="the folder runs' model: a built-in, a torchvision name or package.module:function")
    parser.add_argument("--model-kwargs", default="", help="the folder runs' model_kwargs (a JSON object)")
    args = parser.parse_args()

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    scratch = Path(tempfile.mkdtemp(prefix="workbench-screenshot-"))
    os.environ["WORKBENCH_HOME"] = str(scratch / "home")

    from PySide6.QtCore import QTimer

    from workbench.config import RunConfig
    from workbench.engine.events import RunEnded
    from workbench.experiments.sweep import SweepAxis
    from workbench.gui.app import build_window, create_application, run_window
    from workbench.gui.runs_view import RunsView
    from workbench.gui.settings_file import SettingsFile
    from workbench.history.store import HistoryStore

    if args.folder:
        base = RunConfig(dataset="folder", data_path=str(args.folder.expanduser().resolve()),
                         image_size=args.image_size, model=args.model, model_kwargs=args.model_kwargs,
                         epochs=args.epochs, batch_size=64, lr=0.05, log_every=5, device="auto")
    elif args.data:
        base = RunConfig(dataset="npz", data_path=str(args.data.resolve()), epochs=args.epochs, batch_size=64,
                         lr=0.05, log_every=5, device="auto")
    else:
        base = RunConfig(dataset="synthetic", synthetic_size=4096, epochs=args.epochs, batch_size=64, lr=0.02,
                         log_every=5, device="auto")
    if args.folder:  # the workers decode the files: where augmentation runs is the one change
        runs = [base.replace(num_workers=2, augment="cpu"), base.replace(num_workers=2, augment="gpu")]
    else:
        first = base.replace(num_workers=0, augment="cpu")
        runs = [first]
        for change in (dict(num_workers=2), dict(augment="gpu"), dict(batch_size=128), dict(lr=base.lr * 2)):
            runs.append(runs[-1].replace(**change))
        runs[-1] = runs[-1].replace(profile=True, profile_every=args.profile_every)

    app = create_application()
    store = HistoryStore.open()
    window = build_window(store, settings=SettingsFile(scratch / "settings.json"))
    view = window.findChild(RunsView)
    big = tuple(int(value) for value in args.size.split("x"))
    small = tuple(int(value) for value in args.small_size.split("x"))
    window.resize(*big)
    outcomes: list[str] = []
    args.out_dir.mkdir(parents=True, exist_ok=True)

    def start_next() -> None:
        if window.controller.device is None:  # the form knows the hardware once the probe has answered
            QTimer.singleShot(200, start_next)
            return
        window.form.set_config(runs[len(outcomes)])
        if not window.start_button.isEnabled():
            print(f"cannot start: {window.start_button.toolTip()}", file=sys.stderr)
            window.close()
            return
        window.start_button.click()

    def on_ended(event) -> None:
        outcomes.append(event.status)
        print(f"run {len(outcomes)}: {event.status} {event.reason or ''}", flush=True)

    sweep_started = False

    def on_finished() -> None:  # the thread has ended: the next run may start, or the pictures be taken
        if outcomes and outcomes[-1] != "finished":
            window.close()
        elif len(outcomes) < len(runs):
            QTimer.singleShot(200, start_next)
        elif args.folder:
            QTimer.singleShot(300, take_folder_screenshot)
        elif not sweep_started:
            QTimer.singleShot(300, take_screenshots)
        else:
            QTimer.singleShot(300, take_sweep_screenshots)

    def grab(name: str) -> None:
        window.plots.redraw()
        window.experiments.sweep_view.redraw()
        app.processEvents()
        path = args.out_dir / name
        window.grab().save(str(path))
        print(f"wrote {path}", flush=True)

    def take_screenshots() -> None:
        view.refresh(then=take_screenshots_of_the_runs)  # read off the GUI thread: select once the table holds them

    def take_screenshots_of_the_runs() -> None:
        ids = sorted(record.id for record in store.list_runs())
        view.select_runs([ids[int(number) - 1] for number in args.select.split(",")])
        view.comparison.differences_only.setChecked(True)
        window.plots.set_x_axis("samples_seen")
        window.tabs.setCurrentIndex(0)
        grab("screenshot.png")
        window.tabs.setCurrentWidget(window.runs_tab)
        grab("screenshot-runs.png")
        window.tabs.setCurrentWidget(window.gpu_time)
        grab("screenshot-gpu-time.png")
        window.resize(*small)
        window.tabs.setCurrentIndex(0)
        QTimer.singleShot(300, take_small_then_sweep)

    def take_folder_screenshot() -> None:
        from PySide6.QtWidgets import QScrollArea

        # The form scrolled just enough to show the model's fields below the data's.
        window.form.findChild(QScrollArea, "settingsScroll").ensureWidgetVisible(window.form.editor("model_kwargs"))
        window.plots.set_x_axis("samples_seen")
        window.tabs.setCurrentIndex(0)
        grab("screenshot-folder.png")
        window.tabs.setCurrentWidget(window.sample_view)
        QTimer.singleShot(3000, take_folder_samples)  # the preview decodes the folder's files off this thread

    def take_folder_samples() -> None:
        grab("screenshot-folder-samples.png")
        window.close()

    def take_small_then_sweep() -> None:
        nonlocal sweep_started
        grab(f"screenshot-{small[0]}x{small[1]}.png")
        window.resize(*big)
        # A sweep from the window, as a user starts one from the Experiments tab: the profiled run's
        # settings over three batch sizes, each member a short run.
        window.form.set_config(runs[-1].replace(profile=False))
        window.tabs.setCurrentWidget(window.experiments)
        sweep_started = True
        window.controller.start_sweep([SweepAxis("batch_size", SWEEP_BATCHES)], {"max_steps": args.sweep_steps})

    def take_sweep_screenshots() -> None:
        window.tabs.setCurrentWidget(window.experiments)
        grab("screenshot-sweep.png")
        window.close()

    window.training_thread.event.connect(lambda event: isinstance(event, RunEnded) and on_ended(event))
    window.training_thread.finished.connect(on_finished)
    QTimer.singleShot(500, start_next)
    try:
        code = run_window(app, window)
    finally:
        store.close()
    expected = len(runs) + (0 if args.folder else len(SWEEP_BATCHES))
    return code if outcomes == ["finished"] * expected else 1


if __name__ == "__main__":
    raise SystemExit(main())

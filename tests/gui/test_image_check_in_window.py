"""The window checks an image folder's files before a run (issue 30 §2): on the training thread, never the GUI's,
with the count on the progress bar; Stop cancels it; unreadable files are listed at once and nothing runs."""

from __future__ import annotations

import threading
import time

from builders import FakeRun, collect
from own_images import make_folder

from workbench import image_check
from workbench.config import RunConfig
from workbench.engine.events import RunEnded


def start_and_collect(qtbot, window, config: RunConfig, after_start=None) -> RunEnded:
    ended: list[RunEnded] = []
    keep = collect(RunEnded, ended)
    window.training_thread.event.connect(keep)
    try:
        window.form.set_config(config)
        with qtbot.waitSignal(window.training_thread.finished, timeout=60_000):
            window.start_button.click()
            if after_start is not None:
                after_start()
    finally:
        window.training_thread.event.disconnect(keep)
    assert len(ended) == 1
    return ended[0]


def test_unreadable_images_are_listed_in_the_window_found_off_the_gui_thread_and_nothing_runs(
        qtbot, make_window, tmp_path, monkeypatch):
    root = make_folder(tmp_path / "pets")
    bad = [root / "dog" / "empty.jpg", root / "fox" / "notes.png"]
    bad[0].write_bytes(b"")
    bad[1].write_text("not an image\n")
    threads = set()
    checked = image_check._problem
    monkeypatch.setattr(image_check, "_problem",
                        lambda path, full: threads.add(threading.current_thread()) or checked(path, full))
    run = FakeRun()
    window = make_window(run_function=run)
    window.show()
    ended = start_and_collect(qtbot, window, RunConfig(dataset="folder", data_path=str(root), device="cpu"))
    assert threads and threading.main_thread() not in threads
    assert ended.status == "failed" and ended.kind == "data" and run.configs == []
    shown = window.run_message.text()
    assert shown.startswith("Run failed: 2 of ") and all(str(path) in shown for path in bad)


def test_stop_cancels_the_image_check(qtbot, make_window, tmp_path, monkeypatch):
    root = make_folder(tmp_path / "pets", per_class=30)
    checked = image_check._problem
    monkeypatch.setattr(image_check, "_problem", lambda path, full: time.sleep(0.05) or checked(path, full))
    run = FakeRun()
    window = make_window(run_function=run)
    window.show()

    def stop_once_checking():
        qtbot.waitUntil(lambda: "Checking images:" in window.progress.format(), timeout=30_000)
        window.stop_button.click()

    ended = start_and_collect(qtbot, window, RunConfig(dataset="folder", data_path=str(root), device="cpu"),
                              after_start=stop_once_checking)
    assert ended.status == "stopped" and "while checking the images" in ended.reason and run.configs == []


def test_with_skip_unreadable_images_ticked_the_run_starts(qtbot, make_window, tmp_path):
    root = make_folder(tmp_path / "pets")
    (root / "dog" / "empty.jpg").write_bytes(b"")
    run = FakeRun(steps=2)
    window = make_window(run_function=run)
    window.show()
    window.form.set_config(RunConfig(dataset="folder", data_path=str(root), device="cpu"))
    box = window.form.editor("skip_bad_images")
    assert box.isEnabled() and not box.isChecked()
    box.setChecked(True)
    ended = start_and_collect(qtbot, window, window.form.config())
    assert ended.status == "finished" and [config.skip_bad_images for config in run.configs] == [True]

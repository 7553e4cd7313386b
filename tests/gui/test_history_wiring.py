"""The app as main() assembles it: GUI runs go into the same history as CLI runs and show in the Runs tab."""

from builders import TINY_RUN

from workbench.cli import main as cli_main
from workbench.engine import probe_device
from workbench.gui.app import build_window
from workbench.gui.background import wait_for_background_calls
from workbench.gui.engine_calls import engine_run
from workbench.gui.runs_view import RunsView
from workbench.history.store import HistoryStore


def test_a_gui_run_and_a_cli_run_share_one_history(qtbot, settings, isolated_workbench_home, capsys):
    store = HistoryStore.open()
    window = build_window(store, settings=settings, run_function=engine_run,
                          probe_function=lambda: probe_device("auto"))
    qtbot.addWidget(window)
    try:
        window.show()
        qtbot.waitUntil(lambda: window.controller.device is not None, timeout=30_000)
        window.form.set_config(TINY_RUN)
        with qtbot.waitSignal(window.training_thread.finished, timeout=60_000):
            window.start_button.click()

        assert cli_main(["run", "--dataset", "synthetic", "--synthetic-size", "256", "--batch-size", "32",
                         "--max-steps", "3", "--log-every", "1", "--device", "cpu", "--num-workers", "0", "--name",
                         "from the CLI"]) == 0
        capsys.readouterr()

        runs = sorted(store.list_runs(), key=lambda run: run.id)
        assert [(run.source, run.status) for run in runs] == [("gui", "finished"), ("cli", "finished")]
        assert runs[0].config == window.form.config() and runs[0].summary.steps > 0
        assert runs[0].verdict and runs[1].verdict  # both measured data wait and device busy

        view = window.findChild(RunsView)
        assert view is not None
        view.refresh()
        qtbot.waitUntil(lambda: not view.is_reading(), timeout=10_000)  # read off the GUI thread
        table = view.findChild(object, "runsTable")
        assert table.model().rowCount() == 2
        assert window.status_line.text().startswith("Finished: test accuracy")
        assert "bound" in window.run_message.text()  # the verdict is shown with the result
    finally:
        window.training_thread.request_stop()
        window.training_thread.wait(10_000)
        window.close()
        wait_for_background_calls(10_000)  # the Runs tab's reads, off the GUI thread
        store.close()


def test_a_history_the_disk_cannot_write_is_listed_read_only_and_nothing_is_recorded(
        qtbot, settings, isolated_workbench_home, monkeypatch):
    """On a read-only mount or a full disk the window opened with an empty Runs tab, though `workbench runs` lists
    the same history (the mount itself: history/test_unwritable_history.py)."""
    from builders import FakeRun, record_complete_run, window_probe

    from workbench.gui.app import open_history
    from workbench.history.store import HistoryUnwritable

    with HistoryStore.open() as store:
        for _ in range(2):
            record_complete_run(store)

    def unwritable(cls, home=None):
        raise HistoryUnwritable("cannot open the run history: the home is on a read-only file system")

    monkeypatch.setattr(HistoryStore, "open", classmethod(unwritable))
    store, problem, recording = open_history()
    assert store is not None and recording is False
    assert problem.startswith("Runs will not be recorded: cannot open the run history") and "read only" in problem
    window = build_window(store, recording=recording, settings=settings, run_function=FakeRun(steps=3),
                          probe_function=window_probe())
    qtbot.addWidget(window)
    try:
        view = window.findChild(RunsView)
        view.refresh()
        qtbot.waitUntil(lambda: not view.is_reading(), timeout=10_000)  # read off the GUI thread
        assert view.model.rowCount() == 2
        window.form.set_config(TINY_RUN)
        with qtbot.waitSignal(window.training_thread.finished, timeout=30_000):
            window.start_button.click()
        assert len(store.list_runs()) == 2  # the run trained, and nothing was recorded
    finally:
        window.training_thread.request_stop()
        window.training_thread.wait(10_000)
        window.close()
        wait_for_background_calls(10_000)  # the Runs tab's reads, off the GUI thread
        store.close()

"""RunsView: the runs table, the side-by-side comparison, Load settings, and exports that match the CLI's."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported: no display needed

import csv
import sys

import numpy as np
import pytest
from builders import GPU, fill_history, record_complete_run, started, step, summary, trace_record
from PySide6.QtCore import QCoreApplication, Qt

from workbench.cli import main
from workbench.config import RunConfig
from workbench.engine.events import MemorySnapshot, RunEnded
from workbench.gui.comparison_view import DIFFERENCE_BACKGROUND
from workbench.gui.runs_table import COLUMN_TITLES
from workbench.gui.runs_exports import OVERLAY_KEYS
from workbench.gui.runs_view import RunsView
from runs_views import column, settled, shown_view, written
from workbench.history import reads
from workbench.history import store as store_module
from workbench.history.store import HistoryStore


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))  # put back after tests that call main()
    return tmp_path / "home"


@pytest.fixture
def store(home):
    with HistoryStore.open(home) as opened:
        yield opened


@pytest.fixture
def make_view(store, qtbot):
    from workbench.gui.background import wait_for_background_calls

    def make(auto_refresh_ms: int = 0) -> RunsView:
        return shown_view(store, qtbot, auto_refresh_ms)

    yield make
    wait_for_background_calls(10_000)  # a read of the history, an export or a read of curves still under way


def polled(view, qtbot) -> None:
    """What the 2 s poll does, and wait for what it read to land."""
    view.refresher.poll()
    settled(view, qtbot)


def refreshed(view, qtbot) -> None:
    """Refresh the table and wait for the read to land, as the tests before reads left the GUI thread did."""
    view.refresh()
    settled(view, qtbot)


def export(view, qtbot, button) -> None:
    """Click an export button and wait for the export, written off the GUI thread, to end."""
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(button.isEnabled, timeout=10_000)


def record_gpu_run(store, config: RunConfig, images_per_sec=None, name=None, **summary_changes) -> int:
    """A finished run with GPU memory figures."""
    memory = MemorySnapshot(torch_allocated=2 * 2**30, torch_reserved=3 * 2**30, nvml_device_used=4 * 2**30)
    recorder = store.start_run(config, name=name, source="gui")
    recorder.record(started(config, device=GPU, total_steps=3))
    for index in range(1, 4):
        recorder.record(step(index, 3, memory=memory))
    values = dict(
        images_per_sec=images_per_sec, peak_allocated_bytes=3 * 2**30, peak_reserved_bytes=int(3.5 * 2**30),
        peak_nvml_device_used_bytes=int(4.25 * 2**30), test_accuracy=0.9123, data_wait_fraction=0.125,
        device_type="cuda", device_name=GPU.name,
    )
    values.update(summary_changes)
    recorder.record(RunEnded(status="finished", summary=summary(3, **values)))
    return recorder.run_id


def sort_by(view: RunsView, title: str, order: Qt.SortOrder) -> None:
    view.table.sortByColumn(COLUMN_TITLES.index(title), order)


def test_table_lists_runs_newest_first_with_readable_figures(make_view, store):
    cpu_run = record_complete_run(store, RunConfig(device="cpu", batch_size=32), name="on the cpu")
    gpu_run = record_gpu_run(store, RunConfig(batch_size=256, precision="bf16"), images_per_sec=12345.6)
    view = make_view()

    assert view.table.objectName() == "runsTable"
    assert column(view, "ID") == [str(gpu_run), str(cpu_run)]
    assert column(view, "Name") == ["synthetic: precision=bf16, batch_size=256, device=auto", "on the cpu"]
    assert column(view, "Status") == ["finished", "finished"]
    assert column(view, "Batch") == ["256", "32"]
    assert column(view, "Precision") == ["bf16", "fp32"]
    assert column(view, "Img/s") == ["12,346", "1,006"]
    assert column(view, "Data wait") == ["12.5 %", "25.0 %"]
    assert column(view, "Peak alloc") == ["3.0 GiB", ""]
    assert column(view, "Peak reserved") == ["3.5 GiB", ""]
    assert column(view, "Peak NVML") == ["4.2 GiB", ""]  # nothing to measure on a CPU run
    assert column(view, "Final loss") == ["0.2500", "0.2500"]
    assert column(view, "Test acc") == ["91.2 %", "42.0 %"]
    assert view.findChild(type(view.count_label), "runsCount").text() == "2 runs"
    numeric = view.proxy.index(0, COLUMN_TITLES.index("Img/s")).data(Qt.ItemDataRole.TextAlignmentRole)
    assert numeric & Qt.AlignmentFlag.AlignRight


def test_numeric_columns_sort_as_numbers_with_unknowns_last(make_view, store):
    ids = {
        ips: record_gpu_run(store, RunConfig(), images_per_sec=ips)
        for ips in (900.0, 10_000.0, None, 95.0)
    }
    view = make_view()
    sort_by(view, "Img/s", Qt.SortOrder.AscendingOrder)
    assert column(view, "Img/s") == ["95", "900", "10,000", ""]  # as text, "10,000" would come first
    sort_by(view, "Img/s", Qt.SortOrder.DescendingOrder)
    assert column(view, "Img/s") == ["10,000", "900", "95", ""]
    assert column(view, "ID")[0] == str(ids[10_000.0])


def test_comparison_highlights_what_differs_and_can_show_only_that(make_view, store, qtbot):
    first = record_complete_run(store, RunConfig(device="cpu", batch_size=32))
    second = record_complete_run(store, RunConfig(device="cpu", batch_size=64), images_per_sec=2000.0)
    view = make_view()
    comparison = view.findChild(type(view.comparison), "comparisonView")
    check = view.findChild(type(comparison.differences_only), "differencesOnlyCheck")
    assert not check.isEnabled()  # nothing to compare yet

    view.select_runs([second, first])
    assert view.selected_run_ids() == [first, second]
    assert comparison.tree.headerItem().text(1).startswith(f"#{first} ")
    assert comparison.tree.headerItem().text(2).startswith(f"#{second} ")
    assert comparison.title.text().endswith("1 setting differs")
    differing = comparison.differing_keys()
    assert "batch_size" in differing and "images_per_sec" in differing
    assert "model" not in differing and "test_accuracy" not in differing
    assert comparison.item_for("batch_size").background(1).color() == DIFFERENCE_BACKGROUND
    assert comparison.item_for("model").background(1).color() != DIFFERENCE_BACKGROUND
    assert comparison.visible_rows()["batch_size"] == ("32", "64")
    assert "model" in comparison.visible_rows()  # every setting is listed

    qtbot.mouseClick(check, Qt.MouseButton.LeftButton)
    assert check.isChecked()
    visible = comparison.visible_rows()
    assert visible["batch_size"] == ("32", "64")
    assert visible["images_per_sec"] == ("1,006", "2,000")
    assert "model" not in visible and "lr" not in visible and "test_accuracy" not in visible
    assert comparison.item_for("model").isHidden()

    qtbot.mouseClick(check, Qt.MouseButton.LeftButton)
    assert "model" in comparison.visible_rows()


def test_after_the_selection_is_cleared_the_comparison_shows_no_old_run_names(make_view, store):
    first = record_complete_run(store, RunConfig(device="cpu", batch_size=32))
    second = record_complete_run(store, RunConfig(device="cpu", batch_size=64))
    view = make_view()
    tree = view.comparison.tree
    view.select_runs([first, second])
    assert tree.columnCount() == 3
    view.select_runs([])
    header = tree.headerItem()
    assert tree.columnCount() == 1
    assert [header.text(column) for column in range(tree.columnCount())] == ["Setting"]
    assert "Select runs" in view.comparison.title.text()
    view.select_runs([first])  # one run: its column only, no leftover second column
    assert tree.columnCount() == 2 and header.text(1) == store.get_run(first).label


def test_load_settings_sends_the_selected_runs_config(make_view, store, qtbot):
    config = RunConfig(device="cpu", batch_size=48, lr=0.2, pipeline="gpu-resident", max_steps=7)
    run_id = record_complete_run(store, config)
    other = record_complete_run(store)
    view = make_view()
    button = view.findChild(type(view.load_settings_button), "loadSettingsButton")
    assert not button.isEnabled()

    view.select_runs([run_id, other])
    assert not button.isEnabled()  # which one? load needs exactly one run
    view.select_runs([run_id])
    assert button.isEnabled()
    with qtbot.waitSignal(view.loadSettingsRequested, timeout=10_000) as received:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert received.args == [config]
    assert "Loaded the settings" in view.status_label.text()


def test_rename_and_note_go_to_the_store_and_the_table(make_view, store, qtbot, monkeypatch):
    run_id = record_complete_run(store, name="before")
    view = make_view()
    view.select_runs([run_id])
    answers = iter(["  after  ", "pinned memory on\nsecond line"])
    monkeypatch.setattr(view, "_ask_text", lambda *args, **kwargs: next(answers))

    qtbot.mouseClick(view.findChild(type(view.rename_button), "renameRunButton"), Qt.MouseButton.LeftButton)
    written(view, qtbot)  # the note button is off until the table shows the rename
    qtbot.mouseClick(view.findChild(type(view.note_button), "noteRunButton"), Qt.MouseButton.LeftButton)
    written(view, qtbot)

    record = store.get_run(run_id)
    assert (record.name, record.note) == ("after", "pinned memory on\nsecond line")
    assert column(view, "Name") == ["after"]
    assert column(view, "Note") == ["pinned memory on"]
    assert view.selected_run_ids() == [run_id]  # the refresh kept the selection


def test_cancelled_rename_changes_nothing(make_view, store, qtbot, monkeypatch):
    run_id = record_complete_run(store, name="kept")
    view = make_view()
    view.select_runs([run_id])
    monkeypatch.setattr(view, "_ask_text", lambda *args, **kwargs: None)
    qtbot.mouseClick(view.rename_button, Qt.MouseButton.LeftButton)
    assert store.get_run(run_id).name == "kept"


def test_delete_asks_first_and_refuses_a_running_run(make_view, store, qtbot, monkeypatch):
    keep = record_complete_run(store)
    doomed = record_complete_run(store)
    running = store.start_run(RunConfig()).run_id  # owned by this live process
    view = make_view()
    button = view.findChild(type(view.delete_button), "deleteRunButton")
    questions = []

    view.select_runs([doomed])
    monkeypatch.setattr(view, "_confirm", lambda text: questions.append(text) or False)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert len(questions) == 1 and "cannot be undone" in questions[0]
    assert {record.id for record in store.list_runs()} == {keep, doomed, running}

    monkeypatch.setattr(view, "_confirm", lambda text: True)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    written(view, qtbot)
    assert {record.id for record in store.list_runs()} == {keep, running}
    assert column(view, "ID") == [str(running), str(keep)]

    view.select_runs([running, keep])
    assert not button.isEnabled()
    assert "still running" in button.toolTip()


def test_gui_export_is_byte_identical_to_the_cli_export(make_view, store, home, tmp_path, qtbot, monkeypatch, capsys):
    first = record_complete_run(store, RunConfig(device="cpu", batch_size=32), name='Größe, "quoted"\nline ✓')
    record_complete_run(store, RunConfig(device="cpu", batch_size=64), name="=1+1")
    third = record_gpu_run(store, RunConfig(batch_size=128), images_per_sec=5000.0)
    view = make_view()
    saved_to = iter([tmp_path / "gui-selected.csv", tmp_path / "gui-all.csv", tmp_path / "gui-steps.csv"])
    monkeypatch.setattr(view, "_ask_save_path", lambda title, default_name: str(next(saved_to)))
    export_button = view.findChild(type(view.export_csv_button), "exportCsvButton")

    view.select_runs([third, first])
    export(view, qtbot, export_button)
    assert view.status_label.text() == f"Wrote 2 runs to {tmp_path / 'gui-selected.csv'}"
    view.select_runs([])
    export(view, qtbot, export_button)  # nothing selected: every run
    view.select_runs([first, third])
    export(view, qtbot, view.findChild(type(view.export_steps_button), "exportStepsButton"))

    cli = ["--home", str(home), "export", "--out"]
    assert main([*cli, str(tmp_path / "cli-selected.csv"), "--runs", str(first), str(third)]) == 0
    assert main([*cli, str(tmp_path / "cli-all.csv")]) == 0
    assert main([*cli, str(tmp_path / "cli-steps.csv"), "--runs", str(first), str(third), "--steps"]) == 0
    capsys.readouterr()
    for name in ("selected", "all", "steps"):
        gui, cli_file = (tmp_path / f"gui-{name}.csv").read_bytes(), (tmp_path / f"cli-{name}.csv").read_bytes()
        assert gui == cli_file, name
    with open(tmp_path / "gui-all.csv", encoding="utf-8", newline="") as file:
        assert [row[1] for row in csv.reader(file)][1:] == ['Größe, "quoted"\nline ✓', "'=1+1", store.get_run(third).name]


def test_export_to_an_unwritable_path_says_why_in_the_view(make_view, store, tmp_path, qtbot, monkeypatch):
    record_complete_run(store)
    view = make_view()
    target = tmp_path / "missing" / "runs.csv"
    monkeypatch.setattr(view, "_ask_save_path", lambda title, default_name: str(target))
    export(view, qtbot, view.export_csv_button)
    assert "cannot write" in view.status_label.text() and "folder does not exist" in view.status_label.text()
    assert "c62828" in view.status_label.styleSheet()
    assert not target.parent.exists()


def test_an_export_is_written_off_the_gui_thread_with_the_export_buttons_busy(make_view, store, tmp_path, qtbot,
                                                                              monkeypatch):
    """"Export steps…" of a run of 100,000 steps held the window 7 s: the export read and wrote on the GUI thread."""
    import threading

    from workbench.gui import runs_exports

    record_complete_run(store, steps=4)
    view = make_view()
    target = tmp_path / "steps.csv"
    monkeypatch.setattr(view, "_ask_save_path", lambda title, default_name: str(target))
    go_on, threads = threading.Event(), []
    real = runs_exports.export_steps_csv

    def held(*args):
        threads.append(threading.current_thread())
        go_on.wait(10)  # until the test has seen the window while the export is under way
        return real(*args)

    monkeypatch.setattr(runs_exports, "export_steps_csv", held)
    qtbot.mouseClick(view.export_steps_button, Qt.MouseButton.LeftButton)
    busy = (view.export_steps_button.isEnabled(), view.export_csv_button.isEnabled(), view.status_label.text())
    go_on.set()
    assert busy == (False, False, f"Writing {target}…")
    qtbot.waitUntil(view.export_steps_button.isEnabled, timeout=10_000)
    assert threads and threading.main_thread() not in threads
    said = view.status_label.text()
    assert said.startswith("Wrote ") and said.endswith(f" step metric rows to {target}")
    assert target.exists() and view.export_csv_button.isEnabled()


def test_the_selected_runs_curves_are_read_off_the_gui_thread(make_view, store, qtbot, monkeypatch):
    """Selecting a run of 100,000 logged steps froze the window 3 s: its curves were read on the GUI thread."""
    import threading

    from workbench.gui.background import wait_for_background_calls

    first, second = record_complete_run(store, steps=4), record_complete_run(store, steps=3)
    view = make_view()
    threads = []
    real = reads.HistoryReads.step_metrics

    def watched(self, run_id):
        threads.append(threading.current_thread())
        return real(self, run_id)

    monkeypatch.setattr(reads.HistoryReads, "step_metrics", watched)
    drawn = []
    view.overlayRequested.connect(lambda overlays: drawn.append([run_id for run_id, _, _ in overlays]))
    view.select_runs([first])
    view.select_runs([first, second])  # a newer selection: only its curves are drawn, whichever read ends first
    qtbot.waitUntil(lambda: [first, second] in drawn, timeout=10_000)
    wait_for_background_calls(10_000)
    QCoreApplication.processEvents()  # the other read's outcome, queued back to the GUI thread
    assert [ids for ids in drawn if ids] == [[first, second]]
    assert threads and threading.main_thread() not in threads


def test_cancelled_export_writes_nothing(make_view, store, tmp_path, qtbot, monkeypatch):
    record_complete_run(store)
    view = make_view()
    monkeypatch.setattr(view, "_ask_save_path", lambda title, default_name: None)
    qtbot.mouseClick(view.export_csv_button, Qt.MouseButton.LeftButton)
    assert view.status_label.text() == ""


def test_selected_runs_curves_are_offered_for_overlay(make_view, store, qtbot):
    first = record_complete_run(store, steps=4)
    second = record_gpu_run(store, RunConfig(), images_per_sec=3000.0)
    view = make_view()
    with qtbot.waitSignal(view.overlayRequested, timeout=10_000) as received:
        view.select_runs([first, second])
    overlays = received.args[0]
    assert [(run_id, label) for run_id, label, _ in overlays] == [
        (first, store.get_run(first).label), (second, store.get_run(second).label)]
    first_curves, second_curves = overlays[0][2], overlays[1][2]
    assert tuple(first_curves) == OVERLAY_KEYS
    assert first_curves["step"].tolist() == [1, 2, 3, 4]
    assert first_curves["loss"].tolist() == [2.5, 1.25, 2.5 / 3, 0.625]
    assert np.isnan(first_curves["torch_allocated"]).all()  # CPU run: no device memory
    assert second_curves["nvml_device_used"].tolist() == [4 * 2**30] * 3

    with qtbot.waitSignal(view.overlayRequested, timeout=10_000) as received:
        view.select_runs([])
    assert received.args == [[]]


def test_runs_recorded_elsewhere_appear_without_a_restart(make_view, store, home, qtbot):
    record_complete_run(store)
    view = make_view(auto_refresh_ms=50)
    with HistoryStore.open(home) as cli_process:  # another connection, as a `workbench run` would hold
        record_complete_run(cli_process, name="from the terminal", source="cli")
    qtbot.waitUntil(lambda: view.model.rowCount() == 2, timeout=10_000)
    assert column(view, "Name")[0] == "from the terminal"


def test_refresh_marks_runs_of_dead_processes_interrupted(make_view, store):
    import subprocess

    recorder = store.start_run(RunConfig())
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with store._transaction() as conn:
        conn.execute("UPDATE runs SET pid = ?, process_identity = NULL WHERE id = ?", (dead.pid, recorder.run_id))
    view = make_view()
    assert column(view, "Status") == ["interrupted"]


def test_a_poll_during_a_run_re_reads_only_the_running_row_of_two_thousand(make_view, store, home, monkeypatch,
                                                                            qtbot):
    """Issue 9: the poll used to re-read and re-parse the whole history every 2 s on the GUI thread."""
    old_ids = fill_history(store, 2000)
    config = RunConfig(device="cpu")
    recorder = store.start_run(config, name="running", source="gui")
    recorder.record(started(config, total_steps=4))
    view = make_view()
    assert view.model.rowCount() == 2001 and column(view, "Status")[0] == "running"
    view.select_runs([old_ids[5]])
    parsed, redrawn, resets = [], [], []
    real_record = reads.record_from_row
    monkeypatch.setattr(reads, "record_from_row", lambda row: parsed.append(row["id"]) or real_record(row))
    view.model.dataChanged.connect(lambda first, last: redrawn.append((first.row(), last.row())))
    view.model.modelReset.connect(lambda: resets.append(True))

    recorder.record(step(1, 4, loss=1.5))
    recorder.flush()  # the recorder's once-a-second write
    polled(view, qtbot)  # what the 2 s poll does
    assert parsed == [recorder.run_id]  # one row read and parsed, not 2,001
    running_row = view.model.row_of(recorder.run_id)
    assert redrawn == [(running_row, running_row)] and resets == []
    assert column(view, "Final loss")[0] == "1.5000"
    polled(view, qtbot)  # nothing written since: nothing read
    assert parsed == [recorder.run_id]

    with HistoryStore.open(home) as cli_process:  # meanwhile a `workbench run` records a run and deletes one
        new_id = record_complete_run(cli_process, name="from the terminal")
        cli_process.delete(old_ids[0])
    recorder.record(RunEnded(status="finished", summary=summary(4)))
    parsed.clear()
    polled(view, qtbot)
    assert sorted(parsed) == [recorder.run_id, new_id]
    assert view.model.rowCount() == 2001 and resets == []
    assert column(view, "Name")[:2] == ["from the terminal", "running"]
    assert column(view, "Status")[:2] == ["finished", "finished"]
    assert str(old_ids[0]) not in column(view, "ID")
    assert view.selected_run_ids() == [old_ids[5]]  # the selection stayed with its run
    assert view.count_label.text() == "2001 runs"


def test_sweep_members_are_tagged_with_their_sweep(make_view, store):
    lone = record_gpu_run(store, RunConfig(), images_per_sec=900.0)
    sequence_id = store.create_sequence("sweep", "sweep batch_size")
    members = []
    for batch in (64, 128):
        config = RunConfig(batch_size=batch)
        recorder = store.start_run(config, source="gui", sequence_id=sequence_id)
        recorder.record(started(config, device=GPU, total_steps=3))
        recorder.record(RunEnded(status="finished", summary=summary(3, device_type="cuda", device_name=GPU.name)))
        members.append(recorder.run_id)
    view = make_view()
    tags = dict(zip(column(view, "ID"), column(view, "Sequence")))
    assert tags == {str(lone): "", str(members[0]): "sweep batch_size", str(members[1]): "sweep batch_size"}


def test_a_message_goes_when_it_stops_being_true(make_view, store, tmp_path, qtbot, monkeypatch):
    """Issue 22: a red "cannot write … folder does not exist" stayed long after; each message clears with its cause."""
    first, second = record_complete_run(store), record_complete_run(store)
    view = make_view()
    view.select_runs([first])
    monkeypatch.setattr(view, "_ask_save_path", lambda title, default_name: str(tmp_path / "missing" / "runs.csv"))
    export(view, qtbot, view.export_csv_button)
    assert "folder does not exist" in view.status_label.text()
    refreshed(view, qtbot)  # the table's own refresh (the 2 s poll) changes nothing the message is about
    assert "folder does not exist" in view.status_label.text()
    view.select_runs([second])  # the user moved on to other runs
    assert view.status_label.text() == ""

    real = HistoryStore.changes_since  # the view reads through a store of its own, opened off the GUI thread
    monkeypatch.setattr(HistoryStore, "changes_since", lambda self, revision: (_ for _ in ()).throw(
        store_module.HistoryError("cannot read the run history: disk I/O error")))
    refreshed(view, qtbot)
    assert "disk I/O error" in view.status_label.text()
    monkeypatch.setattr(HistoryStore, "changes_since", real)
    refreshed(view, qtbot)  # the history reads again
    assert view.status_label.text() == ""


def test_the_comparison_says_what_the_selected_repeats_measured(make_view, store):
    """Issue 23: two groups of repeats read as medians with intervals, and the A/B verdict of compare_rates."""
    sequence = store.create_sequence("sweep", "sweep channels_last", {})
    base = RunConfig(device="cpu", max_steps=3)
    ids = []
    for a, b in ((1000.0, 1310.0), (1010.0, 1300.0), (990.0, 1320.0)):
        for config, rate in ((base, a), (base.replace(channels_last=True), b)):
            recorder = store.start_run(config, source="cli", sequence_id=sequence)
            recorder.record(started(config, total_steps=3))
            recorder.record(RunEnded(status="finished", summary=summary(3, images_per_sec=rate)))
            ids.append(recorder.run_id)
    view = make_view()
    view.select_runs(ids)
    speed = view.comparison.speed
    assert speed.isVisibleTo(view)
    lines = speed.text().splitlines()
    assert lines[0].endswith(": 1,000 img/s (median of 3 runs, 990–1,010 (75 %))")
    assert lines[2].startswith("B against A: measured 1.31×: faster (")
    view.select_runs(ids[:1])  # one run of a sequence reads as its repeats (issue 30 §6)
    assert speed.text() == (f"Img/s of #{ids[0]}, #{ids[2]}, #{ids[4]}: "
                            "1,000 img/s (median of 3 runs, 990–1,010 (75 %)).")
    view.select_runs([ids[0], ids[3]])
    assert speed.text().splitlines()[2].startswith("B against A: measured 1.31×: faster (")
    view.select_runs([])
    assert not speed.isVisibleTo(view)


def test_tags_go_to_the_store_and_the_table(make_view, store, qtbot, monkeypatch):
    """Issue 30 §9: tags on runs, in the history and the table."""
    run_id = record_complete_run(store, name="tagged")
    view = make_view()
    view.select_runs([run_id])
    answers = iter([" baseline, fp16 try ,, baseline", "a;b"])
    monkeypatch.setattr(view, "_ask_text", lambda *args, **kwargs: next(answers))
    qtbot.mouseClick(view.tags_button, Qt.MouseButton.LeftButton)
    written(view, qtbot)
    assert store.get_run(run_id).tags == ("baseline", "fp16 try")
    assert column(view, "Tags") == ["baseline, fp16 try"]
    qtbot.mouseClick(view.tags_button, Qt.MouseButton.LeftButton)  # the CSV's separator: refused, said, nothing lost
    assert store.get_run(run_id).tags == ("baseline", "fp16 try") and "without ';'" in view.status_label.text()


def test_a_double_click_on_a_trace_record_keeps_the_forms_settings(make_view, store, qtbot):
    """The Load settings button is off for a trace; a double-click on its row must not load RunConfig()'s
    defaults over the user's form either (a trace holds no settings)."""
    trace_id, _ = store.add_trace(trace_record())
    view = make_view()
    view.select_runs([trace_id])
    loaded = []
    view.loadSettingsRequested.connect(loaded.append)
    row = view.proxy.mapFromSource(view.model.index(view.model.row_of(trace_id), 0))
    view.table.doubleClicked.emit(row)
    assert loaded == []
    assert "holds no settings" in view.status_label.text()


def test_a_trace_record_has_no_duration_and_says_it_was_opened(make_view, store):
    """A trace was opened, not run: no "0:00" that sorts it as a run of no seconds."""
    trace_id, _ = store.add_trace(trace_record())
    run_id = record_complete_run(store)
    view = make_view()
    durations = dict(zip((int(text) for text in column(view, "ID")), column(view, "Duration")))
    assert durations[trace_id] == "" and durations[run_id] != ""
    statuses = dict(zip((int(text) for text in column(view, "ID")), column(view, "Status")))
    assert statuses[trace_id] == "opened" and statuses[run_id] == "finished"  # a trace was opened, not run
    started = COLUMN_TITLES.index("Started")
    tooltip = view.model.index(view.model.row_of(trace_id), started).data(Qt.ItemDataRole.ToolTipRole)
    assert tooltip.startswith("a trace, opened ")


def test_a_trace_records_settings_cells_say_unknown_not_a_batch_of_the_forms_defaults(make_view, store):
    """A trace of two ranks: its Batch tooltip read "128 × 2 processes × 1 accumulation steps = 256 per optimiser
    step" (RunConfig()'s defaults, and its ranks counted as processes), and its settings "… not used"."""
    trace_id, _ = store.add_trace(trace_record())
    view = make_view()
    row = view.model.row_of(trace_id)
    for title in ("Batch", "Workers"):
        tooltip = view.model.index(row, COLUMN_TITLES.index(title)).data(Qt.ItemDataRole.ToolTipRole)
        assert tooltip.endswith(": unknown (an opened trace: its settings are its own script's, which the trace does "
                                "not hold)"), tooltip
        assert "processes" not in tooltip and "not used" not in tooltip


def test_traces_are_named_as_traces_not_runs(make_view, store, monkeypatch):
    """Two traces hold no settings: no "0 settings differ" that reads as "the same settings"; their dialogs and
    messages say trace."""
    first, _ = store.add_trace(trace_record(sha256="01" * 32))
    second, _ = store.add_trace(trace_record(sha256="02" * 32))
    run_id = record_complete_run(store)
    view = make_view()
    view.select_runs([first, second])
    assert view.comparison.title.text() == "<b>Comparing 2 traces</b>"
    view.select_runs([first, run_id])
    assert view.comparison.title.text().startswith("<b>Comparing 2 records</b> — ")
    view.select_runs([first])
    asked = []
    monkeypatch.setattr(view, "_ask_text", lambda *args, **kwargs: asked.append(args[:2]))
    view.rename_button.click()
    assert asked == [("Rename trace", f"New name for trace #{first}:")]


def test_the_count_tags_and_export_messages_say_traces_where_they_are(make_view, store, monkeypatch, tmp_path, qtbot):
    trace_id, _ = store.add_trace(trace_record(sha256="01" * 32))
    store.add_trace(trace_record(sha256="02" * 32))
    run_id = record_complete_run(store)
    view = make_view()
    assert view.count_label.text() == "1 run and 2 traces"
    view.select_runs([trace_id])
    monkeypatch.setattr(view, "_ask_text", lambda *args, **kwargs: "profiled")
    view.tags_button.click()
    written(view, qtbot)
    assert view.status_label.text() == f"Saved the tags of trace #{trace_id}."
    monkeypatch.setattr(view, "_ask_save_path", lambda title, default_name: str(tmp_path / "mixed.csv"))
    view.select_runs([trace_id, run_id])
    export(view, qtbot, view.export_csv_button)
    assert view.status_label.text() == f"Wrote 1 run and 1 trace to {tmp_path / 'mixed.csv'}"


def test_a_row_holding_values_no_workbench_wrote_lists_sizes_and_compares(make_view, store, qtbot):
    """A start time of 1e300 crashed the window (a segfault as the table sized its columns), and findings_json '5',
    text in a figure or a blob for a name each failed it with a traceback before it opened."""
    damaged = record_complete_run(store)
    other = record_complete_run(store)
    with store._transaction() as conn:
        conn.execute("UPDATE runs SET started_at = 1e300, finished_at = 'late', findings_json = '5', "
                     "images_per_sec = 'fast', name = ? WHERE id = ?", (b"\xff\x00name", damaged))
    view = make_view()
    refreshed(view, qtbot)
    assert view.count_label.text() == "2 runs"
    view.table.resizeColumnsToContents()
    started = COLUMN_TITLES.index("Started")
    row = view.proxy.mapFromSource(view.model.index(view.model.row_of(damaged), started)).row()
    assert view.proxy.index(row, started).data() == ""  # no date names 1e300 seconds
    view.select_runs([damaged, other])
    assert view.comparison.title.text().startswith("<b>Comparing 2 runs</b>")

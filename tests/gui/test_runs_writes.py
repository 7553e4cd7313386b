"""The Runs tab writes the history off the GUI thread: a rename, note, tags or delete held by a hung disk (a network
home) leaves the window painting, the run's write buttons stay off until the table shows the write, a second
delete of the same rows is refused, and a write that fails says why in red."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported: no display needed

import threading

import pytest
from builders import record_complete_run
from PySide6.QtCore import QTimer

from workbench.gui.background import wait_for_background_calls
from workbench.gui.runs_view import ERROR_STYLE, RunsView
from workbench.history.store import HistoryError, HistoryStore
from runs_views import column, shown_view, written


@pytest.fixture
def store(tmp_path):
    with HistoryStore.open(tmp_path / "home") as opened:
        yield opened


@pytest.fixture
def make_view(store, qtbot):
    def make() -> RunsView:
        return shown_view(store, qtbot)  # the tests refresh by hand

    yield make
    assert wait_for_background_calls(10_000), "a write or read of the history outlived the test"


class HeldWrites:
    """A HistoryStore write method held on an event until ``released``, as on a hung disk; the threads it was
    called on. A call on the GUI thread is not held (it would hang the test): it is noted."""

    def __init__(self):
        self.entered = threading.Event()  # a write has begun
        self.released = threading.Event()
        self.left = threading.Event()  # a write has ended
        self.calls: list = []  # the run id of each call
        self.on_gui_thread: list = []

    def hold(self, monkeypatch, method: str) -> None:
        real = getattr(HistoryStore, method)

        def held(store, run_id, *args):
            self.calls.append(run_id)
            self.entered.set()
            if threading.current_thread() is threading.main_thread():
                self.on_gui_thread.append(run_id)
            else:
                assert self.released.wait(60), "never released"
            try:
                return real(store, run_id, *args)
            finally:
                self.left.set()

        monkeypatch.setattr(HistoryStore, method, held)


@pytest.fixture
def held_writes(make_view):
    writes = HeldWrites()
    yield writes
    writes.released.set()  # before make_view joins the pool (a failed test leaves a write held)


def write_buttons(view: RunsView) -> list[bool]:
    return [button.isEnabled() for button in (view.rename_button, view.note_button, view.tags_button,
                                              view.delete_button)]


ACTIONS = {  # store method: the button, what the dialog answers, what the status line says once it is written
    "rename": ("rename_button", "after", "Renamed run #{}."),
    "set_note": ("note_button", "a note", "Saved the note on run #{}."),
    "set_tags": ("tags_button", "fp16, baseline", "Saved the tags of run #{}."),
    "delete": ("delete_button", True, "Deleted 1 run."),
}


@pytest.mark.parametrize("method", ACTIONS)
def test_a_write_held_by_the_disk_leaves_the_gui_thread_running(make_view, store, held_writes, qtbot, monkeypatch,
                                                                method):
    """Renames, notes, tags and deletes wrote through the GUI thread's store: on a hung network home the window
    froze until the disk answered."""
    run_id = record_complete_run(store, name="before")
    view = make_view()
    view.select_runs([run_id])
    button, answer, said = ACTIONS[method]
    monkeypatch.setattr(view, "_ask_text", lambda *args, **kwargs: answer)
    monkeypatch.setattr(view, "_confirm", lambda text: answer)
    held_writes.hold(monkeypatch, method)

    getattr(view, button).click()
    qtbot.waitUntil(held_writes.entered.is_set, timeout=10_000)
    write_done_when_the_timer_fired = []
    QTimer.singleShot(0, lambda: write_done_when_the_timer_fired.append(held_writes.left.is_set()))
    qtbot.waitUntil(lambda: bool(write_done_when_the_timer_fired), timeout=10_000)
    assert write_done_when_the_timer_fired == [False]  # events ran while the write was held
    assert held_writes.on_gui_thread == []
    assert view.is_writing() and write_buttons(view) == [False] * 4
    assert column(view, "Name") == ["before"] and view.status_label.text() == ""

    held_writes.released.set()
    written(view, qtbot)
    assert view.status_label.text() == said.format(run_id)
    assert view.status_label.styleSheet() == ""
    record = {record.id: record for record in store.list_runs()}.get(run_id)
    assert {"rename": lambda: record.name == "after", "set_note": lambda: record.note == "a note",
            "set_tags": lambda: record.tags == ("fp16", "baseline"), "delete": lambda: record is None}[method]()
    names = {"rename": ["after"], "delete": []}.get(method, ["before"])
    assert column(view, "Name") == names  # the table shows the write
    assert write_buttons(view) == ([True] * 4 if names else [False] * 4)


def test_a_delete_in_flight_keeps_its_button_off_and_refuses_a_second_delete(make_view, store, held_writes, qtbot,
                                                                            monkeypatch):
    doomed = record_complete_run(store, name="doomed")
    other = record_complete_run(store, name="other")
    view = make_view()
    questions = []
    monkeypatch.setattr(view, "_confirm", lambda text: questions.append(text) or True)
    held_writes.hold(monkeypatch, "delete")
    view.select_runs([doomed])

    view.delete_button.click()
    qtbot.waitUntil(held_writes.entered.is_set, timeout=10_000)
    assert held_writes.on_gui_thread == []
    assert not view.delete_button.isEnabled() and "still being written" in view.delete_button.toolTip()
    view._delete_selected()  # what the Delete key does, past the disabled button
    assert len(questions) == 1, "a second delete of the same row was asked for"
    assert "still being written" in view.status_label.text()
    view.select_runs([other])  # writes to other runs are not held up by it
    assert write_buttons(view) == [True] * 4
    view.select_runs([doomed, other])
    assert not view.delete_button.isEnabled()

    held_writes.released.set()
    written(view, qtbot)
    assert held_writes.calls == [doomed]
    assert column(view, "Name") == ["other"] and view.selected_run_ids() == [other]
    assert view.status_label.text() == "Deleted 1 run."
    assert [record.id for record in store.list_runs()] == [other]


def test_a_write_that_fails_says_why_in_red(make_view, store, qtbot, monkeypatch):
    run_id = record_complete_run(store, name="kept")
    view = make_view()
    view.select_runs([run_id])
    threads = []

    def failing(store, run_id, *args):
        threads.append(threading.current_thread())
        raise HistoryError("cannot write the run history: disk I/O error")

    monkeypatch.setattr(HistoryStore, "set_note", failing)
    monkeypatch.setattr(view, "_ask_text", lambda *args, **kwargs: "a note")
    view.note_button.click()
    written(view, qtbot)
    assert view.status_label.text() == "cannot write the run history: disk I/O error"
    assert view.status_label.styleSheet() == ERROR_STYLE
    assert threads and threading.main_thread() not in threads
    assert write_buttons(view) == [True] * 4  # the user can try again
    assert store.get_run(run_id).note == ""

    monkeypatch.setattr(HistoryStore, "delete", failing)  # a delete refused run by run: said once the table shows it
    monkeypatch.setattr(view, "_confirm", lambda text: True)
    view.delete_button.click()
    written(view, qtbot)
    assert view.status_label.text() == "cannot write the run history: disk I/O error"
    assert view.status_label.styleSheet() == ERROR_STYLE
    assert column(view, "Name") == ["kept"] and len(threads) == 2

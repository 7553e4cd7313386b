"""The Runs tab reads the history off the GUI thread: a hung disk (a network home) leaves the window painting,
refreshes asked meanwhile are one read after it, a read that fails says so, and a closed tab is left alone."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported: no display needed

import sqlite3
import threading

import pytest
from builders import count_upgrades, older_history, record_complete_run
from PySide6.QtCore import QCoreApplication, QTimer

from workbench.gui.background import wait_for_background_calls
from workbench.gui import runs_refresh
from workbench.gui.runs_refresh import SAY_AGAIN_AFTER_TICKS
from workbench.gui.runs_view import ERROR_STYLE, LOADING_TEXT, RunsView
from workbench.history.failure_log import failure_log_path
from workbench.history.errors import HistoryDamaged, HistoryTooNew, HistoryUnwritable
from workbench.history.store import HistoryError, HistoryStore
from runs_views import column, settled, shown_view


@pytest.fixture
def store(tmp_path):
    with HistoryStore.open(tmp_path / "home") as opened:
        yield opened


@pytest.fixture
def make_view(store, qtbot):
    def make(wait: bool = True) -> RunsView:
        return shown_view(store, qtbot, wait=wait)  # the tests poll by hand

    yield make
    assert wait_for_background_calls(10_000), "a read of the history outlived the test"


class HeldReads:
    """HistoryStore.changes_since held on an event until ``released``, as on a hung disk; what each call asked,
    returned and on which thread. A call on the GUI thread is not held (it would hang the test): it is noted."""

    def __init__(self):
        self.entered = threading.Event()  # a read has begun
        self.released = threading.Event()
        self.left = threading.Event()  # a read has ended
        self.asked: list = []  # the revision each read was asked from
        self.returned: list[int] = []  # the revision each read brought
        self.on_gui_thread: list = []

    def hold(self, monkeypatch, after_the_read: bool = False) -> None:
        """Hold each read before it (the disk hangs) or ``after_the_read`` (its snapshot taken: a write made
        while it is held is not in it)."""
        real = HistoryStore.changes_since

        def held(store, revision):
            self.asked.append(revision)
            changes = real(store, revision) if after_the_read else None
            self.entered.set()
            if threading.current_thread() is threading.main_thread():
                self.on_gui_thread.append(revision)
            else:
                assert self.released.wait(60), "never released"
            changes = changes or real(store, revision)
            self.returned.append(changes.revision)
            self.left.set()
            return changes

        monkeypatch.setattr(HistoryStore, "changes_since", held)


@pytest.fixture
def held_reads(make_view):
    reads = HeldReads()
    yield reads
    reads.released.set()  # before make_view joins the pool (a failed test leaves a read held)


def names(view: RunsView) -> list[str]:
    return column(view, "Name")


def failures_said(monkeypatch) -> list[str]:
    """What the tab says of each read that fails (RunsView._read_failed, still called), in order."""
    said: list[str] = []
    real_failed = RunsView._read_failed
    monkeypatch.setattr(RunsView, "_read_failed", lambda view, error: said.append(str(error)) or real_failed(view, error))
    return said


def logged(tmp_path) -> list[str]:
    """The entries of failures.log in the test's home, once its background writes have landed."""
    assert wait_for_background_calls(10_000)  # failures.log is written off the GUI thread
    log = failure_log_path(tmp_path / "home")
    text = log.read_text(encoding="utf-8") if log.exists() else ""
    return [line for line in text.splitlines() if line.startswith("=== ")]


def test_a_refresh_held_by_the_disk_leaves_the_gui_thread_running(make_view, store, held_reads, qtbot, monkeypatch):
    """The refresh read the history on the GUI thread: on a hung network home the window froze."""
    record_complete_run(store, name="first")
    view = make_view()
    record_complete_run(store, name="written while the disk hangs")
    held_reads.hold(monkeypatch)
    view.refresh()
    qtbot.waitUntil(held_reads.entered.is_set, timeout=10_000)
    read_done_when_the_timer_fired = []
    QTimer.singleShot(0, lambda: read_done_when_the_timer_fired.append(held_reads.left.is_set()))
    qtbot.waitUntil(lambda: bool(read_done_when_the_timer_fired), timeout=10_000)
    assert read_done_when_the_timer_fired == [False]  # events ran while the read was held
    assert held_reads.on_gui_thread == []
    assert names(view) == ["first"] and view.is_reading()

    held_reads.released.set()
    qtbot.waitUntil(lambda: view.model.rowCount() == 2, timeout=10_000)
    assert names(view) == ["written while the disk hangs", "first"]
    assert view.count_label.text() == "2 runs"


def test_the_tab_says_loading_until_the_first_read_lands(make_view, store, held_reads, qtbot, monkeypatch):
    record_complete_run(store, name="first")
    held_reads.hold(monkeypatch)
    view = make_view(wait=False)
    qtbot.waitUntil(held_reads.entered.is_set, timeout=10_000)
    assert held_reads.on_gui_thread == []
    assert view.count_label.text() == LOADING_TEXT and view.model.rowCount() == 0
    assert not view.comparison.title.text().startswith("No runs yet")
    assert not view.export_csv_button.isEnabled()  # nothing to export yet

    held_reads.released.set()
    settled(view, qtbot)
    assert view.count_label.text() == "1 run" and names(view) == ["first"]
    assert view.export_csv_button.isEnabled()


def test_refreshes_asked_during_a_read_are_one_read_after_it_from_the_revision_it_brought(
        make_view, store, held_reads, qtbot, monkeypatch):
    """At most one read in flight and one asked: results land in order, none older over a newer one, and a write
    after the held read's snapshot is read by the next read."""
    record_complete_run(store, name="first")
    view = make_view()
    shown = view.refresher.revision
    held_reads.hold(monkeypatch, after_the_read=True)
    view.refresh()
    qtbot.waitUntil(held_reads.entered.is_set, timeout=10_000)
    record_complete_run(store, name="written after the snapshot")
    for _ in range(3):
        view.refresh()
    view.refresher.poll()  # the poll waits for the read in flight
    assert held_reads.asked == [shown]

    held_reads.released.set()
    settled(view, qtbot)
    assert held_reads.on_gui_thread == []
    assert len(held_reads.asked) == 2, "the three refreshes asked meanwhile were not one read"
    assert held_reads.asked[1] == held_reads.returned[0]  # started once the first had landed, from its revision
    assert view.refresher.revision == held_reads.returned[1] > held_reads.returned[0]
    assert names(view) == ["written after the snapshot", "first"]

    view.refresher.poll()  # nothing written since the last read: no read
    settled(view, qtbot)
    assert len(held_reads.asked) == 2


def test_a_read_that_fails_says_why_in_the_status_line_until_one_succeeds(make_view, store, qtbot, monkeypatch):
    record_complete_run(store, name="first")
    view = make_view()
    real = HistoryStore.changes_since
    threads = []

    def failing(store, revision):
        threads.append(threading.current_thread())
        raise HistoryError("cannot read the run history: disk I/O error")

    monkeypatch.setattr(HistoryStore, "changes_since", failing)
    view.refresh()
    settled(view, qtbot)
    assert view.status_label.text() == "cannot read the run history: disk I/O error"
    assert view.status_label.styleSheet() == ERROR_STYLE
    assert threads and threading.main_thread() not in threads
    assert names(view) == ["first"]  # the table keeps what it showed

    monkeypatch.setattr(HistoryStore, "changes_since", real)
    record_complete_run(store, name="second")
    view.refresher.poll()  # the history reads again
    settled(view, qtbot)
    assert view.status_label.text() == ""
    assert names(view) == ["second", "first"]


def test_the_poll_reads_the_revision_off_the_gui_thread(make_view, store, qtbot, monkeypatch):
    record_complete_run(store, name="first")
    view = make_view()
    released, threads = threading.Event(), []
    real = HistoryStore.read_revision

    def held_revision(home):
        threads.append(threading.current_thread())
        if threading.current_thread() is not threading.main_thread():
            assert released.wait(60), "never released"
        return real(home)

    monkeypatch.setattr(HistoryStore, "read_revision", held_revision)
    record_complete_run(store, name="second")
    try:
        view.refresher.poll()
        qtbot.waitUntil(lambda: bool(threads), timeout=10_000)
        assert threading.main_thread() not in threads
        assert view.is_reading() and names(view) == ["first"]
    finally:
        released.set()
    settled(view, qtbot)
    assert names(view) == ["second", "first"]


def test_closing_the_tab_while_a_read_is_held_calls_nothing_on_it(make_view, store, held_reads, qtbot, monkeypatch):
    record_complete_run(store, name="first")
    held_reads.hold(monkeypatch)
    view = RunsView(store, auto_refresh_ms=0)
    qtbot.waitUntil(held_reads.entered.is_set, timeout=10_000)
    assert held_reads.on_gui_thread == []
    destroyed = []
    view.destroyed.connect(lambda: destroyed.append(True))
    view.close()
    view.deleteLater()
    qtbot.waitUntil(lambda: bool(destroyed), timeout=10_000)

    held_reads.released.set()
    assert wait_for_background_calls(10_000)
    QCoreApplication.processEvents()  # the read's result is queued to a relay that went with the view
    assert held_reads.returned  # the read ended, and nothing it reached raised (pytest-qt fails a slot that does)


def test_refreshes_of_an_older_history_read_only_copy_it_into_memory_once(tmp_path, qtbot, monkeypatch):
    """A history too old to read as it is, on a disk that cannot be upgraded (opened for reading, as the app
    does there): each refresh, and each overlay of the selected runs, copied the whole file into memory and
    upgraded the copy (seconds and the file's size in memory, every time, on tens of thousands of runs)."""
    home = tmp_path / "home"
    path = older_history(home)
    before = path.read_bytes()
    upgrades = count_upgrades(monkeypatch)
    with HistoryStore.open_for_reading(home) as store:
        view = shown_view(store, qtbot)
        assert names(view) == ["second", "first"]
        for _ in range(3):
            view.refresh()
            settled(view, qtbot)
        overlays: list = []
        view.overlayRequested.connect(overlays.append)
        view.select_runs([1])  # its curves are read through an open of their own
        qtbot.waitUntil(lambda: bool(overlays), timeout=10_000)
        assert [run_id for run_id, _, _ in overlays[-1]] == [1]
        view.close()
    assert wait_for_background_calls(10_000)
    assert len(upgrades) == 1
    assert path.read_bytes() == before


def test_the_poll_of_an_older_history_read_only_reads_nothing_while_nothing_is_written(tmp_path, qtbot,
                                                                                     monkeypatch):
    """Schema 5's upgrade of the copy rewrote each compile switch as its mode, raising the copy's revision past the
    file's: the poll saw a write every 2 s, and each refresh it asked for read (and copied) the history again."""
    home = tmp_path / "home"
    older_history(home, version=4, config_json='{"compile": true}')
    asked = []
    real = HistoryStore.changes_since
    monkeypatch.setattr(HistoryStore, "changes_since", lambda store, revision: asked.append(revision) or real(
        store, revision))
    with HistoryStore.open_for_reading(home) as store:
        view = shown_view(store, qtbot)
        for _ in range(3):
            view.refresher.poll()
            settled(view, qtbot)
        assert names(view) == ["second", "first"]
        view.close()
    assert wait_for_background_calls(10_000)
    assert asked == [None]  # the first read alone


def test_the_poll_of_a_history_older_than_schema_4_read_only_shows_what_another_workbench_records(tmp_path, qtbot):
    """Such a history holds no run revision: the poll failed on every tick, unsaid, and the tab never refreshed by
    itself (a run recorded in it by an older workbench, a rename, stayed unseen)."""
    home = tmp_path / "home"
    path = older_history(home, version=3)
    with HistoryStore.open_for_reading(home) as store:
        view = shown_view(store, qtbot)
        with sqlite3.connect(path) as conn:
            conn.execute("INSERT INTO runs (name, status, source, started_at, config_json) "
                         "VALUES ('third', 'finished', 'cli', 1.0e9, '{}')")
            conn.execute("UPDATE runs SET name = 'renamed elsewhere' WHERE id = 1")
        conn.close()
        view.refresher.poll()
        settled(view, qtbot)
        assert names(view) == ["third", "second", "renamed elsewhere"]
        assert view.status_label.text() == ""
        view.close()
    assert wait_for_background_calls(10_000)


def test_a_poll_failing_tick_after_tick_says_why_once_and_the_tab_reads_when_it_reads_again(make_view, store, qtbot,
                                                                                            monkeypatch):
    """The poll's failures were swallowed: a history it could not read left the table as it was, nothing said."""
    record_complete_run(store, name="first")
    said = failures_said(monkeypatch)
    view = make_view()
    real = HistoryStore.read_revision

    def failing(home):
        raise HistoryError("cannot read the run history: disk I/O error")

    monkeypatch.setattr(HistoryStore, "read_revision", failing)
    for _ in range(3):
        view.refresher.poll()
        settled(view, qtbot)
    assert said == ["cannot read the run history: disk I/O error"]  # once, not every 2 s
    assert view.status_label.text() == said[0] and view.status_label.styleSheet() == ERROR_STYLE

    monkeypatch.setattr(HistoryStore, "read_revision", real)
    view.refresher.poll()  # nothing was written meanwhile: a read clears what the failures said all the same
    settled(view, qtbot)
    assert view.status_label.text() == "" and names(view) == ["first"]
    monkeypatch.setattr(HistoryStore, "read_revision", failing)
    view.refresher.poll()
    settled(view, qtbot)
    assert len(said) == 2  # failing again is said again


def test_a_poll_that_keeps_failing_is_logged_once_and_said_again_once_another_message_took_its_place(
        make_view, store, tmp_path, qtbot, monkeypatch):
    """A poll failing tick after tick was said once in the status line and logged nowhere: an export's "Wrote …"
    took its place while the poll still failed, and nothing ever said again that the table no longer followed the
    history."""
    record_complete_run(store, name="first")
    said = failures_said(monkeypatch)
    view = make_view()
    reason = "cannot read the run history: disk I/O error"

    def failing(home):
        raise HistoryError(reason)

    def tick() -> None:
        view.refresher.poll()
        settled(view, qtbot)

    monkeypatch.setattr(HistoryStore, "read_revision", failing)
    for _ in range(SAY_AGAIN_AFTER_TICKS + 2):  # said and still shown: not said again
        tick()
    assert said == [reason] and view.status_label.text() == reason
    log = failure_log_path(tmp_path / "home")
    qtbot.waitUntil(log.exists, timeout=10_000)  # written off the GUI thread

    monkeypatch.setattr(view, "_ask_save_path", lambda title, default_name: str(tmp_path / "runs.csv"))
    view.export_csv_button.click()  # its outcome takes the status line
    qtbot.waitUntil(lambda: view.status_label.text().startswith("Wrote "), timeout=10_000)
    for _ in range(SAY_AGAIN_AFTER_TICKS - 1):
        tick()
    assert view.status_label.text().startswith("Wrote ")  # time to read what took its place
    tick()
    assert said == [reason, reason]
    assert view.status_label.text() == reason and view.status_label.styleSheet() == ERROR_STYLE

    entries = logged(tmp_path)
    assert len(entries) == 1 and entries[0].endswith(f"the Runs tab's poll of the history failed: {reason}"), entries


def test_a_poll_failing_with_another_message_each_tick_is_logged_once_per_kind_while_it_fails(
        make_view, store, tmp_path, qtbot, monkeypatch):
    """"Once" was keyed on the message: a failure whose text changed each tick (a byte offset, a time, two errors
    taking turns) was written to failures.log on every tick, every 2 s for as long as it lasted. Now once per kind
    of failure while it keeps failing (at most 3 kinds); the status line shows the latest message."""
    record_complete_run(store, name="first")
    view = make_view()
    real = HistoryStore.read_revision
    ticks = iter(range(1000))
    kind = [HistoryError]

    def failing(home):
        raise kind[0](f"cannot read the run history: disk I/O error at byte {next(ticks) * 4096}")

    def tick() -> None:
        view.refresher.poll()
        settled(view, qtbot)

    monkeypatch.setattr(HistoryStore, "read_revision", failing)
    for _ in range(SAY_AGAIN_AFTER_TICKS + 2):
        tick()
    entries = logged(tmp_path)
    assert len(entries) == 1 and entries[0].endswith("disk I/O error at byte 0"), entries
    latest = f"cannot read the run history: disk I/O error at byte {(SAY_AGAIN_AFTER_TICKS + 1) * 4096}"
    assert view.status_label.text() == latest and view.status_label.styleSheet() == ERROR_STYLE

    for _ in range(3):  # another kind of failure, then the two taking turns: logged once more, not every tick
        kind[0] = HistoryUnwritable
        tick()
        kind[0] = HistoryError
        tick()
    assert len(logged(tmp_path)) == 2
    assert view.status_label.text().endswith(f"at byte {(SAY_AGAIN_AFTER_TICKS + 7) * 4096}")
    for other in (HistoryDamaged, HistoryTooNew):  # a third kind is logged, a fourth no more
        kind[0] = other
        tick()
    assert len(logged(tmp_path)) == 3  # runs_refresh.LOGGED_KINDS_AT_ONCE
    kind[0] = HistoryError

    monkeypatch.setattr(HistoryStore, "read_revision", real)
    tick()  # it reads again: the status line's spell is over
    assert view.status_label.text() == ""
    monkeypatch.setattr(HistoryStore, "read_revision", failing)
    for _ in range(3):
        tick()
    assert view.status_label.text().startswith("cannot read") and view.status_label.styleSheet() == ERROR_STYLE
    assert len(logged(tmp_path)) == 3  # one read between is not the quiet that logs it again (LOG_AGAIN_AFTER_QUIET_TICKS)


def test_a_poll_that_fails_and_reads_by_turns_is_logged_once_per_kind_until_it_stays_quiet(
        make_view, store, tmp_path, qtbot, monkeypatch):
    """A flaky network disk (fail, read, fail, read, …): each read ended the spell of failure, so each failure
    began one and was written to failures.log, a line every 4 s for as long as it flapped. Now a kind of failure
    already logged is logged again only once it has not failed for LOG_AGAIN_AFTER_QUIET_TICKS ticks; the status
    line still says each failure in red, and a read still clears it."""
    quiet_ticks = 4  # 300 ticks (10 minutes) in the app: the rule, not the wait, is under test
    monkeypatch.setattr(runs_refresh, "LOG_AGAIN_AFTER_QUIET_TICKS", quiet_ticks)
    record_complete_run(store, name="first")
    said = failures_said(monkeypatch)
    view = make_view()
    real = HistoryStore.read_revision
    kind = [HistoryError]

    def failing(home):
        raise kind[0]("cannot read the run history: disk I/O error")

    def tick(fails: bool) -> None:
        monkeypatch.setattr(HistoryStore, "read_revision", failing if fails else real)
        view.refresher.poll()
        settled(view, qtbot)

    for flap in range(2 * quiet_ticks):  # a read between failures, longer than the quiet that logs it again
        tick(fails=True)
        assert view.status_label.styleSheet() == ERROR_STYLE  # each failure is said, as before
        tick(fails=False)
        assert view.status_label.text() == ""
    assert len(said) == 2 * quiet_ticks
    assert len(logged(tmp_path)) == 1

    kind[0] = HistoryUnwritable  # another kind flapping in among them: once more
    for _ in range(3):
        tick(fails=True)
        tick(fails=False)
    assert len(logged(tmp_path)) == 2

    tick(fails=True)
    for _ in range(quiet_ticks - 1):  # not quiet long enough: the next failure is not logged
        tick(fails=False)
    tick(fails=True)
    assert len(logged(tmp_path)) == 2
    for _ in range(quiet_ticks):  # quiet that long: logged again, once
        tick(fails=False)
    tick(fails=True)
    tick(fails=True)
    entries = logged(tmp_path)
    assert len(entries) == 3 and entries[-1].endswith("failed: cannot read the run history: disk I/O error")


def test_a_poll_failing_with_another_message_each_tick_leaves_the_message_that_took_its_place_to_be_read(
        make_view, store, tmp_path, qtbot, monkeypatch):
    """Each new message was said at once: an export's "Wrote …" was gone at the next tick (2 s), though a failure
    that kept its message waited SAY_AGAIN_AFTER_TICKS ticks."""
    record_complete_run(store, name="first")
    view = make_view()
    ticks = iter(range(1000))

    def failing(home):
        raise HistoryError(f"cannot read the run history: the disk is busy ({next(ticks)} s)")

    def tick() -> None:
        view.refresher.poll()
        settled(view, qtbot)

    monkeypatch.setattr(HistoryStore, "read_revision", failing)
    tick()
    monkeypatch.setattr(view, "_ask_save_path", lambda title, default_name: str(tmp_path / "runs.csv"))
    view.export_csv_button.click()  # its outcome takes the status line
    qtbot.waitUntil(lambda: view.status_label.text().startswith("Wrote "), timeout=10_000)
    for _ in range(SAY_AGAIN_AFTER_TICKS - 1):
        tick()
    assert view.status_label.text().startswith("Wrote ")
    tick()
    assert view.status_label.text() == f"cannot read the run history: the disk is busy ({SAY_AGAIN_AFTER_TICKS} s)"
    assert view.status_label.styleSheet() == ERROR_STYLE

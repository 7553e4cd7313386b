"""changes_since: a view that polls the history re-reads only the runs written since it last looked."""

import os
import sqlite3

import pytest
from builders import fill_history, record_complete_run, started, step

from workbench.config import RunConfig
from workbench.history import reads
from workbench.history import store as store_module
from workbench.history.schema import MIGRATIONS
from workbench.history.store import HistoryStore


@pytest.fixture
def store(tmp_path):
    with HistoryStore.open(tmp_path) as opened:
        yield opened


@pytest.fixture
def parsed(monkeypatch):
    """The ids of the rows turned into RunRecords, in order."""
    ids = []
    real = reads.record_from_row
    monkeypatch.setattr(reads, "record_from_row", lambda row: ids.append(row["id"]) or real(row))
    return ids


def test_first_call_reads_every_run_then_only_what_was_written(store):
    first, second = record_complete_run(store), record_complete_run(store)
    everything = store.changes_since(None)
    assert [record.id for record in everything.changed] == [second, first]
    assert everything.run_ids == {first, second}

    assert store.changes_since(everything.revision).changed == ()  # nothing written since
    store.rename(first, "renamed")
    renamed = store.changes_since(everything.revision)
    assert [(record.id, record.name) for record in renamed.changed] == [(first, "renamed")]
    assert renamed.revision > everything.revision

    store.set_note(second, "a note")
    third = record_complete_run(store)
    later = store.changes_since(renamed.revision)
    assert [record.id for record in later.changed] == [third, second]
    assert later.changed[1].note == "a note"

    store.delete(first)
    deleted = store.changes_since(later.revision)
    assert deleted.changed == () and deleted.run_ids == {second, third}
    assert deleted.revision > later.revision


def test_a_running_runs_progress_writes_are_seen_as_they_land(store):
    config = RunConfig(device="cpu")
    recorder = store.start_run(config)
    recorder.record(started(config, total_steps=4))
    seen = store.changes_since(None)
    recorder.record(step(1, 4))
    recorder.flush()  # the recorder's once-a-second write
    progressed = store.changes_since(seen.revision)
    assert [(record.id, record.summary.steps) for record in progressed.changed] == [(recorder.run_id, 1)]


def test_writes_by_another_process_are_seen(store, tmp_path):
    seen = store.changes_since(None)
    with HistoryStore.open(tmp_path) as cli_process:
        run_id = record_complete_run(cli_process, name="from the terminal")
    changes = store.changes_since(seen.revision)
    assert [(record.id, record.name) for record in changes.changed] == [(run_id, "from the terminal")]


def test_deleting_the_newest_run_never_hides_a_later_write(store):
    # A stamp of "highest revision + 1" would give the next write the deleted run's revision, which a
    # view that had seen it would skip; the counter never goes back.
    old = record_complete_run(store)
    newest = record_complete_run(store)
    seen = store.changes_since(None)
    store.delete(newest)
    store.rename(old, "written after the delete")
    changes = store.changes_since(seen.revision)
    assert [(record.id, record.name) for record in changes.changed] == [(old, "written after the delete")]
    assert changes.run_ids == {old}


def test_runs_from_before_the_upgrade_are_read_whole_and_their_next_write_is_seen(tmp_path):
    conn = sqlite3.connect(tmp_path / store_module.DATABASE_NAME)
    for migration in MIGRATIONS[:3]:
        migration(conn)
    conn.execute("INSERT INTO runs (name, status, source, started_at, config_json) "
                 "VALUES ('from schema 3', 'finished', 'cli', 1.0, '{}')")
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    with HistoryStore.open(tmp_path) as store:
        everything = store.changes_since(None)
        assert [record.name for record in everything.changed] == ["from schema 3"]
        store.set_note(everything.changed[0].id, "noted after the upgrade")
        noted = store.changes_since(everything.revision).changed
        assert [record.note for record in noted] == ["noted after the upgrade"]


def test_with_two_thousand_runs_a_heartbeat_re_reads_only_the_running_row(store, parsed):
    fill_history(store, 2000)
    config = RunConfig(device="cpu")
    recorder = store.start_run(config)
    recorder.record(started(config, total_steps=4))
    seen = store.changes_since(None)
    assert len(seen.run_ids) == 2001
    parsed.clear()

    recorder.record(step(1, 4))
    recorder.flush()
    assert store.mark_interrupted_runs() == []  # what a view does first on every refresh
    changes = store.changes_since(seen.revision)
    assert parsed == [recorder.run_id]  # one row parsed, not 2,001
    assert len(changes.run_ids) == 2001


def test_the_revision_a_poll_reads_is_the_one_changes_since_brings(store, tmp_path):
    """HistoryStore.read_revision: the Runs tab's poll, a one-row read that moves with every write to a run (a delete
    too) and equals the revision changes_since brings, so the table is re-read exactly when it is behind."""
    assert HistoryStore.read_revision(tmp_path / "elsewhere") == 0  # no history yet
    first = record_complete_run(store)
    assert HistoryStore.read_revision(store.path.parent) == store.changes_since(None).revision
    before = HistoryStore.read_revision(store.path.parent)
    store.rename(first, "renamed")
    assert HistoryStore.read_revision(store.path.parent) > before
    before = HistoryStore.read_revision(store.path.parent)
    store.delete(first)
    assert HistoryStore.read_revision(store.path.parent) == store.changes_since(None).revision > before

    fifo = tmp_path / "fifo" / "history.sqlite3"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    with pytest.raises(store_module.HistoryError):  # refused by stat: opened, a FIFO would block the poll for good
        HistoryStore.read_revision(fifo.parent)


def test_a_history_replaced_by_one_of_a_lower_revision_is_read_whole(tmp_path):
    """A revision past the history's (another file put in its place: a backup restored) read the runs stamped above
    it: none, and the table kept the runs of the file that went."""
    with HistoryStore.open(tmp_path / "before") as before:
        for name in ("first", "second", "third"):
            record_complete_run(before, name=name)
        shown = before.changes_since(None).revision
    with HistoryStore.open(tmp_path / "restored") as restored:
        record_complete_run(restored, name="restored")
    with HistoryStore.open_for_reading(tmp_path / "restored") as restored:
        since = restored.changes_since(shown)
    assert since.revision < shown
    assert [record.name for record in since.changed] == ["restored"]

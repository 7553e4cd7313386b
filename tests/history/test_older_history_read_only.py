"""An older history opened only for reading (a read-only disk: it cannot be upgraded in place) is read from a copy
upgraded in memory, made once while the file stays as it was: the Runs tab opens the history for every read (each
refresh, each overlay), and each open copied and upgraded the whole file. The file is never written. No Qt."""

from __future__ import annotations

import hashlib
import sqlite3
import threading

import pytest
from builders import count_upgrades, older_history, record_complete_run
from small_disk import remount_read_only, remount_read_write, small_tmpfs

from workbench.history.database import DATABASE_NAME
from workbench.history.schema import SCHEMA_VERSION
from workbench.history.store import HistoryStore


def rename_in_file(path, run_id, name):
    """What another process (an older workbench, on a disk it can write) commits to the file."""
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE runs SET name = ? WHERE id = ?", (name, run_id))
    conn.close()


@pytest.fixture
def upgrades(monkeypatch):
    return count_upgrades(monkeypatch)


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def names_read(home, check_pages=True):
    with HistoryStore.open_for_reading(home, check_pages) as store:
        return [record.name for record in store.changes_since(None).changed]


def test_reads_of_an_older_history_copy_it_once_while_it_stays_as_it_was(tmp_path, upgrades):
    """Each read copied the whole file into memory and upgraded the copy: on tens of thousands of runs, seconds
    and the file's size in memory for every refresh of the Runs tab."""
    home = tmp_path / "home"
    path = older_history(home)
    before = sha256(path)
    for check_pages in (True, False, False, False, False):  # the Runs tab's first read, then its refreshes
        assert names_read(home, check_pages) == ["second", "first"]
    assert len(upgrades) == 1
    assert sha256(path) == before
    with HistoryStore.open_for_reading(home) as store:
        assert store.changes_since(None).revision == store.changes_since(0).revision
    assert len(upgrades) == 1


def test_a_commit_to_the_file_is_read_from_a_new_copy(tmp_path, upgrades):
    home = tmp_path / "home"
    path = older_history(home)
    assert names_read(home) == ["second", "first"]
    rename_in_file(path, 1, "renamed elsewhere")
    assert names_read(home) == ["second", "renamed elsewhere"]
    assert names_read(home) == ["second", "renamed elsewhere"]
    assert len(upgrades) == 2


def test_the_shared_copy_refuses_writes_and_is_read_by_two_threads_at_once(tmp_path, upgrades):
    home = tmp_path / "home"
    path = older_history(home)
    before = sha256(path)
    with HistoryStore.open_for_reading(home) as store:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store._conn.execute("UPDATE runs SET name = 'written to the copy'")
        read_in_thread = []
        with store._database.snapshot():  # one reader mid-read while another thread opens and reads
            thread = threading.Thread(target=lambda: read_in_thread.append(names_read(home, check_pages=False)))
            thread.start()
            thread.join(30)
        assert read_in_thread == [["second", "first"]]
    assert names_read(home) == ["second", "first"]
    assert len(upgrades) == 1 and sha256(path) == before


def test_a_history_upgraded_since_is_read_as_it_is(tmp_path):
    from workbench.history.upgraded_copies import UPGRADED_COPIES

    home = tmp_path / "home"
    older_history(home)
    assert names_read(home) == ["second", "first"]
    HistoryStore.open(home).close()  # a run, the app: the file is upgraded
    rename_in_file(home / DATABASE_NAME, 2, "after the upgrade")
    assert names_read(home) == ["after the upgrade", "first"]
    assert home / DATABASE_NAME not in UPGRADED_COPIES  # its copy is not kept in memory for nothing


def test_on_a_read_only_mount_the_copy_is_made_again_once_the_file_changes(tmp_path, upgrades):
    """On a read-only mount SQLite cannot make a WAL history's shared-memory file: the file is read as immutable,
    and that connection is told of no commits, so a change to the file is seen by its size, time and inode."""
    with small_tmpfs(tmp_path / "disk", "4m") as disk:
        home = disk / "home"
        path = older_history(home)
        remount_read_only(disk)
        before = sha256(path)
        assert names_read(home) == names_read(home) == ["second", "first"]
        assert len(upgrades) == 1 and sha256(path) == before
        remount_read_write(disk)
        rename_in_file(path, 1, "renamed elsewhere")
        remount_read_only(disk)
        assert names_read(home) == ["second", "renamed elsewhere"]
        assert len(upgrades) == 2
        assert [entry.name for entry in home.iterdir()] == [DATABASE_NAME]  # nothing made beside it


@pytest.mark.parametrize("version", [4, 5], ids=["compile switch", "rank peaks"])
def test_the_copy_has_the_files_run_revision_though_its_upgrade_rewrote_runs(tmp_path, version):
    """Schema 5's upgrade rewrites a compile switch as its mode, schema 6's a rank's peak under its new name:
    each rewrite raised the copy's revision past the file's, which the Runs tab's poll reads, so the poll saw a
    write every 2 s, for ever (and each refresh copied the whole file again)."""
    home = tmp_path / "home"
    path = older_history(home, version, config_json='{"compile": true}')
    if version == 5:
        with sqlite3.connect(path) as conn:
            conn.execute("""UPDATE runs SET rank_peaks_json = '{"peak_nvml_used_bytes": [1, 2]}'""")
        conn.close()
    with HistoryStore.open_for_reading(home) as store:
        everything = store.changes_since(None)
        assert everything.revision == HistoryStore.read_revision(home)
        assert [record.name for record in everything.changed] == ["second", "first"]
    rename_in_file(path, 1, "renamed elsewhere")
    with HistoryStore.open_for_reading(home) as store:
        since = store.changes_since(everything.revision)
        assert since.revision == HistoryStore.read_revision(home)
        assert "renamed elsewhere" in [record.name for record in since.changed]  # the rows rewritten are read too


def record_in_file(path, name):
    """A run another workbench of the file's schema records in it (a disk it can write)."""
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO runs (name, status, source, started_at, config_json) "
                     "VALUES (?, 'finished', 'cli', 1.0e9, '{}')", (name,))
    conn.close()


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_the_poll_of_an_older_history_read_only_sees_each_commit_to_it(tmp_path, upgrades, version):
    """Before schema 4 a history holds no run revision: the Runs tab's poll of it failed on every tick, unsaid, and
    a read of the copy made after a commit, from the last copy's revision, read nothing (each copy's revision was
    its upgrade's, the same in each): a run another workbench recorded, a rename, never appeared."""
    home = tmp_path / "home"
    path = older_history(home, version)
    with HistoryStore.open_for_reading(home) as store:
        shown = store.changes_since(None)
    assert HistoryStore.read_revision(home) == shown.revision  # nothing written: the tab reads nothing
    record_in_file(path, "third")
    rename_in_file(path, 1, "renamed elsewhere")
    polled = HistoryStore.read_revision(home)
    assert polled != shown.revision
    with HistoryStore.open_for_reading(home, check_pages=False) as store:
        since = store.changes_since(shown.revision)
    assert since.revision == polled == HistoryStore.read_revision(home)
    assert {"third", "renamed elsewhere"} <= {record.name for record in since.changed}
    assert since.run_ids == {1, 2, 3}
    assert len(upgrades) == 2  # the poll copies the file once it changed, and the read that follows reads that copy


def test_an_older_history_upgraded_by_a_run_elsewhere_is_read_from_the_copys_revision(tmp_path):
    home = tmp_path / "home"
    older_history(home, version=3)
    with HistoryStore.open_for_reading(home) as store:
        shown = store.changes_since(None)
    with HistoryStore.open(home) as writer:  # a run of this workbench on a disk it can write upgrades the file
        record_complete_run(writer, name="recorded by a run")
    polled = HistoryStore.read_revision(home)
    assert polled != shown.revision
    with HistoryStore.open_for_reading(home, check_pages=False) as store:
        since = store.changes_since(shown.revision)
    assert since.revision == polled
    assert "recorded by a run" in [record.name for record in since.changed]

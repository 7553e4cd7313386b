"""Workbench processes that open one history at the same moment (CLI runs started together, the GUI and a CLI run)
all get it.

SQLite waits out its busy timeout for most locks, but not where waiting could deadlock: a connection switching a
new (rollback-mode) file to WAL fails at once while another holds the file's write lock, which is what another
process switching it at the same moment holds.
"""

import contextlib
import sqlite3
import threading

from workbench.history.database import DATABASE_NAME
from workbench.history.store import HistoryStore


def test_a_new_history_opens_while_another_connection_holds_its_write_lock(tmp_path):
    other = sqlite3.connect(tmp_path / DATABASE_NAME, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # the write lock on the new, rollback-mode file, for 0.3 s
    done = threading.Timer(0.3, other.execute, ("ROLLBACK",))
    done.start()
    try:
        with HistoryStore.open(tmp_path) as store:
            assert store.list_runs() == []
    finally:
        done.join()
        other.close()
    with contextlib.closing(sqlite3.connect(tmp_path / DATABASE_NAME)) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_history_another_process_makes_between_two_reads_is_not_called_damaged(tmp_path):
    """Two CLI runs opening a new history at once (CI: "the run history … is damaged (it holds tables … but no
    workbench schema version)"): the other's migration committed after this one read the version (0) and before
    it read the tables. The reads share one snapshot now, which the other's commit cannot come between."""
    from workbench.history.database import HistoryDatabase, migrate, usable_version
    from workbench.history.schema import MIGRATIONS, SCHEMA_VERSION

    path = tmp_path / DATABASE_NAME
    reader = sqlite3.connect(path, isolation_level=None)
    writer = sqlite3.connect(path, isolation_level=None, timeout=0.2)

    class TheOtherCommitsAfterTheVersionIsRead:
        def __init__(self) -> None:
            self.done = False

        def execute(self, sql: str, *args):
            cursor = reader.execute(sql, *args)
            if "user_version" in sql and not self.done:
                self.done, rows = True, cursor.fetchall()
                with contextlib.suppress(Exception):  # held off by this read's snapshot: it tries again later
                    migrate(HistoryDatabase(writer, path), MIGRATIONS, SCHEMA_VERSION)
                return FetchedRows(rows)
            return cursor

        @property
        def in_transaction(self) -> bool:
            return reader.in_transaction

    class FetchedRows:
        def __init__(self, rows) -> None:
            self.rows = rows

        def fetchone(self):
            return self.rows[0]

    try:
        assert usable_version(TheOtherCommitsAfterTheVersionIsRead(), path, MIGRATIONS, SCHEMA_VERSION) in (
            0, SCHEMA_VERSION)
    finally:
        reader.close()
        writer.close()

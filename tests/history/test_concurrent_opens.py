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

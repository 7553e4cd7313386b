"""The run history: one SQLite database in the workbench home that every run, GUI or CLI, is written to.

HistoryStore is the history as the rest of the workbench uses it: opened for writing (``open``: the schema
brought up to date, runs whose process died marked "interrupted") or only for reading (``open_for_reading``:
`workbench runs` and `export`, which work on a read-only or full disk), its reads (reads.py), the runs and
sequences it starts and edits, each run's writes handed to its RunRecorder (run_writes.py). The file itself,
its checks and its transactions are database.py's; what can go wrong, in words, errors.py's. No Qt.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from workbench.config import RunConfig
from workbench.history import measured_changes, processes
from workbench.history.measured_changes import MeasuredChangeRecord
from workbench.history.database import (
    DATABASE_NAME,
    HistoryDatabase,
    open_for_reading,
    open_for_writing,
    run_revision,
)
from workbench.history.errors import (
    HistoryDamaged,
    HistoryError,
    HistoryTooNew,
    HistoryUnwritable,
    RunInProgress,
    RunNotFound,
    translated,
)
from workbench.history.naming import NameOwner, distinct_name, run_name
from workbench.history.reads import HistoryReads
from workbench.history.recorder import RunRecorder
from workbench.history.records import RunRecord, clean_tags, config_from_json
from workbench.history.run_writes import RunWrites
from workbench.history.schema import MIGRATIONS, SCHEMA_VERSION
from workbench.history.trace_records import KeptBefore, TraceRecord, bring_up_to_date, insert_trace, trace_record_id
from workbench.history.traces import delete_traces

__all__ = ["DATABASE_NAME", "HistoryDamaged", "HistoryError", "HistoryStore", "HistoryTooNew", "HistoryUnwritable",
           "RunInProgress", "RunNotFound"]

# A run owned by another machine cannot be checked; after this long without a write it is presumed dead.
FOREIGN_HOST_STALE_SECONDS = 24 * 3600


class HistoryStore(HistoryReads):
    def __init__(self, database: HistoryDatabase):
        self._database = database
        self._conn = database.conn
        self.path = database.path
        self.note = database.note  # a read-only open's word on what it could not see (None: nothing)

    # -- opening ---------------------------------------------------------------------
    @classmethod
    def open(cls, home: Optional[Path] = None) -> HistoryStore:
        """Open (creating if needed) the history in ``home`` (default: the workbench home) for writing.

        A damaged history, or one from a newer workbench, is refused (HistoryDamaged, HistoryTooNew) before
        anything is written to it; one that cannot be written where it is gives HistoryUnwritable."""
        database = open_for_writing(_database_path(home), MIGRATIONS, SCHEMA_VERSION)
        store = cls(database)
        try:
            store.mark_interrupted_runs()
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def open_for_reading(cls, home: Optional[Path] = None, check_pages: bool = True) -> HistoryStore:
        """The history in ``home`` for reading only: nothing is written to its file or made beside it where that
        cannot be done, so it opens on a read-only or full disk; an older schema is read as this version reads
        it, without upgrading the file. Runs whose process died are marked "interrupted" where the file takes
        the write (best effort: a read-only or full disk leaves them as they are). Without ``check_pages`` the
        tables' pages are not checked first (database.usable_version)."""
        path = _database_path(home)
        store = cls(open_for_reading(path, MIGRATIONS, SCHEMA_VERSION, check_pages))
        try:
            if path.exists() and _dead_runs(store._database):  # rare: look again once they are marked
                _mark_interrupted_if_writable(path)
                store.close()
                store = cls(open_for_reading(path, MIGRATIONS, SCHEMA_VERSION, check_pages))
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def read_revision(cls, home: Optional[Path] = None) -> int:
        """The revision ``changes_since`` of the history in ``home`` opened for reading would bring, read cheaply
        (no checks, one row): what a view that polls compares (database.run_revision). Raises HistoryError."""
        return run_revision(_database_path(home), MIGRATIONS, SCHEMA_VERSION)

    def close(self) -> None:
        self._database.close()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _transaction(self):
        return self._database.transaction()

    def change_token(self) -> tuple[int, int]:
        """Changes whenever anyone (this connection or another process) commits: cheap polling for views."""
        with translated(self.path, "read"):  # closed, or the file went away: a polling view skips a beat
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0]), self._database.local_writes

    # -- runs ------------------------------------------------------------------------
    def start_run(
        self, config: RunConfig, name: Optional[str] = None, source: str = "cli", sequence_id: Optional[int] = None
    ) -> RunRecorder:
        """Record a new run as "running" and return the recorder its events go to.

        ``sequence_id`` (from ``create_sequence``) makes the run a member of that sequence of runs."""
        pid = os.getpid()
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO runs (name, status, source, started_at, heartbeat_at, pid, hostname, "
                "process_identity, app_version, config_json, sequence_id) "
                "VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    name or "",
                    source,
                    time.time(),
                    time.time(),
                    pid,
                    processes.hostname(),
                    processes.process_identity(pid),
                    _app_version(),
                    json.dumps(config.to_dict(), sort_keys=True),
                    sequence_id,
                ),
            )
            run_id = int(cursor.lastrowid)
            given = name
            if not name:
                previous = conn.execute(
                    # a failed run is no step the user took from, and a trace record's settings are not a run's:
                    # "same settings" is said against a run that ran
                    "SELECT config_json FROM runs WHERE id < ? AND status != 'failed' AND record_kind = 'run' "
                    "ORDER BY id DESC LIMIT 1",
                    (run_id,)
                ).fetchone()
                previous_config = config_from_json(previous[0])[0] if previous is not None else None
                name = run_name(config, previous_config)
            name = distinct_name(name, config, _sequence_name(conn, sequence_id), _name_owner(conn, run_id))
            if name != given:
                conn.execute("UPDATE runs SET name = ? WHERE id = ?", (name, run_id))
        return RunRecorder(RunWrites(self._database, run_id), name=name, config=config, source=source)

    def add_trace(self, trace: TraceRecord, source: str = "gui") -> tuple[int, Optional[KeptBefore]]:
        """Keep an opened trace as a record of kind "trace": (its id, None where the record is new). The same bytes
        (sha256) opened again give the record already kept, brought up to date where this workbench's analysis
        gave other figures (trace_records.py): what it held is the KeptBefore."""
        with self._transaction() as conn:
            existing = trace_record_id(conn, trace.sha256)
            if existing is not None:
                return existing, bring_up_to_date(conn, existing, trace, _app_version())
            name = Path(trace.path).name or trace.path
            run_id = insert_trace(conn, trace, name, source, time.time(), _app_version())
        return run_id, None

    def kept_trace_id(self, sha256: str) -> Optional[int]:
        """The record of a trace of these bytes, where one is kept (a read: it answers on a full or read-only disk)."""
        with translated(self.path, "read"):
            return trace_record_id(self._conn, sha256)

    def create_sequence(self, kind: str, name: str, plan: Optional[dict[str, Any]] = None) -> int:
        """Record a new sequence of runs (kind: sweep, tune or max_batch); returns its id for ``start_run``."""
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO sequences (kind, name, created_at, plan_json) VALUES (?, ?, ?, ?)",
                (kind, name, time.time(), json.dumps(plan, sort_keys=True) if plan is not None else None),
            )
        return int(cursor.lastrowid)

    def add_measured_change(self, change: MeasuredChangeRecord) -> int:
        """Store one change measured against a baseline (history/measured_changes.py); its id."""
        with self._transaction() as conn:
            return measured_changes.add(conn, change)

    def measured_changes(self, config: RunConfig, device_type: str, device_name: str) -> list[MeasuredChangeRecord]:
        """The changes measured on this device from ``config``'s speed settings, oldest first."""
        with translated(self.path, "read"):
            return measured_changes.measured_on(self._conn, config, device_type, device_name)

    def rename(self, run_id: int, name: str) -> None:
        name = name.strip()
        if not name:
            raise HistoryError("a run's name cannot be empty")
        self._update_one(run_id, "UPDATE runs SET name = ? WHERE id = ?", (name, run_id))

    def set_note(self, run_id: int, note: str) -> None:
        self._update_one(run_id, "UPDATE runs SET note = ? WHERE id = ?", (note, run_id))

    def set_tags(self, run_id: int, tags: Sequence[str]) -> tuple[str, ...]:
        """Replace the run's tags (cleaned: see ``clean_tags``); the tags kept."""
        kept = clean_tags(tags)
        self._update_one(run_id, "UPDATE runs SET tags_json = ? WHERE id = ?", (json.dumps(list(kept)), run_id))
        return kept

    def delete(self, run_id: int) -> None:
        """Delete a run and its metrics; a run its live process is still writing is refused."""
        record = self.get_run(run_id)
        if record.status == "running" and owner_may_be_alive(record):
            raise RunInProgress(f"run #{run_id} is still running (process {record.pid} on {record.hostname})")
        with translated(self.path, "read"):
            traces = [path for row in self._conn.execute(
                "SELECT trace_path, ops_trace_path FROM profile_samples WHERE run_id = ?", (run_id,)) for path in row
                if path]
        with self._transaction() as conn:
            conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))  # metrics go by ON DELETE CASCADE
        delete_traces(traces)

    def _update_one(self, run_id: int, sql: str, params: tuple) -> None:
        with self._transaction() as conn:
            if conn.execute(sql, params).rowcount == 0:
                raise RunNotFound(f"no run with id {run_id} in {self.path}")

    # -- interrupted runs ------------------------------------------------------------
    def mark_interrupted_runs(self) -> list[int]:
        """Mark "running" runs whose process has died as "interrupted"; returns their ids.

        A run whose process is still alive (a CLI run while the GUI opens) is left alone.
        """
        return _mark_interrupted(self._database, _dead_runs(self._database))


def _dead_runs(database: HistoryDatabase) -> list[sqlite3.Row]:
    # Only the owner's columns: views call this on every refresh, and a run's whole row is not needed here.
    with translated(database.path, "read"):
        running = database.conn.execute(
            "SELECT id, pid, hostname, process_identity, heartbeat_at, started_at, steps FROM runs "
            "WHERE status = 'running'"
        ).fetchall()
    return [row for row in running if not owner_may_be_alive(row)]


def _mark_interrupted(database: HistoryDatabase, dead: list[sqlite3.Row]) -> list[int]:
    if not dead:
        return []
    with database.transaction() as conn:
        for row in dead:
            # Its process may have died, or lived on after the history stopped taking its writes (a full disk):
            # either way its record stops where its last write left it, and that is all this says.
            conn.execute(
                "UPDATE runs SET status = 'interrupted', reason = ?, finished_at = ? WHERE id = ? AND status = 'running'",
                (
                    f"the process running it (pid {row['pid']} on {row['hostname']}) ended without finishing "
                    f"its record, so how the run ended is unknown; the record stops at its last write (step {row['steps']})",
                    row["heartbeat_at"] or row["started_at"],  # the last sign of life is the best end time we have
                    row["id"],
                ),
            )
    return [row["id"] for row in dead]


def _mark_interrupted_if_writable(path: Path) -> None:
    """For a reader: mark the runs whose process died through a connection of its own, where the file takes the
    write (the reader's file passed its checks: it is a usable history). A read-only or full disk, or a busy
    history, leaves them as they are: the reader shows them as stored."""
    try:
        conn = sqlite3.connect(path, timeout=1.0, isolation_level=None)
    except sqlite3.Error:
        return
    conn.row_factory = sqlite3.Row
    database = HistoryDatabase(conn, path)
    try:
        _mark_interrupted(database, _dead_runs(database))
    except HistoryError:
        pass
    finally:
        database.close()


def owner_may_be_alive(run: RunRecord | sqlite3.Row) -> bool:
    """``run``: a RunRecord, or a row of runs with pid, hostname, process_identity, heartbeat_at, started_at."""
    get = run.__getitem__ if isinstance(run, sqlite3.Row) else functools.partial(getattr, run)
    pid, hostname, identity = get("pid"), get("hostname"), get("process_identity")
    last_seen = get("heartbeat_at") or get("started_at")
    if hostname != processes.hostname() or pid is None:
        return time.time() - last_seen < FOREIGN_HOST_STALE_SECONDS
    return processes.process_alive(pid, identity)


def _database_path(home: Optional[Path]) -> Path:
    if home is None:
        from workbench.paths import workbench_home

        home = workbench_home()
    return Path(home).expanduser() / DATABASE_NAME


@functools.lru_cache(maxsize=1)
def _app_version() -> Optional[str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpu-training-workbench")
    except PackageNotFoundError:
        return None


def _sequence_name(conn: sqlite3.Connection, sequence_id: Optional[int]) -> Optional[str]:
    row = conn.execute("SELECT name FROM sequences WHERE id = ?", (sequence_id,)).fetchone() if sequence_id else None
    return row[0] if row is not None else None


def _name_owner(conn: sqlite3.Connection, run_id: int) -> NameOwner:
    """Who has a name already (another run than ``run_id`` that did not fail): its settings and its sequence's name.
    A failed run's name is free again: five failed tries of one folder made the run that worked "(repeat 6)"."""

    def owner(name: str) -> Optional[tuple[RunConfig, Optional[str]]]:
        row = conn.execute(
            "SELECT runs.config_json, sequences.name FROM runs LEFT JOIN sequences ON sequences.id = runs.sequence_id "
            "WHERE runs.name = ? AND runs.id != ? AND runs.status != 'failed' ORDER BY runs.id DESC LIMIT 1",
            (name, run_id)
        ).fetchone()
        return (config_from_json(row[0])[0], row[1]) if row is not None else None

    return owner

"""The run history: one SQLite database in the workbench home that every run, GUI or CLI, is written to.

One connection per HistoryStore, used from one thread. WAL mode lets a GUI read while a CLI run
in another process writes. Opening the store brings the schema up to date and marks runs whose
process died as "interrupted". No Qt here.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional, Sequence

from workbench.config import RunConfig
from workbench.history import comparisons, processes
from workbench.history.naming import NameOwner, distinct_name, run_name
from workbench.history.records import RunChanges, RunRecord, config_from_json, rank_peaks_json, record_from_row
from workbench.history.schema import (
    EPOCH_COLUMNS,
    MIGRATIONS,
    PROFILE_SAMPLE_COLUMNS,
    PROFILE_SAMPLE_LISTS,
    DEVICE_COLUMNS,
    SCHEMA_VERSION,
    STEP_COLUMNS,
    SUMMARY_COLUMNS,
)

if TYPE_CHECKING:
    import numpy as np

    from workbench.device_info import DeviceInfo
    from workbench.engine.events import ProfileSample, RunStarted, RunSummary
    from workbench.history.comparisons import MeasuredChange
    from workbench.history.recorder import RunRecorder

DATABASE_NAME = "history.sqlite3"
# Every read of a run: its row, and the name of the sequence (sweep) it belongs to, if any.
_RUNS = "SELECT runs.*, sweeps.name AS sweep_name FROM runs LEFT JOIN sweeps ON sweeps.id = runs.sweep_id"
# A run owned by another machine cannot be checked; after this long without a write it is presumed dead.
FOREIGN_HOST_STALE_SECONDS = 24 * 3600


class HistoryError(Exception):
    """The history cannot do what was asked; the message says why, in words."""


class HistorySchemaError(HistoryError):
    """The database was written by a newer workbench, or is not a history database at all."""


class RunNotFound(HistoryError, LookupError):
    pass


class RunInProgress(HistoryError):
    """The run is still being written by a live process."""


class HistoryStore:
    def __init__(self, conn: sqlite3.Connection, path: Path):
        self._conn = conn
        self.path = path
        self._local_writes = 0  # data_version only counts other connections' commits

    # -- opening ---------------------------------------------------------------------
    @classmethod
    def open(cls, home: Optional[Path] = None) -> HistoryStore:
        """Open (creating if needed) the history in ``home`` (default: the workbench home)."""
        if home is None:
            from workbench.paths import workbench_home

            home = workbench_home()
        home = Path(home).expanduser()
        path = home / DATABASE_NAME
        try:
            home.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE), see _transaction.
            conn = sqlite3.connect(path, timeout=10.0, isolation_level=None)
        except (OSError, sqlite3.Error) as error:
            raise HistoryError(f"cannot open the run history at {path}: {_words(error)}") from error
        try:
            conn.row_factory = sqlite3.Row
            store = cls(conn, path)
            store._prepare()
            store.mark_interrupted_runs()
        except BaseException:
            conn.close()
            raise
        return store

    def _prepare(self) -> None:
        try:
            version = self._user_version()
        except sqlite3.DatabaseError as error:
            raise HistorySchemaError(
                f"{self.path} is not a workbench history database ({_words(error)}); move it aside to start afresh"
            ) from error
        self._refuse_newer(version)
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL keeps every commit through a process crash; only power loss can cost the last ones.
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            if version < SCHEMA_VERSION:
                self._migrate()
        except sqlite3.Error as error:
            raise HistoryError(
                f"cannot bring the run history at {self.path} up to schema {SCHEMA_VERSION}: {_words(error)}"
            ) from error

    def _user_version(self) -> int:
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise HistorySchemaError(
                f"history database {self.path} was written by a newer workbench "
                f"(schema {version}; this version reads up to {SCHEMA_VERSION}); update the workbench to open it"
            )

    def _migrate(self) -> None:
        with self._transaction():
            version = self._user_version()  # another process may have migrated while we waited for the lock
            self._refuse_newer(version)
            for migration in MIGRATIONS[version:]:
                migration(self._conn)
            self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE takes the write lock up front: a deferred transaction that later upgrades to a
        # writer gets SQLITE_BUSY at once under WAL instead of waiting out the busy timeout.
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise HistoryError(f"cannot write the run history at {self.path}: {_words(error)}") from error
        try:
            yield self._conn
        except BaseException:
            self._rollback()
            raise
        else:
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as error:
                self._rollback()
                raise HistoryError(f"cannot write the run history at {self.path}: {_words(error)}") from error
        self._local_writes += 1

    def _rollback(self) -> None:
        if self._conn.in_transaction:  # some errors (a full disk) have rolled back already
            self._conn.execute("ROLLBACK")

    def change_token(self) -> tuple[int, int]:
        """Changes whenever anyone (this connection or another process) commits: cheap polling for views."""
        try:
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0]), self._local_writes
        except sqlite3.Error as error:  # closed, or the file went away: a polling view skips a beat
            raise HistoryError(f"cannot read the run history at {self.path}: {_words(error)}") from error

    # -- runs ------------------------------------------------------------------------
    def start_run(
        self, config: RunConfig, name: Optional[str] = None, source: str = "cli", sequence_id: Optional[int] = None
    ) -> RunRecorder:
        """Record a new run as "running" and return the recorder its events go to.

        ``sweep_id`` (from ``create_sweep``) makes the run a member of that sequence of runs."""
        from workbench.history.recorder import RunRecorder

        pid = os.getpid()
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO runs (name, status, source, started_at, heartbeat_at, pid, hostname, "
                "process_identity, app_version, config_json, sweep_id) "
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
                    "SELECT config_json FROM runs WHERE id < ? ORDER BY id DESC LIMIT 1", (run_id,)
                ).fetchone()
                previous_config = config_from_json(previous[0])[0] if previous is not None else None
                name = run_name(config, previous_config)
            name = distinct_name(name, config, _sequence_name(conn, sequence_id), _name_owner(conn, run_id))
            if name != given:
                conn.execute("UPDATE runs SET name = ? WHERE id = ?", (name, run_id))
        return RunRecorder(self, run_id, name=name, config=config, source=source)

    def create_sequence(self, kind: str, name: str, plan: Optional[dict[str, Any]] = None) -> int:
        """Record a new sequence of runs (kind: sweep, tune or max_batch); returns its id for ``start_run``."""
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO sweeps (kind, name, created_at, plan_json) VALUES (?, ?, ?, ?)",
                (kind, name, time.time(), json.dumps(plan, sort_keys=True) if plan is not None else None),
            )
        return int(cursor.lastrowid)

    def add_measured_change(self, change: MeasuredChange) -> int:
        """Store one change measured against a baseline (history/comparisons.py); its id."""
        with self._transaction() as conn:
            return comparisons.add(conn, change)

    def measured_changes(self, config: RunConfig, device_type: str, device_name: str) -> list[MeasuredChange]:
        """The changes measured on this device from ``config``'s speed settings, oldest first."""
        try:
            return comparisons.measured_on(self._conn, config, device_type, device_name)
        except sqlite3.Error as error:
            raise HistoryError(f"cannot read the run history at {self.path}: {_words(error)}") from error

    def sequence_runs(self, sequence_id: int) -> list[RunRecord]:
        """The runs of one sequence, in the order they ran."""
        return [record_from_row(row) for row in self._conn.execute(f"{_RUNS} WHERE runs.sweep_id = ? ORDER BY runs.id",
                                                           (sequence_id,))]

    def changes_since(self, revision: Optional[int]) -> RunChanges:
        """The runs added or written since ``revision`` (every run when None), read in one snapshot.

        Every write to a run stamps it with the history's next revision (triggers, schema 4), so a view that
        polls during a run re-reads the running row only, not the whole history."""
        try:
            with self._snapshot() as conn:
                current = int(conn.execute("SELECT value FROM run_revision").fetchone()[0])
                if revision is None:
                    rows = conn.execute(f"{_RUNS} ORDER BY runs.id DESC").fetchall()
                elif revision == current:
                    rows = []  # nothing written, nothing deleted
                else:
                    rows = conn.execute(
                        f"{_RUNS} WHERE runs.revision > ? ORDER BY runs.id DESC", (revision,)
                    ).fetchall()
                run_ids = frozenset(row[0] for row in conn.execute("SELECT id FROM runs"))
        except sqlite3.Error as error:
            raise HistoryError(f"cannot read the run history at {self.path}: {_words(error)}") from error
        return RunChanges(current, tuple(record_from_row(row) for row in rows), run_ids)

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """Reads that see one state of the file, whatever other processes commit meanwhile (WAL)."""
        self._conn.execute("BEGIN")
        try:
            yield self._conn
        finally:
            self._rollback()  # nothing was written: ending the read transaction is all

    def list_runs(self) -> list[RunRecord]:
        """Every run, newest first."""
        return [record_from_row(row) for row in self._conn.execute(f"{_RUNS} ORDER BY runs.id DESC")]

    def get_run(self, run_id: int) -> RunRecord:
        row = self._conn.execute(f"{_RUNS} WHERE runs.id = ?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFound(f"no run with id {run_id} in {self.path}")
        return record_from_row(row)

    def get_runs(self, run_ids: Optional[Sequence[int]] = None) -> list[RunRecord]:
        """The given runs (all when None), oldest first; unknown ids are refused all together."""
        if run_ids is None:
            return [record_from_row(row) for row in self._conn.execute(f"{_RUNS} ORDER BY runs.id")]
        wanted = sorted(set(int(run_id) for run_id in run_ids))
        records = {}
        for start in range(0, len(wanted), 500):  # stay under SQLite's bound-parameter limit
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self._conn.execute(f"{_RUNS} WHERE runs.id IN ({marks})", chunk):
                records[row["id"]] = record_from_row(row)
        missing = [run_id for run_id in wanted if run_id not in records]
        if missing:
            listed = ", ".join(str(run_id) for run_id in missing)
            raise RunNotFound(f"no run with id{'s' if len(missing) > 1 else ''} {listed} in {self.path}")
        return [records[run_id] for run_id in wanted]

    def rename(self, run_id: int, name: str) -> None:
        name = name.strip()
        if not name:
            raise HistoryError("a run's name cannot be empty")
        self._update_one(run_id, "UPDATE runs SET name = ? WHERE id = ?", (name, run_id))

    def set_note(self, run_id: int, note: str) -> None:
        self._update_one(run_id, "UPDATE runs SET note = ? WHERE id = ?", (note, run_id))

    def delete(self, run_id: int) -> None:
        """Delete a run and its metrics; a run its live process is still writing is refused."""
        record = self.get_run(run_id)
        if record.status == "running" and self._owner_may_be_alive(record):
            raise RunInProgress(f"run #{run_id} is still running (process {record.pid} on {record.hostname})")
        traces = [path for row in self._conn.execute(
            "SELECT trace_path, ops_trace_path FROM profile_samples WHERE run_id = ?", (run_id,)) for path in row if path]
        with self._transaction() as conn:
            conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))  # metrics go by ON DELETE CASCADE
        _delete_traces(traces)

    def _discard_unstarted(self, run_id: int) -> None:
        """Remove a run that never started training (its recorder's call; no metrics exist yet)."""
        with self._transaction() as conn:
            conn.execute("DELETE FROM runs WHERE id = ? AND device_json IS NULL", (run_id,))

    def _update_one(self, run_id: int, sql: str, params: tuple) -> None:
        with self._transaction() as conn:
            if conn.execute(sql, params).rowcount == 0:
                raise RunNotFound(f"no run with id {run_id} in {self.path}")

    # -- interrupted runs ------------------------------------------------------------
    def mark_interrupted_runs(self) -> list[int]:
        """Mark "running" runs whose process has died as "interrupted"; returns their ids.

        A run whose process is still alive (a CLI run while the GUI opens) is left alone.
        """
        # Only the owner's columns: views call this on every refresh, and a run's whole row is not needed here.
        running = self._conn.execute(
            "SELECT id, pid, hostname, process_identity, heartbeat_at, started_at FROM runs WHERE status = 'running'"
        ).fetchall()
        dead = [row for row in running if not self._owner_may_be_alive(row)]
        if not dead:
            return []
        with self._transaction() as conn:
            for row in dead:
                conn.execute(
                    "UPDATE runs SET status = 'interrupted', reason = ?, finished_at = ? "
                    "WHERE id = ? AND status = 'running'",
                    (
                        f"the process running it (pid {row['pid']} on {row['hostname']}) ended without finishing it",
                        row["heartbeat_at"] or row["started_at"],  # the last sign of life is the best end time we have
                        row["id"],
                    ),
                )
        return [row["id"] for row in dead]

    @staticmethod
    def _owner_may_be_alive(run: RunRecord | sqlite3.Row) -> bool:
        """``run``: a RunRecord, or a row of runs with pid, hostname, process_identity, heartbeat_at, started_at."""
        get = run.__getitem__ if isinstance(run, sqlite3.Row) else functools.partial(getattr, run)
        pid, hostname, identity = get("pid"), get("hostname"), get("process_identity")
        last_seen = get("heartbeat_at") or get("started_at")
        if hostname != processes.hostname() or pid is None:
            return time.time() - last_seen < FOREIGN_HOST_STALE_SECONDS
        return processes.process_alive(pid, identity)

    # -- metrics ---------------------------------------------------------------------
    def step_metrics(self, run_id: int) -> dict[str, np.ndarray]:
        """The run's step windows as arrays: "step" plus every STEP_COLUMNS name; unknown values are NaN."""
        return self._arrays("step_metrics", "step", STEP_COLUMNS, run_id)

    def epoch_metrics(self, run_id: int) -> dict[str, np.ndarray]:
        """Per-epoch figures as arrays: "epoch" plus every EPOCH_COLUMNS name."""
        return self._arrays("epoch_metrics", "epoch", EPOCH_COLUMNS, run_id)

    def _arrays(self, table: str, key: str, columns: tuple[str, ...], run_id: int) -> dict[str, np.ndarray]:
        import numpy as np  # only views and exports need arrays; `workbench runs` stays quick

        rows = self._conn.execute(
            f"SELECT {key}, {', '.join(columns)} FROM {table} WHERE run_id = ? ORDER BY {key}", (run_id,)
        ).fetchall()
        arrays = {key: np.array([row[0] for row in rows], dtype=np.int64)}
        for index, name in enumerate(columns, start=1):
            arrays[name] = np.array([np.nan if row[index] is None else row[index] for row in rows], dtype=np.float64)
        return arrays

    def profile_samples(self, run_id: int) -> list[ProfileSample]:
        """The run's profiler samples, in step order, as the engine yielded them."""
        from workbench.engine.events import NamedTime, ProfileSample

        rows = self._conn.execute(
            f"SELECT first_step, {', '.join(PROFILE_SAMPLE_COLUMNS)}, "
            f"{', '.join(name + '_json' for name in PROFILE_SAMPLE_LISTS)} "
            "FROM profile_samples WHERE run_id = ? ORDER BY first_step",
            (run_id,),
        ).fetchall()
        samples = []
        for row in rows:
            values = {name: row[name] for name in ("first_step", *PROFILE_SAMPLE_COLUMNS)}
            values["timeline_host_ops_recorded"] = bool(values["timeline_host_ops_recorded"])
            for name in PROFILE_SAMPLE_LISTS:
                items = json.loads(row[name + "_json"] or "[]")
                values[name] = tuple(NamedTime(name=item["name"], seconds=item["seconds"], count=item["count"]) for item in items)
            samples.append(ProfileSample(**values))
        return samples

    def iter_step_rows(self, run_id: int) -> Iterator[sqlite3.Row]:
        """Raw step rows (step, then STEP_COLUMNS), in step order: for streaming exports."""
        return iter(
            self._conn.execute(
                f"SELECT step, {', '.join(STEP_COLUMNS)} FROM step_metrics WHERE run_id = ? ORDER BY step", (run_id,)
            )
        )

    def iter_epoch_rows(self, run_id: int) -> Iterator[sqlite3.Row]:
        """Raw epoch rows (epoch, then EPOCH_COLUMNS), in epoch order."""
        return iter(
            self._conn.execute(
                f"SELECT epoch, {', '.join(EPOCH_COLUMNS)} FROM epoch_metrics WHERE run_id = ? ORDER BY epoch",
                (run_id,),
            )
        )

    # -- writes for RunRecorder --------------------------------------------------------
    def _write_started(self, run_id: int, started: RunStarted) -> None:
        device: DeviceInfo = started.device
        run_info = {
            "dataset_name": started.dataset_name,
            "train_size": started.train_size,
            "test_size": started.test_size,
            "num_classes": started.num_classes,
            "steps_per_epoch": started.steps_per_epoch,
            "total_steps": started.total_steps,
            "parameter_count": started.parameter_count,
            "engine_started_at": started.started_at,
            "notes": list(started.notes),
        }
        with self._transaction() as conn:
            conn.execute(
                "UPDATE runs SET device_json = ?, run_info_json = ?, device_type = ?, device_name = ?, "
                "torch_version = ?, heartbeat_at = ? WHERE id = ?",
                (
                    json.dumps(asdict(device), sort_keys=True),
                    json.dumps(run_info, sort_keys=True),
                    device.type,
                    device.name,
                    device.torch_version,
                    time.time(),
                    run_id,
                ),
            )

    def _write_progress(
        self,
        run_id: int,
        step_rows: list[tuple],
        epoch_rows: list[tuple],
        summary: RunSummary,
        end: Optional[tuple[str, Optional[str], Optional[str], Optional[str]]] = None,
        sample_rows: Sequence[tuple] = (),
    ) -> None:
        """Buffered metrics, the summary so far, a heartbeat, and for the last write the run's end, at once."""
        now = time.time()
        with self._transaction() as conn:
            if sample_rows:
                names = ("first_step", *PROFILE_SAMPLE_COLUMNS, *(name + "_json" for name in PROFILE_SAMPLE_LISTS))
                conn.executemany(
                    f"INSERT OR REPLACE INTO profile_samples (run_id, {', '.join(names)}) "
                    f"VALUES ({', '.join('?' * (len(names) + 1))})",
                    [(run_id, *row) for row in sample_rows],
                )
            if step_rows:
                conn.executemany(
                    f"INSERT OR REPLACE INTO step_metrics (run_id, step, {', '.join(STEP_COLUMNS)}) "
                    f"VALUES ({', '.join('?' * (len(STEP_COLUMNS) + 2))})",
                    [(run_id, *row) for row in step_rows],
                )
            if epoch_rows:
                conn.executemany(
                    f"INSERT OR REPLACE INTO epoch_metrics (run_id, epoch, {', '.join(EPOCH_COLUMNS)}) "
                    f"VALUES ({', '.join('?' * (len(EPOCH_COLUMNS) + 2))})",
                    [(run_id, *row) for row in epoch_rows],
                )
            # Device facts come from RunStarted; a summary built without the events must not erase them.
            assignments = ", ".join(f"{name} = COALESCE(?, {name})" if name in DEVICE_COLUMNS else f"{name} = ?"
                                    for name in SUMMARY_COLUMNS)
            values = [getattr(summary, name) for name in SUMMARY_COLUMNS]
            values.append(json.dumps([finding.to_dict() for finding in summary.findings]) if summary.findings else None)
            values.append(rank_peaks_json(summary))
            sql = (f"UPDATE runs SET {assignments}, findings_json = ?, rank_peaks_json = ?, "
                   "device_type = COALESCE(?, device_type), heartbeat_at = ?")
            values += [summary.device, now]
            if end is not None:
                sql += ", status = ?, reason = ?, failure_kind = ?, traceback = ?, finished_at = ?"
                values += [*end, now]
            conn.execute(sql + " WHERE id = ?", (*values, run_id))


@functools.lru_cache(maxsize=1)
def _app_version() -> Optional[str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpu-training-workbench")
    except PackageNotFoundError:
        return None


def _words(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower() if error.strerror[:1].isupper() else error.strerror
    return str(error)


TRACE_SUFFIX = ".trace.json.gz"


def _delete_traces(paths: Sequence[str]) -> None:
    """A deleted run's profiler traces go with it: only files the profiler wrote (``*.trace.json.gz`` in
    a run's folder under a ``traces`` folder), then that folder if it is left empty. A trace already
    gone, or one that cannot be removed, does not stop the deletion."""
    folders = set()
    for text in paths:
        path = Path(text)
        if not path.name.endswith(TRACE_SUFFIX) or path.parent.parent.name != "traces":
            continue
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
        folders.add(path.parent)
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty: another run's traces never share it, but be safe


def _sequence_name(conn: sqlite3.Connection, sequence_id: Optional[int]) -> Optional[str]:
    row = conn.execute("SELECT name FROM sweeps WHERE id = ?", (sequence_id,)).fetchone() if sequence_id else None
    return row[0] if row is not None else None


def _name_owner(conn: sqlite3.Connection, run_id: int) -> NameOwner:
    """Who has a name already (another run than ``run_id``): its settings and its sequence's name."""

    def owner(name: str) -> Optional[tuple[RunConfig, Optional[str]]]:
        row = conn.execute(
            "SELECT runs.config_json, sweeps.name FROM runs LEFT JOIN sweeps ON sweeps.id = runs.sweep_id "
            "WHERE runs.name = ? AND runs.id != ? ORDER BY runs.id DESC LIMIT 1", (name, run_id)
        ).fetchone()
        return (config_from_json(row[0])[0], row[1]) if row is not None else None

    return owner

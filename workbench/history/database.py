"""The history's SQLite file: opened for writing or only for reading, checked to be a history this workbench can
use before anything is written to it, brought up to date, and the transactions every write goes through.

One connection per HistoryDatabase, used from one thread. WAL mode lets a GUI read while a CLI run in another
process writes; the log is checkpointed often and truncated, so a long run does not grow it without bound.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import os
import sqlite3
import time
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from workbench.history.errors import (
    SQLITE_BUSY,
    SQLITE_CANTOPEN,
    SQLITE_IOERR,
    SQLITE_READONLY,
    HistoryDamaged,
    HistoryTooNew,
    damaged,
    history_error,
    sqlite_code,
    translated,
)
from workbench.history.upgraded_copies import UPGRADED_COPIES
from workbench.regular_file import folder_problem, kind_problem, os_error_words

DATABASE_NAME = "history.sqlite3"
# A checkpoint every 128 pages (512 KiB at SQLite's 4 KiB pages; SQLite's default is 1000) and the log cut back
# to 1 MiB after one: a run's log stays small on a small disk. Checkpoints run in the writing process.
WAL_AUTOCHECKPOINT_PAGES = 128
JOURNAL_SIZE_LIMIT_BYTES = 1 << 20
# How long an open or a write waits for another process's lock before saying the history is busy.
BUSY_TIMEOUT_S = 10.0
# The tables a run's start writes: checked page by page on open (they are small; step metrics are not read).
CHECKED_TABLES = ("runs", "sequences", "run_revision")

Migration = Callable[[sqlite3.Connection], None]


class HistoryDatabase:
    """One connection to the history file and the transactions on it."""

    def __init__(self, conn: sqlite3.Connection, path: Path, note: Optional[str] = None):
        self.conn = conn
        self.path = path
        self.note = note  # what a read-only open could not see, in words (None: it sees everything)
        self.local_writes = 0  # PRAGMA data_version only counts other connections' commits

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE takes the write lock up front: a deferred transaction that later upgrades to a
        # writer gets SQLITE_BUSY at once under WAL instead of waiting out the busy timeout. Every SQLite
        # error inside (not only BEGIN and COMMIT) comes out as the HistoryError that says what to do.
        with translated(self.path, "write"):
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
                self.conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
        self.local_writes += 1

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """Reads that see one state of the file, whatever other processes commit meanwhile (WAL)."""
        with translated(self.path, "read"):
            self.conn.execute("BEGIN")
            try:
                yield self.conn
            finally:
                self._rollback()  # nothing was written: ending the read transaction is all

    def _rollback(self) -> None:
        if self.conn.in_transaction:  # some errors (a full disk) have rolled back already
            with contextlib.suppress(sqlite3.Error):  # the error that brought us here is the one to report
                self.conn.execute("ROLLBACK")

    def checkpoint(self) -> None:
        """Copy the log into the database and cut it to nothing (frees a full disk's room for a last write)."""
        with translated(self.path, "write"):
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def close(self) -> None:
        self.conn.close()


def _refuse_what_is_no_file(path: Path) -> None:
    """HistoryDamaged where ``path`` is there but no regular file: SQLite would open a FIFO for good (blocking, deaf
    to Ctrl-C) and read a device; and where its folder, the workbench home, is a file (it read as no history)."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        problem = folder_problem(path.parent)
        if problem is not None and problem != "does not exist":
            raise HistoryDamaged(f"the run history cannot be kept in {path.parent}: it {problem}, not a folder; "
                                 "move it aside, or use --home to keep the history elsewhere") from None
        return
    except OSError as error:
        if error.errno == errno.ELOOP:  # Path.exists() says False: it read as no history, and export wrote none
            home_problem = folder_problem(path.parent)
            where = (f"the workbench home {path.parent} {home_problem}" if home_problem and "loop" in home_problem
                     else f"{path} {os_error_words(error)}")
            raise HistoryDamaged(f"the run history cannot be reached: {where}; it is left as it is: replace the link, "
                                 "or use --home to keep the history elsewhere") from None
        return  # SQLite's open says what it is, in its words
    problem = kind_problem(mode)
    if problem is not None:
        raise HistoryDamaged(f"the run history {path} {problem}, not a database; it is left as it is: move it aside "
                             "and the workbench starts a new one there, or use --home to keep the history elsewhere")


# The files SQLite keeps beside a database: its write-ahead log, the log's shared memory, a rollback journal.
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def _refuse_side_files_of_another_kind(path: Path) -> None:
    """HistoryDamaged naming the file where one SQLite keeps beside the history is a FIFO, a folder or a loop: a
    write said only "disk I/O error", or "no permission", naming neither the file nor what it is."""
    for suffix in SQLITE_SIDE_FILES:
        side = path.with_name(path.name + suffix)
        try:
            problem = kind_problem(os.stat(side).st_mode)
        except (FileNotFoundError, NotADirectoryError):  # none yet (or no home: the open says that)
            continue
        except OSError as error:
            problem = os_error_words(error)
        if problem is not None:
            raise HistoryDamaged(f"cannot write the run history {path}: {side}, the file SQLite keeps beside it, "
                                 f"{problem}; the history is left as it is: move that aside, or use --home to keep "
                                 "the history elsewhere")


def open_for_writing(path: Path, migrations: Sequence[Migration], newest: int) -> HistoryDatabase:
    """The history at ``path`` (made when absent), checked and brought up to schema ``newest``."""
    _refuse_what_is_no_file(path)
    _refuse_side_files_of_another_kind(path)
    with translated(path, "open"):
        path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE), see HistoryDatabase.transaction.
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    conn.row_factory = sqlite3.Row
    database = HistoryDatabase(conn, path)
    try:
        version = usable_version(conn, path, migrations, newest)  # before anything writes to the file
        with translated(path, "open"):
            _use_wal(conn)
            # NORMAL in WAL keeps every commit through a process crash; only power loss can cost the last ones.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
            conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT_BYTES}")
        if version < newest:
            migrate(database, migrations, newest)
    except BaseException:
        conn.close()
        raise
    return database


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL (a no-op once it is), waiting for other processes as a write would.

    SQLite does not wait out the busy timeout here: a switch that finds another connection holding the write lock
    of a file still in rollback mode (another process switching it: two processes opening a new history at once)
    fails at once, as waiting could deadlock. It is tried again until the timeout, having let go of its own lock."""
    deadline, pause = time.monotonic() + BUSY_TIMEOUT_S, 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL").fetchall()
            return
        except sqlite3.OperationalError as error:
            if sqlite_code(error) != SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(2 * pause, 0.1)


def open_for_reading(path: Path, migrations: Sequence[Migration], newest: int, check_pages: bool = True
                     ) -> HistoryDatabase:
    """The history at ``path`` for reading only: nothing is written to the file, so it reads on a read-only or
    full disk. An older schema is read from a copy upgraded in memory, made once while the file stays as it was
    (upgraded_copies: the Runs tab opens the history for every read); a history not made yet reads as empty.
    ``check_pages``: see usable_version."""
    _refuse_what_is_no_file(path)
    if not path.exists():
        return _in_memory(path, migrations, newest)
    conn, note = _connect_read_only(path)
    try:
        version = usable_version(conn, path, migrations, newest, check_pages)
        if version < newest:
            conn.close()
            with translated(path, "read"):
                conn = UPGRADED_COPIES.reader(path, (tuple(migrations), newest),
                                              functools.partial(_checked_source, path, migrations, newest),
                                              functools.partial(_upgraded, path, migrations, newest))
        else:
            UPGRADED_COPIES.discard(path)  # upgraded since (a run, the app): the file itself is read now
    except BaseException:
        conn.close()
        raise
    conn.row_factory = sqlite3.Row
    return HistoryDatabase(conn, path, note)


def _checked_source(path: Path, migrations: Sequence[Migration], newest: int) -> sqlite3.Connection:
    """A read-only connection to the history at ``path`` that any thread may use, one at a time (an upgraded copy
    keeps it to watch the file), its schema checked again: the file may have been replaced since."""
    source, _ = _connect_read_only(path, any_thread=True)
    try:
        usable_version(source, path, migrations, newest, check_pages=False)
    except BaseException:
        source.close()
        raise
    return source


def _upgraded(path: Path, migrations: Sequence[Migration], newest: int, source: sqlite3.Connection,
              copy: sqlite3.Connection) -> None:
    """Copy the history ``source`` reads into the in-memory database ``copy`` and bring it up to ``newest``, its
    run revision the file's; a file older than the run revision (schema 4) gives each copy one of its own."""
    with translated(path, "read"):
        source.backup(copy)
        has_revision = copy.execute(HAS_RUN_REVISION).fetchone()
        revision = copy.execute("SELECT value FROM run_revision").fetchone()[0] if has_revision else None
    migrate(HistoryDatabase(copy, path), migrations, newest)
    if revision is None:
        # The file stamps no run with its writes: the copy's stamps are the upgrade's, the same in every copy, so a
        # read of the copy made after a commit (a run another workbench recorded) from the last one's revision read
        # nothing new, for ever. Each copy's revision is below the last one's and every stamp (0 and up): a read
        # from an earlier copy's revision, or from this one's once the file is upgraded, reads every run.
        revision = next(_OLDER_COPY_REVISIONS)
    # The upgrade's rewrites of runs (schema 5's compile modes, schema 6's rank peaks) raise the copy's revision past
    # the file's, which the Runs tab's poll reads: it saw a write every 2 s, for ever. The rows they stamped stay
    # above it: a read from an earlier revision reads them again, which is all.
    copy.execute("UPDATE run_revision SET value = ?", (revision,))


# Does the database have the run revision (schema 4 on)?
HAS_RUN_REVISION = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'run_revision'"
# The run revisions of the copies of files older than schema 4: -1, -2, ... (see _upgraded).
_OLDER_COPY_REVISIONS = itertools.count(-1, -1)


def _connect_read_only(path: Path, any_thread: bool = False) -> tuple[sqlite3.Connection, Optional[str]]:
    """mode=ro; where WAL's shared-memory file cannot be made beside the database (a read-only mount, a full
    disk), immutable=1, which reads the database file alone: commits still in its -wal file are not seen.
    ``any_thread``: the connection may be used from other threads (one at a time)."""
    uri = path.absolute().as_uri()
    with translated(path, "read"):
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                               check_same_thread=not any_thread)
    try:
        conn.execute("PRAGMA user_version").fetchone()  # the first read opens the WAL, if the file has one
        return conn, None
    except sqlite3.Error as error:
        conn.close()
        if sqlite_code(error) not in (SQLITE_CANTOPEN, SQLITE_IOERR, SQLITE_READONLY):
            raise history_error(error, path, "read") from error
    with translated(path, "read"):
        conn = sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None, check_same_thread=not any_thread)
    log = path.with_name(path.name + "-wal")
    unseen = log.exists() and log.stat().st_size > 0
    note = (f"the newest writes, in {log}, cannot be read without writing beside it; the runs shown may miss them"
            if unseen else None)
    return conn, note


def run_revision(path: Path, migrations: Sequence[Migration], newest: int) -> int:
    """The revision open_for_reading's changes_since would bring (every write to a run raises it: schema 4), read
    cheaply: the "was any run written since?" of a view that polls. Read through a read-only connection of its own
    without open_for_reading's checks (they read the whole runs table); 0 where there is no history yet. A file
    older than schema 4 has none: its upgraded copy's (open_for_reading, without checking pages: the copy is made
    again only when the file has changed, and the read that follows reads that copy). Raises HistoryError."""
    _refuse_what_is_no_file(path)
    if not path.exists():
        return 0
    conn, _ = _connect_read_only(path)
    try:
        with translated(path, "read"):
            if conn.execute(HAS_RUN_REVISION).fetchone() is not None:
                return int(conn.execute("SELECT value FROM run_revision").fetchone()[0])
    finally:
        conn.close()
    database = open_for_reading(path, migrations, newest, check_pages=False)
    try:
        with translated(path, "read"):
            return int(database.conn.execute("SELECT value FROM run_revision").fetchone()[0])
    finally:
        database.close()


def _in_memory(path: Path, migrations: Sequence[Migration], newest: int) -> HistoryDatabase:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.row_factory = sqlite3.Row
    database = HistoryDatabase(conn, path)
    migrate(database, migrations, newest)
    return database


def usable_version(conn: sqlite3.Connection, path: Path, migrations: Sequence[Migration], newest: int,
                   check_pages: bool = True) -> int:
    """The file's schema version, once it is known to be a history this workbench can use and is undamaged
    where a run's start would write; otherwise HistoryTooNew or HistoryDamaged, having written nothing.
    Without ``check_pages`` the tables' pages are not checked (that reads every run): for a reader that opens the
    history again and again (the Runs tab, every 2 s during a run), whose reads say a damaged page they meet."""
    with translated(path, "open"):
        # One snapshot for every read below: another process making the history (two opening a new one at once)
        # could commit between reading its version (0) and its tables (all there), which read as damaged.
        conn.execute("BEGIN")
        try:
            return _usable_version(conn, path, migrations, newest, check_pages)
        finally:
            if conn.in_transaction:  # (an error may have ended it)
                conn.execute("COMMIT")


def _usable_version(conn: sqlite3.Connection, path: Path, migrations: Sequence[Migration], newest: int,
                    check_pages: bool) -> int:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > newest:
        raise HistoryTooNew(
            f"history database {path} was written by a newer workbench "
            f"(schema {version}; this version reads up to {newest}); update the workbench to open it, "
            "or use --home to keep this version's history elsewhere"
        )
    present = _schema(conn)
    expected = expected_schema(tuple(migrations[:version]))
    if version == 0 and present:
        raise damaged(path, f"it holds tables ({', '.join(sorted(name for _, name in present))}) "
                            "but no workbench schema version")
    problems = _missing(expected, present)
    if problems:
        raise damaged(path, "; ".join(problems))
    for table in CHECKED_TABLES if check_pages else ():
        if ("table", table) in expected:
            found = [row[0] for row in conn.execute(f"PRAGMA quick_check({table})")]
            if found != ["ok"]:
                raise damaged(path, f"table {table}: {found[0]}")
    return version


def migrate(database: HistoryDatabase, migrations: Sequence[Migration], newest: int) -> None:
    with database.transaction() as conn:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])  # another process may have migrated
        if version > newest:
            raise HistoryTooNew(f"history database {database.path} was upgraded by a newer workbench meanwhile "
                                f"(schema {version}; this version reads up to {newest})")
        for migration in migrations[version:]:
            migration(conn)
        conn.execute(f"PRAGMA user_version = {newest}")


Schema = dict[tuple[str, str], frozenset[str]]  # (type, name) → its columns (tables) or nothing (indexes, triggers)


@functools.lru_cache(maxsize=8)
def expected_schema(migrations: tuple[Migration, ...]) -> Schema:
    """What a history of ``len(migrations)`` versions holds: the migrations, run on an empty database in memory."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        conn.execute("BEGIN")
        for migration in migrations:
            migration(conn)
        conn.execute("COMMIT")
        return _schema(conn)
    finally:
        conn.close()


def _schema(conn: sqlite3.Connection) -> Schema:
    objects = conn.execute(
        "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index', 'trigger') "
        "AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    return {
        (kind, name): frozenset(row[1] for row in conn.execute(f'PRAGMA table_info("{name}")'))
        if kind == "table" else frozenset()
        for kind, name in objects
    }


def _missing(expected: Schema, present: Schema) -> list[str]:
    problems = []
    for (kind, name), columns in sorted(expected.items()):
        if (kind, name) not in present:
            problems.append(f"no {kind} {name}")
        elif columns - present[(kind, name)]:
            missing = ", ".join(sorted(columns - present[(kind, name)]))
            problems.append(f"table {name} has no column {missing}")
    return problems

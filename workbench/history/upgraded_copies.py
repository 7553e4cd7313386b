"""Older history files opened only for reading are read from a copy upgraded in memory: one copy per file, kept
while the file stays as it was.

A reader cannot upgrade the file it reads (a read-only disk, and `workbench runs` never writes), so an older
schema is copied into memory and brought up to date there. The Runs tab opens the history anew for every read
(each refresh, each overlay, each export): copying and upgrading the whole file each time cost seconds and the
file's size in memory per read on a history of tens of thousands of runs. Here the copy is made once and shared:
each reader gets a connection of its own (its thread's) to one in-memory database (SQLite's shared cache), which
refuses writes (query_only), as the read-only file does.

The copy is made again once the file may have changed: another connection committed to it (PRAGMA data_version of
the connection the copy was made through, kept open to watch), or the file or its write-ahead log is another one
or has another size or time (a connection that reads the file as immutable is told of no commits). Both are read
before the copy is made, so a commit during the copy makes the next read copy again rather than be missed.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Hashable, Optional

# Copies kept at once, the least recently read dropped first: a window reads one history.
KEPT_COPIES = 2

Signature = tuple[Optional[tuple[int, int, int, int]], ...]  # (device, inode, size, mtime) of the file and its log


@dataclass
class _Copy:
    key: Hashable  # what it was upgraded to (the migrations): another key is another copy
    uri: str  # of the in-memory database readers connect to
    keeper: sqlite3.Connection  # holds the in-memory database while the copy is kept
    source: sqlite3.Connection  # the read-only connection to the file it was copied through: watches for commits
    data_version: int  # the source's PRAGMA data_version when the copy was made
    signature: Signature  # the files' when the copy was made

    def close(self) -> None:
        """Readers still connected keep the in-memory database until they close."""
        self.keeper.close()
        self.source.close()


class UpgradedCopies:
    """The upgraded copies of older history files, made once and read by any thread."""

    def __init__(self, kept: int = KEPT_COPIES):
        self._kept = kept
        self._lock = threading.Lock()  # one reader at a time checks, makes or drops a copy
        self._copies: OrderedDict[Path, _Copy] = OrderedDict()
        self._names = itertools.count(1)

    def reader(self, path: Path, key: Hashable, open_source: Callable[[], sqlite3.Connection],
               upgrade: Callable[[sqlite3.Connection, sqlite3.Connection], None]) -> sqlite3.Connection:
        """A connection of this thread's own that reads the upgraded copy of the history file at ``path``.

        Where no copy of the file as it is now is kept, one is made: ``open_source()``, a checked read-only
        connection to the file that any thread may use (kept to watch the file), then ``upgrade(source, copy)``
        copies the file into the empty in-memory database ``copy`` and brings it up to date."""
        path = Path(os.path.abspath(path))
        with self._lock:
            copy = self._copies.get(path)
            if copy is None or copy.key != key or not _unchanged(copy, path):
                copy = self._make(path, key, open_source, upgrade)
                self._keep(path, copy)
            self._copies.move_to_end(path)
            return _read_only_connection(copy.uri)

    def __contains__(self, path: object) -> bool:
        """A copy of the file at ``path`` is kept."""
        return isinstance(path, Path) and Path(os.path.abspath(path)) in self._copies

    def discard(self, path: Path) -> None:
        """Drop the copy of the file at ``path``, if one is kept (the file is up to date now: it is read as it is)."""
        path = Path(os.path.abspath(path))
        if path not in self._copies:
            return  # (every read of an up-to-date file gets here: no wait on the lock while another is copied)
        with self._lock:
            copy = self._copies.pop(path, None)
        if copy is not None:
            copy.close()

    def clear(self) -> None:
        """Drop every copy (readers still connected keep theirs until they close)."""
        with self._lock:
            while self._copies:
                self._copies.popitem()[1].close()

    def _make(self, path: Path, key: Hashable, open_source: Callable[[], sqlite3.Connection],
              upgrade: Callable[[sqlite3.Connection, sqlite3.Connection], None]) -> _Copy:
        source = open_source()
        keeper: Optional[sqlite3.Connection] = None
        try:
            signature = _signature(path)  # read before the copy: a commit during it is a change next time
            data_version = _data_version(source)
            uri = f"file:workbench-history-copy-{next(self._names)}?mode=memory&cache=shared"
            keeper = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            upgrade(source, keeper)
        except BaseException:
            if keeper is not None:
                keeper.close()
            source.close()
            raise
        return _Copy(key, uri, keeper, source, data_version, signature)

    def _keep(self, path: Path, copy: _Copy) -> None:
        old = self._copies.pop(path, None)
        if old is not None:
            old.close()
        self._copies[path] = copy
        while len(self._copies) > self._kept:
            self._copies.popitem(last=False)[1].close()


def _unchanged(copy: _Copy, path: Path) -> bool:
    try:
        return _data_version(copy.source) == copy.data_version and _signature(path) == copy.signature
    except sqlite3.Error:  # the file went away, a disk error: copied again, and that read says what is wrong
        return False


def _data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _signature(path: Path) -> Signature:
    return tuple(_stat(path.with_name(path.name + suffix)) for suffix in ("", "-wal"))


def _stat(path: Path) -> Optional[tuple[int, int, int, int]]:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def _read_only_connection(uri: str) -> sqlite3.Connection:
    conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    try:
        conn.execute("PRAGMA query_only = ON")  # a write to the copy would be lost, and seen by every reader
    except BaseException:
        conn.close()
        raise
    return conn


UPGRADED_COPIES = UpgradedCopies()

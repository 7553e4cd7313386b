"""What can go wrong with the run history, told apart so each gets the right advice.

A *damaged* history (not a database, a malformed page, a table or column missing) or one from a newer
workbench is never written to: move it aside, or update. A history that *cannot be written here* (the
disk is full, the file system is read-only, no permission, an I/O error) is intact: make room or write
elsewhere, and never move it aside for that. SQLite says which by its result code
(``sqlite3.Error.sqlite_errorcode``, Python 3.11+; its message on 3.10); the folder's file system says why
a write failed (``os.statvfs``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from pathlib import Path
from typing import Iterator, Optional

from workbench.formatting import format_bytes

# SQLite's primary result codes (https://sqlite.org/rescode.html); an extended code's low byte is its primary.
SQLITE_PERM, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY = 3, 5, 6, 8
SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB = 10, 11, 13, 14, 26
DAMAGED_CODES = frozenset({SQLITE_CORRUPT, SQLITE_NOTADB})
UNWRITABLE_CODES = frozenset({SQLITE_PERM, SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN})
BUSY_CODES = frozenset({SQLITE_BUSY, SQLITE_LOCKED})
# Python 3.10 has no sqlite_errorcode: SQLite's own message for each code stands in for it.
_CODE_BY_MESSAGE = {
    "file is not a database": SQLITE_NOTADB,
    "database disk image is malformed": SQLITE_CORRUPT,
    "database or disk is full": SQLITE_FULL,
    "attempt to write a readonly database": SQLITE_READONLY,
    "unable to open database file": SQLITE_CANTOPEN,
    "disk i/o error": SQLITE_IOERR,
    "access permission denied": SQLITE_PERM,
    "database is locked": SQLITE_BUSY,
    "database table is locked": SQLITE_LOCKED,
}
# Less free space than this in the history's folder is a full disk, whatever SQLite's code said.
NEARLY_FULL_BYTES = 1 << 20


class HistoryError(Exception):
    """The history cannot do what was asked; the message says why, in words."""


class HistoryDamaged(HistoryError):
    """Not a history this workbench can use (not a database, a damaged page, a table or column missing).
    Nothing is written to it."""


class HistoryTooNew(HistoryError):
    """Written by a newer workbench (a higher schema version). Nothing is written to it."""


class HistoryUnwritable(HistoryError):
    """The history is intact, but cannot be written (or opened) where it is: disk full, read-only, permission."""


class RunNotFound(HistoryError, LookupError):
    pass


class RunInProgress(HistoryError):
    """The run is still being written by a live process."""


def sqlite_code(error: sqlite3.Error) -> Optional[int]:
    """SQLite's primary result code for ``error`` (None when neither its code nor its message tells)."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF
    return _CODE_BY_MESSAGE.get(str(error).strip().lower())


def damaged(path: Path, detail: str) -> HistoryDamaged:
    return HistoryDamaged(
        f"the run history {path} is damaged ({detail}); it is left as it is: move it aside "
        f"(e.g. rename it to {path.name}.damaged) and the workbench starts a new one there, or use --home to "
        "keep the history elsewhere"
    )


def history_error(error: BaseException, path: Path, doing: str) -> HistoryError:
    """``error`` (from SQLite or the file system) while ``doing`` ("open", "read", "write") the history at ``path``,
    as the HistoryError that gives the right advice."""
    if isinstance(error, HistoryError):
        return error
    detail = words(error)
    if isinstance(error, sqlite3.Error):
        code = sqlite_code(error)
        if code == SQLITE_NOTADB:
            return HistoryDamaged(
                f"{path} is not a workbench history database ({detail}); it is left as it is: move it aside "
                f"(e.g. rename it to {path.name}.damaged) to start afresh, or use --home to keep the history elsewhere"
            )
        if code in DAMAGED_CODES:
            return damaged(path, detail)
        if code in BUSY_CODES:
            return HistoryError(f"cannot {doing} the run history at {path}: another process holds it ({detail}); "
                                "try again when it is done")
        if code in UNWRITABLE_CODES:
            return unwritable(path, doing, code, detail)
    elif isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM,
                                                        errno.EDQUOT, errno.EIO):
        code = {errno.ENOSPC: SQLITE_FULL, errno.EDQUOT: SQLITE_FULL, errno.EROFS: SQLITE_READONLY,
                errno.EIO: SQLITE_IOERR}.get(error.errno, SQLITE_PERM)
        return unwritable(path, doing, code, detail)
    return HistoryError(f"cannot {doing} the run history at {path}: {detail}")


def unwritable(path: Path, doing: str, code: Optional[int], detail: str) -> HistoryUnwritable:
    cause, remedy = _why_not_writable(path, code, detail)
    intact = "the history is intact" if path.exists() else "nothing was lost"
    return HistoryUnwritable(
        f"cannot {doing} the run history at {path}: {cause}; {intact}: {remedy}use --home to keep the history "
        "elsewhere"
    )


def _why_not_writable(path: Path, code: Optional[int], detail: str) -> tuple[str, str]:
    """(why the folder cannot take a write, what to do first) from its file system, then from SQLite's code."""
    folder = _existing_folder(path)
    try:
        stats = os.statvfs(folder)
    except OSError:
        stats = None
    if stats is not None and stats.f_flag & os.ST_RDONLY:
        return f"{folder} is on a read-only file system ({detail})", "remount it read-write, or "
    free = stats.f_bavail * stats.f_frsize if stats is not None else None
    if free is not None and free < NEARLY_FULL_BYTES:
        return f"the disk is full ({detail}, {format_bytes(free)} free)", "free some space, or "
    if code == SQLITE_FULL:  # room on the disk: a quota, or a size limit on the file
        shown = f"; {format_bytes(free)} free on its disk" if free is not None else ""
        return f"the database or its disk is full ({detail}{shown})", "free some space, or "
    if code in (SQLITE_PERM, SQLITE_READONLY) or not os.access(folder, os.W_OK) or (
            path.exists() and not os.access(path, os.W_OK)):
        return f"no permission to write in {folder} ({detail})", "give this user write permission there, or "
    return f"the file system refused ({detail})", ""


def _existing_folder(path: Path) -> Path:
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


@contextlib.contextmanager
def translated(path: Path, doing: str) -> Iterator[None]:
    """SQLite's and the file system's errors inside, raised as the HistoryError that says what to do."""
    try:
        yield
    except sqlite3.IntegrityError:
        raise  # a constraint the caller broke (a sequence id that does not exist): the caller's bug, as it is
    except (sqlite3.Error, OSError) as error:
        raise history_error(error, path, doing) from error


def words(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower() if error.strerror[:1].isupper() else error.strerror
    return str(error)

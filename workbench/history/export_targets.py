"""Where an export may write, and how.

An open stream (the CLI's standard output, for "-") is written as it is. A regular file is written to a temporary file beside it (beside a symlink's target: the link stays) and renamed
over it, so a failed export leaves nothing half-written. A FIFO or a character device (a pipe to another
program, /dev/stdout, /dev/null) is written as a stream, never replaced; a reader that stops reading fails the
export after STALLED_AFTER_S instead of blocking its caller (the window's, on the GUI thread) for good. Nothing
in the workbench home is written over unless it is a CSV the workbench wrote: never the history (its database,
its -wal, -shm, -journal).
"""

from __future__ import annotations

import csv
import errno
import io
import os
import select
import stat
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator, Optional, Sequence, Union

from workbench.history.database import SQLITE_SIDE_FILES
from workbench.history.errors import HistoryError
from workbench.regular_file import (
    NotARegularFile, kind_problem, open_regular_file, os_error_words, write_error_words,
)
from workbench.replaced_file import created_temporary_beside, keep_permissions, replaced_file

# The history's own files beside it: never an export's target.
HISTORY_SUFFIXES = ("", *SQLITE_SIDE_FILES)
STALLED_AFTER_S = 10.0  # a stream's reader that takes nothing for this long has stopped reading
_CHUNK_CHARS = 64 * 1024


class ExportError(HistoryError):
    """The file could not be written; the message names the file and the reason."""


def write_csv(path: Union[Path, BinaryIO], history: Path, header: Sequence[str], rows: Iterable[list[str]]) -> None:
    """The CSV to ``path``: to an open binary stream as it is; streamed to a FIFO or a character device; else
    atomically to a regular file (refused where that would replace the history, or anything in its folder but a
    CSV the workbench wrote)."""
    if not isinstance(path, Path):
        _write_to_open_stream(path, header, rows)
        return
    path = path.expanduser()
    try:
        found: Optional[os.stat_result] = os.stat(path)  # follows links: what a write would reach
    except FileNotFoundError:
        found = None  # a new file (or a dangling link: its target is made)
    except (OSError, ValueError) as error:
        raise ExportError(f"cannot write {path}: {_stat_words(error, path)}") from None
    if found is not None and (stat.S_ISFIFO(found.st_mode) or stat.S_ISCHR(found.st_mode)):
        _stream(path, header, rows)
        return
    if found is not None and not stat.S_ISREG(found.st_mode):
        what = ("it is a folder; give a file name" if stat.S_ISDIR(found.st_mode)
                else f"it {kind_problem(found.st_mode)}")
        raise ExportError(f"cannot write {path}: {what}")
    target = replaced_file(path)  # a symlink's target is written, and the link stays
    problem = _home_problem(target, found, history)
    if problem is not None:
        raise ExportError(f"cannot write {path}: {problem}")
    _write_atomically(target, header, rows)


def _home_problem(target: Path, found: Optional[os.stat_result], history: Path) -> Optional[str]:
    """Why writing ``target`` would harm the run history or its folder (the workbench home); None when it would not."""
    home = Path(os.path.realpath(history.parent))
    history_files = [Path(os.path.realpath(history.with_name(history.name + suffix))) for suffix in HISTORY_SUFFIXES]
    if target in history_files or (found is not None and any(_same_file(found, other) for other in history_files)):
        return f"it is the run history ({history}); give another file name"
    if target.parent != home and home not in target.parents:
        return None
    if found is None:
        return None if target.suffix.lower() == ".csv" else (
            f"it would be made in the workbench home ({home}), which holds only the history and what the "
            "workbench makes: give a name ending in .csv, or a file outside it")
    return None if _written_by_us(target) else (
        f"it is in the workbench home ({home}) and is not a CSV the workbench wrote; give another file name")


def _same_file(found: os.stat_result, other: Path) -> bool:
    try:
        mine = os.stat(other)
    except OSError:
        return False
    return (found.st_dev, found.st_ino) == (mine.st_dev, mine.st_ino)  # a hard link to the history too


def _written_by_us(path: Path) -> bool:
    """Whether ``path`` is a .csv whose first line is the start of one of our exports' headers."""
    if path.suffix.lower() != ".csv":
        return False
    try:
        with open_regular_file(path) as stream:
            first = stream.readline(64 * 1024).decode("utf-8", "replace").rstrip("\r\n")
    except (NotARegularFile, OSError):
        return False
    return first.startswith("run_id,")  # both exports' headers, in every version


def _stream(path: Path, header: Sequence[str], rows: Iterable[list[str]]) -> None:
    """Write the CSV to a FIFO or a character device as it is, never replacing it. O_NONBLOCK: a FIFO nobody
    reads is refused at once (ENXIO) instead of waiting for a reader, and one that stops reading fails the export
    after STALLED_AFTER_S."""
    flags = os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise ExportError(f"cannot write {path}: it is a FIFO (named pipe) that no program is reading; start the "
                              "reader first, or give a file name") from None
        raise ExportError(f"cannot write {path}: {write_error_words(error, path)}") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):  # swapped since the stat: not what was checked
            raise ExportError(f"cannot write {path}: it changed while being opened; try again")
        for chunk in _csv_chunks(header, rows):
            _send(path, descriptor, chunk)
    except OSError as error:  # /dev/full: ENOSPC; a reader that went away: EPIPE
        raise ExportError(f"cannot write {path}: {write_error_words(error, path)}") from None
    finally:
        os.close(descriptor)


def _write_to_open_stream(stream: BinaryIO, header: Sequence[str], rows: Iterable[list[str]]) -> None:
    """Write the CSV to an open binary stream, the bytes a file would get. A reader that went away (`workbench
    export - | head`) raises BrokenPipeError, for the caller to end quietly as other Unix tools do; any other
    failure (a full disk under a redirect) is an ExportError."""
    name = "standard output" if getattr(stream, "name", None) == "<stdout>" else "the output stream"
    try:
        for chunk in _csv_chunks(header, rows):
            stream.write(chunk)
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        raise ExportError(f"cannot write {name}: {(error.strerror or str(error)).lower()}") from None


def _csv_chunks(header: Sequence[str], rows: Iterable[list[str]]) -> Iterator[bytes]:
    """The CSV's UTF-8 bytes, in chunks of about _CHUNK_CHARS characters (a long export is never held whole)."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(header)
    for row in rows:
        writer.writerow(row)
        if text.tell() >= _CHUNK_CHARS:
            yield text.getvalue().encode("utf-8")
            text.seek(0)
            text.truncate()
    yield text.getvalue().encode("utf-8")


def _send(path: Path, descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(descriptor, view):]
        except BlockingIOError:  # the pipe is full: wait for its reader, a while
            _, writable, _ = select.select([], [descriptor], [], STALLED_AFTER_S)
            if not writable:
                raise ExportError(f"cannot write {path}: the program reading it took nothing for "
                                  f"{STALLED_AFTER_S:g} s") from None


def _stat_words(error: Exception, path: Path) -> str:
    if isinstance(error, ValueError):
        return "it is not a valid path (it holds a NUL character)"
    assert isinstance(error, OSError)
    return "it " + os_error_words(error) if error.errno == errno.ELOOP else write_error_words(error, path)


def _write_atomically(path: Path, header: Sequence[str], rows: Iterable[list[str]]) -> None:
    temporary = _create_temporary(path)
    try:
        with open(temporary, "w", encoding="utf-8", newline="") as file:
            writer = csv.writer(file)
            writer.writerow(header)
            writer.writerows(rows)
            file.flush()
            os.fsync(file.fileno())
        keep_permissions(path, temporary)
        os.replace(temporary, path)
    except OSError as error:
        _remove_quietly(temporary)
        raise ExportError(f"cannot write {path}: {write_error_words(error, path)}") from error
    except BaseException:
        _remove_quietly(temporary)
        raise


def _create_temporary(path: Path) -> Path:
    # made with mode 0o666 (created_temporary_beside): the umask decides a new file's permissions, as for any new
    # file; a file replaced keeps its own (keep_permissions)
    try:
        return created_temporary_beside(path)
    except OSError as error:
        raise ExportError(f"cannot write {path}: {write_error_words(error, path)}") from error


def _remove_quietly(path: Path) -> None:
    try:
        os.remove(path)
    except OSError:
        pass

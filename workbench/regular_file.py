"""Is a user-given path a regular file? Asked before anything opens it.

Opening a FIFO waits for a writer forever, reading /dev/zero never ends, and a symlink loop raises
from places that do not expect it (``Path.resolve``). ``os.stat`` follows the links without opening
the path, so the answer never blocks; every reader of a path a user (or a saved setting) gave asks
here first. Stdlib only: the settings' checks (setting_checks.py) ask it too.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO, Optional

_KINDS = (
    (stat.S_ISDIR, "is a folder"),
    (stat.S_ISFIFO, "is a FIFO (named pipe)"),
    (stat.S_ISCHR, "is a character device"),
    (stat.S_ISBLK, "is a block device"),
    (stat.S_ISSOCK, "is a socket"),
)


class NotARegularFile(ValueError):
    """The path cannot be read as a file; the message names it and says why."""


class InvalidPath(ValueError):
    """No file could have this path (a NUL character, ``~user`` of no user); the message follows the path."""


def expanded(path: Path | str) -> Path:
    """``path`` with a leading ``~`` or ``~user`` expanded (a ``~user`` of no user is the file of that name, where
    there is one); InvalidPath when it is no path at all (Path.expanduser raises RuntimeError for a user this
    machine does not have, and every os call ValueError on a NUL)."""
    text = os.fspath(path)
    if "\0" in text:
        raise InvalidPath("is not a valid path (it holds a NUL character)")
    try:
        return Path(text).expanduser()
    except RuntimeError:
        if os.path.lexists(text):  # a file named "~bob.json" here, which the shell left as it was: that file
            return Path(text)
        head = Path(text).parts[0]
        whose = f"of a user {head[1:]!r}, and this machine has none" if head != "~" else "and it cannot be found"
        raise InvalidPath(f"is not a valid path ({head} would be the home folder {whose})") from None


def invalid_path_problem(path: Path | str) -> Optional[str]:
    """``expanded``'s words when ``path`` is no path at all, else None."""
    try:
        expanded(path)
    except InvalidPath as error:
        return str(error)
    return None


def regular_file_problem(path: Path | str) -> Optional[str]:
    """Why this path is not a regular file, as words that follow the path ("is a FIFO (named pipe)",
    "does not exist", ...); None when it is one (symlinks followed)."""
    try:
        mode = os.stat(expanded(path)).st_mode
    except OSError as error:
        return os_error_words(error)
    except InvalidPath as error:
        return str(error)
    return kind_problem(mode)


def folder_problem(path: Path | str) -> Optional[str]:
    """Why this path is not a folder, in words that follow the path; None when it is one (os.stat only)."""
    try:
        mode = os.stat(expanded(path)).st_mode
    except OSError as error:
        return os_error_words(error)
    except InvalidPath as error:
        return str(error)
    if stat.S_ISDIR(mode):
        return None
    return "is a file" if stat.S_ISREG(mode) else kind_problem(mode)


def kind_problem(mode: int) -> Optional[str]:
    """Why a file of this ``st_mode`` is not a regular file; None when it is."""
    if stat.S_ISREG(mode):
        return None
    return next((words for test, words in _KINDS if test(mode)), "is not a regular file")


def open_regular_file(path: Path | str) -> BinaryIO:
    """The file opened for reading in binary; NotARegularFile (naming the path) for anything else.

    Checked twice: by path before opening (the message), and on the opened descriptor (a path swapped
    for a FIFO in between). O_NONBLOCK keeps even that open from waiting for a writer.
    """
    shown = _readable_path(path)
    problem = regular_file_problem(shown)
    if problem is not None:
        raise NotARegularFile(f"{shown} {problem}")
    try:
        descriptor = os.open(shown, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise NotARegularFile(f"{shown} {os_error_words(error)}") from None
    stream = os.fdopen(descriptor, "rb")
    problem = kind_problem(os.fstat(descriptor).st_mode)
    if problem is not None:
        stream.close()
        raise NotARegularFile(f"{shown} {problem}")
    return stream


def read_regular_file(path: Path | str, max_bytes: int) -> bytes:
    """The file's bytes, at most ``max_bytes``; NotARegularFile (naming the path) for anything else."""
    shown = _readable_path(path)
    with open_regular_file(shown) as stream:
        try:
            data = stream.read(max_bytes + 1)
        except OSError as error:
            raise NotARegularFile(f"{shown} {os_error_words(error)}") from None
    if len(data) > max_bytes:
        raise NotARegularFile(f"{shown} is larger than {max_bytes:,} bytes")
    return data


def write_error_words(error: OSError, path: Path) -> str:
    """Why writing ``path`` failed, in words that follow "cannot write PATH: "."""
    if isinstance(error, FileNotFoundError):
        # a folder that is there but makes no files (/proc, /sys) gives the same error as one that is not there
        return "its folder takes no new files" if path.parent.is_dir() else "its folder does not exist"
    if isinstance(error, PermissionError):
        return "permission denied"
    if isinstance(error, IsADirectoryError):
        return "it is a folder; give a file name"
    return (error.strerror or str(error)).lower()


def new_file_problem(folder: Path | str) -> Optional[str]:
    """Why an existing ``folder`` cannot take a new file, in words that follow the folder; None when it can, as far
    as os.access and os.statvfs tell (nothing is created). root passes os.access even in /proc, so the file system
    is asked too: one without storage (/proc, /sys) or mounted read-only takes no file."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return "takes no new files (permission denied)"
    if hasattr(os, "statvfs"):
        try:
            found = os.statvfs(folder)
        except OSError:
            return None  # the write itself says why
        if found.f_flag & os.ST_RDONLY:
            return "takes no new files (a read-only file system)"
        # neither blocks nor inodes: /proc, /sys (a network FUSE mount may report no blocks, yet inodes); ramfs
        # reports none either, and takes files: its type tells it apart, where the mount table can be read
        if found.f_blocks == 0 and found.f_files == 0 and _file_system_type(folder) not in _STORAGE_WITHOUT_LIMITS:
            return "takes no new files (a file system without storage, such as /proc)"
    return None


# File systems that report neither blocks nor inodes (statvfs), and take files all the same: they have no limits.
_STORAGE_WITHOUT_LIMITS = frozenset({"ramfs"})
MOUNT_TABLE = "/proc/self/mountinfo"


def _file_system_type(folder: Path | str, mount_table: Optional[str] = None) -> Optional[str]:
    """The type of the file system that holds ``folder`` (the mount whose point is the longest prefix of its real
    path), from Linux's mount table; None where it cannot be read. ``mount_table``: its text (tests)."""
    if mount_table is None:
        try:
            with open(MOUNT_TABLE, encoding="utf-8", errors="replace") as table:  # the kernel's: never blocks
                mount_table = table.read(1 << 20)
        except OSError:
            return None
    path = os.path.realpath(folder)
    found, longest = None, -1
    for line in mount_table.splitlines():
        fields, _, rest = line.partition(" - ")
        parts, kind = fields.split(), rest.split()[:1]
        if len(parts) < 5 or not kind:
            continue
        point = parts[4].replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= longest:  # the later of two mounts on one point is the one seen
            found, longest = kind[0], len(point)
    return found


def _readable_path(path: Path | str) -> Path:
    try:
        return expanded(path)
    except InvalidPath as error:
        raise NotARegularFile(f"{path} {error}") from None


def os_error_words(error: OSError) -> str:
    if error.errno in (errno.ENOENT, errno.ENOTDIR):
        return "does not exist"
    if error.errno == errno.ELOOP:
        return "is a symlink loop (too many levels of symbolic links)"
    if error.errno in (errno.EACCES, errno.EPERM):
        return "cannot be read (permission denied)"
    return f"cannot be read ({(error.strerror or str(error)).lower()})"

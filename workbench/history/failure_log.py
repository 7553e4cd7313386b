"""failures.log in the workbench home: the whole traceback of every run that failed unexpectedly, and the window's
background reads that kept failing (the Runs tab's poll of the history), one line each.

The run history keeps the traceback too (runs.traceback); the log is for reading with any editor
and for attaching to a bug report. Appending never raises: a log that cannot be written must not
stop a failure from being recorded. Past MAX_BYTES the file moves to failures.log.1 (one old file).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any, Optional

from workbench.formatting import printable
from workbench.history.metrics import iso_utc

LOG_FOLDER = "logs"
LOG_NAME = "failures.log"
MAX_BYTES = 5 * 2**20


def failure_log_path(home: Optional[Path] = None) -> Path:
    if home is None:
        from workbench.paths import workbench_home

        home = workbench_home()
    return Path(home) / LOG_FOLDER / LOG_NAME


def log_failure(
    reason: str,
    traceback: str,
    *,
    kind: Optional[str] = None,
    run_id: Optional[int] = None,
    source: Optional[str] = None,
    settings: Optional[dict[str, Any]] = None,
    at: Optional[float] = None,
    home: Optional[Path] = None,
) -> Optional[Path]:
    """Append one failure; returns the log's path, or None when it could not be written."""
    import time

    path = failure_log_path(home)
    run = f"run #{run_id}" if run_id is not None else "a run not in the history"
    lines = [
        f"=== {iso_utc(at if at is not None else time.time())} {run}" + (f" ({source})" if source else "")
        + " failed" + (f" [{kind}]" if kind else "") + f": {reason}",
    ]
    if settings is not None:
        lines.append("settings: " + json.dumps(settings, sort_keys=True))
    lines.append(traceback.rstrip("\n"))
    return _append_entry(path, lines)


def log_problem(what: str, reason: str, *, at: Optional[float] = None, home: Optional[Path] = None) -> Optional[Path]:
    """Append one line, "``what`` failed: ``reason``" (no run, no traceback: a read of the window's that kept
    failing). Returns the log's path, or None when it could not be written."""
    import time

    stamp = iso_utc(at if at is not None else time.time())
    # printable: a path in the reason (a newline in a folder's name) cannot break the line
    return _append_entry(failure_log_path(home), [printable(f"=== {stamp} {what} failed: {reason}")])


def _append_entry(path: Path, lines: list[str]) -> Optional[Path]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = ("\n".join(lines) + "\n\n").encode("utf-8", "backslashreplace")
        if os.open in os.supports_dir_fd:
            _append(path.parent, text)
        else:  # Windows: no FIFOs to block on, and no dir_fd
            with open(path, "ab") as file:
                file.write(text)
    except OSError:
        return None
    return path


def _append(folder: Path, text: bytes) -> None:
    """Append to the log in ``folder`` only where it is a regular file inside it: a FIFO there would block the CLI
    after a crash for good (O_NONBLOCK: refused instead), and a symlink, of the log or of its folder, would append
    the traceback outside the home (O_NOFOLLOW on both: refused). OSError for anything else."""
    nonblocking_cloexec = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    directory = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | nofollow | nonblocking_cloexec)
    try:
        found = _lstat(LOG_NAME, directory)
        if found is not None and stat.S_ISREG(found.st_mode) and found.st_size > MAX_BYTES:
            os.replace(LOG_NAME, LOG_NAME + ".1", src_dir_fd=directory, dst_dir_fd=directory)
        log = os.open(LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT | nofollow | nonblocking_cloexec, 0o666,
                      dir_fd=directory)
        try:
            if not stat.S_ISREG(os.fstat(log).st_mode):  # a FIFO with a reader, a device: not the log
                raise OSError(errno.EINVAL, f"{folder / LOG_NAME} is not a regular file")
            os.write(log, text)
        finally:
            os.close(log)
    finally:
        os.close(directory)


def _lstat(name: str, directory: int) -> Optional[os.stat_result]:
    try:
        return os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return None

"""Paths a hostile or unlucky user leaves behind (a FIFO, a symlink loop), and a guard that turns a read
blocked on a FIFO into a fast test failure instead of a hang."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

BLOCKED_AFTER_S = 15.0  # far longer than a stat; a test never waits this long unless it blocked


def make_fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def make_symlink_loop(path: Path) -> Path:
    """``path`` → ``path.other`` → ``path``: os.stat raises ELOOP, Path.resolve raises RuntimeError."""
    other = path.with_name(path.name + ".other")
    os.symlink(other, path)
    os.symlink(path, other)
    return path


# The watchdog is a process of its own: a thread could not run while the GUI thread blocks inside a Qt
# call that holds the GIL (QSettings opening a FIFO), and a blocked open cannot be interrupted from Python
# (Qt retries it on EINTR, so pytest-timeout's alarm would not end it either).
_WATCHDOG = r"""
import os, sys, time
fifo, after_s = sys.argv[1], float(sys.argv[2])
time.sleep(after_s)
while True:
    try:  # succeeds only while someone waits to read it (ENXIO otherwise)
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        print("a reader", flush=True)
    except OSError:
        pass
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # frees a writer waiting in open
    time.sleep(0.1)
    try:
        if os.read(reader, 1 << 16):
            print("a writer", flush=True)
    except BlockingIOError:
        pass
    os.close(reader)
    time.sleep(0.1)
"""


@contextlib.contextmanager
def fifo_unblocked(fifo: Path, after_s: float = BLOCKED_AFTER_S) -> Iterator[None]:
    """Fails the test when code inside the block opened ``fifo`` and waited on it, instead of hanging: after
    ``after_s`` a watchdog process opens the other end (and closes it) again and again, which lets a blocked
    open return (a reader then sees end of file, a writer a broken pipe)."""
    watchdog = subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(fifo), str(after_s)],
                                stdout=subprocess.PIPE, text=True)
    try:
        yield
    finally:
        watchdog.kill()
        freed, _ = watchdog.communicate()
    assert not freed, (f"blocked on the FIFO {fifo} for {after_s:g} s: a watchdog freed "
                       f"{', '.join(sorted(set(freed.split())))}")

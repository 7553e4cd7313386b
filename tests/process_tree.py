"""The processes a test left behind: this process's descendants, or a session's processes, read from /proc (Linux)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def descendants(root: int | None = None) -> dict[int, str]:
    """pid → command line of every live descendant of ``root`` (default: this process)."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":
            children.setdefault(int(parent), []).append(int(entry.name))
    found: dict[int, str] = {}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            try:
                found[child] = (Path("/proc") / str(child) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            stack.append(child)
    return found


def _ours(processes: dict[int, str]) -> dict[int, str]:
    # Python's resource tracker is started once per process that first uses a multiprocessing lock, and
    # lives as long as it: it is not part of any run.
    return {pid: line for pid, line in processes.items() if "resource_tracker" not in line}


def leftovers(before: dict[int, str], timeout: float = 10.0) -> dict[int, str]:
    """Descendants that were not there before, after waiting up to ``timeout`` for them to go."""
    deadline = time.monotonic() + timeout
    while True:
        left = {pid: line for pid, line in _ours(descendants()).items() if pid not in before}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


# Processes that end on their own end within seconds; this is the generous margin.
GONE_S = 30.0


def session_processes(session: int) -> dict[int, str]:
    """pid → command line of every live (not zombie) process of ``session``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) != session:
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone meanwhile
            continue
    return found


def left_after(session: int, timeout: float = GONE_S) -> dict[int, str]:
    """The session's processes still alive once they have had ``timeout`` seconds to go."""
    deadline = time.monotonic() + timeout
    while (left := session_processes(session)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def kill_session(session: int) -> None:
    """Never leave a run behind, nor what it started (each pid, as found)."""
    for pid in session_processes(session):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

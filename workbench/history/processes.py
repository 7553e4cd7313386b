"""Is the process that owns a running run still alive? (pid + hostname, guarded against pid reuse on Linux)."""

from __future__ import annotations

import os
import socket
import sys
from functools import lru_cache
from typing import Optional


def hostname() -> str:
    return socket.gethostname()


def process_identity(pid: int) -> Optional[str]:
    """Boot id + start time of ``pid`` on Linux, so a recycled pid is not mistaken for the run's process.

    None where the platform offers no cheap equivalent; the pid check alone then decides.
    """
    boot = _boot_id()
    if boot is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            text = stat.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: fields after it follow the last ")".
    after_name = text.rsplit(")", 1)[-1].split()
    if len(after_name) < 20:
        return None
    return f"{boot}/{after_name[19]}"  # field 22 of stat: start time in clock ticks since boot


@lru_cache(maxsize=1)
def _boot_id() -> Optional[str]:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as boot:
            return boot.read().strip() or None
    except OSError:
        return None


def process_alive(pid: int, identity: Optional[str] = None) -> bool:
    """True while ``pid`` runs on this machine (and, when ``identity`` is known, is the same process)."""
    if pid <= 0:
        return False
    if identity is not None:
        current = process_identity(pid)
        if current is not None:
            return current == identity and not _is_zombie(pid)
    if sys.platform == "win32":
        return _windows_process_alive(pid)
    try:
        os.kill(pid, 0)  # signal 0: existence check only
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """A killed child its parent has not reaped yet still answers kill(pid, 0); it is dead all the same."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


# Defined on Windows only, where process_alive calls it (ctypes.WinDLL exists there alone).
if sys.platform == "win32":

    def _windows_process_alive(pid: int) -> bool:
        # os.kill on Windows terminates the process for any signal but the console ones, so ask the kernel.
        import ctypes

        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
        query_limited_information, still_active, access_denied = 0x1000, 259, 5
        handle = kernel32.OpenProcess(query_limited_information, False, pid)
        if not handle:
            return ctypes.get_last_error() == access_denied
        try:
            exit_code = ctypes.c_ulong()
            if not kernel32.GetExitCodeProcess(handle, ctypes.byref(exit_code)):
                return True
            return exit_code.value == still_active
        finally:
            kernel32.CloseHandle(handle)

"""A small tmpfs for the full-disk and read-only-disk cases: mounted for a test and always unmounted after it.
Where mounting is not permitted (not root, no mount command, a container without the capability) the test
skips, saying so."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Iterator

import pytest


@contextlib.contextmanager
def small_tmpfs(folder: Path, size: str = "1m") -> Iterator[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                                 capture_output=True, text=True, timeout=30)
    except OSError as error:
        pytest.skip(f"cannot mount a small tmpfs here ({error})")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield folder
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True, timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=30)  # busy: detach it


def remount_read_only(folder: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True, capture_output=True, timeout=30)


def remount_read_write(folder: Path) -> None:
    subprocess.run(["mount", "-o", "remount,rw", str(folder)], check=True, capture_output=True, timeout=30)


def fill(folder: Path) -> Path:
    """Write a file in ``folder`` until its disk is full; the file."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as file, contextlib.suppress(OSError):
        while True:
            file.write(b"\0" * 4096)
    return filler

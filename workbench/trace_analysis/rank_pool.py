"""A folder's rank files read side by side, each in a process of its own, where that pays.

A job of 8 GPUs writes 8 rank files; read one after the other, 8 files of a few hundred MB take minutes. Each file
is read and analysed on its own (``reading.read_rank_file``), so the files can be read in as many processes as the
machine has cores, as HTA reads them. A process costs about a quarter of a second to start (a fresh interpreter
importing the reader: no torch) and holds its own file's events, so the pool is used only where the files are
large enough to pay for it (``PARALLEL_MIN_BYTES`` in all) and as many as memory allows. Each is a fresh
``python -m workbench.trace_analysis.rank_worker`` (never a fork: the window's threads and Qt are not copied, and
no caller's main module is run again, as multiprocessing's spawn would), killed when the read is cancelled or
fails: none outlives the read.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from workbench.trace_analysis.model import TraceCancelled, TraceError

# All the folder's files on disk: below this a sequential read takes about as long as starting the processes.
PARALLEL_MIN_BYTES = 8 * 1024**2
# A gzipped trace inflates 10-25×, and the reader holds about its inflated size at its peak: what one process may
# take, for sizing the pool to the memory free.
GZIP_RATIO = 25
POLL_SECONDS = 0.1  # how often the wait asks cancelled()


def workers_for(sizes: Sequence[int], gzipped: Sequence[bool]) -> int:
    """How many processes to read these files with: one per file, up to the CPUs and to the memory free for the
    largest file's peak in each; 1 (no pool) where the files are too small to pay for one. ``gzipped``: by each
    file's name (an estimate of its peak, so no file is opened twice)."""
    if len(sizes) < 2 or sum(sizes) < PARALLEL_MIN_BYTES:
        return 1
    peak = max(size * (GZIP_RATIO if packed else 1) for size, packed in zip(sizes, gzipped))
    return max(1, min(len(sizes), os.cpu_count() or 1, _free_memory_bytes() // max(peak, 1)))


def _free_memory_bytes() -> int:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not POSIX: no pool (one file at a time, as before)
        return 0


def read_files(files: Sequence[Path], fallback_ranks: Sequence[int], sizes: Sequence[int], workers: int,
               want_digest: bool, progress: Optional[Callable[[int, int], None]],
               cancelled: Optional[Callable[[], bool]]) -> list[Any]:
    """``reading.read_rank_file`` of each file (numbered its fallback rank where it names none), each in a
    process of its own (``rank_worker``), ``workers`` at a time (``workers_for``); in the files' order.
    ``progress(bytes_done, bytes_total)`` as each file is done;
    TraceCancelled once ``cancelled()`` says so, and TraceError where a process fails: its processes terminated
    either way. Each result comes back through its process's stdout: nothing is written to disk, so a reader killed
    mid-read (SIGKILL included) leaves nothing behind."""
    total = sum(sizes)
    results: list[Any] = [None] * len(files)
    queued = list(range(len(files)))
    running: dict[int, _Reading] = {}
    done = 0
    try:
        while queued or running:
            if cancelled is not None and cancelled():
                raise TraceCancelled("reading cancelled")
            while queued and len(running) < workers:
                position = queued.pop(0)
                running[position] = _Reading(_start(files[position], fallback_ranks[position], want_digest))
            time.sleep(POLL_SECONDS)
            for position in [p for p, reading in running.items() if reading.finished()]:
                results[position] = running.pop(position).result(files[position])
                done += sizes[position]
                if progress is not None:
                    progress(done, total)
        return results
    finally:
        for reading in running.values():
            reading.process.kill()
        for reading in running.values():
            reading.drained.join()


def _start(file: Path, fallback_rank: int, want_digest: bool) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _WORKER_CODE.format(root=str(_WORKBENCH_ROOT), here=_current_folder()), str(os.getpid()),
         str(file), str(fallback_rank), "1" if want_digest else "0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


# The worker imports the workbench this process runs, and nothing from the folder the user is in: `python -m` and
# `-c` put that folder first on sys.path, so a workbench.py there (a user's own script is often named so) ran in
# each reader in place of ours. Python 3.10 has no -P, so the child takes the folder off sys.path before importing
# anything but sys, and puts the folder our package lies in first.
_WORKBENCH_ROOT = Path(__file__).resolve().parents[2]
_WORKER_CODE = ("import sys; sys.path[:] = [{root!r}] + [p for p in sys.path if p not in ('', {here!r})]; "
                "import runpy; runpy.run_module('workbench.trace_analysis.rank_worker', run_name='__main__')")


def _current_folder() -> str:
    try:
        return os.getcwd()
    except OSError:  # removed since: the child's '' then names nothing
        return ""


class _Reading:
    """One process at work, its pipes drained by a thread of its own (a full pipe would stop it) until it ends."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.output: tuple[bytes, bytes] = (b"", b"")
        self.drained = threading.Thread(target=self._drain, name="rank-file-reader", daemon=True)
        try:
            self.drained.start()
        except BaseException:  # no thread to be had: the process is not left behind
            process.kill()
            process.communicate()
            raise

    def _drain(self) -> None:
        try:
            self.output = self.process.communicate()
        except BaseException as error:  # (a pipe's read failing): the process ends here, and says why
            self.process.kill()
            self.process.wait()
            self.output = (b"", f"reading its output failed: {error}".encode())

    def finished(self) -> bool:
        return not self.drained.is_alive()

    def result(self, file: Path) -> Any:
        out, err = self.output
        if self.process.returncode != 0 or not out:
            lines = err.decode(errors="replace").strip().splitlines()
            reason = lines[-1] if lines else f"exit status {self.process.returncode}"
            raise TraceError(f"{file}: the process reading it failed ({reason})")
        return pickle.loads(out)  # written by our own child to its stdout (never a file's content)

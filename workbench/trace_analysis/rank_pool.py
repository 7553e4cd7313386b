"""Trace files read in processes of their own: a folder's rank files side by side where that pays, and the
window's lone file apart from its GUI thread.

A job of 8 GPUs writes 8 rank files; read one after the other, 8 files of a few hundred MB take minutes. Each file
is read and analysed on its own (``reading.read_rank_file``), so the files can be read in as many processes as the
machine has cores, as HTA reads them. A process costs about a quarter of a second to start (a fresh interpreter
importing the reader: no torch) and holds its own file's events, so the pool is used only where the files are
large enough to pay for it (``PARALLEL_MIN_BYTES`` in all) and as many as memory allows. Each is a fresh
``python -m workbench.trace_analysis.rank_worker`` (never a fork: the window's threads and Qt are not copied, and
no caller's main module is run again, as multiprocessing's spawn would), killed when the read is cancelled or
fails: none outlives the read.

The window (``read_report(in_worker=True)``) also reads the files the pool would leave to its own process (a single
file, or a folder whose files are too small, or the machine too small, for the pool) in one such process, all of
them one after the other, where together they are large enough (``worth_a_process``): in the window's process the
reader's sorts of a large trace's lists, and the freeing of its events once read, hold the GIL, and so the GUI
thread, for a quarter of a second to seconds at a time, and a folder of small files held it for its whole read
(docs/failure-modes.md). Each process says its bytes read and the start of its analysis on a pipe of their own, so
the progress bar moves as it would in this process; the CLI has no window to keep live and reads them in its own
process.
"""

from __future__ import annotations

import json
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
# The files read for the window (read_report's in_worker) that the pool leaves to one process get a process of their
# own from this much text in all (a gzipped file taken at GZIP_RATIO× its size): below it the reader holds the GIL
# for tens of milliseconds at most (27 ms for 15 MB on the 2-core AMD EPYC VM), and the process would cost more (a
# quarter to half a second to start).
IN_WORKER_MIN_BYTES = 16 * 1024**2
POLL_SECONDS = 0.1  # how often the wait asks cancelled()
ANALYSING = b"analysing"  # a process's news once its file's bytes are read (before it, its bytes read, a line each)


def workers_for(sizes: Sequence[int], gzipped: Sequence[bool]) -> int:
    """How many processes to read these files with: one per file, up to the CPUs and to the memory free for the
    largest file's peak in each; 1 (no pool) where the files are too small to pay for one. ``gzipped``: by each
    file's name (an estimate of its peak, so no file is opened twice)."""
    if len(sizes) < 2 or sum(sizes) < PARALLEL_MIN_BYTES:
        return 1
    peak = max(size * (GZIP_RATIO if packed else 1) for size, packed in zip(sizes, gzipped))
    return max(1, min(len(sizes), os.cpu_count() or 1, _free_memory_bytes() // max(peak, 1)))


def worth_a_process(sizes: Sequence[int], gzipped: Sequence[bool]) -> bool:
    """Whether files read for the window one after the other (a lone file, or a folder's too small for the pool) are
    large enough, all together, to be read in a process of their own: a folder of 40 small files holds the window's
    GIL as long as one file of their size."""
    return sum(size * (GZIP_RATIO if packed else 1) for size, packed in zip(sizes, gzipped)) >= IN_WORKER_MIN_BYTES


def _free_memory_bytes() -> int:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not POSIX: no pool (one file at a time, as before)
        return 0


def read_files(files: Sequence[Path], fallback_ranks: Sequence[int], sizes: Sequence[int], workers: int,
               several: bool, want_digest: bool, progress: Optional[Callable[[int, int], None]],
               cancelled: Optional[Callable[[], bool]], analysing: Optional[Callable[[], None]] = None,
               together: bool = False) -> list[Any]:
    """``reading.read_rank_file`` of each file (numbered its fallback rank where it names none; ``several``: one of
    a folder's, its TraceError its result's ``error``, else raised here), each in a process of its own
    (``rank_worker``), ``workers`` at a time (``workers_for``), or all in one process, one after the other, where
    ``together`` says so (``worth_a_process``: one start for the lot); in the files' order.
    ``progress(bytes_done, bytes_total)`` as the processes say their bytes read (a chunk at a time), and
    ``analysing()`` once every file's bytes are read and the last ones' figures are being worked out;
    TraceCancelled once ``cancelled()`` says so, and TraceError where a process fails: its processes killed
    either way. Each result comes back through its process's stdout: nothing is written to disk, so a reader killed
    mid-read (SIGKILL included) leaves nothing behind."""
    total = sum(sizes)
    results: list[Any] = [None] * len(files)
    # each process's files, by their places among ``files``
    queued = [list(range(len(files)))] if together else [[position] for position in range(len(files))]
    running: dict[tuple[int, ...], _Reading] = {}
    done = reported = 0
    said_analysing = False
    try:
        while queued or running:
            if cancelled is not None and cancelled():
                raise TraceCancelled("reading cancelled")
            while queued and len(running) < workers:
                places = tuple(queued.pop(0))
                running[places] = _Reading.start([(files[place], fallback_ranks[place]) for place in places],
                                                 several, want_digest)
            time.sleep(POLL_SECONDS)
            for places in [p for p, reading in running.items() if reading.finished()]:
                for place, result in zip(places, running.pop(places).result([files[place] for place in places])):
                    results[place] = result
                done += sum(sizes[place] for place in places)
            for reading in running.values():
                reading.take_news()
            # a file rewritten longer since its size was taken counts no more than that size: the bar never runs back
            now = done + sum(min(reading.bytes_read, sum(sizes[place] for place in places))
                             for places, reading in running.items())
            if progress is not None and now > reported:
                progress(now, total)
            reported = max(reported, now)
            if (analysing is not None and not said_analysing and not queued and running
                    and all(reading.analysing for reading in running.values())):
                analysing()
                said_analysing = True
        return results
    finally:
        for reading in running.values():
            reading.process.kill()
        for reading in running.values():
            reading.close()


def _start(several: bool, want_digest: bool, news_fd: int) -> subprocess.Popen[bytes]:
    """A ``rank_worker``, waiting on its stdin for its files (``job_text``)."""
    return subprocess.Popen(
        [sys.executable, "-c", _WORKER_CODE.format(root=str(_WORKBENCH_ROOT), here=_current_folder()), str(os.getpid()),
         "1" if several else "0", "1" if want_digest else "0", str(news_fd)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(news_fd,))


def job_text(job: Sequence[tuple[Path, int]]) -> bytes:
    """A process's files and their fallback ranks, as its stdin takes them: JSON (ASCII; a name that is not UTF-8
    keeps its bytes as surrogates), not arguments, which a folder of thousands of files would run past the system's
    limit on."""
    return json.dumps([[os.fspath(file), fallback_rank] for file, fallback_rank in job]).encode("ascii")


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
    """One process at work: its result's pipes drained by a thread of its own (a full pipe would stop it) until it
    ends, and its news (bytes read, then its analysis begun) read from a pipe of their own at each poll."""

    def __init__(self, process: subprocess.Popen[bytes], news_fd: int, job: bytes) -> None:
        self.process = process
        self.job = job
        self.news_fd = news_fd
        self.bytes_read = 0
        self.analysing = False
        self._unread = b""  # a line of news not yet whole
        self.output: tuple[bytes, bytes] = (b"", b"")
        self.drained = threading.Thread(target=self._drain, name="rank-file-reader", daemon=True)
        try:
            self.drained.start()
        except BaseException:  # no thread to be had: the process is not left behind
            process.kill()
            process.communicate()
            os.close(news_fd)
            raise

    @classmethod
    def start(cls, job: Sequence[tuple[Path, int]], several: bool, want_digest: bool) -> _Reading:
        """A process reading these files (each with its fallback rank), one after the other."""
        news_fd, news_for_the_process = os.pipe()
        try:
            process = _start(several, want_digest, news_for_the_process)
        except BaseException:
            os.close(news_fd)
            raise
        finally:
            os.close(news_for_the_process)  # the process's copy is its own: the pipe ends when the process does
        os.set_blocking(news_fd, False)  # read at each poll, never waited on
        return cls(process, news_fd, job_text(job))

    def _drain(self) -> None:
        try:
            self.output = self.process.communicate(self.job)
        except BaseException as error:  # (a pipe's read failing): the process ends here, and says why
            self.process.kill()
            self.process.wait()
            self.output = (b"", f"reading its output failed: {error}".encode())

    def take_news(self) -> None:
        """What the process has said since the last poll: ``bytes_read`` and ``analysing`` brought up to date."""
        try:
            while chunk := os.read(self.news_fd, 1 << 16):
                self._unread += chunk
        except BlockingIOError:  # all read
            pass
        *lines, self._unread = self._unread.split(b"\n")
        for line in lines:
            if line == ANALYSING:
                self.analysing = True
            elif line.isdigit():
                self.bytes_read = int(line)

    def finished(self) -> bool:
        return not self.drained.is_alive()

    def close(self) -> None:
        """Once the process has ended or been killed: its pipes' thread done and its news pipe closed."""
        self.drained.join()
        os.close(self.news_fd)

    def result(self, files: Sequence[Path]) -> list[Any]:
        """Its files' results, in their order."""
        self.close()
        out, err = self.output
        if self.process.returncode != 0 or not out:
            lines = err.decode(errors="replace").strip().splitlines()
            reason = lines[-1] if lines else f"exit status {self.process.returncode}"
            if len(files) == 1:
                raise TraceError(f"{files[0]}: the process reading it failed ({reason})")
            raise TraceError(f"{files[0].parent}: the process reading its {len(files):,} files failed ({reason})")
        result = pickle.loads(out)  # written by our own child to its stdout (never a file's content)
        if isinstance(result, TraceError):  # a lone file's: its one line, as read in this process
            raise result
        return list(result)

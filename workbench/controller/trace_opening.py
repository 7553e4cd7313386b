"""Opening a torch.profiler trace in the window, without Qt: read off the GUI thread, with progress and Cancel,
then kept in the history as a record of kind "trace".

``TraceOpening.run`` is what the window's background call runs; ``progress()`` and ``cancel()`` are what the GUI
thread calls meanwhile (a progress bar polled on a timer, a Cancel button). Nothing here waits on the GUI thread:
the path is checked with ``os.stat`` first (a FIFO, a device or a socket is refused before anything opens it), the
reading checks ``cancelled()`` as it goes, and so does the hashing.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

from workbench.history.errors import HistoryError
from workbench.history.store import HistoryStore
from workbench.history.trace_records import TraceRecord
from workbench.regular_file import kind_problem, regular_file_problem
from workbench.trace_analysis.model import RankReport, TraceCancelled, TraceError, TraceReport
from workbench.trace_analysis.reading import read_report
from workbench.trace_analysis.report_json import rank_json
from workbench.trace_analysis.script_findings import with_findings

ReadReport = Callable[..., TraceReport]  # read_report(path, progress=…, cancelled=…)


def read_with_findings(path: str, **options: object) -> TraceReport:
    """What `workbench trace` reports: the trace read, each rank's findings phrased for the user's script."""
    return with_findings(read_report(path, **options))  # type: ignore[arg-type]

READING, HASHING, RECORDING = "reading", "hashing", "keeping it in the history"
_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class TraceProgress:
    """How far an opening has got: its phase and the bytes of that phase done and in all (0: not known yet)."""

    phase: str
    done_bytes: int = 0
    total_bytes: int = 0

    @property
    def fraction(self) -> Optional[float]:
        """Of the phase, 0–1; None while the total is unknown."""
        return min(1.0, self.done_bytes / self.total_bytes) if self.total_bytes > 0 else None


@dataclass(frozen=True)
class OpenedTrace:
    """A trace read, and where the history keeps it."""

    report: TraceReport
    record_id: Optional[int]  # its record of kind "trace" (None: not kept; history_note says why)
    kept_before: bool  # the same bytes were opened before: record_id is that record, not a new one
    history_note: Optional[str] = None


class TraceOpening:
    """One trace being opened. ``home``: the history's folder (None: the trace is shown, not kept)."""

    def __init__(self, path: os.PathLike | str, home: Optional[Path], read: ReadReport = read_with_findings,
                 source: str = "gui"):
        self.path = Path(os.path.abspath(Path(path).expanduser()))  # as kept in the history; no file is touched
        self._home = home
        self._read = read
        self._source = source
        self._cancel = threading.Event()
        self._progress = TraceProgress(READING)  # replaced whole: the GUI thread reads it without a lock

    def progress(self) -> TraceProgress:
        return self._progress

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def run(self) -> OpenedTrace:
        """Read, hash and keep the trace (call it off the GUI thread). TraceError says why it cannot be read,
        TraceCancelled that Cancel was pressed; a history that cannot take it leaves the report shown."""
        problem = _path_problem(self.path)
        if problem is not None:
            raise TraceError(f"{self.path} {problem}")
        report = self._read(str(self.path), progress=self._reading, cancelled=self._cancel.is_set)
        self._check_cancelled()
        if self._home is None:
            return OpenedTrace(report, None, False, "no run history is open: the trace is shown, not kept")
        record = self._fingerprint(report)
        self._check_cancelled()
        self._progress = TraceProgress(RECORDING)
        try:
            with HistoryStore.open(self._home) as store:
                record_id, kept_before = store.add_trace(record, source=self._source)
        except (HistoryError, OSError) as error:
            return OpenedTrace(report, None, False, f"not kept in the history: {error}")
        return OpenedTrace(report, record_id, kept_before)

    def _reading(self, done_bytes: int, total_bytes: int) -> None:
        self._progress = TraceProgress(READING, done_bytes, total_bytes)

    def _check_cancelled(self) -> None:
        if self._cancel.is_set():
            raise TraceCancelled(f"opening {self.path} was cancelled")

    def _fingerprint(self, report: TraceReport) -> TraceRecord:
        """The record to keep: the figures, and the size and sha256 of the bytes read (a folder's rank files:
        the digest of their names and digests, in name order)."""
        files = _files_read(self.path, report.files)
        sizes = [_size(file) for file in files]
        total = sum(sizes)
        done = 0
        digests = []
        for file in files:
            digest = hashlib.sha256()
            for chunk in self._chunks(file):
                digest.update(chunk)
                done += len(chunk)
                self._progress = TraceProgress(HASHING, done, total)
            digests.append(digest.hexdigest())
        if self.path.is_dir():
            folder = hashlib.sha256()
            for name, file_digest in sorted(zip((file.name for file in files), digests)):
                folder.update(f"{name}\0{file_digest}\n".encode())
            sha256 = folder.hexdigest()
        else:
            sha256 = digests[0]
        return TraceRecord(path=str(self.path), size_bytes=total, sha256=sha256,
                           ranks=tuple(_kept_figures(rank) for rank in report.ranks), notes=tuple(report.notes),
                           files=tuple(file.name for file in files) if self.path.is_dir() else ())

    def _chunks(self, file: Path) -> Iterator[bytes]:
        # O_NONBLOCK and a check of the opened descriptor: a file swapped for a FIFO since it was read never waits.
        try:
            descriptor = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError as error:
            raise TraceError(f"{file} cannot be read: {error.strerror or error}") from None
        with os.fdopen(descriptor, "rb") as stream:
            problem = kind_problem(os.fstat(stream.fileno()).st_mode)
            if problem is not None:
                raise TraceError(f"{file} {problem}")
            while chunk := stream.read(_CHUNK_BYTES):
                self._check_cancelled()
                yield chunk


def _kept_figures(rank: RankReport) -> dict[str, Any]:
    """A rank as its record keeps it: its `--json` entry, and each step's time, so that two traces compare by the
    A/B statistic in the Runs tab (controller/trace_step_comparison.py)."""
    figures = rank_json(rank)
    figures["step_seconds"] = [float(seconds) for seconds in rank.step_seconds]
    return figures


def _path_problem(path: Path) -> Optional[str]:
    """Why the path is neither a regular file nor a folder, in words that follow it; None when it is one."""
    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            return None
    except (OSError, ValueError):
        pass  # regular_file_problem says which
    return regular_file_problem(path)


def _files_read(path: Path, named: Sequence[str]) -> list[Path]:
    """The files the report was read from: the path itself, or the rank files a folder's report names."""
    if not path.is_dir():
        return [path]
    files = [Path(name) if Path(name).exists() else path / Path(name).name for name in named]
    if not files:
        raise TraceError(f"{path}: the report names no rank file it was read from")
    return files


def _size(file: Path) -> int:
    try:
        return os.stat(file).st_size
    except OSError as error:
        raise TraceError(f"{file} cannot be read: {error.strerror or error}") from None

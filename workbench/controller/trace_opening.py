"""Opening a torch.profiler trace in the window, without Qt: read off the GUI thread, with progress and Cancel,
then kept in the history as a record of kind "trace".

``TraceOpening.run`` is what the window's background call runs; ``progress()`` and ``cancel()`` are what the GUI
thread calls meanwhile (a progress bar polled on a timer, a Cancel button). Nothing here waits on the GUI thread:
the path is checked with ``os.stat`` first (a FIFO, a device or a socket is refused before anything opens it), and
the reading, which hashes the bytes it reads for the record, checks ``cancelled()`` as it goes.

A single file of 16 MB of text or more, or a folder whose files are too small for the pool but reach that size
together, is read in a process of its own (``read_in_worker_with_findings``, rank_pool.py's): read in the window's
process, the reader's sorts of a large trace's lists and the freeing of its events held the GIL for a quarter of a
second to seconds at a time, and the window stuttered (a folder's small files: for their whole read). Its progress
and its analysis's start come back from that process; Cancel kills it. The CLI reads in its own process
(``read_with_findings``): it has no window to keep live, and a process costs a quarter to half a second to start.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from workbench.history.errors import HistoryError
from workbench.history.store import HistoryStore
from workbench.history.trace_records import KeptBefore, TraceRecord, same_figures
from workbench.regular_file import InvalidPath, expanded, regular_file_problem
from workbench.trace_analysis.model import Fingerprint, RankReport, TraceCancelled, TraceError, TraceReport
from workbench.trace_analysis.reading import read_report
from workbench.trace_analysis.report_json import rank_json
from workbench.trace_analysis.script_findings import with_findings

ReadReport = Callable[..., TraceReport]  # read_report(path, progress=…, cancelled=…)


def read_with_findings(path: str, **options: object) -> TraceReport:
    """What `workbench trace` reports: the trace read, each rank's findings phrased for the user's script."""
    return with_findings(read_report(path, **options))  # type: ignore[arg-type]


def read_in_worker_with_findings(path: str, **options: object) -> TraceReport:
    """The same report, a single file, or a folder's files too small for the pool, large enough together to
    stutter the window (``rank_pool.worth_a_process``) read in a process of its own (a folder's large files: in the
    pool's), so that the window's GUI thread never waits on the reader for this process's GIL."""
    return read_with_findings(path, in_worker=True, **options)

# The phases of an opening, as its progress bar names them: the bytes read (a fraction), the rank's figures worked
# out from them (seconds on a large trace: no fraction to give), and the record kept.
READING, ANALYSING, RECORDING = "reading", "working out its figures", "keeping it in the history"


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
    history_note: Optional[str] = None  # what the history could not take, or what it held of a record kept before


def _kept_before(home: Path, report: TraceReport, record: TraceRecord, error: Exception) -> Optional[OpenedTrace]:
    """Where the history took no write: the record already kept of these bytes, read without writing, said to hold
    other figures where it does; None where there is none or it cannot be read."""
    try:
        with HistoryStore.open_for_reading(home) as store:
            kept_id = store.kept_trace_id(record.sha256)
            kept = store.get_run(kept_id) if kept_id is not None else None
    except (HistoryError, OSError):
        return None
    if kept is None:
        return None
    note = None if same_figures(kept.trace, record) else (
        f"the figures kept there{_by(kept.app_version)} are an earlier analysis's, not these, and could not "
        f"be brought up to date: {error}")
    return OpenedTrace(report, kept.id, True, note)


def _kept_note(before: Optional[KeptBefore]) -> Optional[str]:
    """What a status line says of a record kept before whose figures this opening replaced; None: nothing to say."""
    if before is None or not before.figures_replaced:
        return None
    return (f"its figures there were brought up to date with this analysis: those kept{_by(before.app_version)} "
            "differed")


def _by(app_version: Optional[str]) -> str:
    return f" by workbench {app_version}" if app_version else ""


class TraceOpening:
    """One trace being opened. ``home``: the history's folder (None: the trace is shown, not kept)."""

    def __init__(self, path: os.PathLike | str, home: Optional[Path], read: ReadReport = read_in_worker_with_findings,
                 source: str = "gui"):
        try:
            where = expanded(os.fspath(path))
        except InvalidPath:  # no file can have this path: the read says so in one line
            where = Path(path)
        self.path = Path(os.path.abspath(where))  # as kept in the history; no file is touched
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
        """Read (and hash) and keep the trace (call it off the GUI thread). TraceError says why it cannot be read,
        TraceCancelled that Cancel was pressed; a history that cannot take it leaves the report shown."""
        problem = _path_problem(self.path)
        if problem is not None:
            raise TraceError(f"{self.path} {problem}")
        if self._home is None:
            report = self._read(str(self.path), progress=self._reading, cancelled=self._cancel.is_set,
                                analysing=self._analysing)
            self._check_cancelled()
            return OpenedTrace(report, None, False, "no run history is open: the trace is shown, not kept")
        fingerprints: dict[str, Fingerprint] = {}
        report = self._read(str(self.path), progress=self._reading, cancelled=self._cancel.is_set,
                            fingerprints=fingerprints, analysing=self._analysing)
        self._check_cancelled()
        record = self._record(report, fingerprints)
        self._progress = TraceProgress(RECORDING)
        try:
            with HistoryStore.open(self._home) as store:
                record_id, before = store.add_trace(record, source=self._source)
        except (HistoryError, OSError) as error:
            kept = _kept_before(self._home, report, record, error)  # a full disk takes no write; a record may be there
            return kept or OpenedTrace(report, None, False, f"not kept in the history: {error}")
        return OpenedTrace(report, record_id, before is not None, _kept_note(before))

    def _reading(self, done_bytes: int, total_bytes: int) -> None:
        self._progress = TraceProgress(READING, done_bytes, total_bytes)

    def _analysing(self) -> None:
        self._progress = TraceProgress(ANALYSING)

    def _check_cancelled(self) -> None:
        if self._cancel.is_set():
            raise TraceCancelled(f"opening {self.path} was cancelled")

    def _record(self, report: TraceReport, fingerprints: dict[str, Fingerprint]) -> TraceRecord:
        """The record to keep: the figures, and the size and sha256 of the bytes they were read from, hashed by the
        reader in the same pass (a file rewritten since, a profiler's next cycle under the same name, cannot lend
        its digest to these figures); a folder's: the digest of its rank files' names and digests, in name order."""
        read = [(Path(name), fingerprints[name]) for name in report.files if name in fingerprints]
        if not read:
            raise TraceError(f"{self.path}: the report names no file it was read from")
        if self.path.is_dir():
            folder = hashlib.sha256()
            for name, fingerprint in sorted((file.name, fingerprint) for file, fingerprint in read):
                folder.update(f"{name}\0{fingerprint.sha256}\n".encode())
            sha256 = folder.hexdigest()
        else:
            sha256 = read[0][1].sha256
        return TraceRecord(path=str(self.path), size_bytes=sum(fingerprint.size_bytes for _, fingerprint in read),
                           sha256=sha256, ranks=tuple(_kept_figures(rank) for rank in report.ranks),
                           notes=tuple(report.notes),
                           files=tuple(file.name for file, _ in read) if self.path.is_dir() else ())


def _kept_figures(rank: RankReport) -> dict[str, Any]:
    """A rank as its record keeps it: its `--json` entry, each step's time and the steps' window, so that two
    traces compare by the A/B statistic in the Runs tab (controller/trace_step_comparison.py), whether it held
    no GPU work (set beside a GPU's trace, the step line says the devices may differ), and whether its file named
    its rank (one numbered by its place is paired by that number alone, which the step line says), and the
    profiler's options it was taken with."""
    figures = rank_json(rank)
    figures["step_seconds"] = [float(seconds) for seconds in rank.step_seconds]
    figures["window_seconds"] = float(rank.window_seconds)  # the shares' window: a share × it ÷ steps is per step
    figures["cpu_only"] = rank.cpu_only  # no GPU work read (why its figures are null is in unavailable_reasons)
    figures["rank_named"] = rank.rank_named  # False: a file naming no rank (the Runs tab says so)
    # the profiler's options that lengthen the host's time: two traces taken with different ones, the step line says
    figures["profiler_options"] = list(rank.profiler_options)
    return figures


def _path_problem(path: Path) -> Optional[str]:
    """Why the path is neither a regular file nor a folder, in words that follow it; None when it is one."""
    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            return None
    except (OSError, ValueError):
        pass  # regular_file_problem says which
    return regular_file_problem(path)

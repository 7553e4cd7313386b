"""Profiler traces from any PyTorch program, read into per-rank reports: files, folders of ranks, gzip.

``read_report(path)`` takes a ``torch.profiler`` trace (``.json``, ``.json.gz``, ``*.pt.trace.json.gz``) or a
folder of them (one file per rank, as HTA takes it) and returns a ``TraceReport`` with one ``RankReport`` per
rank (per GPU where one file holds several). Each file is read in one pass by ``parsed_trace.read_trace`` (its
formats and defences are there), in this process or, for a large folder, beside the others in ``rank_pool``'s
(and where ``in_worker`` asks, the window's, a lone file or a folder's small files, large together, all in one of
its processes); then each rank is analysed by ``ranks.analyse``. Hostile paths give a ``TraceError`` with one
line, never a hang: not a regular file (FIFO, device) is refused before opening, and a folder's entries are
checked one by one.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import os
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Union

from workbench.formatting import format_step_seconds
from workbench.regular_file import InvalidPath, expanded, folder_problem, regular_file_problem
from workbench.trace_analysis import file_ranks, job_ranks, json_stream, rank_pool, ranks
from workbench.trace_analysis.comparing import CATEGORIES
from workbench.trace_analysis.model import Fingerprint, RankReport, TraceCancelled, TraceError, TraceReport
from workbench.trace_analysis.wording import ranks_in_several_files
from workbench.trace_analysis.parsed_trace import process_rank, read_head, read_trace

Progress = Callable[[int, int], None]
Cancelled = json_stream.Cancelled

TRACE_SUFFIXES = (".json", ".json.gz")


def read_report(
    path: Union[str, Path],
    *,
    rank: Optional[int] = None,
    progress: Optional[Progress] = None,
    cancelled: Optional[Cancelled] = None,
    fingerprints: Optional[dict[str, Fingerprint]] = None,
    analysing: Optional[Callable[[], None]] = None,
    in_worker: bool = False,
) -> TraceReport:
    """The report of a trace file or a folder of rank files. TraceError (one line) where it cannot be read;
    TraceCancelled once ``cancelled()`` says so; ``progress(bytes_read, bytes_total)`` as it reads.
    ``fingerprints``: filled with each file read (as the report's ``files`` name it) → the sha256 and the count
    of the bytes read from it, in the same pass. ``analysing()`` as a file's bytes are all read and its analysis
    begins (seconds on a large trace: a progress bar says so rather than stand at 100 %). ``in_worker``: the files
    the pool would leave to this process (a single file, or a folder's too small for the pool), where together they
    are of ``rank_pool.worth_a_process``'s size, are read in one process of ``rank_pool``'s rather than in this one
    (the window: its GUI thread would wait on this process's GIL while the reader sorts a large trace or reads a
    folder of many small ones), killed once ``cancelled()`` says so."""
    # The cyclic collector is paused while millions of events are decoded and kept (none of them forms a
    # cycle): its full passes over the growing heap cost 20–25 % of the CPU on a 300 MB trace (measured:
    # 20.3–22.2 s with it, 16.5 s without). Reference counting still frees everything as usual.
    collecting = gc.isenabled()
    gc.disable()
    try:
        try:
            where = expanded(path)
        except InvalidPath as error:
            raise TraceError(f"{path} {error}") from None
        return _read_report(where, rank, progress, cancelled, fingerprints, analysing, in_worker)
    finally:
        if collecting:
            gc.enable()


def _read_report(path: Path, rank: Optional[int], progress: Optional[Progress], cancelled: Optional[Cancelled],
                 fingerprints: Optional[dict[str, Fingerprint]], analysing: Optional[Callable[[], None]],
                 in_worker: bool = False) -> TraceReport:
    files, notes = trace_files(path)
    places = list(range(len(files)))
    heads = [_head(file, cancelled) for file in files] if len(files) > 1 else [FileHead(None, True)]
    fallbacks = fallback_ranks(files, heads)
    if rank is not None and len(files) > 1:
        # Only one rank asked for: the files whose heads name it are read first, and the rest only where those
        # do not hold it (a process driving several GPUs numbers them apart, which its head does not say).
        places = [place for place, head in enumerate(heads)
                  if head.holds_events and (head.rank if head.rank is not None else fallbacks[place]) == rank
                  ] or places
    read = _read_files(files, fallbacks, places, fingerprints is not None, progress, cancelled, analysing, in_worker)
    if len(places) < len(files):
        if any(report.rank == rank for one in read.values() for report in one.reports):
            notes.append(f"rank {rank} asked for: {len(places):,} of the folder's {len(files):,} files read, the "
                         f"{'one' if len(places) == 1 else 'ones'} of that rank by {_HOW_RANKS_ARE_TOLD}")
        else:
            rest = [place for place in range(len(files)) if place not in read]
            read.update(_read_files(files, fallbacks, rest, fingerprints is not None, progress, cancelled, analysing,
                                    in_worker))
    files_read = [files[place] for place in sorted(read)]
    read_in_order = [read[place] for place in sorted(read)]
    reports: list[RankReport] = []
    unreadable: list[str] = []
    by_order: list[str] = []  # files whose rank is their place in the folder
    for file, one in zip(files_read, read_in_order):
        if fingerprints is not None and one.fingerprint is not None:
            fingerprints[str(file)] = one.fingerprint
        if one.error is not None:
            unreadable.append(one.error)  # one bad rank file: the others are still worth reading
            continue
        if len(files) > 1 and any(not report.rank_named for report in one.reports):
            by_order.append(file.name)
        reports.extend(one.reports)
    if not reports:
        raise TraceError(f"{path}: no rank file could be read (first: {unreadable[0]})")
    notes.extend(f"left out: {line}" for line in unreadable)
    if by_order:
        notes.append(f"{len(by_order):,} {'file names' if len(by_order) == 1 else 'files name'} no rank (no "
                     "distributedInfo, no rank-N in the name): numbered by their place among the folder's files, in "
                     "name order with numbers as numbers; one tensorboard_trace_handler worker's files "
                     "(<worker>.<time>.pt.trace.json) share one number")
    if rank is None and files != [path]:  # a folder read whole: does it hold every rank of its job?
        lacking = job_ranks.ranks_not_read_note((one.job for one in read_in_order if one.error is None),
                                                bool(unreadable))
        if lacking:
            notes.append(lacking)
    cycles_notes, ranks_of_cycles = _cycles(files_read, read_in_order)
    notes.extend(cycles_notes)
    if len(files) > 1:
        seen = Counter(r.rank for r in reports)
        # a rank whose files are all one worker's cycles has its note above; another in several files gets this one
        cycles_seen = Counter(ranks_of_cycles)
        twice = sorted(r for r, count in seen.items() if count > 1 and count != cycles_seen[r])
        if twice:
            notes.append(ranks_in_several_files(twice))
    if rank is not None:
        chosen = tuple(r for r in reports if r.rank == rank)
        if not chosen:
            there = ", ".join(str(number) for number in sorted({r.rank for r in reports}))
            raise TraceError(f"{path}: no rank {rank} (ranks: {there or 'none'})")
        reports = list(chosen)
    return TraceReport(path=str(path), ranks=tuple(sorted(reports, key=lambda r: r.rank)), notes=tuple(notes),
                       files=tuple(str(file) for file in files_read))


def _read_files(files: list[Path], fallbacks: list[int], places: list[int], want_digest: bool,
                progress: Optional[Progress], cancelled: Optional[Cancelled],
                analysing: Optional[Callable[[], None]] = None, in_worker: bool = False) -> dict[int, RankFile]:
    """The files at these places of the folder, read (beside each other where ``rank_pool`` says it pays; else
    all in one process of its own where ``in_worker`` asks and they are large enough together), by place, each
    numbered ``fallbacks[place]`` where it names no rank; ``progress`` over their bytes, and at its end once they
    are all read."""
    chosen = [files[place] for place in places]
    sizes = [os.stat(file).st_size for file in chosen]
    gzipped = [file.name.endswith(".gz") for file in chosen]
    total = sum(sizes)
    workers = rank_pool.workers_for(sizes, gzipped)
    # The files the pool leaves to one process (too small to pay for a process each, or too few CPUs or too little
    # memory free) are read one after the other: for the window, in one process of their own where together they
    # would hold its GIL for long (a folder of 40 files of 3 MB, as a lone file of 120 MB), else in this one (a
    # process costs a quarter to half a second to start). (A process's news pipe is handed over by pass_fds: POSIX
    # only.)
    together = workers == 1 and in_worker and os.name == "posix" and rank_pool.worth_a_process(sizes, gzipped)
    if workers > 1 or together:
        read = rank_pool.read_files(chosen, [fallbacks[place] for place in places], sizes, workers, len(files) > 1,
                                    want_digest, progress, cancelled, analysing, together)
    else:
        read, done = [], 0
        for place, file, size in zip(places, chosen, sizes):
            def file_progress(bytes_read: int, _offset: int = done) -> None:
                if progress is not None:
                    progress(_offset + bytes_read, total)

            read.append(read_rank_file(file, fallbacks[place], len(files) > 1, want_digest, file_progress,
                                       cancelled, analysing))
            done += size
    if progress is not None:
        progress(total, total)
    return dict(zip(places, read))


_HOW_RANKS_ARE_TOLD = "the distributedInfo in its head, else rank-N in its name, else its place in the folder"


@dataclass(frozen=True)
class FileHead:
    """What a folder's file says before its events: the rank its distributedInfo names, and whether it holds trace
    events (False where its head cannot be read either: its full read fails where the head's did)."""

    rank: Optional[int]
    holds_events: bool


def _head(file: Path, cancelled: Optional[Cancelled]) -> FileHead:
    try:
        meta, holds_events = read_head(file, cancelled)
    except TraceCancelled:
        raise
    except TraceError:
        return FileHead(None, False)
    return FileHead(process_rank(meta), holds_events)


@dataclass(frozen=True)
class RankFile:
    """One rank file as read: its ranks' reports (one per GPU it names), or why it could not be read."""

    reports: tuple[RankReport, ...] = ()
    error: Optional[str] = None  # one line: the file is left out of its folder
    fingerprint: Optional[Fingerprint] = None  # of the bytes read, where asked for
    job: Optional[tuple[int, int]] = None  # (its process's rank, the job's world_size), as its distributedInfo says


def read_rank_file(file: Path, fallback_rank: int, several: bool, want_digest: bool,
                   progress: Optional[Callable[[int], None]] = None, cancelled: Optional[Cancelled] = None,
                   analysing: Optional[Callable[[], None]] = None) -> RankFile:
    """One trace file read and analysed, one of its folder's (``several``: a TraceError is this file's ``error``,
    not raised), numbered ``fallback_rank`` (``fallback_ranks``) where its head names no rank. TraceCancelled
    once ``cancelled()`` says so, in the reading or between the analysis's stages; ``analysing()`` when the bytes
    are read and the analysis begins. In this process, or in one of ``rank_pool``'s (it takes plain arguments and
    returns picklable data)."""
    digest = json_stream.FileDigest() if want_digest else None
    fingerprint = None
    try:
        parsed = read_trace(file, progress=progress, cancelled=cancelled, digest=digest)
        fingerprint = Fingerprint(digest.sha256.hexdigest(), digest.size_bytes) if digest is not None else None
        if analysing is not None:
            analysing()
        per_gpu = file_ranks.rank_events(parsed, fallback_rank, cancelled)
    except TraceCancelled:
        raise
    except TraceError as error:  # one rank file naming 2,000 GPUs, or unreadable: the folder's others are still read
        if not several:
            raise
        return RankFile(error=str(error), fingerprint=fingerprint)
    # numbered by its place among its folder's files, or 0 as the only file read
    names_no_rank = _rank_from_name(file.name, -1) < 0 and not parsed.names_its_rank()
    job = job_ranks.process_and_world(parsed.meta)
    del parsed
    reports = []
    for events in per_gpu:
        if cancelled is not None and cancelled():
            raise TraceCancelled("reading cancelled")
        reports.append(dataclasses.replace(ranks.analyse(events, cancelled), file=str(file),
                                           rank_named=not names_no_rank))
    return RankFile(tuple(reports), None, fingerprint, job)


def trace_files(path: Path) -> tuple[list[Path], list[str]]:
    """The trace files a path names: itself, or a folder's ``*.json`` / ``*.json.gz`` files sorted by rank; and
    notes on a folder's entries left out (a FIFO or a loop among them is never opened)."""
    if folder_problem(path) is None:
        try:
            entries = list(path.iterdir())
        except OSError as error:  # a folder that may be entered but not listed, or one gone since
            reason = (error.strerror or str(error)).lower()
            raise TraceError(f"{path}: the folder cannot be listed ({reason})") from None
        named = sorted((p for p in entries if p.name.endswith(TRACE_SUFFIXES) and not p.name.startswith(".")),
                       key=lambda p: (_rank_from_name(p.name, 1 << 30), _natural(p.name)))
        files, notes = [], []
        for candidate in named:
            problem = regular_file_problem(candidate)
            if problem is None:
                files.append(candidate)
            else:
                notes.append(f"left out: {candidate.name} {problem}")
        if not files:
            why = f"; {notes[0]}" + (f" (and {len(notes) - 1:,} more)" if len(notes) > 1 else "") if notes else ""
            if not why:
                hidden = sum(1 for p in entries if p.name.endswith(TRACE_SUFFIXES) and p.name.startswith("."))
                said = "1 hidden file (named .…) is" if hidden == 1 else f"{hidden:,} hidden files (named .…) are"
                why = (f"; {said} left out, as an editor's or a copy's leftovers are" if hidden
                       else _folders_of_traces(entries))
            raise TraceError(f"{path}: the folder holds no readable trace files (*.json, *.json.gz){why}")
        return files, notes
    problem = regular_file_problem(path)
    if problem is not None:
        raise TraceError(f"{path} {problem}")
    return [path], []


FOLDERS_LOOKED_INTO = 100  # a folder of a million folders is not listed one by one
ENTRIES_LOOKED_AT = 10_000  # of each


def _folders_of_traces(entries: list[Path]) -> str:
    """", but its folders run1, run2 hold some: open one" where folders in it (one level down, the first
    FOLDERS_LOOKED_INTO of them) hold trace files, as a TensorBoard log folder holds one folder per run; else ""."""
    holding = []
    for entry in sorted((entry for entry in entries if folder_problem(entry) is None), key=lambda e: _natural(e.name)
                        )[:FOLDERS_LOOKED_INTO]:
        try:
            with os.scandir(entry) as names:
                if any(item.name.endswith(TRACE_SUFFIXES) and not item.name.startswith(".")
                       for item in itertools.islice(names, ENTRIES_LOOKED_AT)):
                    holding.append(entry.name)
        except OSError:  # a folder that cannot be listed: not one to suggest
            continue
    if not holding:
        return ""
    shown = ", ".join(holding[:5]) + (f" and {len(holding) - 5:,} more" if len(holding) > 5 else "")
    return (f", but its {'folder' if len(holding) == 1 else 'folders'} {shown} "
            f"{'holds' if len(holding) == 1 else 'hold'} some: open one (a folder is read as one job, a file per rank)")


def _natural(name: str) -> list[Any]:
    """A name's sort key with its numbers as numbers: worker2 before worker10."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name) if part]


# tensorboard_trace_handler's file name: <worker>.<time.time_ns()>.pt.trace.json[.gz], the worker by default
# <host>_<pid>. A schedule of several cycles (repeat=0, the default, or repeat > 1) writes one file per cycle.
_HANDLER_NAME = re.compile(r"(?P<worker>.+)\.\d+\.pt\.trace\.json(?:\.gz)?")


def _handler_worker(name: str) -> Optional[str]:
    """The tensorboard_trace_handler worker that wrote a file of this name; None where the name is not its."""
    match = _HANDLER_NAME.fullmatch(name)
    return match.group("worker") if match else None


def fallback_ranks(files: list[Path], heads: list[FileHead]) -> list[int]:
    """Each file's rank where its head names none: rank-N in its name, else its process's place among the folder's
    processes, in the files' order: the lowest number that no file's head or name takes. A process is a file, or
    the files of one tensorboard_trace_handler worker (its cycles: one process, not ranks of a job, so one number).
    Files that hold no trace events (a metrics.json beside the traces) are numbered last: they are left out when
    read, and numbered among the others they moved every later file's number, so a comparison paired the wrong
    files."""
    named = [head.rank if head.rank is not None else _rank_from_name(file.name, -1) for file, head in zip(files, heads)]
    taken = {number for number in named if number >= 0}
    ranks = list(named)
    worker_numbers: dict[str, int] = {}
    free = 0
    for holding_events in (True, False):
        for place, (file, head) in enumerate(zip(files, heads)):
            if named[place] >= 0 or head.holds_events is not holding_events:
                continue
            worker = _handler_worker(file.name) or "\0" + file.name  # a file of its own: no worker name has NUL
            if worker not in worker_numbers:
                while free in taken:
                    free += 1
                worker_numbers[worker] = free
                taken.add(free)
            ranks[place] = worker_numbers[worker]
    return ranks


NAMES_LISTED = 4  # of a worker's cycles, in its note


def _cycles(files: list[Path], read: list[RankFile]) -> tuple[list[str], list[int]]:
    """A note for each tensorboard_trace_handler worker whose files in the folder (two or more, read as the same
    ranks) are one process's profiling cycles; and the ranks of those files, once per file."""
    by_worker: dict[str, list[tuple[Path, tuple[RankReport, ...]]]] = {}
    for file, one in zip(files, read):
        worker = _handler_worker(file.name)
        if worker is not None and one.error is None:
            by_worker.setdefault(worker, []).append((file, one.reports))
    notes: list[str] = []
    ranks_of_cycles: list[int] = []
    for worker, cycles in by_worker.items():
        ranks_read = {tuple(report.rank for report in reports) for _, reports in cycles}
        if len(cycles) > 1 and len(ranks_read) == 1:
            numbers = next(iter(ranks_read))
            whose = f"rank {numbers[0]}" if len(numbers) == 1 else "ranks " + ", ".join(map(str, numbers))
            names = [file.name for file, _ in cycles]
            if len(names) > NAMES_LISTED:  # a thousand cycles: the first few and the last, not a page of names
                names = [*names[:NAMES_LISTED - 1], f"… ({len(names) - NAMES_LISTED:,} more) …", names[-1]]
            together = _cycles_together([reports[0] for _, reports in cycles]) if len(numbers) == 1 else ""
            notes.append(f"{worker}: {len(cycles):,} files, one process's profiling cycles (a schedule with repeat "
                         f"other than 1 writes one file per cycle), each read as {whose}, one section per file: "
                         f"{', '.join(names)}{together}")
            ranks_of_cycles += [number for _ in cycles for number in numbers]
    return notes, ranks_of_cycles


def _cycles_together(cycles: list[RankReport]) -> str:
    """"; together: 8 steps, median 5.0 ms (4.6 ms–5.6 ms), compute 17.3% · … · idle 76.4%": one process's
    cycles as one answer, each figure exact: the steps are all the cycles' steps, and each GPU share is each
    cycle's share weighted by the time it is over (the cycles' windows are apart, so the shares of their union)."""
    steps = sorted(seconds for cycle in cycles for seconds in cycle.step_seconds)
    if not steps:
        return ""
    text = (f"; together: {len(steps):,} steps, median {format_step_seconds(statistics.median(steps))} "
            f"({format_step_seconds(steps[0])}–{format_step_seconds(steps[-1])})")
    windows = [cycle.window_seconds for cycle in cycles]
    shares = {label: [getattr(cycle, name) for cycle in cycles] for name, label in CATEGORIES}
    if sum(windows) > 0 and all(value is not None for values in shares.values() for value in values):
        text += ", " + " · ".join(
            f"{label} {sum(share * window for share, window in zip(values, windows)) / sum(windows):.1%}"
            for label, values in shares.items())
    return text


def _rank_from_name(name: str, default: int) -> int:
    match = re.search(r"rank[-_]?(\d+)", name, re.IGNORECASE)
    return int(match.group(1)) if match else default

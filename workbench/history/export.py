"""Runs to CSV: one row per run, and the step metrics in long format (run_id, step, metric, value).

The CLI and the GUI both call these functions, so their files are byte-identical. A regular file is
written to a temporary file beside it (beside a symlink's target: the link stays) and renamed over it, so
a failed export leaves nothing half-written. A FIFO or a character device (a pipe to another program,
/dev/stdout, /dev/null) is written as a stream, never replaced. Nothing in the workbench home is written
over unless it is a CSV the workbench wrote: never the history (its database, its -wal, -shm, -journal).
"""

from __future__ import annotations

import csv
import errno
import heapq
import os
import secrets
import stat
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence

from workbench.config import FIELD_NAMES
from workbench.history.metrics import SUMMARY_METRICS, iso_utc
from workbench.history.records import RunRecord
from workbench.history.schema import EPOCH_COLUMNS, RANK_PEAK_FIGURES, STEP_COLUMNS
from workbench.history.store import HistoryError, HistoryStore
from workbench.regular_file import NotARegularFile, kind_problem, open_regular_file, os_error_words

# The history's own files beside it: never an export's target.
HISTORY_SUFFIXES = ("", "-wal", "-shm", "-journal")

# What the run is and where it came from (source: gui or cli), as the Runs tab shows it, and the
# sequence of runs (sweep, tune, max-batch) it was a member of.
RUN_IDENTITY_COLUMNS: tuple[str, ...] = (
    "run_id", "name", "note", "source", "status", "reason", "started_at", "finished_at", "sweep_id", "sweep_name",
)
# Every figure of the run's summary (history/metrics.py), how far it got included (steps, samples_seen, epochs_completed).
SUMMARY_EXPORT_COLUMNS: tuple[str, ...] = tuple(metric.csv_column for metric in SUMMARY_METRICS)
# Each rank's peak of a multi-process run, by rank, in one cell: "1073741824;1073741824" (empty for one process).
RANK_PEAK_COLUMNS: tuple[str, ...] = tuple("rank_" + name for name in RANK_PEAK_FIGURES)
# Columns that name a figure more exactly than its contract column, which stays: NVML's "used" is
# device-wide (other processes and CUDA contexts included); this one says so by name.
ALIAS_COLUMNS: dict[str, str] = {"peak_nvml_device_used_bytes": "peak_nvml_used_bytes"}
RUNS_CSV_COLUMNS: tuple[str, ...] = (
    RUN_IDENTITY_COLUMNS + FIELD_NAMES + SUMMARY_EXPORT_COLUMNS + RANK_PEAK_COLUMNS + tuple(ALIAS_COLUMNS)
)
STEPS_CSV_COLUMNS: tuple[str, ...] = ("run_id", "step", "metric", "value")
# Per-epoch figures join the long file at the step they were taken, prefixed so "loss" stays unambiguous.
EPOCH_METRIC_PREFIX = "epoch_"

# A spreadsheet treats a cell starting with these as a formula (OWASP "CSV injection").
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class ExportError(HistoryError):
    """The file could not be written; the message names the file and the reason."""


def export_runs_csv(store: HistoryStore, path: os.PathLike | str, run_ids: Optional[Sequence[int]] = None) -> int:
    """Write one row per run (all runs when ``run_ids`` is None), oldest first; returns the row count."""
    records = store.get_runs(run_ids)
    _write_csv(Path(path), store.path, RUNS_CSV_COLUMNS, (run_row(record) for record in records))
    return len(records)


def export_steps_csv(store: HistoryStore, path: os.PathLike | str, run_ids: Optional[Sequence[int]] = None) -> int:
    """Write the runs' step (and epoch) metrics as run_id, step, metric, value rows; returns the row count."""
    records = store.get_runs(run_ids)
    counter = _Counter()
    rows = counter.count(row for record in records for row in step_rows(store, record.id))
    _write_csv(Path(path), store.path, STEPS_CSV_COLUMNS, rows)
    return counter.value


def run_row(record: RunRecord) -> list[str]:
    settings = record.config.to_dict()
    values: list[Any] = [
        record.id,
        record.name,
        record.note,
        record.source,
        record.status,
        record.reason,
        iso_utc(record.started_at),
        iso_utc(record.finished_at),
        record.sequence_id,
        record.sequence_name,
        *(settings[name] for name in FIELD_NAMES),
        *(getattr(record.summary, metric.name) for metric in SUMMARY_METRICS),
    ]
    return [cell(value) for value in values] + [
        ";".join(cell(value) for value in getattr(record.summary, name)) for name in RANK_PEAK_COLUMNS
    ] + [cell(getattr(record.summary, name)) for name in ALIAS_COLUMNS.values()]


def step_rows(store: HistoryStore, run_id: int) -> Iterator[list[str]]:
    """One run's long-format rows in step order: each step's window metrics, then any epoch figures."""
    windows = (
        (row[0], 0, index, name, row[index + 1])
        for row in store.iter_step_rows(run_id)
        for index, name in enumerate(STEP_COLUMNS)
    )
    epochs = (
        (row["step"], 1, index, EPOCH_METRIC_PREFIX + name, row[index + 1])
        for row in store.iter_epoch_rows(run_id)
        for index, name in enumerate(EPOCH_COLUMNS)
        if name != "step"
    )
    for step, _, _, metric, value in heapq.merge(windows, epochs, key=_order):
        if value is not None:  # long format: a figure that was never measured has no row
            yield [cell(run_id), cell(step), metric, cell(value)]


def _order(item: tuple) -> tuple:
    return item[:3]  # step, windows before epochs, column order; never the value (it may be None)


def cell(value: Any) -> str:
    """A CSV cell: numbers as numbers (a negative one stays a number), text guarded against formulas."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) else str(value)
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


def _write_csv(path: Path, history: Path, header: Sequence[str], rows: Iterable[list[str]]) -> None:
    """The CSV to ``path``: streamed to a FIFO or a character device, else atomically to a regular file (refused
    where that would replace the history, or anything in its folder but a CSV the workbench wrote)."""
    path = path.expanduser()
    try:
        found: Optional[os.stat_result] = os.stat(path)  # follows links: what a write would reach
    except FileNotFoundError:
        found = None  # a new file (or a dangling link: its target is made)
    except (OSError, ValueError) as error:
        raise ExportError(f"cannot write {path}: {_stat_words(error)}") from None
    if found is not None and (stat.S_ISFIFO(found.st_mode) or stat.S_ISCHR(found.st_mode)):
        _stream(path, header, rows)
        return
    if found is not None and not stat.S_ISREG(found.st_mode):
        what = "it is a folder; give a file name" if stat.S_ISDIR(found.st_mode) else f"it {kind_problem(found.st_mode)}"
        raise ExportError(f"cannot write {path}: {what}")
    target = Path(os.path.realpath(path))  # a symlink's target is written, and the link stays
    problem = _home_problem(target, found, history)
    if problem is not None:
        raise ExportError(f"cannot write {path}: {problem}")
    _write_atomically(target, header, rows)


def _home_problem(target: Path, found: Optional[os.stat_result], history: Path) -> Optional[str]:
    """Why writing ``target`` would harm the run history or its folder (the workbench home); None when it would not."""
    home = Path(os.path.realpath(history.parent))
    history_files = [Path(os.path.realpath(history.with_name(history.name + suffix))) for suffix in HISTORY_SUFFIXES]
    if target in history_files or (found is not None and any(_same_file(found, other) for other in history_files)):
        return f"it is the run history ({history}); give another file name"
    if target.parent != home and home not in target.parents:
        return None
    if found is None:
        return None if target.suffix.lower() == ".csv" else (
            f"it would be made in the workbench home ({home}), which holds only the history and what the "
            "workbench makes: give a name ending in .csv, or a file outside it")
    return None if _written_by_us(target) else (
        f"it is in the workbench home ({home}) and is not a CSV the workbench wrote; give another file name")


def _same_file(found: os.stat_result, other: Path) -> bool:
    try:
        mine = os.stat(other)
    except OSError:
        return False
    return (found.st_dev, found.st_ino) == (mine.st_dev, mine.st_ino)  # a hard link to the history too


def _written_by_us(path: Path) -> bool:
    """Whether ``path`` is a .csv whose first line is the header of one of our exports."""
    if path.suffix.lower() != ".csv":
        return False
    try:
        with open_regular_file(path) as stream:
            first = stream.readline(64 * 1024).decode("utf-8", "replace").rstrip("\r\n")
    except (NotARegularFile, OSError):
        return False
    return first in (",".join(RUNS_CSV_COLUMNS), ",".join(STEPS_CSV_COLUMNS)) or first.startswith("run_id,")


def _stream(path: Path, header: Sequence[str], rows: Iterable[list[str]]) -> None:
    """Write the CSV to a FIFO or a character device as it is, never replacing it. O_NONBLOCK: a FIFO nobody
    reads is refused at once (ENXIO) instead of waiting for a reader; the writes then block as a pipe's do."""
    flags = os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise ExportError(f"cannot write {path}: it is a FIFO (named pipe) that no program is reading; start the "
                              "reader first, or give a file name") from None
        raise ExportError(f"cannot write {path}: {_reason(error)}") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):  # swapped since the stat: not what was checked
            raise ExportError(f"cannot write {path}: it changed while being opened; try again")
        os.set_blocking(descriptor, True)
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="", closefd=False) as file:
            writer = csv.writer(file)
            writer.writerow(header)
            writer.writerows(rows)
    except OSError as error:  # /dev/full: ENOSPC; a reader that went away: EPIPE
        raise ExportError(f"cannot write {path}: {_reason(error)}") from None
    finally:
        os.close(descriptor)


def _stat_words(error: Exception) -> str:
    if isinstance(error, ValueError):
        return "it is not a valid path (it holds a NUL character)"
    assert isinstance(error, OSError)
    return "it " + os_error_words(error) if error.errno == errno.ELOOP else _reason(error)


def _write_atomically(path: Path, header: Sequence[str], rows: Iterable[list[str]]) -> None:
    temporary = _create_temporary(path)
    try:
        with open(temporary, "w", encoding="utf-8", newline="") as file:
            writer = csv.writer(file)
            writer.writerow(header)
            writer.writerows(rows)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except OSError as error:
        _remove_quietly(temporary)
        raise ExportError(f"cannot write {path}: {_reason(error)}") from error
    except BaseException:
        _remove_quietly(temporary)
        raise


def _create_temporary(path: Path) -> Path:
    # os.open with 0o666 lets the umask decide the final file's permissions, as for any new file
    # (tempfile's files are private 0o600, which would stick after the rename).
    for _ in range(100):
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        except OSError as error:
            raise ExportError(f"cannot write {path}: {_reason(error)}") from error
        return temporary
    raise ExportError(f"cannot write {path}: no free temporary file name in {path.parent}")


def _remove_quietly(path: Path) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _reason(error: OSError) -> str:
    if isinstance(error, FileNotFoundError):
        return "its folder does not exist"
    if isinstance(error, PermissionError):
        return "permission denied"
    if isinstance(error, IsADirectoryError):
        return "it is a folder; give a file name"
    return (error.strerror or str(error)).lower()


class _Counter:
    def __init__(self) -> None:
        self.value = 0

    def count(self, items: Iterable) -> Iterator:
        for item in items:
            self.value += 1
            yield item

"""Runs to CSV: one row per run, and the step metrics in long format (run_id, step, metric, value).

The CLI and the GUI both call these functions, so their files are byte-identical. Files are
written to a temporary file beside the target and renamed over it: a failed export leaves
nothing half-written.
"""

from __future__ import annotations

import csv
import heapq
import os
import secrets
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence

from workbench.config import FIELD_NAMES
from workbench.history.metrics import SUMMARY_METRICS, iso_utc
from workbench.history.records import RunRecord
from workbench.history.schema import EPOCH_COLUMNS, RANK_PEAK_FIGURES, STEP_COLUMNS
from workbench.history.store import HistoryError, HistoryStore
from workbench.history.trace_records import GPU_SPAN_KEYS, RANK_FIGURE_KEYS

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
# A record of kind "trace" (issue 27): the file, and each figure of its ranks in one cell, rank by rank, as the rank
# peaks are ("0.71;0.69"); its findings' kinds by rank ("input_bound,sync_in_loop;none"). A run's are empty, and a
# trace's settings and run figures are (it has none).
TRACE_RANK_KEYS: tuple[str, ...] = ("rank", *RANK_FIGURE_KEYS, *("gpu_span." + key for key in GPU_SPAN_KEYS))
TRACE_COLUMNS: tuple[str, ...] = (
    "record_kind", "trace_path", "trace_size_bytes", "trace_sha256",
    *("trace_" + key.replace(".", "_") for key in TRACE_RANK_KEYS), "trace_findings",
)
RUNS_CSV_COLUMNS: tuple[str, ...] = (
    RUN_IDENTITY_COLUMNS + FIELD_NAMES + SUMMARY_EXPORT_COLUMNS + RANK_PEAK_COLUMNS + tuple(ALIAS_COLUMNS)
    + TRACE_COLUMNS
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
    _write_atomically(Path(path), RUNS_CSV_COLUMNS, (run_row(record) for record in records))
    return len(records)


def export_steps_csv(store: HistoryStore, path: os.PathLike | str, run_ids: Optional[Sequence[int]] = None) -> int:
    """Write the runs' step (and epoch) metrics as run_id, step, metric, value rows; returns the row count."""
    records = store.get_runs(run_ids)
    counter = _Counter()
    rows = counter.count(row for record in records for row in step_rows(store, record.id))
    _write_atomically(Path(path), STEPS_CSV_COLUMNS, rows)
    return counter.value


def run_row(record: RunRecord) -> list[str]:
    if record.is_trace:
        return _trace_row(record)
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
    ] + [cell(getattr(record.summary, name)) for name in ALIAS_COLUMNS.values()] + [
        cell(record.record_kind), *("" for _ in TRACE_COLUMNS[1:])]


def _trace_row(record: RunRecord) -> list[str]:
    """A trace record's row: who it is, its device, and its trace columns; its settings and run figures empty."""
    identity = [record.id, record.name, record.note, record.source, record.status, record.reason,
                iso_utc(record.started_at), iso_utc(record.finished_at), record.sequence_id, record.sequence_name]
    summary = [record.summary.device_name if metric.name == "device_name" else None for metric in SUMMARY_METRICS]
    trace = record.trace
    if trace is None:  # its stored figures could not be read: the row says what it is and no more
        figures: list[str] = ["" for _ in TRACE_COLUMNS[1:]]
    else:
        figures = [cell(trace.path), cell(trace.size_bytes), cell(trace.sha256),
                   *(";".join(cell(value) for value in trace.rank_values(key)) for key in TRACE_RANK_KEYS),
                   cell(";".join(",".join(dict.fromkeys(str(finding.get("kind")) for finding in findings
                                                        if isinstance(finding, dict))) or "none"
                                 for findings in trace.rank_values("findings") if isinstance(findings, list)))]
    return ([cell(value) for value in identity] + ["" for _ in FIELD_NAMES] + [cell(value) for value in summary]
            + ["" for _ in RANK_PEAK_COLUMNS] + ["" for _ in ALIAS_COLUMNS] + [cell(record.record_kind)] + figures)


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


def _write_atomically(path: Path, header: Sequence[str], rows: Iterable[list[str]]) -> None:
    path = path.expanduser()
    if path.is_dir():
        raise ExportError(f"cannot write {path}: it is a folder; give a file name")
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

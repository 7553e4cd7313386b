"""Runs to CSV: one row per run, and the step metrics in long format (run_id, step, metric, value).

The CLI and the GUI both call these functions, so their files are byte-identical. Where a file may be written
and how (atomically, or as a stream to a FIFO or a device; never over the history) is export_targets'.
"""

from __future__ import annotations

import heapq
import os
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator, Optional, Sequence, Union

from workbench.config import FIELD_NAMES
from workbench.history import stored_values
from workbench.history.export_targets import ExportError as ExportError  # what the callers of the exports catch
from workbench.history.export_targets import write_csv
from workbench.history.metrics import SUMMARY_METRICS, iso_utc
from workbench.history.records import TAG_SEPARATOR, RunRecord
from workbench.history.schema import EPOCH_COLUMNS, RANK_PEAK_FIGURES, STEP_COLUMNS
from workbench.history.store import HistoryStore
from workbench.history.trace_records import GPU_SPAN_KEYS, RANK_FIGURE_KEYS

# What the run is and where it came from (source: gui or cli), as the Runs tab shows it, and the
# sequence of runs (sweep, repeats, tune, verify, max-batch) it was a member of.
RUN_IDENTITY_COLUMNS: tuple[str, ...] = (
    "run_id", "name", "note", "source", "status", "reason", "started_at", "finished_at", "sequence_id", "sequence_name",
)
# Every figure of the run's summary (history/metrics.py), how far it got included (steps, samples_seen, epochs_completed).
SUMMARY_EXPORT_COLUMNS: tuple[str, ...] = tuple(metric.name for metric in SUMMARY_METRICS)
# Each rank's peak of a multi-process run, by rank, in one cell: "1073741824;1073741824" (empty for one process).
RANK_PEAK_COLUMNS: tuple[str, ...] = tuple("rank_" + name for name in RANK_PEAK_FIGURES)
# A record of kind "trace" (issue 27): the file, and each figure of its ranks in one cell, rank by rank, as the rank
# peaks are ("0.71;0.69"); its findings' kinds by rank ("input_bound,sync_in_loop;none"). A run's are empty, and a
# trace's settings and run figures are (it has none).
TRACE_RANK_KEYS: tuple[str, ...] = ("rank", *RANK_FIGURE_KEYS, *("gpu_span." + key for key in GPU_SPAN_KEYS))
TRACE_COLUMNS: tuple[str, ...] = (
    "record_kind", "trace_path", "trace_size_bytes", "trace_sha256",
    *("trace_" + key.replace(".", "_") for key in TRACE_RANK_KEYS), "trace_findings",
)
# Added after the others, so that a reader of the columns by position reads the earlier ones where they were.
LATER_COLUMNS: tuple[str, ...] = ("tags", *TRACE_COLUMNS)  # tags: the run's, TAG_SEPARATOR between them
RUNS_CSV_COLUMNS: tuple[str, ...] = (
    RUN_IDENTITY_COLUMNS + FIELD_NAMES + SUMMARY_EXPORT_COLUMNS + RANK_PEAK_COLUMNS + LATER_COLUMNS
)
STEPS_CSV_COLUMNS: tuple[str, ...] = ("run_id", "step", "metric", "value")
# Per-epoch figures join the long file at the step they were taken, prefixed so "loss" stays unambiguous.
EPOCH_METRIC_PREFIX = "epoch_"

# A spreadsheet treats a cell starting with these as a formula (OWASP "CSV injection").
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


# A file's path, or an open binary stream the CSV is written to as it is (the CLI's standard output, for "-").
ExportTarget = Union[os.PathLike, str, BinaryIO]


def export_runs_csv(store: HistoryStore, path: ExportTarget, run_ids: Optional[Sequence[int]] = None
                    ) -> list[RunRecord]:
    """Write one row per run or trace record (all when ``run_ids`` is None), oldest first; returns the records
    written (their kinds say what the rows were: ``records_count_text``)."""
    records = store.get_runs(run_ids)
    write_csv(_target(path), store.path, RUNS_CSV_COLUMNS, (run_row(record) for record in records))
    return records


def export_steps_csv(store: HistoryStore, path: ExportTarget, run_ids: Optional[Sequence[int]] = None) -> int:
    """Write the runs' step (and epoch) metrics as run_id, step, metric, value rows; returns the row count."""
    records = store.get_runs(run_ids)
    counter = _Counter()
    rows = counter.count(row for record in records for row in step_rows(store, record.id))
    write_csv(_target(path), store.path, STEPS_CSV_COLUMNS, rows)
    return counter.value


def _target(path: ExportTarget) -> Union[Path, BinaryIO]:
    return Path(path) if isinstance(path, (str, os.PathLike)) else path


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
    ] + [TAG_SEPARATOR.join(record.tags), cell(record.record_kind), *("" for _ in TRACE_COLUMNS[1:])]


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
            + ["" for _ in RANK_PEAK_COLUMNS] + [TAG_SEPARATOR.join(record.tags), cell(record.record_kind)] + figures)


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
        if stored_values.number(value) is not None:  # long format: a figure never measured (or unreadable) has no row
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


class _Counter:
    def __init__(self) -> None:
        self.value = 0

    def count(self, items: Iterable) -> Iterator:
        for item in items:
            self.value += 1
            yield item

"""The runs table: one row per stored run, display text formatted, the raw value kept for sorting.

The figures people compare come first (images/sec, test accuracy, data wait), then the settings that
tell runs apart; a setting that did nothing in a run (workers with a GPU-resident pipeline) reads "–",
with why in its tooltip.

The model changes row by row (``apply_changes``: runs added, rewritten, deleted), so a refresh during a run
redraws the running row only and the view keeps its sorting, scrolling and selection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Any, Callable, Optional, Sequence

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QWidget

from workbench.config import SETTINGS
from workbench.engine.run_summary import IMAGES_PER_SEC_MEANS
from workbench.formatting import format_duration
from workbench.history.compare import TRACE_HAS_NO_SETTINGS, unused_settings
from workbench.history.metrics import METRICS_BY_NAME, format_metric, local_time
from workbench.history.records import RunRecord

SORT_ROLE = Qt.ItemDataRole.UserRole
RUN_ID_ROLE = Qt.ItemDataRole.UserRole + 1
STATUS_COLOURS = {
    "running": "#1f6fb4",
    "finished": "#2e7d32",
    "stopped": "#8a6d00",
    "failed": "#c62828",
    "interrupted": "#d35400",
}


@dataclass(frozen=True)
class Column:
    title: str
    value: Callable[[RunRecord], Any]  # raw: what sorting compares
    text: Callable[[Any], str]
    numeric: bool = False
    tooltip: str = ""
    setting: str = ""  # the RunConfig field a settings column shows


def _metric(name: str) -> Column:
    metric = METRICS_BY_NAME[name]
    return Column(metric.label, lambda r: getattr(r.summary, name), lambda v: format_metric(metric.kind, v), numeric=True)


def _setting(title: str, name: str, numeric: bool = False) -> Column:
    def value(record: RunRecord):
        return None if name in unused_settings(record) else getattr(record.config, name)

    return Column(title, value, str, numeric=numeric, tooltip=f"{SETTINGS[name].label} ({name})", setting=name)


NOT_USED_TEXT = "–"
COLUMNS: tuple[Column, ...] = (
    Column("ID", lambda r: r.id, str, numeric=True),
    Column("Name", lambda r: r.name, str),
    # The figures people compare first: at 1400 px they must not sit off-screen behind the settings.
    _metric("images_per_sec"),
    _metric("test_accuracy"),
    _metric("data_wait_fraction"),
    _metric("final_loss"),
    Column("Status", lambda r: r.shown_status, str),
    Column("Kind", lambda r: r.record_kind, str,
           tooltip="run: trained by the workbench; trace: a torch.profiler trace opened with File → Open trace…"),
    _setting("Model", "model"),
    _setting("Batch", "batch_size", numeric=True),
    _setting("Workers", "num_workers", numeric=True),
    _setting("Pipeline", "pipeline"),
    _setting("Augment", "augment"),
    _setting("Precision", "precision"),
    _metric("peak_allocated_bytes"),
    _metric("peak_reserved_bytes"),
    _metric("peak_nvml_device_used_bytes"),
    _metric("peak_process_rss_bytes"),
    Column("Sequence", lambda r: r.sequence_name or "", str,
           tooltip="the sweep, search, max-batch or repeats sequence this run was a member of"),
    Column("Started", lambda r: r.started_at, local_time, numeric=True),
    Column("Duration", lambda r: r.duration_seconds, format_duration, numeric=True),
    Column("Note", lambda r: r.note, lambda v: v.splitlines()[0] if v else ""),
    Column("Tags", lambda r: ", ".join(r.tags), str),
)
COLUMN_TITLES = tuple(column.title for column in COLUMNS)
_TOOLTIPS = {
    "Img/s": IMAGES_PER_SEC_MEANS,
    "Data wait": "share of training time spent waiting for the next batch",
    "Peak alloc": "peak memory held by tensors (torch.cuda.max_memory_allocated)",
    "Peak reserved": "peak memory held by PyTorch's caching allocator (torch.cuda.max_memory_reserved)",
    "Peak NVML": "peak device memory in use as the driver sees it (all processes, CUDA context included)",
    "Peak RSS (process)": "peak resident memory (RSS) of the training process: the memory figure of a CPU run "
                          "(loader workers not included)",
    "Final loss": "training loss of the last logging window",
    "Test acc": "test-set accuracy after the last epoch",
}


class RunsTableModel(QAbstractTableModel):
    """One row per RunRecord; display text formatted, SORT_ROLE raw so numbers sort as numbers."""

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self._records: list[RunRecord] = []
        self._row_of: dict[int, int] = {}  # run id → row

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._records)

    def columnCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def record(self, row: int) -> RunRecord:
        return self._records[row]

    def all_records(self) -> list[RunRecord]:
        return list(self._records)

    def records_with_ids(self, run_ids: AbstractSet[int]) -> list[RunRecord]:
        """The shown runs among ``run_ids``, oldest first."""
        return sorted((self._records[self._row_of[run_id]] for run_id in run_ids if run_id in self._row_of),
                      key=lambda record: record.id)

    def row_of(self, run_id: int) -> Optional[int]:
        return self._row_of.get(run_id)

    def apply_changes(self, changed: Sequence[RunRecord], run_ids: AbstractSet[int]) -> None:
        """Remove the rows whose run is gone, rewrite the changed runs' rows, append the new runs."""
        gone = sorted((row for run_id, row in self._row_of.items() if run_id not in run_ids), reverse=True)
        for row in gone:  # from the bottom up, so the rows still to remove keep their numbers
            self.beginRemoveRows(QModelIndex(), row, row)
            del self._records[row]
            self.endRemoveRows()
        if gone:
            self._index_rows()
        added = []
        for record in changed:
            row = self._row_of.get(record.id)
            if row is None:
                added.append(record)
            else:
                self._records[row] = record
                self.dataChanged.emit(self.index(row, 0), self.index(row, len(COLUMNS) - 1))
        if added:
            added.sort(key=lambda record: record.id, reverse=True)  # newest first, as the store lists them
            first = len(self._records)
            self.beginInsertRows(QModelIndex(), first, first + len(added) - 1)
            self._records.extend(added)
            self._index_rows()
            self.endInsertRows()

    def _index_rows(self) -> None:
        self._row_of = {record.id: row for row, record in enumerate(self._records)}

    def set_records(self, records: Sequence[RunRecord]) -> None:
        if [r.id for r in records] == [r.id for r in self._records]:
            # Same runs (a running one moved on): update in place so sorting, scrolling and selection stay.
            self._records = list(records)
            self._index_rows()
            if records:
                self.dataChanged.emit(self.index(0, 0), self.index(len(records) - 1, len(COLUMNS) - 1))
            return
        self.beginResetModel()
        self._records = list(records)
        self._index_rows()
        self.endResetModel()

    def data(self, index: QModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        record, column = self._records[index.row()], COLUMNS[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            value = column.value(record)
            if value is None and column.setting:
                return NOT_USED_TEXT
            return "" if value is None else column.text(value)
        if role == SORT_ROLE:
            return column.value(record)
        if role == RUN_ID_ROLE:
            return record.id
        if role == Qt.ItemDataRole.TextAlignmentRole:
            horizontal = Qt.AlignmentFlag.AlignRight if column.numeric else Qt.AlignmentFlag.AlignLeft
            return int(horizontal | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and column.title == "Status":
            return QBrush(QColor(STATUS_COLOURS.get(record.status, "#303030")))
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(record, column)
        return None

    @staticmethod
    def _tooltip(record: RunRecord, column: Column) -> Optional[str]:
        if column.title == "Status" and record.reason:
            return f"{record.shown_status}: {record.reason}"
        if column.title in ("Name", "Note") and record.note:
            return record.note
        if record.is_trace and (column.setting or column.title == "Batch"):  # the script's settings: not in the trace
            label = SETTINGS[column.setting].label if column.setting else column.title
            return f"{label}: unknown ({TRACE_HAS_NO_SETTINGS})"
        if column.title == "Batch" and (record.config.accumulation_steps > 1 or record.summary.world_size > 1):
            processes = f" × {record.summary.world_size} processes" if record.summary.world_size > 1 else ""
            effective = record.config.batch_size * record.summary.world_size * record.config.accumulation_steps
            return f"{record.config.batch_size}{processes} × {record.config.accumulation_steps} accumulation steps " \
                   f"= {effective} per optimiser step"
        if column.title == "Started":
            if record.is_trace:
                return f"a trace, opened {local_time(record.started_at)} from the {record.source.upper()}"
            return f"started {local_time(record.started_at)} from the {record.source.upper()}"
        if column.setting and column.setting in unused_settings(record):
            return f"{SETTINGS[column.setting].label} not used: {unused_settings(record)[column.setting]}"
        return None

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation != Qt.Orientation.Horizontal:
            return None
        column = COLUMNS[section]
        if role == Qt.ItemDataRole.DisplayRole:
            return column.title
        if role == Qt.ItemDataRole.ToolTipRole:
            return _TOOLTIPS.get(column.title) or column.tooltip or None
        if role == Qt.ItemDataRole.TextAlignmentRole:
            horizontal = Qt.AlignmentFlag.AlignRight if column.numeric else Qt.AlignmentFlag.AlignLeft
            return int(horizontal | Qt.AlignmentFlag.AlignVCenter)
        return None


class RunsSortProxy(QSortFilterProxyModel):
    """Sorts by the raw value: numbers as numbers, text case-insensitively, unknown values last."""

    def lessThan(self, left: QModelIndex, right: QModelIndex) -> bool:
        a, b = left.data(SORT_ROLE), right.data(SORT_ROLE)
        if a is None or b is None:
            # Unknowns sink to the bottom whichever way the column is sorted (Qt swaps the
            # arguments for a descending sort, so "last" means greatest ascending, least descending).
            if self.sortOrder() == Qt.SortOrder.AscendingOrder:
                return a is not None and b is None
            return a is None and b is not None
        if isinstance(a, str) and isinstance(b, str):
            return a.casefold() < b.casefold()
        return a < b

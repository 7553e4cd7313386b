"""The run history in the app: a sortable runs table, a live side-by-side comparison, CSV export.

RunsView reads and writes through a HistoryStore (GUI thread only) and tells the main window what
the user wants through signals: settings to load into the form, past curves to overlay. Dialogs go
through small methods (_confirm, _ask_text, _ask_save_path) that tests replace.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from PySide6.QtCore import (
    QAbstractTableModel,
    QItemSelection,
    QItemSelectionModel,
    QModelIndex,
    QSortFilterProxyModel,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QBrush, QColor, QFont, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTableView,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.formatting import format_duration
from workbench.history.compare import SECTIONS, ComparisonRow, compare_runs
from workbench.gui.series import SERIES_KEYS
from workbench.history.export import export_runs_csv, export_steps_csv
from workbench.history.metrics import METRICS_BY_NAME, format_metric, local_time
from workbench.history.store import HistoryError, HistoryStore, RunRecord

# The step curves the main window's plots overlay (PlotsPanel.add_overlay takes exactly these).
OVERLAY_KEYS: tuple[str, ...] = SERIES_KEYS
MAX_OVERLAY_RUNS = 8
SORT_ROLE = Qt.ItemDataRole.UserRole
RUN_ID_ROLE = Qt.ItemDataRole.UserRole + 1
STATUS_COLOURS = {
    "running": "#1f6fb4",
    "finished": "#2e7d32",
    "stopped": "#8a6d00",
    "failed": "#c62828",
    "interrupted": "#d35400",
}
DIFFERENCE_BACKGROUND = QColor("#fff1c2")
AUTO_REFRESH_MS = 2000


@dataclass(frozen=True)
class Column:
    title: str
    value: Callable[[RunRecord], Any]  # raw: what sorting compares
    text: Callable[[Any], str]
    numeric: bool = False
    tooltip: str = ""


def _metric(name: str) -> Column:
    metric = METRICS_BY_NAME[name]
    return Column(metric.label, lambda r: getattr(r, name), lambda v: format_metric(metric.kind, v), numeric=True)


def _setting(title: str, name: str, numeric: bool = False) -> Column:
    return Column(title, lambda r: getattr(r.config, name), str, numeric=numeric, tooltip=f"setting: {name}")


COLUMNS: tuple[Column, ...] = (
    Column("ID", lambda r: r.id, str, numeric=True),
    Column("Name", lambda r: r.name, str),
    Column("Status", lambda r: r.status, str),
    Column("Started", lambda r: r.started_at, local_time, numeric=True),
    _setting("Model", "model"),
    _setting("Pipeline", "pipeline"),
    _setting("Augment", "augment"),
    _setting("Workers", "num_workers", numeric=True),
    _setting("Batch", "batch_size", numeric=True),
    _setting("Precision", "precision"),
    _metric("images_per_sec"),
    _metric("data_wait_fraction"),
    _metric("peak_allocated_bytes"),
    _metric("peak_reserved_bytes"),
    _metric("peak_nvml_used_bytes"),
    _metric("final_loss"),
    _metric("test_accuracy"),
    Column("Duration", lambda r: r.duration_seconds, format_duration, numeric=True),
    Column("Note", lambda r: r.note, lambda v: v.splitlines()[0] if v else ""),
)
COLUMN_TITLES = tuple(column.title for column in COLUMNS)
_TOOLTIPS = {
    "Img/s": "training images per second over the steady state (every logging window after the first)",
    "Data wait": "share of training time spent waiting for the next batch",
    "Peak alloc": "peak memory held by tensors (torch.cuda.max_memory_allocated)",
    "Peak reserved": "peak memory held by PyTorch's caching allocator (torch.cuda.max_memory_reserved)",
    "Peak NVML": "peak device memory in use as the driver sees it (all processes, CUDA context included)",
    "Final loss": "training loss of the last logging window",
    "Test acc": "test-set accuracy after the last epoch",
}


class RunsTableModel(QAbstractTableModel):
    """One row per RunRecord; display text formatted, SORT_ROLE raw so numbers sort as numbers."""

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self._records: list[RunRecord] = []

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._records)

    def columnCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def record(self, row: int) -> RunRecord:
        return self._records[row]

    @property
    def records(self) -> list[RunRecord]:
        return list(self._records)

    def set_records(self, records: Sequence[RunRecord]) -> None:
        if [r.id for r in records] == [r.id for r in self._records]:
            # Same runs (a running one moved on): update in place so sorting, scrolling and selection stay.
            self._records = list(records)
            if records:
                self.dataChanged.emit(self.index(0, 0), self.index(len(records) - 1, len(COLUMNS) - 1))
            return
        self.beginResetModel()
        self._records = list(records)
        self.endResetModel()

    def data(self, index: QModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        record, column = self._records[index.row()], COLUMNS[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            value = column.value(record)
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
            return f"{record.status}: {record.reason}"
        if column.title in ("Name", "Note") and record.note:
            return record.note
        if column.title == "Batch" and (record.config.accumulation_steps > 1 or record.world_size > 1):
            processes = f" × {record.world_size} processes" if record.world_size > 1 else ""
            effective = record.config.batch_size * record.world_size * record.config.accumulation_steps
            return f"{record.config.batch_size}{processes} × {record.config.accumulation_steps} accumulation steps " \
                   f"= {effective} per optimiser step"
        if column.title == "Started":
            return f"started {local_time(record.started_at)} from the {record.source.upper()}"
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


class ComparisonView(QWidget):
    """Selected runs side by side: every setting, result and environment fact; differing rows highlighted."""

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("comparisonView")
        self.title = QLabel()
        self.title.setObjectName("comparisonTitle")
        self.differences_only = QCheckBox("Differences only")
        self.differences_only.setObjectName("differencesOnlyCheck")
        self.differences_only.setToolTip("Hide the rows where every selected run has the same value")
        self.differences_only.toggled.connect(self._apply_filter)
        self.tree = QTreeWidget()
        self.tree.setObjectName("comparisonTree")
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.setIndentation(12)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.tree.header().setStretchLastSection(False)
        self.tree.header().setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)

        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.title, 1)
        top.addWidget(self.differences_only)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.tree)
        self._rows: list[ComparisonRow] = []
        self._items: list[tuple[ComparisonRow, QTreeWidgetItem]] = []
        self._sections: dict[str, QTreeWidgetItem] = {}
        self._shown: Optional[tuple[list[RunRecord], str]] = None
        self.set_records([])

    def set_records(self, records: Sequence[RunRecord], empty_text: str = "") -> None:
        if (list(records), empty_text) == self._shown:
            return  # a refresh that changed nothing here: keep scroll position and column widths
        self._shown = (list(records), empty_text)
        scroll = self.tree.verticalScrollBar().value()
        self._build(records, empty_text)
        self.tree.verticalScrollBar().setValue(scroll)

    def _build(self, records: Sequence[RunRecord], empty_text: str) -> None:
        self.tree.clear()
        self._items.clear()
        self._sections.clear()
        self._rows = compare_runs(records) if records else []
        if not records:
            self.title.setText(empty_text or "Select runs in the table to compare their settings and results.")
            self.tree.setColumnCount(1)  # setHeaderLabels alone never removes columns: old runs' names would stay
            self.tree.setHeaderLabels(["Setting"])
            self.differences_only.setEnabled(False)
            return
        differing = sum(1 for row in self._rows if row.section == "Settings" and row.differs)
        if len(records) == 1:
            self.title.setText(f"<b>{_escape(records[0].label)}</b> — select two or more runs to compare")
        else:
            self.title.setText(
                f"<b>Comparing {len(records)} runs</b> — {differing} setting{'s' if differing != 1 else ''} differ"
            )
        self.differences_only.setEnabled(len(records) > 1)
        self.tree.setColumnCount(len(records) + 1)
        self.tree.setHeaderLabels(["", *(record.label for record in records)])
        for column, record in enumerate(records, start=1):
            self.tree.headerItem().setToolTip(column, f"{record.label}\n{record.note}".strip())
        bold = QFont(self.tree.font())
        bold.setBold(True)
        for section in SECTIONS:
            item = QTreeWidgetItem([section])
            item.setFont(0, bold)
            item.setFirstColumnSpanned(True)
            self.tree.addTopLevelItem(item)
            self._sections[section] = item
        for row in self._rows:
            item = QTreeWidgetItem([row.label, *row.texts])
            if row.differs:
                for column in range(len(records) + 1):
                    item.setBackground(column, DIFFERENCE_BACKGROUND)
                item.setFont(0, bold)
            for column, text in enumerate(row.texts, start=1):
                if text:
                    item.setToolTip(column, text)
            self._sections[row.section].addChild(item)
            self._items.append((row, item))
        for item in self._sections.values():
            item.setExpanded(True)
        self._apply_filter()
        self.tree.header().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        for column in range(len(records) + 1):
            self.tree.resizeColumnToContents(column)
            self.tree.setColumnWidth(column, min(self.tree.columnWidth(column) + 12, 320))

    def _apply_filter(self) -> None:
        only_differences = self.differences_only.isChecked() and self.differences_only.isEnabled()
        shown: dict[str, int] = {section: 0 for section in self._sections}
        for row, item in self._items:
            hidden = only_differences and not row.differs
            item.setHidden(hidden)
            shown[row.section] += not hidden
        for section, item in self._sections.items():
            item.setHidden(shown[section] == 0)

    # -- for tests and the main window -------------------------------------------------------
    def visible_rows(self) -> dict[str, tuple[str, ...]]:
        """Row key → the texts shown, for the rows not hidden."""
        return {row.key: row.texts for row, item in self._items if not item.isHidden()}

    def differing_keys(self) -> list[str]:
        return [row.key for row in self._rows if row.differs]

    def item_for(self, key: str) -> QTreeWidgetItem:
        return next(item for row, item in self._items if row.key == key)


class RunsView(QWidget):
    """The history tab: runs table on top, comparison of the selected runs below, actions in a bar."""

    loadSettingsRequested = Signal(object)  # RunConfig of the selected run
    overlayRequested = Signal(object)  # list of (run id, label, {OVERLAY_KEYS: numpy array}) for the selected runs

    def __init__(self, store: HistoryStore, parent: Optional[QWidget] = None, auto_refresh_ms: int = AUTO_REFRESH_MS):
        super().__init__(parent)
        self.setObjectName("runsView")
        self.store = store
        self._token: Optional[tuple[int, int]] = None
        self._overlay_key: Optional[tuple] = None
        self._export_dir = Path.home()
        self._sized_columns = False

        self.model = RunsTableModel(self)
        self.proxy = RunsSortProxy(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.table = QTableView()
        self.table.setObjectName("runsTable")
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.DescendingOrder)  # newest first
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 8)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.horizontalHeader().setHighlightSections(False)
        self.table.selectionModel().selectionChanged.connect(self._on_selection_changed)
        self.table.doubleClicked.connect(lambda _: self._load_settings())
        delete_key = QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), self.table)
        delete_key.setContext(Qt.ShortcutContext.WidgetShortcut)
        delete_key.activated.connect(self._delete_selected)

        self.load_settings_button = self._button("loadSettingsButton", "Load settings", self._load_settings,
                                                 "Put this run's settings into the form, to tweak and rerun")
        self.rename_button = self._button("renameRunButton", "Rename…", self._rename_selected)
        self.note_button = self._button("noteRunButton", "Note…", self._edit_note, "Add or edit a note on this run")
        self.delete_button = self._button("deleteRunButton", "Delete…", self._delete_selected)
        self.export_csv_button = self._button("exportCsvButton", "Export CSV…", self._export_runs)
        self.export_steps_button = self._button("exportStepsButton", "Export steps…", self._export_steps)
        self.count_label = QLabel()
        self.count_label.setObjectName("runsCount")
        self.status_label = QLabel()
        self.status_label.setObjectName("runsStatus")
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.comparison = ComparisonView()

        actions = QHBoxLayout()
        actions.setContentsMargins(0, 0, 0, 0)
        for button in (self.load_settings_button, self.rename_button, self.note_button, self.delete_button):
            actions.addWidget(button)
        actions.addStretch(1)
        actions.addWidget(self.count_label)
        actions.addSpacing(12)
        actions.addWidget(self.export_csv_button)
        actions.addWidget(self.export_steps_button)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.setChildrenCollapsible(False)
        splitter.addWidget(self.table)
        splitter.addWidget(self.comparison)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(actions)
        layout.addWidget(splitter, 1)
        layout.addWidget(self.status_label)

        # Runs recorded by another process (a CLI run) appear without a restart: poll a cheap change counter.
        self._poll = QTimer(self)
        self._poll.setInterval(auto_refresh_ms)
        self._poll.timeout.connect(self._refresh_if_changed)
        if auto_refresh_ms > 0:
            self._poll.start()
        self.refresh()

    def _button(self, name: str, text: str, slot: Callable[[], None], tooltip: str = "") -> QPushButton:
        button = QPushButton(text)
        button.setObjectName(name)
        button.setToolTip(tooltip)
        button.clicked.connect(slot)
        return button

    # -- reading the store -------------------------------------------------------------------
    def refresh(self) -> None:
        """Re-read the history (the main window calls this when a run starts or ends)."""
        selected = self.selected_run_ids()
        try:
            self.store.mark_interrupted_runs()
            records = self.store.list_runs()
            self._token = self.store.change_token()
        except HistoryError as error:
            self._show_status(str(error), error=True)
            return
        self.model.set_records(records)
        self._select_ids(selected)
        if not self._sized_columns and records:
            self._size_columns()
        self.count_label.setText(f"{len(records)} run{'s' if len(records) != 1 else ''}")
        self._on_selection_changed()

    def _refresh_if_changed(self) -> None:
        try:
            token = self.store.change_token()
        except HistoryError:
            return
        if token != self._token:
            self.refresh()

    def _size_columns(self) -> None:
        """Fit each column to its header and its widest cell, once: later the user's widths stay."""
        metrics = self.table.fontMetrics()
        header_metrics = self.table.horizontalHeader().fontMetrics()
        limits = {"Name": 260, "Note": 240}
        for section, title in enumerate(COLUMN_TITLES):
            cells = (self.proxy.index(row, section).data() or "" for row in range(min(self.proxy.rowCount(), 200)))
            content = max((metrics.horizontalAdvance(text) for text in cells), default=0) + 14
            header = header_metrics.horizontalAdvance(title) + 26  # room for the sort arrow
            self.table.setColumnWidth(section, min(max(content, header), limits.get(title, 160)))
        self._sized_columns = True

    # -- selection -----------------------------------------------------------------------------
    def selected_run_ids(self) -> list[int]:
        """Ids of the selected runs, oldest first."""
        rows = self.table.selectionModel().selectedRows()
        return sorted(index.data(RUN_ID_ROLE) for index in rows)

    def selected_records(self) -> list[RunRecord]:
        wanted = set(self.selected_run_ids())
        return sorted((r for r in self.model.records if r.id in wanted), key=lambda r: r.id)

    def select_runs(self, run_ids: Sequence[int]) -> None:
        self.table.selectionModel().clearSelection()
        self._select_ids(run_ids)

    def _select_ids(self, run_ids: Sequence[int]) -> None:
        wanted = set(run_ids)
        selection = QItemSelection()
        for row, record in enumerate(self.model.records):
            if record.id in wanted:
                index = self.proxy.mapFromSource(self.model.index(row, 0))
                selection.select(index, index)
        flags = QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows
        self.table.selectionModel().select(selection, flags)

    def _on_selection_changed(self, *_: Any) -> None:
        records = self.selected_records()
        one = len(records) == 1
        self.load_settings_button.setEnabled(one)
        self.rename_button.setEnabled(one)
        self.note_button.setEnabled(one)
        running = [record.label for record in records if record.status == "running"]
        self.delete_button.setEnabled(bool(records) and not running)
        self.delete_button.setToolTip(
            f"{running[0]} is still running" if running else "Delete the selected runs and their metrics"
        )
        has_runs = self.model.rowCount() > 0
        scope = f"{len(records)} selected" if records else "all"
        self.export_csv_button.setEnabled(has_runs)
        self.export_steps_button.setEnabled(has_runs)
        self.export_csv_button.setToolTip(f"Write one row per run ({scope}) with every setting and result")
        self.export_steps_button.setToolTip(f"Write the step metrics ({scope}) as run_id, step, metric, value rows")
        empty_text = "" if has_runs else "No runs yet: runs from the app and from `workbench run` appear here."
        self.comparison.set_records(records, empty_text)
        self._emit_overlay(records)

    def _emit_overlay(self, records: Sequence[RunRecord]) -> None:
        records = list(records)[-MAX_OVERLAY_RUNS:]
        key = tuple((record.id, record.steps, record.name) for record in records)
        if key == self._overlay_key:
            return  # nothing new to draw: a refresh while the same runs stay selected
        self._overlay_key = key
        try:
            overlays = [(record.id, record.label, self._curves(record.id)) for record in records]
        except HistoryError as error:
            self._show_status(str(error), error=True)
            return
        self.overlayRequested.emit(overlays)

    def _curves(self, run_id: int) -> dict:
        metrics = self.store.step_metrics(run_id)
        return {key: metrics[key] for key in OVERLAY_KEYS}

    # -- actions -------------------------------------------------------------------------------
    def _load_settings(self) -> None:
        records = self.selected_records()
        if len(records) != 1:
            return
        record = records[0]
        self.loadSettingsRequested.emit(record.config)
        message = f"Loaded the settings of {record.label} into the form."
        if record.config_dropped:
            message += f" Not used (unknown to this version): {', '.join(record.config_dropped)}."
        self._show_status(message)

    def _rename_selected(self) -> None:
        records = self.selected_records()
        if len(records) != 1:
            return
        name = self._ask_text("Rename run", f"New name for run #{records[0].id}:", records[0].name)
        if name is None or not name.strip() or name.strip() == records[0].name:
            return
        self._change(lambda: self.store.rename(records[0].id, name), f"Renamed run #{records[0].id}.")

    def _edit_note(self) -> None:
        records = self.selected_records()
        if len(records) != 1:
            return
        note = self._ask_text("Note", f"Note on {records[0].label}:", records[0].note, multiline=True)
        if note is None or note == records[0].note:
            return
        self._change(lambda: self.store.set_note(records[0].id, note.strip()), f"Saved the note on run #{records[0].id}.")

    def _delete_selected(self) -> None:
        records = self.selected_records()
        if not records:
            return
        what = records[0].label if len(records) == 1 else f"these {len(records)} runs"
        if not self._confirm(f"Delete {what} and their step metrics?\n\nThis cannot be undone."):
            return
        refused = []
        for record in records:
            try:
                self.store.delete(record.id)
            except HistoryError as error:
                refused.append(str(error))
        self.refresh()
        if refused:
            self._show_status("; ".join(refused), error=True)
        else:
            self._show_status(f"Deleted {len(records)} run{'s' if len(records) != 1 else ''}.")

    def _change(self, write: Callable[[], None], done: str) -> None:
        try:
            write()
        except HistoryError as error:
            self._show_status(str(error), error=True)
            return
        self.refresh()
        self._show_status(done)

    def _export_runs(self) -> None:
        self._export("Export runs to CSV", "workbench-runs.csv", export_runs_csv, "run")

    def _export_steps(self) -> None:
        self._export("Export step metrics to CSV", "workbench-steps.csv", export_steps_csv, "step metric row")

    def _export(self, title: str, default_name: str, export: Callable, noun: str) -> None:
        run_ids = self.selected_run_ids() or None  # nothing selected: every run, as the CLI does
        path = self._ask_save_path(title, default_name)
        if not path:
            return
        try:
            count = export(self.store, path, run_ids)
        except HistoryError as error:
            self._show_status(str(error), error=True)
            return
        self._export_dir = Path(path).parent
        self._show_status(f"Wrote {count} {noun}{'s' if count != 1 else ''} to {path}")

    def _show_status(self, text: str, error: bool = False) -> None:
        self.status_label.setStyleSheet("color: #c62828;" if error else "")
        self.status_label.setText(text)

    # -- dialogs: tests replace these ------------------------------------------------------------
    def _confirm(self, text: str) -> bool:
        answer = QMessageBox.question(self, "Delete runs", text,
                                      QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
                                      QMessageBox.StandardButton.Cancel)
        return answer == QMessageBox.StandardButton.Yes

    def _ask_text(self, title: str, label: str, text: str, multiline: bool = False) -> Optional[str]:
        if multiline:
            value, ok = QInputDialog.getMultiLineText(self, title, label, text)
        else:
            value, ok = QInputDialog.getText(self, title, label, text=text)
        return value if ok else None

    def _ask_save_path(self, title: str, default_name: str) -> Optional[str]:
        path, _ = QFileDialog.getSaveFileName(self, title, str(self._export_dir / default_name),
                                              "CSV files (*.csv);;All files (*)")
        return path or None

    def closeEvent(self, event: Any) -> None:
        self._poll.stop()
        super().closeEvent(event)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

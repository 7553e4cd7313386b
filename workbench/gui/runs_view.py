"""The Runs tab: the runs table on top, the comparison of the selected runs below, actions in a bar.

RunsView assembles the pieces (runs_table, comparison_view, runs_dialogs, runs_exports, runs_refresh,
runs_write_actions) and reads and writes off the GUI thread, through connections of its own: the runs written since
the table's revision (runs_refresh: a 2 s poll, one read at a time), the step curves it overlays and the exports
(runs_exports), renames, notes, tags and deletes (runs_write_actions, a mixin, through runs_writes: a run's write
buttons are off until the table shows its write). It tells the main window what the user wants through signals:
settings to load into the form, past curves to overlay. Dialogs go through small methods (_confirm, _ask_text,
_ask_save_path) that tests replace.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from PySide6.QtCore import QItemSelection, QItemSelectionModel, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from workbench.gui import runs_dialogs
from workbench.gui.background import call_in_background
from workbench.gui.comparison_view import ComparisonView
from workbench.gui.runs_exports import RUNS_CSV, STEPS_CSV, CsvExport, overlay_curves
from workbench.gui.runs_refresh import RunsRefresh
from workbench.gui.runs_table import COLUMN_TITLES, RUN_ID_ROLE, SORT_ROLE, RunsSortProxy, RunsTableModel
from workbench.gui.runs_write_actions import RunsWriteActions
from workbench.history.records import RunChanges, RunRecord, records_count_text
from workbench.history.store import HistoryError, HistoryStore

MAX_OVERLAY_RUNS = 8
AUTO_REFRESH_MS = 2000
LOADING_TEXT = "Loading runs…"  # until the first read lands
ERROR_STYLE = "color: #c62828;"  # the status line's, for an error


class RunsView(RunsWriteActions, QWidget):
    """The history tab: runs table on top, comparison of the selected runs below, actions in a bar."""

    loadSettingsRequested = Signal(object)  # RunConfig of the selected run
    overlayRequested = Signal(object)  # list of runs_exports.Overlay: the selected runs' curves

    def __init__(self, store: HistoryStore, parent: Optional[QWidget] = None, auto_refresh_ms: int = AUTO_REFRESH_MS):
        super().__init__(parent)
        self.setObjectName("runsView")
        self.store = store
        self._overlay_key: Optional[tuple] = None  # the runs whose curves were asked for last
        self._exporting = False  # an export is being written (off the GUI thread)
        self._writing: set[int] = set()  # runs being written (off the GUI thread) until the table shows it
        self._export_dir = Path.home()
        self._sized_columns = False
        # What the status line's message is about, so it goes when that stops being true: "history" (the
        # history could not be read: until a read succeeds) or the runs selected when an action was reported.
        self._status_cause: Optional[object] = None

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
        self.tags_button = self._button("tagsRunButton", "Tags…", self._edit_tags,
                                        "Tag this run: words, comma-separated (the Tags column, the CSV's tags)")
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
        for button in (self.load_settings_button, self.rename_button, self.note_button, self.tags_button,
                       self.delete_button):
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

        # Runs recorded by another process (a CLI run) appear without a restart: the refresher polls the revision.
        self.refresher = RunsRefresh(store.path, self._apply_changes, self._read_failed, auto_refresh_ms, self,
                                     failure_shown=self._history_failure_shown)
        self.count_label.setText(LOADING_TEXT)
        self._on_selection_changed()
        self.refresh()

    def _button(self, name: str, text: str, slot: Callable[[], None], tooltip: str = "") -> QPushButton:
        button = QPushButton(text)
        button.setObjectName(name)
        button.setToolTip(tooltip)
        button.clicked.connect(slot)
        return button

    # -- reading the store -------------------------------------------------------------------
    def refresh(self, then: Optional[Callable[[], None]] = None) -> None:
        """Bring the table up to date, read off the GUI thread (the main window calls this when a run starts or
        ends, the poll when anyone wrote): the first time every run, then only the runs written since, row by row.
        ``then``: called once the table shows every write made before this call (or the read failed)."""
        self.refresher.request(then)

    def is_reading(self) -> bool:
        """A read of the history is in flight or asked for: the table may not show the latest writes yet."""
        return self.refresher.busy

    def _apply_changes(self, changes: RunChanges, reload_everything: bool) -> None:
        if self._status_cause == "history":
            self._show_status("")  # the history reads again
        if reload_everything:
            selected = self.selected_run_ids()
            self.model.set_records(changes.changed)
            self._select_ids(selected)
        else:
            self.model.apply_changes(changes.changed, changes.run_ids)  # the selection stays with its rows
        count = self.model.rowCount()
        if not self._sized_columns and count:
            self._size_columns()
        self.count_label.setText(records_count_text(self.model.all_records()))
        self._on_selection_changed()

    def _read_failed(self, error: HistoryError) -> None:
        if self.refresher.revision is None:
            self.count_label.setText("")  # not loading any more: the status line says why
        self._show_status(str(error), error=True, cause="history")

    def _history_failure_shown(self) -> bool:
        """The status line still says why the history could not be read (no other message took its place)."""
        return self._status_cause == "history"

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
        return self.model.records_with_ids(set(self.selected_run_ids()))

    def select_runs(self, run_ids: Sequence[int]) -> None:
        self.table.selectionModel().clearSelection()
        self._select_ids(run_ids)

    def _select_ids(self, run_ids: Sequence[int]) -> None:
        selection = QItemSelection()
        for run_id in set(run_ids):
            row = self.model.row_of(run_id)
            if row is not None:
                index = self.proxy.mapFromSource(self.model.index(row, 0))
                selection.select(index, index)
        flags = QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows
        self.table.selectionModel().select(selection, flags)

    def _on_selection_changed(self, *_: Any) -> None:
        if isinstance(self._status_cause, tuple) and tuple(self.selected_run_ids()) != self._status_cause:
            self._show_status("")  # an action's outcome (an export that failed, a rename) is about other runs
        records = self.selected_records()
        one = len(records) == 1
        # A trace record has no settings to load (its script's are not in the trace).
        self.load_settings_button.setEnabled(one and not records[0].is_trace)
        self._update_write_buttons(records)
        has_runs = self.model.rowCount() > 0
        self._update_export_buttons()
        read = self.refresher.revision is not None  # until then no "No runs yet": the count says loading
        empty_text = ("" if has_runs or not read
                      else "No runs yet: runs from the app and from `workbench run` appear here.")
        self.comparison.set_records(records, empty_text, self.model.all_records())
        self._emit_overlay(records)

    def _update_export_buttons(self) -> None:
        records = self.selected_records()
        scope = f"{len(records)} selected" if records else "all"
        for button in (self.export_csv_button, self.export_steps_button):
            button.setEnabled(self.model.rowCount() > 0 and not self._exporting)
        self.export_csv_button.setToolTip(f"Write one row per run ({scope}) with every setting and result")
        self.export_steps_button.setToolTip(f"Write the step metrics ({scope}) as run_id, step, metric, value rows")

    def _emit_overlay(self, records: Sequence[RunRecord]) -> None:
        """The selected runs' curves, read off the GUI thread (a run of 100,000 steps held the window 3 s)."""
        records = list(records)[-MAX_OVERLAY_RUNS:]
        key = tuple((record.id, record.summary.steps, record.name) for record in records)
        if key == self._overlay_key:
            return  # nothing new to draw: a refresh while the same runs stay selected
        self._overlay_key = key
        if not records:
            self.overlayRequested.emit([])
            return
        runs = [(record.id, record.label) for record in records]
        call_in_background(self, partial(overlay_curves, self.store.path, runs), partial(self._overlay_read, key),
                           partial(self._overlay_failed, key))

    def _overlay_read(self, key: tuple, overlays: list) -> None:
        if key == self._overlay_key:  # still the runs selected: no other selection's curves came after
            self.overlayRequested.emit(overlays)

    def _overlay_failed(self, key: tuple, error: Exception) -> None:
        if key == self._overlay_key:
            self._show_status(str(error), error=True)

    # -- actions (Rename, Note, Tags, Delete: RunsWriteActions) --------------------------------
    def _load_settings(self) -> None:
        records = self.selected_records()
        if len(records) != 1:
            return
        record = records[0]
        if record.is_trace:  # a double-click reaches here past the disabled button: the form keeps its settings
            self._show_status(f"{record.label} is a profiler trace: it holds no settings to load "
                              "(its script's are not in the trace).")
            return
        self.loadSettingsRequested.emit(record.config)
        message = f"Loaded the settings of {record.label} into the form."
        if record.config_dropped:
            message += f" Not used (unknown to this version): {', '.join(record.config_dropped)}."
        self._show_status(message)

    def _export_runs(self) -> None:
        self._export(RUNS_CSV)

    def _export_steps(self) -> None:
        self._export(STEPS_CSV)

    def _export(self, export: CsvExport) -> None:
        """Written off the GUI thread (100,000 steps took 7 s), the export buttons disabled until it is done."""
        run_ids = self.selected_run_ids() or None  # nothing selected: every run, as the CLI does
        path = self._ask_save_path(export.title, export.default_name)
        if not path:
            return
        self._exporting = True
        self._update_export_buttons()
        self._show_status(f"Writing {path}…")
        call_in_background(self, partial(export.run, self.store.path, path, run_ids), partial(self._exported, path),
                           self._export_failed)

    def _exported(self, path: str, message: str) -> None:
        self._exporting = False
        self._update_export_buttons()
        self._export_dir = Path(path).parent
        self._show_status(message)

    def _export_failed(self, error: Exception) -> None:
        self._exporting = False
        self._update_export_buttons()
        self._show_status(str(error), error=True)

    def _show_status(self, text: str, error: bool = False, cause: Optional[str] = None) -> None:
        self.status_label.setStyleSheet(ERROR_STYLE if error else "")
        self.status_label.setText(text)
        self._status_cause = (cause or tuple(self.selected_run_ids())) if text else None

    # -- dialogs: tests replace these ------------------------------------------------------------
    def _confirm(self, text: str) -> bool:
        return runs_dialogs.confirm(self, "Delete runs", text)

    def _ask_text(self, title: str, label: str, text: str, multiline: bool = False) -> Optional[str]:
        return runs_dialogs.ask_text(self, title, label, text, multiline)

    def _ask_save_path(self, title: str, default_name: str) -> Optional[str]:
        return runs_dialogs.ask_save_path(self, title, self._export_dir, default_name)

    def closeEvent(self, event: Any) -> None:
        self.refresher.stop()
        super().closeEvent(event)

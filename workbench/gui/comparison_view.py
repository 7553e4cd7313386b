"""Selected runs side by side: every setting, result and environment fact, the rows that differ highlighted;
above them, what the runs say about speed: each side's images/sec with its interval, and the A/B verdict
where both sides have repeats (controller/speed_comparison.py)."""

from __future__ import annotations

import html
from typing import Optional, Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.controller.speed_comparison import speed_lines
from workbench.history.compare import SECTIONS, ComparisonRow, compare_runs
from workbench.history.records import RunRecord, records_noun

DIFFERENCE_BACKGROUND = QColor("#fff1c2")
NOT_USED_FOREGROUND = QColor("#8a8a8a")


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
        self.speed = QLabel()
        self.speed.setObjectName("comparisonSpeed")
        self.speed.setWordWrap(True)
        self.speed.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.speed.setToolTip("Runs of one setting in one sequence (repeats) read as their median and its interval; "
                              "a run alone, with the interval of its steady windows. \"faster\" only where the "
                              "interval of the speed-up clears 1 by 2 %.")
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
        layout.addWidget(self.speed)
        layout.addWidget(self.tree)
        self._rows: list[ComparisonRow] = []
        self._items: list[tuple[ComparisonRow, QTreeWidgetItem]] = []
        self._sections: dict[str, QTreeWidgetItem] = {}
        self._shown: Optional[tuple[list[RunRecord], str]] = None
        self._every_run: list[RunRecord] = []
        self.set_records([])

    def set_records(self, records: Sequence[RunRecord], empty_text: str = "", every_run: Sequence[RunRecord] = ()
                    ) -> None:
        """``every_run``: the runs the table holds, where a selected run of a sequence finds its repeats."""
        self._every_run = list(every_run)
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
        lines = speed_lines(records, self._every_run)
        self.speed.setText("\n".join(lines))
        self.speed.setVisible(bool(lines))
        if not records:
            self.title.setText(empty_text or "Select runs in the table to compare their settings and results.")
            self.tree.setColumnCount(1)  # setHeaderLabels alone never removes columns: old runs' names would stay
            self.tree.setHeaderLabels(["Setting"])
            self.differences_only.setEnabled(False)
            return
        differing = sum(1 for row in self._rows if row.section == "Settings" and row.differs)
        noun = records_noun(records)
        if len(records) == 1:
            self.title.setText(f"<b>{html.escape(records[0].label)}</b> — select two or more runs or traces to compare")
        elif noun == "traces":  # traces hold no settings: no count of settings that differ
            self.title.setText(f"<b>Comparing {len(records)} traces</b>")
        else:
            self.title.setText(
                f"<b>Comparing {len(records)} {noun}</b> — "
                + ("1 setting differs" if differing == 1 else f"{differing} settings differ")
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
                note = row.notes[column - 1] if row.notes else ""
                if note:  # a setting that did nothing in this run: greyed, and why
                    item.setForeground(column, NOT_USED_FOREGROUND)
                    item.setToolTip(column, f"Not used: {note}")
                elif text:
                    item.setToolTip(column, text)
            if row.tooltip:
                item.setToolTip(0, row.tooltip)
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


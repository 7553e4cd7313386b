"""Where the GPU's time went, sample by sample, and what to change: a standalone view.

A stacked bar per profiler sample (compute / memcpy / waiting for data / waiting for host / other),
the chosen sample's top kernels and top host ops, and the run's findings, each with an "Apply"
button that emits the RunConfig (field, value) to set in the form and a "Verify" button that asks for the
change to be measured against the run's settings. It only draws: the figures come from ProfileSample and
Finding (see breakdown_model for the words).
"""

from __future__ import annotations

from typing import Optional, Sequence

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.events import ProfileSample
from workbench.engine.run_summary import Finding, NamedTime
from workbench.gui import breakdown_model as model

BAR_WIDTH = 0.6
TIMELINE_TITLE = "GPU time, from the kernel timeline"
HOST_ONLY_TITLE = "Profiler samples: the host's ops (no GPU timeline)"
TOP_ROWS = 8


class BreakdownView(QWidget):
    apply_requested = Signal(str, object)  # (RunConfig field, value)
    verify_requested = Signal(object)  # the Finding whose change to measure

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("breakdownView")
        self._samples: list[ProfileSample] = []
        self._bars: list[pg.BarGraphItem] = []

        self.title = title = QLabel(TIMELINE_TITLE)
        title.setObjectName("breakdownTitle")
        font = title.font()
        font.setBold(True)
        title.setFont(font)
        self.sample_picker = QComboBox()
        self.sample_picker.setObjectName("samplePicker")
        self.sample_picker.setToolTip("The profiler sample whose kernels and host ops are listed below")
        self.sample_picker.currentIndexChanged.connect(self._show_sample)
        header = QHBoxLayout()
        header.addWidget(title)
        header.addStretch(1)
        header.addWidget(QLabel("Sample:"))
        header.addWidget(self.sample_picker)

        self.legend = QWidget()
        legend = QHBoxLayout(self.legend)
        legend.setContentsMargins(0, 0, 0, 0)
        legend.setSpacing(14)
        for _, label, colour in model.SEGMENTS:
            swatch = QLabel()
            swatch.setFixedSize(12, 12)
            swatch.setStyleSheet(f"background: {colour}; border: 1px solid #606060;")
            legend.addWidget(swatch)
            legend.addSpacing(-10)
            legend.addWidget(QLabel(label))
        legend.addStretch(1)

        self.plot = pg.PlotWidget(background="w")
        self.plot.setObjectName("breakdownPlot")
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.hideButtons()
        self.plot.setLabel("left", "share of the sampled time", units="%")
        self.plot.setYRange(0, 100, padding=0.02)
        self.plot.showGrid(y=True, alpha=0.2)
        self.plot.setMinimumHeight(170)
        for axis in ("left", "bottom"):
            self.plot.getAxis(axis).setPen("#303030")
            self.plot.getAxis(axis).setTextPen("#303030")

        self.summary = QLabel("No profiler sample yet: turn on “Profile GPU time”, or ask for a sample during a run.")
        self.summary.setObjectName("sampleSummary")
        self.summary.setWordWrap(True)
        self.trace = QLabel()
        self.trace.setObjectName("tracePath")
        self.trace.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.trace.setToolTip("The sample's Chrome trace: open it at https://ui.perfetto.dev")

        self.kernels_table = _table("topKernels", ["Kernel", "GPU ms", "Calls"])
        self.ops_table = _table("topOps", ["Host op", "Self ms", "Calls"])
        self.kernels_title = QLabel("Top kernels by GPU time")
        tables = QGridLayout()
        tables.addWidget(self.kernels_title, 0, 0)
        tables.addWidget(QLabel("Top host ops by self time"), 0, 1)
        tables.addWidget(self.kernels_table, 1, 0)
        tables.addWidget(self.ops_table, 1, 1)

        findings_title = QLabel("Findings: what bounds the run, and what to change")
        findings_title.setFont(font)
        self.findings_box = QVBoxLayout()
        self.findings_box.setSpacing(6)
        self.no_findings = QLabel("No findings yet: they come with the run's end.")
        self.findings_box.addWidget(self.no_findings)
        self.apply_buttons: list[QPushButton] = []
        self.verify_buttons: list[QPushButton] = []
        self.headline_labels: list[QLabel] = []
        self.remedy_labels: list[QLabel] = []

        # The findings first: they are the answer; the samples below are the evidence.
        layout = QVBoxLayout(self)
        layout.addWidget(findings_title)
        layout.addLayout(self.findings_box)
        layout.addSpacing(8)
        layout.addLayout(header)
        layout.addWidget(self.legend)
        layout.addWidget(self.plot, 3)
        layout.addWidget(self.summary)
        layout.addWidget(self.trace)
        layout.addLayout(tables, 2)

    # -- samples ----------------------------------------------------------------------------------------
    def add_sample(self, sample: ProfileSample) -> None:
        self._samples.append(sample)
        self.sample_picker.addItem(model.sample_label(sample))
        self._redraw_bars()
        self.sample_picker.setCurrentIndex(len(self._samples) - 1)  # the newest is what the user asked for

    def clear(self) -> None:
        self._samples = []
        self.sample_picker.clear()
        self._redraw_bars()
        self.summary.setText("No profiler sample yet.")
        self.trace.setText("")
        self._fill(self.kernels_table, ())
        self._fill(self.ops_table, ())
        self.set_findings(())

    @property
    def samples(self) -> tuple[ProfileSample, ...]:
        return tuple(self._samples)

    def bar_heights(self) -> dict[str, list[float]]:
        """Each part's height in percent, per sample (for tests and the screenshot's check)."""
        return {bar.segment_key: list(bar.opts["height"]) for bar in self._bars}

    def _redraw_bars(self) -> None:
        for bar in self._bars:
            self.plot.removeItem(bar)
        self._bars = []
        parts = [model.segments(sample) for sample in self._samples]
        xs = list(range(len(self._samples)))
        bottoms = [0.0] * len(xs)
        for index, (key, label, colour) in enumerate(model.SEGMENTS):
            heights = [100.0 * segs[index].fraction if segs else 0.0 for segs in parts]
            bar = pg.BarGraphItem(x=xs, y0=list(bottoms), height=heights, width=BAR_WIDTH,
                                  brush=QColor(colour), pen=pg.mkPen("w", width=1))
            bar.segment_key = key
            self.plot.addItem(bar)
            self._bars.append(bar)
            bottoms = [b + h for b, h in zip(bottoms, heights)]
        axis = self.plot.getAxis("bottom")
        axis.setTicks([[(x, model.sample_label(s) + ("" if parts[x] else "\n(no GPU timeline)"))
                        for x, s in enumerate(self._samples)]])
        self.plot.setXRange(-0.6, max(len(xs), 3) - 0.4, padding=0)
        # Samples, and none with a GPU timeline (a CPU run): no empty chart, no empty kernel table.
        timeline = not self._samples or any(parts)
        for widget in (self.legend, self.plot, self.kernels_title, self.kernels_table):
            widget.setVisible(timeline)
        self.title.setText(TIMELINE_TITLE if timeline else HOST_ONLY_TITLE)

    def _show_sample(self, index: int) -> None:
        if not 0 <= index < len(self._samples):
            return
        sample = self._samples[index]
        self.summary.setText(model.sample_summary(sample))
        trace = sample.trace_path or sample.trace_unavailable_reason or ""
        self.trace.setText(f"Trace: {trace}" if trace else "")
        self._fill(self.kernels_table, sample.top_kernels, kernel_names=True)
        self._fill(self.ops_table, sample.top_ops)

    def _fill(self, table: QTableWidget, items: Sequence[NamedTime], kernel_names: bool = False) -> None:
        rows = list(items)[:TOP_ROWS]
        table.setRowCount(len(rows))
        for row, item in enumerate(rows):
            name = QTableWidgetItem(model.short_kernel_name(item.name) if kernel_names else item.name)
            name.setToolTip(item.name)
            table.setItem(row, 0, name)
            for column, text in ((1, f"{item.seconds * 1e3:,.2f}"), (2, f"{item.count:,}")):
                cell = QTableWidgetItem(text)
                cell.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                table.setItem(row, column, cell)

    # -- findings ---------------------------------------------------------------------------------------
    def set_findings(self, findings: Sequence[Finding]) -> None:
        while self.findings_box.count():
            widget = self.findings_box.takeAt(0).widget()
            if widget is not None and widget is not self.no_findings:
                widget.deleteLater()
        self.apply_buttons, self.verify_buttons, self.headline_labels, self.remedy_labels = [], [], [], []
        if not findings:
            self.findings_box.addWidget(self.no_findings)
            self.no_findings.show()
            return
        self.no_findings.hide()
        for number, (headline, remedies) in enumerate(model.grouped(findings), start=1):
            head = QLabel(f"{number}. {headline}")
            head.setObjectName("findingHeadline")
            head.setWordWrap(True)
            first = remedies[0][1]
            head.setToolTip(f"{first.figure_name} = {first.figure}"
                            + (f", threshold {first.threshold}" if first.threshold is not None else ""))
            self.findings_box.addWidget(head)
            self.headline_labels.append(head)
            for remedy, finding in remedies:
                self.findings_box.addWidget(self._remedy_row(remedy, finding))

    def _remedy_row(self, remedy: str, finding: Finding) -> QFrame:
        row = QFrame()
        row.setObjectName("findingRemedy")
        layout = QHBoxLayout(row)
        layout.setContentsMargins(18, 0, 0, 0)
        text = QLabel(f"• {remedy}")
        text.setWordWrap(True)
        layout.addWidget(text, 1)
        self.remedy_labels.append(text)
        label = model.apply_label(finding)
        if label is not None:
            button = QPushButton(label)
            button.setObjectName("applyFinding")
            button.setToolTip(f"Set {finding.field} to {finding.value} in the settings form")
            button.clicked.connect(lambda _=False, f=finding: self.apply_requested.emit(f.field, f.value))
            layout.addWidget(button, 0, Qt.AlignmentFlag.AlignVCenter)
            self.apply_buttons.append(button)
            verify = QPushButton("Verify")
            verify.setObjectName("verifyFinding")
            verify.setToolTip(model.verify_tooltip(finding))
            verify.clicked.connect(lambda _=False, f=finding: self.verify_requested.emit(f))
            layout.addWidget(verify, 0, Qt.AlignmentFlag.AlignVCenter)
            self.verify_buttons.append(verify)
        return row


def _table(name: str, headers: list[str]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setObjectName(name)
    table.setHorizontalHeaderLabels(headers)
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    table.setSelectionMode(QTableWidget.SelectionMode.NoSelection)
    table.setAlternatingRowColors(True)
    header = table.horizontalHeader()
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    for column in range(1, len(headers)):
        header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
    table.setMinimumHeight(150)
    return table

"""The "Trace" tab: a torch.profiler trace opened with File → Open trace… or dropped on the window, read off the GUI
thread with a progress bar and Cancel, and its report drawn rank by rank (controller/trace_page.py says what).

The reading (which hashes the bytes it reads) and the history write run in the background (gui/background.py) as one
``TraceOpening.run``; a timer polls its progress. Nothing here opens the file; a large single file is read in a process
of its own (controller/trace_opening.py says why).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Callable, Optional, Sequence

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from workbench.controller.trace_opening import OpenedTrace, ReadReport, TraceOpening, read_in_worker_with_findings
from workbench.controller.trace_page import RankSection, Share, TracePage, history_line, trace_page
from workbench.gui.background import call_in_background
from workbench.trace_analysis.model import TraceCancelled, TraceError

POLL_MS = 100
TRACE_FILTER = "Profiler traces (*.json *.json.gz);;All files (*)"
EMPTY_TEXT = ("<p style='color:#505050'>Open a trace that <code>torch.profiler</code> wrote (File → Open trace…, or "
              "drop a <code>.json</code> / <code>.json.gz</code> file, or a folder of rank files, on the window): "
              "the GPU time of your own script, split and explained, with what to change.</p>")


# A refusal ("Still opening …") stays this long before the progress poll writes over the status again.
REFUSAL_MS = 4000


class TraceTab(QWidget):
    trace_kept = Signal(int)  # the history record's id (a new one, or the one kept before)
    busy_changed = Signal(bool)  # a trace is being opened (the window's Open trace… actions wait meanwhile)

    def __init__(self, history_home: Optional[Path] = None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("traceTab")
        self._history_home = history_home
        self._opening: Optional[TraceOpening] = None
        self.ask_file: Callable[[], str] = self._ask_file
        self.ask_folder: Callable[[], str] = self._ask_folder
        self.read: ReadReport = read_in_worker_with_findings  # tests put their own reader here

        self.open_button = QPushButton("Open trace…")
        self.open_button.setObjectName("openTraceButton")
        self.open_button.setToolTip("A torch.profiler trace: .json or .json.gz (File → Open trace folder… for ranks)")
        self.open_button.clicked.connect(self.choose_file)
        self.progress = QProgressBar()
        self.progress.setObjectName("traceProgress")
        self.progress.setMaximumWidth(280)
        self.progress.setVisible(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("cancelTraceButton")
        self.cancel_button.setVisible(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.status = QLabel()
        self.status.setObjectName("traceStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        top = QHBoxLayout()
        top.addWidget(self.open_button)
        top.addWidget(self.progress)
        top.addWidget(self.cancel_button)
        top.addWidget(self.status, 1)

        self.report = QTextBrowser()
        self.report.setObjectName("traceReport")
        self.report.setOpenLinks(False)
        self.report.setHtml(EMPTY_TEXT)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.report, 1)

        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._show_progress)
        self._refusal_shown = QTimer(self)
        self._refusal_shown.setSingleShot(True)
        self._refusal_shown.setInterval(REFUSAL_MS)

    # -- opening -----------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return self._opening is not None

    def choose_file(self) -> None:
        path = self.ask_file()
        if path:
            self.open_path(path)

    def choose_folder(self) -> None:
        path = self.ask_folder()
        if path:
            self.open_path(path)

    def open_dropped(self, paths: Sequence[str]) -> None:
        if len(paths) != 1:
            self.status.setText(f"{len(paths)} items dropped: drop one trace file, or one folder of rank traces "
                                "(a folder's files are read as its ranks).")
            return
        self.open_path(paths[0])

    def open_path(self, path: str | Path) -> None:
        """Read the trace (a file, or a folder of rank files) in the background; one at a time."""
        if self._opening is not None:
            self.status.setText(f"Still opening {self._opening.path}: Cancel it first.")
            self._refusal_shown.start()  # the next polls leave it to be read
            return
        opening = TraceOpening(path, self._history_home, read=self.read)
        self._opening = opening
        self.progress.setRange(0, 0)  # busy until the reader reports its size
        self.progress.setVisible(True)
        self.cancel_button.setVisible(True)
        self.cancel_button.setEnabled(True)
        self.open_button.setEnabled(False)
        self.status.setText(f"Reading {opening.path}…")
        self._timer.start()
        self.busy_changed.emit(True)
        call_in_background(self, opening.run, self._opened, self._failed)

    def cancel(self) -> None:
        if self._opening is not None:
            self._opening.cancel()
            self.cancel_button.setEnabled(False)
            self.status.setText(f"Cancelling {self._opening.path}…")

    def shutdown(self) -> None:
        """The window closes: stop reading (the background call ends at its next check)."""
        self.cancel()
        self._timer.stop()

    def _show_progress(self) -> None:
        if self._opening is None:
            return
        progress = self._opening.progress()
        fraction = progress.fraction
        if fraction is None:
            self.progress.setRange(0, 0)
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(round(fraction * 1000))
        self.progress.setFormat(f"{progress.phase} %p%" if fraction is not None else progress.phase)
        if not self._opening.cancelled and not self._refusal_shown.isActive():
            self.status.setText(f"{progress.phase.capitalize()}: {self._opening.path}")

    def _finish(self) -> Optional[TraceOpening]:
        opening, self._opening = self._opening, None
        self._timer.stop()
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)
        self.open_button.setEnabled(True)
        self._refusal_shown.stop()
        self.busy_changed.emit(False)
        return opening

    def _opened(self, opened: OpenedTrace) -> None:
        self._finish()
        line = history_line(opened.record_id, opened.kept_before, opened.history_note)
        self.show_page(trace_page(opened.report, line))
        self.status.setText(line)
        if opened.record_id is not None:
            self.trace_kept.emit(opened.record_id)

    def _failed(self, error: Exception) -> None:
        opening = self._finish()
        path = opening.path if opening is not None else ""
        if isinstance(error, TraceCancelled):
            self.status.setText(f"Cancelled: {path} was not opened.")
        elif isinstance(error, TraceError):
            self.status.setText(str(error))
        else:  # a reader's bug, not the file: still one line, and the window goes on
            self.status.setText(f"{path} could not be read: {type(error).__name__}: {error}")

    # -- drawing -----------------------------------------------------------------------------------
    def show_page(self, page: TracePage) -> None:
        self.report.setHtml(page_html(page))

    def _ask_file(self) -> str:
        return QFileDialog.getOpenFileName(self, "Open a torch.profiler trace", "", TRACE_FILTER)[0]

    def _ask_folder(self) -> str:
        return QFileDialog.getExistingDirectory(self, "Open a folder of rank traces")


def page_html(page: TracePage) -> str:
    parts = [f"<h3 style='margin:0'>{_text(page.title)}</h3>",
             f"<p style='color:#505050;margin-top:2px'>{_text(page.history)}</p>"]
    if page.prove:
        parts.append(f"<p style='color:#505050;margin-top:0'>{_text(page.prove)}</p>")
    parts += [f"<p style='color:#8a6d00'>{_text(note)}</p>" for note in page.notes]
    if page.ranks_rows:
        cell = "style='padding-right:14px'"
        head = "".join(f"<th align='left' {cell}>{_text(title)}</th>" for title in page.ranks_header)
        body = "".join("<tr>" + "".join(f"<td {cell}>{_text(value)}</td>" for value in row) + "</tr>"
                       for row in page.ranks_rows)
        parts.append(f"<p style='margin-bottom:0'><b>Ranks side by side</b></p><table cellspacing='0'><tr>{head}</tr>"
                     f"{body}</table><p style='margin-top:2px'>{_text(page.slowest)}</p><hr>")
    parts += [_rank_html(section) for section in page.sections]
    return "".join(parts)


def _rank_html(section: RankSection) -> str:
    parts = [f"<h3 style='margin-bottom:2px'>{_text(section.title)}</h3>", f"<p style='margin:0'>{_text(section.steps)}</p>"]
    if section.gpu_time:
        parts.append(_bar(section.gpu_time_title, section.gpu_time))
    if section.idle:
        parts.append(_bar("Idle time by cause", section.idle))
    parts.append("<p style='margin-top:4px'>" + "<br>".join(_text(fact) for fact in section.facts) + "</p>")
    if section.findings:
        items = "".join(
            f"<li>{_finding_head(finding.kind, finding.text)}"
            + "".join(f"<br>Change: <code>{_text(change)}</code>" for change in finding.changes) + "</li>"
            for finding in section.findings)
        parts.append(f"<p style='margin-bottom:0'><b>Findings</b></p><ul style='margin-top:0'>{items}</ul>")
    else:
        parts.append("<p><b>Findings</b>: none fired.</p>")
    # Syncs are named by the op that called them, in or out of a loop: a trace without steps shows no loop
    tables = [(title, rows) for title, rows in (
        ("Top kernels", section.top_kernels), ("Top host ops by self time", section.top_host_ops),
        ("Copies and fills", section.top_copies),
        ("Device syncs, by the host op that called them", section.sync_calls)) if rows]
    for title, rows in tables:
        body = "".join(f"<tr><td style='padding-right:12px'>{_text(time)}</td><td>{_text(name)}</td></tr>"
                       for name, time in rows)
        parts.append(f"<p style='margin-bottom:0'><b>{title}</b></p><table cellspacing='0'>{body}</table>")
    parts += [f"<p style='color:#8a6d00'>{_text(note)}</p>" for note in section.notes]
    return "".join(parts) + "<hr>"


def _bar(title: str, shares: tuple[Share, ...]) -> str:
    """A stacked bar of shares (a table whose cells take their share of the width), and its legend."""
    cells = "".join(f"<td width='{max(share.share, 0.0) * 100:.2f}%' bgcolor='{share.colour}'>&nbsp;</td>"
                    for share in shares if share.share > 0.0005)
    legend = " &nbsp; ".join(f"<span style='color:{share.colour}'>■</span> {_text(share.text)}" for share in shares)
    return (f"<p style='margin:6px 0 2px 0'>{_text(title)}</p>"
            f"<table width='100%' height='14' cellspacing='0' cellpadding='0'><tr>{cells}</tr></table>"
            f"<p style='margin:2px 0'>{legend}</p>")


def _finding_head(kind: str, text: str) -> str:
    """A finding's text with its own head in bold ("Copy-bound: copies and fills …"): the kind's name is not said
    twice; where the text has no head of its own, the kind is its head."""
    head, colon, rest = text.partition(": ")
    if not colon or len(head) > 40:
        head, rest = kind, text
    return f"<b>{_text(head)}</b>: {_text(rest)}"


def _text(value: object) -> str:
    return html.escape(str(value))

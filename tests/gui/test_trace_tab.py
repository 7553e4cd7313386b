"""The window's Trace tab: File → Open trace… and a dropped trace, read off the GUI thread with progress and Cancel,
the report drawn per rank and the trace kept in the Runs tab."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from builders import FakeRun, fake_release, window_probe
from conftest import blank_preview
from PySide6.QtCore import QMimeData, QPointF, Qt, QTimer, QUrl
from PySide6.QtGui import QDropEvent

from workbench.gui.app import build_window
from workbench.gui.background import wait_for_background_calls
from workbench.gui.runs_view import RunsView
from workbench.gui.trace_tab import POLL_MS
from workbench.history.store import HistoryStore
from workbench.trace_analysis import rank_pool
from workbench.trace_analysis.model import TraceCancelled

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
H100 = Path(__file__).resolve().parents[1] / "trace_analysis" / "data" / "h100"  # in the repository
HTA_TESTS = Path(__file__).resolve().parents[1] / "trace_analysis" / "data" / "hta-tests"  # in the repository
needs_traces = pytest.mark.skipif(not (TRACES / "two-ranks").is_dir(), reason="../shared/traces is not beside the checkout")


@pytest.fixture
def store(tmp_path):
    with HistoryStore.open(tmp_path / "home") as opened:
        yield opened


@pytest.fixture
def window(qtbot, settings, store):
    made = build_window(store, settings=settings, run_function=FakeRun(), probe_function=window_probe(),
                        release_function=fake_release, preview_function=blank_preview,
                        model_names_function=lambda: ())
    qtbot.addWidget(made)
    yield made
    made.trace_tab.shutdown()
    made.training_thread.request_stop()
    made.training_thread.wait(10_000)
    assert wait_for_background_calls(30_000), "a trace was still being read"


def drop(window, paths):
    data = QMimeData()
    data.setUrls([QUrl.fromLocalFile(str(path)) for path in paths])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, data, Qt.MouseButton.LeftButton,
                       Qt.KeyboardModifier.NoModifier)
    window.dropEvent(event)
    return event


def test_a_dropped_fifo_gets_one_line_and_the_window_never_waits(qtbot, window, tmp_path, store):
    fifo = tmp_path / "trace.json.gz"
    os.mkfifo(fifo)
    drop(window, [fifo])
    assert window.tabs.currentWidget() is window.trace_tab
    qtbot.waitUntil(lambda: not window.trace_tab.busy, timeout=30_000)
    assert window.trace_tab.status.text() == f"{fifo} is a FIFO (named pipe)"
    assert store.list_runs() == []


def test_the_window_stays_live_while_a_trace_reads_and_cancel_stops_it(qtbot, window, tmp_path, store):
    path = tmp_path / "big.json"
    path.write_text("{}")
    release = threading.Event()
    started = threading.Event()

    def slow_read(trace, *, progress=None, cancelled=None, fingerprints=None, analysing=None):  # a 2 GB file, a gzip bomb: slow
        started.set()
        progress(1 << 30, 2 << 30)
        for _ in range(1000):  # a read on the GUI thread would block the window this long, then fail the test
            if cancelled() or release.wait(0.01):
                break
        raise TraceCancelled("cancelled")

    window.trace_tab.read = slow_read
    try:
        drop(window, [path])
        assert started.wait(30)
        ticks = []
        timer = QTimer(window)
        timer.timeout.connect(lambda: ticks.append(1))
        timer.start(10)
        qtbot.waitUntil(lambda: len(ticks) >= 5 and window.trace_tab.progress.value() == 500, timeout=30_000)
        assert window.trace_tab.busy and not window.trace_tab.cancel_button.isHidden()
        assert not window.trace_tab.progress.isHidden()
        # one at a time: the menu's actions wait, and a second drop's refusal stays up through the progress polls
        assert not window.open_trace_action.isEnabled() and not window.open_trace_folder_action.isEnabled()
        window.trace_tab._refusal_shown.setInterval(600_000)  # no wall-clock race on a loaded machine
        drop(window, [path])
        ticks.clear()
        qtbot.waitUntil(lambda: len(ticks) >= 4 * POLL_MS // 10, timeout=30_000)
        assert window.trace_tab.status.text() == f"Still opening {path}: Cancel it first."
        window.trace_tab.cancel_button.click()
        qtbot.waitUntil(lambda: not window.trace_tab.busy, timeout=30_000)
        timer.stop()
    finally:
        release.set()
    assert window.trace_tab.status.text() == f"Cancelled: {path} was not opened."
    assert window.trace_tab.progress.isHidden() and window.trace_tab.open_button.isEnabled()
    assert window.open_trace_action.isEnabled() and window.open_trace_folder_action.isEnabled()
    assert store.list_runs() == []


def test_a_file_that_is_not_a_trace_gets_one_line_and_nothing_kept(qtbot, window, tmp_path, store):
    bad = tmp_path / "notes.json"
    bad.write_text("not JSON at all")
    window.trace_tab.ask_file = lambda: str(bad)
    window.open_trace_action.trigger()
    qtbot.waitUntil(lambda: not window.trace_tab.busy, timeout=30_000)
    line = window.trace_tab.status.text()
    assert str(bad) in line and "\n" not in line
    assert store.list_runs() == []


def test_dropping_several_items_asks_for_one(window, tmp_path):
    drop(window, [tmp_path / "a.json", tmp_path / "b.json"])
    assert not window.trace_tab.busy
    assert window.trace_tab.status.text().startswith("2 items dropped: drop one trace file")


@needs_traces
def test_open_trace_shows_the_report_and_keeps_it_in_the_runs_tab(qtbot, window, store):
    trace = TRACES / "a100-nccl.json.gz"
    window.trace_tab.ask_file = lambda: str(trace)
    window.open_trace_action.trigger()
    assert window.tabs.currentWidget() is window.trace_tab
    qtbot.waitUntil(lambda: not window.trace_tab.busy, timeout=60_000)
    text = window.trace_tab.report.toPlainText()
    assert "Rank 0 · NVIDIA A100" in text and "3 steps (ProfilerStep#N)" in text
    for words in ("GPU time over the steps", "compute", "communication", "Idle time by cause",
                  "waiting for the host", "Top kernels", "ncclKernel_AllReduce", "Top host ops by self time", "Findings"):
        assert words in text
    # a finding says what to try; the page says how to see what it did, as the window compares traces
    assert "trace again, and open the new trace too and select both in the Runs tab" in text
    (record,) = store.list_runs()
    assert record.is_trace and record.trace.path == str(trace)
    assert window.trace_tab.status.text() == f"Kept in the history as #{record.id}: the Runs tab lists it, to compare and export"
    view = window.findChild(RunsView)
    qtbot.waitUntil(lambda: view.model.rowCount() == 1, timeout=10_000)
    assert view.model.record(0).is_trace

    window.trace_tab.open_path(trace)  # the same file again: the record kept, not a second one
    qtbot.waitUntil(lambda: not window.trace_tab.busy, timeout=60_000)
    assert window.trace_tab.status.text().startswith(f"Opened before: the Runs tab lists it as #{record.id}")
    assert len(store.list_runs()) == 1


def test_a_dropped_h100_trace_shows_its_copies_and_the_change_they_call_for(qtbot, window, store, monkeypatch):
    """A real H100 trace of a loop copying pinned float32 batches: the copies are listed by kind, and the finding
    names the change the trace calls for (fewer bytes), not the pinning it shows done. Read in a process of its own
    as a large trace is, ended once read: the reader's sorts never hold the window's GIL."""
    started = []
    real_start = rank_pool._start
    monkeypatch.setattr(rank_pool, "_start", lambda *args: started.append(real_start(*args)) or started[-1])
    monkeypatch.setattr(rank_pool, "IN_WORKER_MIN_BYTES", 0)  # as a trace of 16 MB of text or more is read
    drop(window, [H100 / "h100-copy-pinned.pt.trace.json.gz"])
    qtbot.waitUntil(lambda: not window.trace_tab.busy, timeout=60_000)
    assert len(started) == 1 and started[0].returncode == 0
    text = window.trace_tab.report.toPlainText()
    assert "Rank 0 · NVIDIA H100 80GB HBM3" in text
    assert "Copies and fills" in text and "Memcpy HtoD (Pinned -> Device)" in text
    assert "Copy-bound: copies and fills" in text and "uint8" in text and "pin_memory=True" not in text
    assert "copy-bound: Copy-bound" not in text  # the finding's name is said once
    # and each threshold once, in the finding's own words: "(threshold 15%)", not again after it
    assert text.count("(threshold 15%)") == 1 and "against a threshold" not in text


@needs_traces
def test_a_dropped_folder_of_ranks_shows_every_rank(qtbot, window, store):
    drop(window, [TRACES / "two-ranks"])
    qtbot.waitUntil(lambda: not window.trace_tab.busy, timeout=60_000)
    text = window.trace_tab.report.toPlainText()
    assert "Rank 0 · " in text and "Rank 1 · " in text
    (record,) = store.list_runs()
    assert [rank["rank"] for rank in record.trace.ranks] == [0, 1]


def test_closing_the_window_mid_read_cancels_the_read(qtbot, window, tmp_path, store):
    path = tmp_path / "big.json"
    path.write_text("{}")
    started, saw_cancel = threading.Event(), threading.Event()

    def slow_read(trace, *, progress=None, cancelled=None, fingerprints=None, analysing=None):
        started.set()
        for _ in range(2000):  # 20 s unless cancelled: longer than the wait below
            if cancelled():
                saw_cancel.set()
                break
            threading.Event().wait(0.01)
        raise TraceCancelled("cancelled")

    window.trace_tab.read = slow_read
    drop(window, [path])
    assert started.wait(30)
    window.close()
    assert wait_for_background_calls(10_000), "the read went on after the window closed"
    assert saw_cancel.is_set()
    assert store.list_runs() == []


def test_a_trace_without_a_gpu_timeline_says_why_in_the_tab(qtbot, window, store):
    """CUPTI's range profiler wrote counter ranges in place of the kernels: the tab says no GPU work was read and
    why, draws no GPU bars, and does not call the trace CPU-only."""
    drop(window, [HTA_TESTS / "no-gpu-timeline" / "a100-cupti-range-profiler.json.gz"])
    qtbot.waitUntil(lambda: not window.trace_tab.busy, timeout=60_000)
    text = window.trace_tab.report.toPlainText()
    assert "No GPU work read from this trace" in text and "profiler_metrics" in text
    assert "CPU-only" not in text and "GPU time over the steps" not in text

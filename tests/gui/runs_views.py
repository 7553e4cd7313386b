"""The Runs tab in tests: a view shown over a store, and waits for its reads and writes (off the GUI thread) to
land, for test_runs_view, test_runs_refresh and test_runs_writes."""

from __future__ import annotations

from workbench.gui.runs_table import COLUMN_TITLES
from workbench.gui.runs_view import RunsView
from workbench.history.store import HistoryStore


def shown_view(store: HistoryStore, qtbot, auto_refresh_ms: int = 0, wait: bool = True) -> RunsView:
    """A Runs tab over ``store``, shown (closed and deleted after the test); its first read landed, where ``wait``.
    ``auto_refresh_ms`` 0: the test polls by hand."""
    view = RunsView(store, auto_refresh_ms=auto_refresh_ms)
    qtbot.addWidget(view)
    view.resize(1280, 720)
    view.show()
    if wait:
        settled(view, qtbot)
    return view


def settled(view: RunsView, qtbot) -> None:
    """Wait for the view's reads of the history (off the GUI thread) to land."""
    qtbot.waitUntil(lambda: not view.is_reading(), timeout=10_000)


def written(view: RunsView, qtbot) -> None:
    """Wait for the view's writes (off the GUI thread) to land and the table to show them."""
    qtbot.waitUntil(lambda: not view.is_writing() and not view.is_reading(), timeout=10_000)


def column(view: RunsView, title: str) -> list[str]:
    """The column's cells as shown, top to bottom."""
    section = COLUMN_TITLES.index(title)
    return [view.proxy.index(row, section).data() for row in range(view.proxy.rowCount())]

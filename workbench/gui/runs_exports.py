"""What the Runs tab reads of the history off the GUI thread: the runs written since the table's revision, the
revision the poll compares, the two CSV exports, the same files `workbench export` writes (with and without
--steps), and the step curves of the runs it overlays.

A run of 100,000 logged steps takes seconds to read (7 s to export), and any read can hang on a network home: each
read here opens the history anew, for reading, in the thread that calls it (a SQLite connection belongs to the
thread that opened it), and closes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from workbench.gui.series import SERIES_KEYS
from workbench.history.export import export_runs_csv, export_steps_csv
from workbench.history.records import RunChanges, records_count_text
from workbench.history.store import HistoryStore

# The step curves the main window's plots overlay (PlotsPanel.add_overlay takes exactly these).
OVERLAY_KEYS: tuple[str, ...] = SERIES_KEYS
Overlay = tuple[int, str, dict[str, np.ndarray]]  # run id, label, {OVERLAY_KEYS: its values}


def opened_for_reading(history: Path, check_pages: bool = True) -> HistoryStore:
    """The history whose database file is ``history`` (a HistoryStore's ``path``), opened here for reading."""
    return HistoryStore.open_for_reading(Path(history).parent, check_pages)


def runs_changed_since(history: Path, revision: Optional[int]) -> RunChanges:
    """The runs written since ``revision`` (every run when None); runs whose process died are marked "interrupted"
    first, where the file takes the write (opening for reading does that). Raises HistoryError.

    The first read checks the pages a run's start writes, as opening does; later ones (every 2 s during a run)
    do not: that read the whole runs table each time, for one changed row."""
    with opened_for_reading(history, check_pages=revision is None) as store:
        return store.changes_since(revision)


def history_revision(history: Path) -> int:
    """The revision ``runs_changed_since`` would bring the table up to, read cheaply (an older file's: its upgraded
    copy's). Raises HistoryError."""
    return HistoryStore.read_revision(Path(history).parent)


def overlay_curves(history: Path, runs: Sequence[tuple[int, str]]) -> list[Overlay]:
    """Each (run id, label)'s step curves, read through a connection of this thread's own. Raises HistoryError."""
    with opened_for_reading(history) as store:
        overlays = []
        for run_id, label in runs:
            metrics = store.step_metrics(run_id)
            overlays.append((run_id, label, {key: metrics[key] for key in OVERLAY_KEYS}))
        return overlays


@dataclass(frozen=True)
class CsvExport:
    title: str  # of the save dialog
    default_name: str
    write: Callable[[HistoryStore, str, Optional[Sequence[int]]], str]  # → what was written, in words

    def run(self, history: Path, path: str, run_ids: Optional[Sequence[int]]) -> str:
        """Write the runs (every run when ``run_ids`` is None) of the history at ``history``, read through a
        connection of this thread's own; the message to show. Raises HistoryError."""
        with opened_for_reading(history) as store:
            return f"Wrote {self.write(store, path, run_ids)} to {path}"


def _runs(store: HistoryStore, path: str, run_ids: Optional[Sequence[int]]) -> str:
    return records_count_text(export_runs_csv(store, path, run_ids))  # "1 run and 7 traces"


def _steps(store: HistoryStore, path: str, run_ids: Optional[Sequence[int]]) -> str:
    rows = export_steps_csv(store, path, run_ids)
    return f"{rows} step metric row{'s' if rows != 1 else ''}"


RUNS_CSV = CsvExport("Export runs to CSV", "workbench-runs.csv", _runs)
STEPS_CSV = CsvExport("Export step metrics to CSV", "workbench-steps.csv", _steps)

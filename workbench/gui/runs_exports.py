"""The Runs tab's two CSV exports, the same files `workbench export` writes (with and without --steps)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from workbench.history.export import export_runs_csv, export_steps_csv
from workbench.history.records import records_count_text
from workbench.history.store import HistoryStore


@dataclass(frozen=True)
class CsvExport:
    title: str  # of the save dialog
    default_name: str
    write: Callable[[HistoryStore, str, Optional[Sequence[int]]], str]  # → what was written, in words

    def run(self, store: HistoryStore, path: str, run_ids: Optional[Sequence[int]]) -> str:
        """Write the runs (every run when ``run_ids`` is None); the message to show. Raises HistoryError."""
        return f"Wrote {self.write(store, path, run_ids)} to {path}"


def _runs(store: HistoryStore, path: str, run_ids: Optional[Sequence[int]]) -> str:
    return records_count_text(export_runs_csv(store, path, run_ids))  # "1 run and 7 traces"


def _steps(store: HistoryStore, path: str, run_ids: Optional[Sequence[int]]) -> str:
    rows = export_steps_csv(store, path, run_ids)
    return f"{rows} step metric row{'s' if rows != 1 else ''}"


RUNS_CSV = CsvExport("Export runs to CSV", "workbench-runs.csv", _runs)
STEPS_CSV = CsvExport("Export step metrics to CSV", "workbench-steps.csv", _steps)

"""The Runs tab's two CSV exports, the same files `workbench export` writes (with and without --steps)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from workbench.history.export import export_runs_csv, export_steps_csv
from workbench.history.store import HistoryStore


@dataclass(frozen=True)
class CsvExport:
    title: str  # of the save dialog
    default_name: str
    write: Callable[[HistoryStore, str, Optional[Sequence[int]]], int]  # → rows written
    noun: str  # what one row is, for the message

    def run(self, store: HistoryStore, path: str, run_ids: Optional[Sequence[int]]) -> str:
        """Write the runs (every run when ``run_ids`` is None); the message to show. Raises HistoryError."""
        count = self.write(store, path, run_ids)
        return f"Wrote {count} {self.noun}{'s' if count != 1 else ''} to {path}"


RUNS_CSV = CsvExport("Export runs to CSV", "workbench-runs.csv", export_runs_csv, "run")
STEPS_CSV = CsvExport("Export step metrics to CSV", "workbench-steps.csv", export_steps_csv, "step metric row")

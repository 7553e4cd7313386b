"""The writes a RunRecorder makes to one run's row and metrics: its start, its progress (with, at last, its end),
its removal when it was refused before training, and a bare end where the history cannot take more."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from workbench.history.database import HistoryDatabase
from workbench.history.errors import HistoryError
from workbench.history.records import rank_peaks_json
from workbench.history.schema import (
    DEVICE_COLUMNS,
    EPOCH_COLUMNS,
    PROFILE_SAMPLE_COLUMNS,
    PROFILE_SAMPLE_LISTS,
    STEP_COLUMNS,
    SUMMARY_COLUMNS,
)

if TYPE_CHECKING:
    from workbench.engine.events import RunStarted
    from workbench.engine.run_summary import RunSummary

# How a run ended, as its row keeps it: (status, reason, failure kind, traceback).
RunEnd = tuple[str, Optional[str], Optional[str], Optional[str]]


class RunWrites:
    """One run's writes, each one transaction on the history's connection."""

    def __init__(self, database: HistoryDatabase, run_id: int):
        self._database = database
        self.run_id = run_id

    @property
    def home(self) -> Path:
        """The folder of the history (failures.log goes beside it)."""
        return self._database.path.parent

    def started(self, started: RunStarted) -> None:
        device = started.device
        run_info = {
            "dataset_name": started.dataset_name,
            "train_size": started.train_size,
            "test_size": started.test_size,
            "num_classes": started.num_classes,
            "steps_per_epoch": started.steps_per_epoch,
            "total_steps": started.total_steps,
            "parameter_count": started.parameter_count,
            "engine_started_at": started.started_at,
            "notes": list(started.notes),
        }
        with self._database.transaction() as conn:
            conn.execute(
                "UPDATE runs SET device_json = ?, run_info_json = ?, device_type = ?, device_name = ?, "
                "torch_version = ?, heartbeat_at = ? WHERE id = ?",
                (
                    json.dumps(asdict(device), sort_keys=True),
                    json.dumps(run_info, sort_keys=True),
                    device.type,
                    device.name,
                    device.torch_version,
                    time.time(),
                    self.run_id,
                ),
            )

    def progress(
        self,
        step_rows: Sequence[tuple],
        epoch_rows: Sequence[tuple],
        summary: RunSummary,
        end: Optional[RunEnd] = None,
        sample_rows: Sequence[tuple] = (),
    ) -> None:
        """Buffered metrics, the summary so far, a heartbeat, and for the last write the run's end, at once."""
        now = time.time()
        run_id = self.run_id
        with self._database.transaction() as conn:
            if sample_rows:
                names = ("first_step", *PROFILE_SAMPLE_COLUMNS, *(name + "_json" for name in PROFILE_SAMPLE_LISTS))
                conn.executemany(
                    f"INSERT OR REPLACE INTO profile_samples (run_id, {', '.join(names)}) "
                    f"VALUES ({', '.join('?' * (len(names) + 1))})",
                    [(run_id, *row) for row in sample_rows],
                )
            if step_rows:
                conn.executemany(
                    f"INSERT OR REPLACE INTO step_metrics (run_id, step, {', '.join(STEP_COLUMNS)}) "
                    f"VALUES ({', '.join('?' * (len(STEP_COLUMNS) + 2))})",
                    [(run_id, *row) for row in step_rows],
                )
            if epoch_rows:
                conn.executemany(
                    f"INSERT OR REPLACE INTO epoch_metrics (run_id, epoch, {', '.join(EPOCH_COLUMNS)}) "
                    f"VALUES ({', '.join('?' * (len(EPOCH_COLUMNS) + 2))})",
                    [(run_id, *row) for row in epoch_rows],
                )
            # Device facts come from RunStarted; a summary built without the events must not erase them.
            assignments = ", ".join(f"{name} = COALESCE(?, {name})" if name in DEVICE_COLUMNS else f"{name} = ?"
                                    for name in SUMMARY_COLUMNS)
            values = [getattr(summary, name) for name in SUMMARY_COLUMNS]
            values.append(json.dumps([finding.to_dict() for finding in summary.findings]) if summary.findings else None)
            values.append(rank_peaks_json(summary))
            sql = f"UPDATE runs SET {assignments}, findings_json = ?, rank_peaks_json = ?, heartbeat_at = ?"
            values.append(now)
            if end is not None:
                sql += ", status = ?, reason = ?, failure_kind = ?, traceback = ?, finished_at = ?"
                values += [*end, now]
            conn.execute(sql + " WHERE id = ?", (*values, run_id))

    def bare_end(self, status: str, reason: str, kind: str) -> None:
        """The run's end alone (no metrics, no summary), after the log is checkpointed and cut: the write most
        likely to fit where a full write did not (a full disk), so the record names why it ended."""
        try:
            self._database.checkpoint()  # frees the log's room; may fail itself where the database must grow
        except HistoryError:
            pass  # the update below may still fit
        with self._database.transaction() as conn:
            conn.execute(
                "UPDATE runs SET status = ?, reason = ?, failure_kind = ?, finished_at = ?, heartbeat_at = ? "
                "WHERE id = ?", (status, reason, kind, time.time(), time.time(), self.run_id),
            )

    def discard_unstarted(self) -> None:
        """Remove a run that never started training (no metrics exist yet)."""
        with self._database.transaction() as conn:
            deleted = conn.execute("DELETE FROM runs WHERE id = ? AND device_json IS NULL", (self.run_id,)).rowcount
            if deleted:
                # Its id is given back where no run came after it: five refused specs had left ids 9–13 missing.
                # (AUTOINCREMENT never reuses an id; only this never-started row's is taken back, so a run the user
                # deleted keeps its id unused.)
                conn.execute("UPDATE sqlite_sequence SET seq = seq - 1 WHERE name = 'runs' AND seq = ?",
                             (self.run_id,))

    def checkpoint(self) -> None:
        """Leave the log empty at the run's end: the history is one file again between runs."""
        self._database.checkpoint()

"""Measured changes: what one setting's change did to images/sec against a baseline, on one device.

One row of the ``measured_changes`` table (``comparisons`` until schema 6) per change measured by interleaved
trials: by ``workbench verify`` and the GPU time tab's Verify, each one-setting change the search for faster
settings compared, and each two values of a sweep with repeats (experiments/measured.py). A row holds the device,
the baseline settings, the change (field, value), the speedup with its interval and verdict, and the runs measured.
The findings read them back (``lookup``) to say what a remedy did on this device before. Functions of an
open connection; the store calls them inside its own transactions. No Qt.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Optional

from workbench.config import SPEED_SETTINGS, RunConfig
from workbench.engine.finding_measurements import MeasuredChangeLookup, with_measured_changes
from workbench.engine.run_summary import Finding, MeasuredChange, Verdict
from workbench.history.records import config_from_json


def speed_settings(config: RunConfig) -> dict[str, Any]:
    """The settings a measured change must share with a run to speak for it: those that decide how fast a step runs
    (declared on each field: setting.SPEED). Two baselines that differ only in a run's length, its numbers (lr,
    seed) or its bookkeeping are the same baseline."""
    return {name: getattr(config, name) for name in SPEED_SETTINGS}


def value_key(value: Any) -> str:
    """A setting's value as stored and matched: JSON, so true and 1 stay different."""
    return json.dumps(value, sort_keys=True)


@dataclass(frozen=True, kw_only=True)
class MeasuredChangeRecord:
    """One change measured against a baseline on one device (a row of ``measured_changes``)."""

    sequence_id: Optional[int]  # the sequence that measured it (sequences.id)
    device_type: str  # "cuda", "cpu"
    device_name: str  # DeviceInfo.name: "NVIDIA H100 80GB HBM3"
    baseline: RunConfig  # the settings changed from (a run's own, not a trial's shortened copy)
    field: str
    value: Any
    speedup: float  # median(changed) ÷ median(baseline) images/sec
    speedup_low: Optional[float]
    speedup_high: Optional[float]
    verdict: Verdict
    baseline_run_ids: tuple[Optional[int], ...]
    changed_run_ids: tuple[Optional[int], ...]
    created_at: Optional[float] = None  # unix seconds; set when stored
    id: Optional[int] = None

    @property
    def measured_change(self) -> MeasuredChange:
        return MeasuredChange(speedup=self.speedup, low=self.speedup_low, high=self.speedup_high,
                           verdict=self.verdict,
                           baseline_trials=len(self.baseline_run_ids), changed_trials=len(self.changed_run_ids))


def add(conn: sqlite3.Connection, change: MeasuredChangeRecord) -> int:
    """Store ``change`` (inside the caller's transaction); its id."""
    cursor = conn.execute(
        "INSERT INTO measured_changes (sequence_id, device_type, device_name, baseline_json, field, value_json, speedup, "
        "speedup_low, speedup_high, verdict, baseline_run_ids_json, changed_run_ids_json, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (change.sequence_id, change.device_type, change.device_name, json.dumps(change.baseline.to_dict(), sort_keys=True),
         change.field, value_key(change.value), change.speedup, change.speedup_low, change.speedup_high,
         change.verdict, json.dumps(list(change.baseline_run_ids)), json.dumps(list(change.changed_run_ids)),
         change.created_at if change.created_at is not None else time.time()),
    )
    assert cursor.lastrowid is not None  # set by every INSERT (None only before a cursor's first one)
    return cursor.lastrowid


def measured_on(conn: sqlite3.Connection, config: RunConfig, device_type: str,
                device_name: str) -> list[MeasuredChangeRecord]:
    """Every change measured on this device from a baseline with ``config``'s speed settings, oldest first."""
    wanted = speed_settings(config)
    rows = conn.execute("SELECT * FROM measured_changes WHERE device_type = ? AND device_name = ? ORDER BY id",
                        (device_type, device_name)).fetchall()
    changes = []
    for row in rows:
        baseline, _ = config_from_json(row["baseline_json"])
        if speed_settings(baseline) == wanted:
            changes.append(_from_row(row, baseline))
    return changes


def lookup(changes: list[MeasuredChangeRecord]) -> MeasuredChangeLookup:
    """What each (field, value) measured, from ``measured_on``'s changes: the newest measurement of each
    (measurements from different sequences are not pooled: each was interleaved only within its own)."""
    newest = {(change.field, value_key(change.value)): change.measured_change for change in changes}
    return lambda field, value: newest.get((field, value_key(value)))


def findings_as_shown(source: Any, findings: tuple[Finding, ...], config: RunConfig, device_type: Optional[str],
                      device_name: Optional[str]) -> tuple[Finding, ...]:
    """A run's findings as every view shows them: with what their changes measured on the run's device from its
    settings, ranked by it (findings.with_measured_changes). ``source`` has ``measured_changes`` (a HistoryStore, or
    a recorder factory); reads only when there is a finding to measure and a device to match."""
    if not device_type or not device_name or not any(finding.field is not None for finding in findings):
        return tuple(findings)
    return with_measured_changes(findings, lookup(source.measured_changes(config, device_type, device_name)))


def _from_row(row: sqlite3.Row, baseline: RunConfig) -> MeasuredChangeRecord:
    return MeasuredChangeRecord(
        id=row["id"], sequence_id=row["sequence_id"], device_type=row["device_type"], device_name=row["device_name"],
        baseline=baseline, field=row["field"], value=json.loads(row["value_json"]), speedup=row["speedup"],
        speedup_low=row["speedup_low"], speedup_high=row["speedup_high"], verdict=row["verdict"],
        baseline_run_ids=tuple(json.loads(row["baseline_run_ids_json"])),
        changed_run_ids=tuple(json.loads(row["changed_run_ids_json"])), created_at=row["created_at"],
    )

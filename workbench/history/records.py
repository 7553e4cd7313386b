"""A run as the history gives it back (RunRecord), and how a row of the runs table becomes one.

Reading is tolerant of the history's past: settings a newer or older workbench stored are dropped
and named (``load_config``), JSON columns that cannot be read give empty values. No Qt here.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from workbench.config import FIELD_TYPES, ConfigError, RunConfig
from workbench.history.schema import RANK_PEAK_FIGURES, SUMMARY_COLUMNS

if TYPE_CHECKING:
    from workbench.engine.events import Finding, RunSummary


@dataclass(frozen=True)
class RunRecord:
    id: int
    name: str
    note: str
    status: str  # running, finished, stopped, failed, interrupted
    reason: Optional[str]
    failure_kind: Optional[str]
    source: str  # cli, gui
    started_at: float  # unix seconds
    finished_at: Optional[float]
    config: RunConfig
    device: dict[str, Any] = field(default_factory=dict)  # DeviceInfo fields; empty until the run started
    run_info: dict[str, Any] = field(default_factory=dict)  # dataset_name, train_size, total_steps, notes, ...
    test_accuracy: Optional[float] = None
    final_loss: Optional[float] = None
    images_per_sec: Optional[float] = None
    images_per_sec_median: Optional[float] = None
    data_wait_fraction: Optional[float] = None
    device_span_fraction: Optional[float] = None
    peak_allocated_bytes: Optional[int] = None
    peak_reserved_bytes: Optional[int] = None
    peak_nvml_used_bytes: Optional[int] = None  # device-wide
    peak_nvml_process_used_bytes: Optional[int] = None  # this process's own (None where the driver hides it)
    peak_process_rss_bytes: Optional[int] = None  # the training process's resident memory; None before schema 5
    skipped_optimizer_steps: Optional[int] = None  # fp16 GradScaler skips; None for runs before schema 4
    wall_seconds: Optional[float] = None
    steps: int = 0
    samples_seen: int = 0
    epochs_completed: int = 0
    world_size: int = 1  # processes that trained together; the peaks above are then the highest rank's
    # Each rank's peaks, by rank (() for a one-process run), as in RunSummary.
    rank_peak_allocated_bytes: tuple[Optional[int], ...] = ()
    rank_peak_reserved_bytes: tuple[Optional[int], ...] = ()
    rank_peak_nvml_used_bytes: tuple[Optional[int], ...] = ()
    device_type: Optional[str] = None
    device_name: Optional[str] = None
    torch_version: Optional[str] = None
    # schema 4: the profiler-sampled timeline, the compute ceiling, the findings the run ended with
    profile_samples: int = 0
    kernel_busy_fraction: Optional[float] = None
    memcpy_fraction: Optional[float] = None
    memset_fraction: Optional[float] = None
    idle_waiting_for_data_fraction: Optional[float] = None
    idle_waiting_for_host_fraction: Optional[float] = None
    idle_other_fraction: Optional[float] = None
    kernels_per_step: Optional[float] = None
    launches_per_step: Optional[float] = None
    median_kernel_seconds: Optional[float] = None
    gpu_timeline_unavailable_reason: Optional[str] = None
    ceiling_images_per_sec: Optional[float] = None
    pipeline_efficiency: Optional[float] = None
    findings: tuple[Finding, ...] = ()  # ranked; empty for runs recorded before schema 4
    heartbeat_at: Optional[float] = None
    pid: Optional[int] = None
    hostname: Optional[str] = None
    process_identity: Optional[str] = None
    app_version: Optional[str] = None
    # Stored settings this version does not know (or cannot read); the config uses defaults for them.
    config_dropped: tuple[str, ...] = ()
    # The sequence of runs (sweep, tune, max-batch) this run belongs to; None for a lone run.
    sweep_id: Optional[int] = None
    sweep_name: Optional[str] = None
    traceback: Optional[str] = None  # of a failure nobody expected (kinds error, data_loader, out_of_memory)

    @property
    def duration_seconds(self) -> float:
        """Wall time from start to end (to now, while running)."""
        end = self.finished_at if self.finished_at is not None else time.time()
        return max(0.0, end - self.started_at)

    @property
    def verdict(self) -> Optional[str]:
        """The first finding's headline: what bounded the run, in one sentence (None before schema 4)."""
        return self.findings[0].headline if self.findings else None

    @property
    def label(self) -> str:
        return f"#{self.id} {self.name}"


@dataclass(frozen=True)
class RunChanges:
    """What a view must redraw since it last asked (``HistoryStore.changes_since``)."""

    revision: int  # the history's revision these changes bring a view up to: pass it to the next call
    changed: tuple[RunRecord, ...]  # runs added or written since the revision asked for, newest first
    run_ids: frozenset[int]  # every run stored now: a run a view shows that is not here was deleted


def rank_peaks_json(summary: RunSummary) -> Optional[str]:
    """The runs table's rank_peaks_json: each rank's peaks by figure; None for a one-process run."""
    peaks = {name: list(getattr(summary, "rank_" + name)) for name in RANK_PEAK_FIGURES}
    return json.dumps(peaks) if any(peaks.values()) else None


def _rank_peaks(text: Optional[str]) -> dict[str, tuple[Optional[int], ...]]:
    stored = _json_object(text)
    peaks = {}
    for name in RANK_PEAK_FIGURES:
        values = stored.get(name)
        if isinstance(values, list):
            peaks["rank_" + name] = tuple(value if isinstance(value, int) else None for value in values)
    return peaks


def record_from_row(row: sqlite3.Row) -> RunRecord:
    """A RunRecord from a row of ``SELECT runs.*, sweeps.name AS sweep_name`` (store.py's _RUNS)."""
    config, dropped = load_config(row["config_json"])
    summary = {name: row[name] for name in SUMMARY_COLUMNS}
    summary.update(_rank_peaks(row["rank_peaks_json"]))
    return RunRecord(
        id=row["id"],
        name=row["name"],
        note=row["note"],
        status=row["status"],
        reason=row["reason"],
        failure_kind=row["failure_kind"],
        source=row["source"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        config=config,
        device=_json_object(row["device_json"]),
        run_info=_json_object(row["run_info_json"]),
        device_type=row["device_type"],
        device_name=row["device_name"],
        torch_version=row["torch_version"],
        heartbeat_at=row["heartbeat_at"],
        pid=row["pid"],
        hostname=row["hostname"],
        process_identity=row["process_identity"],
        app_version=row["app_version"],
        config_dropped=dropped,
        findings=_findings(row["findings_json"]),
        sweep_id=row["sweep_id"],
        sweep_name=row["sweep_name"],
        traceback=row["traceback"],
        **summary,
    )


def _findings(text: Optional[str]) -> tuple[Finding, ...]:
    from workbench.engine.events import Finding

    try:
        items = json.loads(text) if text else []
    except ValueError:
        return ()
    return tuple(Finding.from_dict(item) for item in items if isinstance(item, dict))


def load_config(text: Optional[str]) -> tuple[RunConfig, tuple[str, ...]]:
    """A stored RunConfig, tolerant of history: settings this version lacks are dropped (and named),
    settings it added take their defaults."""
    data = _json_object(text)
    dropped = [name for name in data if name not in FIELD_TYPES]
    known = {name: value for name, value in data.items() if name in FIELD_TYPES}
    try:
        return RunConfig.from_dict(known), tuple(dropped)
    except ConfigError:
        usable = {}
        for name, value in known.items():  # a setting whose type changed: keep the rest of the record
            try:
                RunConfig.from_dict({name: value})
            except ConfigError:
                dropped.append(name)
            else:
                usable[name] = value
        return RunConfig.from_dict(usable), tuple(dropped)


def _json_object(text: Optional[str]) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}

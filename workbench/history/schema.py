"""The history database's tables, and the migrations that bring an older file up to date.

``PRAGMA user_version`` holds the schema version. ``MIGRATIONS[n]`` takes a database from version
n to n + 1. Each migration is frozen SQL: once a version has shipped, its statements never change,
because databases in the wild were made by exactly those statements. A new column is one more
migration (``ALTER TABLE … ADD COLUMN``) appended to ``_VERSIONS``; a run's summary figures are the fields of
RunSummary, so a new figure needs only its migration; ``tests/history/test_history_schema.py`` checks
that a fresh database and every upgrade path end with the same tables, that they match the lists, and
that every shipped version still leaves the schema it shipped with (a digest per version).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import fields
from typing import Callable, Union

from workbench.engine.run_summary import RunSummary

# -- what the newest schema holds (the store reads and writes these names) -------------------------

# RunSummary's fields (engine/events.py, the one list of a run's figures) that are not kept in a `runs` column of
# their own name, and where they are kept instead. Every other field is a column of that name: SUMMARY_COLUMNS.
SUMMARY_STORED_ELSEWHERE: dict[str, str] = {
    "status": "runs.status, the record's own (it can also be running or interrupted)",
    "reason": "runs.reason",
    "failure_kind": "runs.failure_kind",
    "top_ops": "profile_samples.top_ops_json, per sample",
    "top_kernels": "profile_samples.top_kernels_json, per sample",
    "trace_paths": "profile_samples.trace_path, per sample",
    "findings": "runs.findings_json, a JSON list of Finding dicts",
    "rank_peak_allocated_bytes": "runs.rank_peaks_json",
    "rank_peak_reserved_bytes": "runs.rank_peaks_json",
    "rank_peak_nvml_device_used_bytes": "runs.rank_peaks_json",
}
# Summary figures stored as columns of `runs`, named as in RunSummary (a new RunSummary field is a new column: add
# it by a migration below; tests/history/test_history_schema.py fails until there is one).
SUMMARY_COLUMNS: tuple[str, ...] = tuple(
    item.name for item in fields(RunSummary) if item.name not in SUMMARY_STORED_ELSEWHERE
)
# Of those, the ones a run's RunStarted knows: a summary built without the events must not erase them.
DEVICE_COLUMNS: tuple[str, ...] = ("device_type", "device_name", "torch_version")

# Each rank's peak memory in a multi-process run, stored as JSON in runs.rank_peaks_json (schema 4):
# {"peak_allocated_bytes": [rank 0, rank 1, …], "peak_reserved_bytes": […], "peak_nvml_device_used_bytes": […]}
# (peak_nvml_used_bytes until schema 6).
RANK_PEAK_FIGURES: tuple[str, ...] = ("peak_allocated_bytes", "peak_reserved_bytes", "peak_nvml_device_used_bytes")

# One row per StepStats window; the long step CSV names its metrics after these columns.
STEP_COLUMNS: tuple[str, ...] = (
    "epoch",
    "samples_seen",
    "elapsed_seconds",
    "loss",
    "lr",
    "images_per_sec",
    "data_wait_fraction",
    "data_wait_seconds",
    "device_span_seconds",  # renamed from compute_seconds in schema 3
    "window_seconds",
    "torch_allocated",
    "torch_reserved",
    "torch_peak_allocated",
    "torch_peak_reserved",
    "nvml_device_used",  # renamed from nvml_used in schema 6
    "gpu_utilization_percent",
    "process_rss",  # schema 4
    "nvml_process_used",  # schema 4
    "skipped_optimizer_steps",  # schema 4: in the window
    "loss_scale",  # schema 4: fp16's GradScaler scale at the log point
)

# One row per EpochStats.
EPOCH_COLUMNS: tuple[str, ...] = (
    "step",
    "train_loss",
    "train_accuracy",
    "test_loss",
    "test_accuracy",
    "images_per_sec",
    "data_wait_fraction",
    "train_seconds",
    "eval_seconds",
    "torch_peak_allocated",
    "torch_peak_reserved",
    "nvml_device_used",  # renamed from nvml_used in schema 6
)

# One row per ProfileSample (schema 4), keyed by (run_id, first_step); its top kernels and ops are JSON
# lists of {name, seconds, count} in the two *_json columns after these.
PROFILE_SAMPLE_COLUMNS: tuple[str, ...] = (
    "last_step",
    "device_type",  # renamed from device in schema 6
    "steps",
    "window_seconds",
    "images_per_sec",
    "host_data_wait_seconds",
    "ops_steps",
    "kernel_busy_seconds",
    "memcpy_seconds",
    "memset_seconds",
    "idle_waiting_for_data_seconds",
    "idle_waiting_for_host_seconds",
    "idle_other_seconds",
    "kernels",
    "launches",
    "median_kernel_seconds",
    "gpu_unavailable_reason",
    "trace_path",
    "ops_trace_path",
    "trace_unavailable_reason",
    "overhead_seconds",
    "timeline_host_ops_recorded",
    "unprofiled_step_seconds",
    "unprofiled_data_wait_seconds",
    "unprofiled_windows",  # schema 5
    "communication_seconds",  # NCCL time apart from compute (issue 31 item 7)
)
PROFILE_SAMPLE_LISTS: tuple[str, ...] = ("top_kernels", "top_ops")

# -- the frozen history of the schema: never edit a shipped version, append a new one ----------------

_V1 = (
    """
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL,
        note TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL,            -- running, finished, stopped, failed, interrupted
        reason TEXT,
        failure_kind TEXT,
        source TEXT NOT NULL,            -- cli, gui
        started_at REAL NOT NULL,        -- unix seconds
        finished_at REAL,
        heartbeat_at REAL,               -- last write by the owning process
        pid INTEGER,
        hostname TEXT,
        process_identity TEXT,           -- guards against pid reuse where the OS tells us
        app_version TEXT,
        config_json TEXT NOT NULL,       -- RunConfig.to_dict()
        device_json TEXT,                -- DeviceInfo fields, from RunStarted
        run_info_json TEXT,              -- dataset, sizes, steps, parameter count, notes
        test_accuracy REAL,
        final_loss REAL,
        images_per_sec_mean REAL,
        images_per_sec_median REAL,
        data_wait_fraction REAL,
        peak_allocated_bytes INTEGER,
        peak_reserved_bytes INTEGER,
        peak_nvml_used_bytes INTEGER,
        wall_seconds REAL,
        steps INTEGER NOT NULL DEFAULT 0,
        samples_seen INTEGER NOT NULL DEFAULT 0,
        epochs_completed INTEGER NOT NULL DEFAULT 0,
        device_type TEXT,
        device_name TEXT,
        torch_version TEXT
    )
    """,
    "CREATE INDEX runs_by_status ON runs(status)",
    """
    CREATE TABLE step_metrics (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        step INTEGER NOT NULL,
        epoch INTEGER,
        samples_seen INTEGER,
        elapsed_seconds REAL,
        loss REAL,
        lr REAL,
        images_per_sec REAL,
        data_wait_fraction REAL,
        data_wait_seconds REAL,
        compute_seconds REAL,
        window_seconds REAL,
        torch_allocated INTEGER,
        torch_reserved INTEGER,
        torch_peak_allocated INTEGER,
        torch_peak_reserved INTEGER,
        nvml_used INTEGER,
        gpu_utilization_percent REAL,
        PRIMARY KEY (run_id, step)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE epoch_metrics (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        epoch INTEGER NOT NULL,
        step INTEGER,
        train_loss REAL,
        train_accuracy REAL,
        test_loss REAL,
        test_accuracy REAL,
        images_per_sec REAL,
        data_wait_fraction REAL,
        train_seconds REAL,
        eval_seconds REAL,
        torch_peak_allocated INTEGER,
        torch_peak_reserved INTEGER,
        nvml_used INTEGER,
        PRIMARY KEY (run_id, epoch)
    ) WITHOUT ROWID
    """,
)

# Schema 2: the device-busy fraction, which with data wait gives a run's bottleneck verdict.
_V2 = ("ALTER TABLE runs ADD COLUMN device_busy_fraction REAL",)

# Schema 3: names that say what the figures are. A CUDA-event pair spans idle gaps too, so the
# "device busy" figure is an event span; the steady-state throughput (samples ÷ seconds after the
# warm-up window) replaces the mean of per-window rates, which stays in old rows but is not read.
_V3 = (
    "ALTER TABLE runs RENAME COLUMN device_busy_fraction TO device_span_fraction",
    "ALTER TABLE step_metrics RENAME COLUMN compute_seconds TO device_span_seconds",
    "ALTER TABLE runs ADD COLUMN images_per_sec REAL",
)

# Schema 4 (shipped).
# The profiler-sampled timeline breakdown per run and per sample, the compute ceiling and pipeline
# efficiency, and the ranked findings (a JSON list of Finding dicts) that replace the verdict.
_V4 = (
    "ALTER TABLE runs ADD COLUMN profile_samples INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN kernel_busy_fraction REAL",
    "ALTER TABLE runs ADD COLUMN memcpy_fraction REAL",
    "ALTER TABLE runs ADD COLUMN memset_fraction REAL",
    "ALTER TABLE runs ADD COLUMN idle_waiting_for_data_fraction REAL",
    "ALTER TABLE runs ADD COLUMN idle_waiting_for_host_fraction REAL",
    "ALTER TABLE runs ADD COLUMN idle_other_fraction REAL",
    "ALTER TABLE runs ADD COLUMN kernels_per_step REAL",
    "ALTER TABLE runs ADD COLUMN launches_per_step REAL",
    "ALTER TABLE runs ADD COLUMN median_kernel_seconds REAL",
    "ALTER TABLE runs ADD COLUMN gpu_timeline_unavailable_reason TEXT",
    "ALTER TABLE runs ADD COLUMN ceiling_images_per_sec REAL",
    "ALTER TABLE runs ADD COLUMN pipeline_efficiency REAL",
    "ALTER TABLE runs ADD COLUMN findings_json TEXT",
    """
    CREATE TABLE profile_samples (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        first_step INTEGER NOT NULL,
        last_step INTEGER,
        device TEXT,
        steps INTEGER,
        window_seconds REAL,
        images_per_sec REAL,
        host_data_wait_seconds REAL,
        ops_steps INTEGER,
        kernel_busy_seconds REAL,
        memcpy_seconds REAL,
        memset_seconds REAL,
        idle_waiting_for_data_seconds REAL,
        idle_waiting_for_host_seconds REAL,
        idle_other_seconds REAL,
        kernels INTEGER,
        launches INTEGER,
        median_kernel_seconds REAL,
        gpu_unavailable_reason TEXT,
        trace_path TEXT,
        ops_trace_path TEXT,
        trace_unavailable_reason TEXT,
        overhead_seconds REAL,
        timeline_host_ops_recorded INTEGER,
        unprofiled_step_seconds REAL,
        unprofiled_data_wait_seconds REAL,
        top_kernels_json TEXT,
        top_ops_json TEXT,
        PRIMARY KEY (run_id, first_step)
    ) WITHOUT ROWID
    """,
    # Sequences of runs (a sweep, a search for faster settings, a max-batch search): each member is an
    # ordinary run that points at its sequence, so it compares and exports like any run.
    """
    CREATE TABLE sweeps (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,              -- sweep, tune, max_batch
        name TEXT NOT NULL,
        created_at REAL NOT NULL,        -- unix seconds
        plan_json TEXT                   -- what was asked: the swept settings and values, the base settings
    )
    """,
    "ALTER TABLE runs ADD COLUMN sweep_id INTEGER REFERENCES sweeps(id) ON DELETE SET NULL",
    "CREATE INDEX runs_by_sweep ON runs(sweep_id)",
    # This process's resident memory at each log point: the memory plot's figure on a CPU.
    "ALTER TABLE step_metrics ADD COLUMN process_rss INTEGER",
    # Data-parallel runs: how many processes trained together, and each one's peak memory.
    "ALTER TABLE runs ADD COLUMN world_size INTEGER NOT NULL DEFAULT 1",
    "ALTER TABLE runs ADD COLUMN rank_peaks_json TEXT",
    # Issue 9: this process's own NVML memory beside the device-wide figure; fp16 skipped steps and the
    # loss scale; the traceback of a failed run.
    "ALTER TABLE runs ADD COLUMN peak_nvml_process_used_bytes INTEGER",
    "ALTER TABLE runs ADD COLUMN skipped_optimizer_steps INTEGER",
    "ALTER TABLE runs ADD COLUMN traceback TEXT",
    "ALTER TABLE step_metrics ADD COLUMN nvml_process_used INTEGER",
    "ALTER TABLE step_metrics ADD COLUMN skipped_optimizer_steps INTEGER",
    "ALTER TABLE step_metrics ADD COLUMN loss_scale REAL",
    # Issue 9: views refresh only what changed. Every write to a run (any process, any code path: the
    # triggers see them all) stamps the row with the next value of one counter that never goes back, not
    # even when the newest run is deleted, so "the runs written since revision N" is one indexed query.
    "CREATE TABLE run_revision (value INTEGER NOT NULL)",
    "INSERT INTO run_revision (value) VALUES (0)",
    "ALTER TABLE runs ADD COLUMN revision INTEGER NOT NULL DEFAULT 0",  # 0: not written since the upgrade
    "CREATE INDEX runs_by_revision ON runs(revision)",
    """
    CREATE TRIGGER runs_revision_on_insert AFTER INSERT ON runs BEGIN
        UPDATE run_revision SET value = value + 1;
        UPDATE runs SET revision = (SELECT value FROM run_revision) WHERE id = NEW.id;
    END
    """,
    # WHEN: the stamp itself is an update of the row; it must not stamp again.
    """
    CREATE TRIGGER runs_revision_on_update AFTER UPDATE ON runs WHEN NEW.revision = OLD.revision BEGIN
        UPDATE run_revision SET value = value + 1;
        UPDATE runs SET revision = (SELECT value FROM run_revision) WHERE id = NEW.id;
    END
    """,
    "CREATE TRIGGER runs_revision_on_delete AFTER DELETE ON runs BEGIN UPDATE run_revision SET value = value + 1; END",
)

def _compile_switches_to_modes(conn: sqlite3.Connection) -> None:
    """Settings stored before compile had modes held compile as true/false: true ran torch.compile's default
    mode, false no compile. Rewrite them as the modes they were, in the runs and in the sequences' plans."""
    for table, column, path in (("runs", "config_json", ()), ("sweeps", "plan_json", ("base",))):
        for key, text in conn.execute(f"SELECT rowid, {column} FROM {table} WHERE {column} IS NOT NULL").fetchall():
            try:
                document = json.loads(text)
            except ValueError:
                continue  # unreadable settings stay as they are (reading them drops what it cannot use)
            settings = document
            for part in path:
                settings = settings.get(part) if isinstance(settings, dict) else None
            if isinstance(settings, dict) and isinstance(settings.get("compile"), bool):
                settings["compile"] = "default" if settings["compile"] else "off"
                conn.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?",
                             (json.dumps(document, sort_keys=True), key))


Step = Union[str, Callable[[sqlite3.Connection], None]]

# Schema 5 (shipped; its digest is frozen in tests/history/test_history_schema.py: add a _V6 for anything new).
_V5: tuple[Step, ...] = (
    # The training process's peak resident memory, the memory figure a CPU run has.
    "ALTER TABLE runs ADD COLUMN peak_process_rss_bytes INTEGER",
    # The interval of a run's images/sec (a bootstrap of its steady windows), and what compiling cost and did.
    "ALTER TABLE runs ADD COLUMN images_per_sec_low REAL",
    "ALTER TABLE runs ADD COLUMN images_per_sec_high REAL",
    "ALTER TABLE runs ADD COLUMN compile_seconds REAL",
    "ALTER TABLE runs ADD COLUMN cuda_graphs TEXT",
    # compile became a mode (off / default / reduce-overhead / max-autotune).
    _compile_switches_to_modes,
    # A profile sample whose base step was shorter than its GPU work (its host wait a negative remainder).
    "ALTER TABLE runs ADD COLUMN timeline_flag TEXT",
    # How many log windows a sample's unprofiled step time is over (it was the last one alone).
    "ALTER TABLE profile_samples ADD COLUMN unprofiled_windows INTEGER NOT NULL DEFAULT 0",
    # NVML's telemetry over the steady windows (medians), and GPM's activity figures on Hopper and newer.
    "ALTER TABLE runs ADD COLUMN nvml_kernel_time_fraction REAL",
    "ALTER TABLE runs ADD COLUMN power_watts REAL",
    "ALTER TABLE runs ADD COLUMN sm_clock_mhz REAL",
    "ALTER TABLE runs ADD COLUMN clock_event_reasons TEXT",
    "ALTER TABLE runs ADD COLUMN pcie_rx_bytes_per_sec REAL",
    "ALTER TABLE runs ADD COLUMN pcie_tx_bytes_per_sec REAL",
    "ALTER TABLE runs ADD COLUMN sm_activity_fraction REAL",
    "ALTER TABLE runs ADD COLUMN sm_occupancy_fraction REAL",
    "ALTER TABLE runs ADD COLUMN tensor_activity_fraction REAL",
    "ALTER TABLE runs ADD COLUMN dram_bandwidth_fraction REAL",
    "ALTER TABLE runs ADD COLUMN telemetry_unavailable_reason TEXT",
    "ALTER TABLE runs ADD COLUMN gpm_unavailable_reason TEXT",
    # Measured changes (history/comparisons.py): what one setting's change did to images/sec against a
    # baseline on one device, by interleaved trials (verify; a search or sweep may write them too). The findings
    # of a run with the same speed settings on the same device read them back.
    """
    CREATE TABLE comparisons (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        sequence_id INTEGER REFERENCES sweeps(id) ON DELETE SET NULL,  -- the sequence that measured it
        device_type TEXT NOT NULL,       -- cuda, cpu
        device_name TEXT NOT NULL,       -- DeviceInfo.name
        baseline_json TEXT NOT NULL,     -- RunConfig.to_dict() of the settings changed from
        field TEXT NOT NULL,             -- the RunConfig field changed
        value_json TEXT NOT NULL,        -- its new value, as JSON
        speedup REAL NOT NULL,           -- median(changed) / median(baseline) images/sec
        speedup_low REAL,                -- its interval (NULL without one)
        speedup_high REAL,
        verdict TEXT NOT NULL,           -- faster, slower, within_noise
        baseline_run_ids_json TEXT NOT NULL,  -- JSON lists of the trials' run ids, in the order they ran
        changed_run_ids_json TEXT NOT NULL,
        created_at REAL NOT NULL         -- unix seconds
    )
    """,
    "CREATE INDEX comparisons_by_device ON comparisons(device_type, device_name, field)",
)

def _rank_peaks_named_device_used(conn: sqlite3.Connection) -> None:
    """Each rank's NVML peak in runs.rank_peaks_json takes the figure's new name (schema 6)."""
    for key, text in conn.execute("SELECT id, rank_peaks_json FROM runs WHERE rank_peaks_json IS NOT NULL").fetchall():
        try:
            peaks = json.loads(text)
        except ValueError:
            continue  # unreadable peaks stay as they are (reading them gives no rank figures)
        if isinstance(peaks, dict) and "peak_nvml_used_bytes" in peaks:
            peaks["peak_nvml_device_used_bytes"] = peaks.pop("peak_nvml_used_bytes")
            conn.execute("UPDATE runs SET rank_peaks_json = ? WHERE id = ?", (json.dumps(peaks), key))


# Schema 6: one name per thing (issue 29). NVML's "used" is device-wide (every process and CUDA context), and the
# name says so; a run's sequence (a sweep, repeats, a tune, a verification, a max-batch search) is a sequence
# wherever it is named.
_V6: tuple[Step, ...] = (
    "ALTER TABLE runs RENAME COLUMN peak_nvml_used_bytes TO peak_nvml_device_used_bytes",
    "ALTER TABLE step_metrics RENAME COLUMN nvml_used TO nvml_device_used",
    "ALTER TABLE epoch_metrics RENAME COLUMN nvml_used TO nvml_device_used",
    _rank_peaks_named_device_used,
    "ALTER TABLE sweeps RENAME TO sequences",  # runs' and comparisons' references follow (SQLite ≥ 3.26)
    "ALTER TABLE runs RENAME COLUMN sweep_id TO sequence_id",
    "ALTER TABLE profile_samples RENAME COLUMN device TO device_type",
    "DROP INDEX runs_by_sweep",
    "CREATE INDEX runs_by_sequence ON runs(sequence_id)",
    # A stored A/B of one setting's change is a measured change (history/measured_changes.py); "comparison" is
    # runs side by side (history/compare.py).
    "ALTER TABLE comparisons RENAME TO measured_changes",
    "DROP INDEX comparisons_by_device",
    "CREATE INDEX measured_changes_by_device ON measured_changes(device_type, device_name, field)",
)

# Issue 31 item 7: NCCL / RCCL kernels are communication, apart from compute (they counted as compute before).
_V_COMMUNICATION: tuple[Step, ...] = (
    "ALTER TABLE runs ADD COLUMN communication_fraction REAL",
    "ALTER TABLE profile_samples ADD COLUMN communication_seconds REAL",
)

# Issue 27: a record of kind "trace", a torch.profiler trace opened in the window, kept beside the runs
# so it lists, compares and exports like one (history/trace_records.py). Its settings are its script's, unknown
# here: config_json is "{}" and the views show none. trace_json: the file (path, size, sha256) and the figures per
# rank (the `workbench trace --json` keys); trace_sha256 finds a file opened before.
_V_TRACE_RECORDS: tuple[Step, ...] = (
    "ALTER TABLE runs ADD COLUMN record_kind TEXT NOT NULL DEFAULT 'run'",  # run, trace
    "ALTER TABLE runs ADD COLUMN trace_json TEXT",
    "ALTER TABLE runs ADD COLUMN trace_sha256 TEXT",
    "CREATE INDEX runs_by_trace_sha256 ON runs(trace_sha256)",
)

# Tags on runs: a JSON list of short words the user gives ("baseline", "fp16 try").
_RUN_TAGS: tuple[Step, ...] = ("ALTER TABLE runs ADD COLUMN tags_json TEXT NOT NULL DEFAULT '[]'",)

# Append new versions here, each a tuple of statements (or functions of the connection where SQL alone cannot
# do it), and never edit one that has shipped.
# An image folder's files a run left out as unreadable (skip_bad_images).
_SKIPPED_BAD_IMAGES: tuple[Step, ...] = (
    "ALTER TABLE runs ADD COLUMN skipped_bad_images INTEGER NOT NULL DEFAULT 0",
)

_VERSIONS: tuple[tuple[Step, ...], ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V_COMMUNICATION, _RUN_TAGS,
                                           _V_TRACE_RECORDS, _SKIPPED_BAD_IMAGES)


def _migration(steps: tuple[Step, ...]) -> Callable[[sqlite3.Connection], None]:
    def apply(conn: sqlite3.Connection) -> None:
        for step in steps:  # execute(), not executescript(): that would commit mid-transaction
            step(conn) if callable(step) else conn.execute(step)

    return apply


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = tuple(_migration(step) for step in _VERSIONS)
SCHEMA_VERSION = len(MIGRATIONS)

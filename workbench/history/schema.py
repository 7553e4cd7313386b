"""The history database's tables, and the migrations that bring an older file up to date.

``PRAGMA user_version`` holds the schema version. ``MIGRATIONS[n]`` takes a database from
version n to n + 1, so schema version 2 is one more function appended to the list.
"""

from __future__ import annotations

import sqlite3
from typing import Callable

# Summary figures stored as columns of `runs` (names match RunSummary and the CSV).
SUMMARY_COLUMNS: tuple[str, ...] = (
    "test_accuracy",
    "final_loss",
    "images_per_sec_mean",
    "images_per_sec_median",
    "data_wait_fraction",
    "device_busy_fraction",  # schema 2
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "peak_nvml_used_bytes",
    "wall_seconds",
    "steps",
    "samples_seen",
    "epochs_completed",
)

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
    "compute_seconds",
    "window_seconds",
    "torch_allocated",
    "torch_reserved",
    "torch_peak_allocated",
    "torch_peak_reserved",
    "nvml_used",
    "gpu_utilization_percent",
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
    "nvml_used",
)


def _create_v1(conn: sqlite3.Connection) -> None:
    conn.execute(
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
        """
    )
    conn.execute("CREATE INDEX runs_by_status ON runs(status)")
    step_columns = ",\n".join(f"{name} {'INTEGER' if _is_integer(name) else 'REAL'}" for name in STEP_COLUMNS)
    conn.execute(
        f"""
        CREATE TABLE step_metrics (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            step INTEGER NOT NULL,
            {step_columns},
            PRIMARY KEY (run_id, step)
        ) WITHOUT ROWID
        """
    )
    epoch_columns = ",\n".join(f"{name} {'INTEGER' if _is_integer(name) else 'REAL'}" for name in EPOCH_COLUMNS)
    conn.execute(
        f"""
        CREATE TABLE epoch_metrics (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            epoch INTEGER NOT NULL,
            {epoch_columns},
            PRIMARY KEY (run_id, epoch)
        ) WITHOUT ROWID
        """
    )


def _is_integer(column: str) -> bool:
    return column in {"epoch", "step", "samples_seen"} or column.startswith(("torch_", "nvml_"))


# The column lists above describe the newest schema; a migration that adds a column appends it there too.
def _add_device_busy_fraction_v2(conn: sqlite3.Connection) -> None:
    """Schema 2: the device-busy fraction, which with data wait gives a run's bottleneck verdict."""
    conn.execute("ALTER TABLE runs ADD COLUMN device_busy_fraction REAL")


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_create_v1, _add_device_busy_fraction_v2)
SCHEMA_VERSION = len(MIGRATIONS)

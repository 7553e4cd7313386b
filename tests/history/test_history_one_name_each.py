"""Schema 6 (issue 29): a history written by schema 5 opens with its runs' figures under today's one name each:
a run's sequence, NVML's device-wide "used", a profile sample's device type."""

from __future__ import annotations

import json
import sqlite3

from workbench.config import RunConfig
from workbench.history.export import RUNS_CSV_COLUMNS, run_row
from workbench.history.schema import MIGRATIONS, SCHEMA_VERSION
from workbench.history.store import HistoryStore


def schema_5_history(path):
    conn = sqlite3.connect(path)
    for migration in MIGRATIONS[:5]:  # exactly what schema 5 created
        migration(conn)
    conn.execute("INSERT INTO sweeps (kind, name, created_at) VALUES ('sweep', 'sweep batch_size', 1.0e9)")
    conn.execute(
        "INSERT INTO runs (name, status, source, started_at, finished_at, config_json, images_per_sec, device_type,"
        " device_name, peak_nvml_used_bytes, world_size, rank_peaks_json, sweep_id) "
        "VALUES ('gpu run', 'finished', 'cli', 1.0e9, 1.0e9 + 60, ?, 1234.5, 'cuda', 'NVIDIA H100', ?, 2, ?, 1)",
        (json.dumps(RunConfig(batch_size=64).to_dict()), 5 * 2**30,
         json.dumps({"peak_allocated_bytes": [1, 2], "peak_reserved_bytes": [3, 4], "peak_nvml_used_bytes": [5, 6]})),
    )
    conn.execute("INSERT INTO step_metrics (run_id, step, loss, nvml_used) VALUES (1, 2, 0.5, 4294967296)")
    conn.execute("INSERT INTO epoch_metrics (run_id, epoch, step, nvml_used) VALUES (1, 1, 2, 4294967297)")
    conn.execute("INSERT INTO profile_samples (run_id, first_step, last_step, device, steps, window_seconds,"
                 " images_per_sec, host_data_wait_seconds) VALUES (1, 21, 31, 'cuda', 8, 0.2, 1280.0, 0.01)")
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()


def test_a_schema_5_history_reads_each_figure_under_its_one_name(tmp_path):
    schema_5_history(tmp_path / "history.sqlite3")
    with HistoryStore.open(tmp_path) as store:
        [record] = store.list_runs()
        assert (record.sequence_id, record.sequence_name) == (1, "sweep batch_size")
        assert store.sequence_runs(1) == [record]
        summary = record.summary
        assert summary.peak_nvml_device_used_bytes == 5 * 2**30 and summary.device_type == "cuda"
        assert summary.rank_peak_nvml_device_used_bytes == (5, 6) and summary.rank_peak_allocated_bytes == (1, 2)
        assert [row["nvml_device_used"] for row in store.iter_step_rows(1)] == [4294967296]
        assert [row["nvml_device_used"] for row in store.iter_epoch_rows(1)] == [4294967297]
        [sample] = store.profile_samples(1)
        assert sample.device_type == "cuda"
        row = dict(zip(RUNS_CSV_COLUMNS, run_row(record)))
        assert (row["sequence_id"], row["peak_nvml_device_used_bytes"], row["images_per_sec"]) == (
            "1", str(5 * 2**30), "1234.5")
        assert store.create_sequence("repeats", "repeats") == 2  # new sequences go to the renamed table
    conn = sqlite3.connect(tmp_path / "history.sqlite3")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    references = conn.execute("SELECT sql FROM sqlite_master WHERE name IN ('runs', 'measured_changes')").fetchall()
    assert all("REFERENCES sequences(id)" in sql.replace('"', "") and "sweeps" not in sql for (sql,) in references)
    conn.close()

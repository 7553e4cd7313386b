"""A history written by schema 1 opens in this version with every run intact."""

import json
import sqlite3

from workbench.config import RunConfig
from workbench.history.schema import MIGRATIONS, SCHEMA_VERSION
from workbench.history.store import HistoryStore


def test_schema_1_database_is_migrated_in_place(tmp_path):
    path = tmp_path / "history.sqlite3"
    conn = sqlite3.connect(path)
    MIGRATIONS[0](conn)  # exactly what version 1 created
    conn.execute(
        "INSERT INTO runs (name, status, source, started_at, finished_at, config_json, images_per_sec_mean,"
        " images_per_sec_median, data_wait_fraction, device_type) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ("old run", "finished", "cli", 1.0e9, 1.0e9 + 60, json.dumps(RunConfig(batch_size=64).to_dict()),
         1234.0, 1200.0, 0.3, "cuda"),
    )
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()

    store = HistoryStore.open(tmp_path)
    try:
        [record] = store.list_runs()
        assert record.name == "old run" and record.config.batch_size == 64
        # Schema 1 stored a mean of window rates, not the steady-state samples ÷ seconds: not shown as one.
        assert record.summary.images_per_sec is None
        assert record.summary.data_wait_fraction == 0.3 and record.summary.device_span_fraction is None
        assert record.verdict is None  # not measured by schema 1
    finally:
        store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()

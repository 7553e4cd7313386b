"""The schema's versions are frozen: a fresh database and every upgrade path end with the same tables.

The next migration that adds a column must not collide with a version-1 table built from today's
column lists (it used to: version 1 was generated from the lists the store writes).
"""

import hashlib
import sqlite3

import pytest
from builders import database_at

from workbench.history import schema
from workbench.history import store as store_module
from workbench.history.schema import (
    EPOCH_COLUMNS,
    MIGRATIONS,
    PROFILE_SAMPLE_COLUMNS,
    PROFILE_SAMPLE_LISTS,
    SCHEMA_VERSION,
    STEP_COLUMNS,
    SUMMARY_COLUMNS,
)
from workbench.history.store import HistoryStore

TABLES = ("runs", "step_metrics", "epoch_metrics", "profile_samples")

# The columns each shipped version had: a migration may add a version, never change one of these.
SHIPPED_VERSION_ADDS = {
    1: {"runs": 32, "step_metrics": 2 + 16, "epoch_metrics": 2 + 12},
    2: {"runs": ["device_busy_fraction"]},
    3: {"runs": ["device_span_fraction", "images_per_sec"], "step_metrics": ["device_span_seconds"]},
}


# What sqlite_master holds after each shipped version (its tables, indexes and triggers, their SQL as written):
# a shipped version's statements never change, because databases in the wild were made by exactly them.
# When a release ships a new version, add its digest here (print it with schema_digest below).
SHIPPED_SCHEMA_DIGESTS = {
    1: "a1ecb16b3619f04ada79f2eb5d3314170a1229337bb2aca66a757b9c25b23d69",
    2: "6c9a59e27b906c1260ad0fa028242bb81d96b39cd5cd75947be25c4a85467ab4",
    3: "6d2ebf84b44a356ae9b7386fdc57e501a31e7965a33763cde9423b424ffb171b",
    4: "f2366df2d80c74532e21564b2dbf001122a6bda18ffbec8ec6d0bc6a22fe453d",
    5: "5dc088fb0fcc8db4cfcb41f3fff6f4915f89a9ced649a69eadeabc00141089b2",
}


def schema_digest(conn: sqlite3.Connection) -> str:
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def columns(conn: sqlite3.Connection) -> dict[str, list[tuple[str, str]]]:
    return {table: [(row[1], row[2]) for row in conn.execute(f"PRAGMA table_info({table})")] for table in TABLES}


def test_fresh_database_matches_the_column_lists_the_store_writes(tmp_path):
    with HistoryStore.open(tmp_path) as store:
        tables = columns(store._conn)
    runs = [name for name, _ in tables["runs"]]
    assert set(SUMMARY_COLUMNS) <= set(runs)
    assert [name for name, _ in tables["step_metrics"]] == ["run_id", "step", *STEP_COLUMNS]
    assert [name for name, _ in tables["epoch_metrics"]] == ["run_id", "epoch", *EPOCH_COLUMNS]
    # The store names the columns it writes, so their order does not matter (ALTER TABLE adds at the end).
    assert sorted(name for name, _ in tables["profile_samples"]) == sorted([
        "run_id", "first_step", *PROFILE_SAMPLE_COLUMNS, *(name + "_json" for name in PROFILE_SAMPLE_LISTS)
    ])
    assert "findings_json" in runs


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_every_upgrade_path_ends_with_the_fresh_schema(tmp_path, version):
    fresh_home, old_home = tmp_path / "fresh", tmp_path / "old"
    old_home.mkdir()
    with HistoryStore.open(fresh_home) as store:
        fresh = columns(store._conn)
    database_at(old_home / store_module.DATABASE_NAME, version)
    with HistoryStore.open(old_home) as store:
        assert store._conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert columns(store._conn) == fresh


def test_shipped_versions_are_unchanged(tmp_path):
    conn = sqlite3.connect(":memory:")
    MIGRATIONS[0](conn)
    assert {table: len(cols) for table, cols in columns(conn).items() if cols} == SHIPPED_VERSION_ADDS[1]
    for version in range(2, max(SHIPPED_VERSION_ADDS) + 1):
        before = columns(conn)
        MIGRATIONS[version - 1](conn)
        after = columns(conn)
        added = {t: [n for n, _ in after[t] if (n, dict(after[t])[n]) not in before[t]] for t in TABLES}
        assert {t: names for t, names in added.items() if names} == SHIPPED_VERSION_ADDS[version]


def test_shipped_versions_leave_exactly_the_schema_they_shipped_with():
    conn = sqlite3.connect(":memory:")
    for version, digest in sorted(SHIPPED_SCHEMA_DIGESTS.items()):
        MIGRATIONS[version - 1](conn)
        assert schema_digest(conn) == digest, f"schema version {version} has shipped: append a new version instead"
    assert SCHEMA_VERSION >= max(SHIPPED_SCHEMA_DIGESTS)


def test_the_next_migration_can_add_a_step_column_to_a_fresh_database(tmp_path, monkeypatch):
    # What the next issue that adds a step metric does: append the name to the list and a migration.
    monkeypatch.setattr(schema, "STEP_COLUMNS", (*STEP_COLUMNS, "new_metric"))

    def add_new_metric(conn):
        conn.execute("ALTER TABLE step_metrics ADD COLUMN new_metric REAL")

    monkeypatch.setattr(store_module, "MIGRATIONS", (*MIGRATIONS, add_new_metric))
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    with HistoryStore.open(tmp_path) as store:  # used to fail: "duplicate column name: new_metric"
        names = [name for name, _ in columns(store._conn)["step_metrics"]]
    assert names.count("new_metric") == 1

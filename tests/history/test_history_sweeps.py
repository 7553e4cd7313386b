"""Schema 4's sequences of runs: a sweeps table, runs.sequence_id, and both read back with every run."""

import sqlite3

import pytest
from builders import complete_run_events, database_at

from workbench.cli.history_commands import format_runs_table
from workbench.config import RunConfig
from workbench.history import store as store_module
from workbench.history.store import HistoryStore


def schema_objects(conn):
    return sorted(tuple(row) for row in conn.execute(
        "SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"))


def table_columns(conn, table):
    return [(row[1], row[2]) for row in conn.execute(f"PRAGMA table_info({table})")]


def test_a_version_3_history_gains_the_sweeps_table_and_index_a_fresh_one_has(tmp_path):
    fresh_home, old_home = tmp_path / "fresh", tmp_path / "old"
    old_home.mkdir()
    database_at(old_home / store_module.DATABASE_NAME, 3)
    with HistoryStore.open(fresh_home) as fresh, HistoryStore.open(old_home) as upgraded:
        assert schema_objects(upgraded._conn) == schema_objects(fresh._conn)
        assert table_columns(upgraded._conn, "sequences") == table_columns(fresh._conn, "sequences")
        assert ("sequence_id", "INTEGER") in table_columns(upgraded._conn, "runs")


def record(store, config, sequence_id=None, name=None):
    recorder = store.start_run(config, name=name, sequence_id=sequence_id)
    for event in complete_run_events(config, 4):
        recorder.record(event)
    return recorder.run_id


def test_members_read_back_with_their_sweep_and_lone_runs_without(tmp_path):
    config = RunConfig(device="cpu")
    with HistoryStore.open(tmp_path) as store:
        lone = record(store, config)
        sequence_id = store.create_sequence("sweep", "sweep num_workers", {"axes": [{"field": "num_workers"}]})
        members = [record(store, config.replace(num_workers=n), sequence_id, f"synthetic: num_workers={n}")
                   for n in (0, 2)]
        assert [(r.id, r.sequence_id, r.sequence_name) for r in store.list_runs()] == [
            (members[1], sequence_id, "sweep num_workers"), (members[0], sequence_id, "sweep num_workers"),
            (lone, None, None)]
        assert [r.id for r in store.sequence_runs(sequence_id)] == members
        assert store.get_run(members[0]).sequence_name == "sweep num_workers"
        assert [r.sequence_id for r in store.get_runs([lone, members[1]])] == [None, sequence_id]
        table = format_runs_table(store.list_runs()).splitlines()
    assert table[0].split()[4] == "SEQUENCE"
    assert f"{sequence_id} sweep num_workers" in table[1] and f"{sequence_id} sweep" not in table[3]


def test_a_sweep_id_that_does_not_exist_is_refused(tmp_path):
    with HistoryStore.open(tmp_path) as store, pytest.raises(sqlite3.IntegrityError):
        store.start_run(RunConfig(), sequence_id=99)  # foreign keys are on: a member belongs to a recorded sequence

"""HistoryStore and RunRecorder: round trips, buffering, recovery, schema versions. No Qt."""

from __future__ import annotations

import json
import math
import socket
import sqlite3
import subprocess
import sys
import time

import pytest
from builders import CPU, epoch, record_complete_run, started, step, summary

from workbench.config import RunConfig
from workbench.engine.events import MemorySnapshot, RunEnded, StatusChanged
from workbench.history import store as store_module
from workbench.history.schema import MIGRATIONS, SCHEMA_VERSION
from workbench.history.store import (
    HistoryDamaged,
    HistoryError,
    HistoryStore,
    HistoryTooNew,
    RunInProgress,
    RunNotFound,
)


@pytest.fixture
def store(tmp_path):
    with HistoryStore.open(tmp_path) as opened:
        yield opened


def test_open_creates_the_home_and_a_wal_database(tmp_path):
    home = tmp_path / "new" / "home"
    with HistoryStore.open(home) as store:
        assert store.path == home / "history.sqlite3"
        assert store.path.is_file()
        journal = store._conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert journal == "wal"


def test_open_without_home_uses_workbench_home(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "from-env"))
    with HistoryStore.open() as store:
        assert store.path == tmp_path / "from-env" / "history.sqlite3"


def test_finished_run_round_trips_config_device_and_summary(store):
    config = RunConfig(device="cpu", batch_size=64, precision="bf16", max_steps=10, lr=0.1)
    run_id = record_complete_run(store, config, name="baseline", source="gui")

    record = store.get_run(run_id)
    assert record.id == run_id
    assert (record.name, record.note, record.status, record.source) == ("baseline", "", "finished", "gui")
    assert record.config == config
    assert record.config_dropped == ()
    assert record.device["name"] == CPU.name and record.device["torch_version"] == "2.14.1"
    assert record.run_info["total_steps"] == 10 and record.run_info["notes"] == ["pin_memory ignored: no CUDA"]
    expected = summary(10)
    for name in ("test_accuracy", "final_loss", "images_per_sec", "images_per_sec_low", "images_per_sec_high",
                 "data_wait_fraction", "wall_seconds", "steps", "samples_seen", "epochs_completed",
                 "device_name", "torch_version"):
        assert getattr(record.summary, name) == getattr(expected, name), name
    assert record.summary.device_type == "cpu"
    assert record.started_at <= record.finished_at <= time.time()
    assert store.list_runs() == [record]


def test_step_and_epoch_metrics_round_trip_with_missing_memory_as_nan(store):
    recorder = store.start_run(RunConfig(device="cpu"))
    recorder.record(started(RunConfig(device="cpu"), total_steps=3))
    recorder.record(step(1, 3, memory=MemorySnapshot(torch_allocated=100, torch_reserved=200, nvml_device_used=300,
                                                     process_rss=400)))
    recorder.record(step(2, 3))
    recorder.record(step(3, 3, loss=0.5))
    recorder.record(epoch(3, test_accuracy=0.5))
    recorder.record(RunEnded(status="finished", summary=summary(3)))

    steps = store.step_metrics(recorder.run_id)
    assert steps["step"].tolist() == [1, 2, 3]
    assert steps["loss"].tolist() == [2.5, 1.25, 0.5]
    assert steps["images_per_sec"].tolist() == [1001.0, 1002.0, 1003.0]
    assert steps["data_wait_fraction"][0] == pytest.approx(0.25)
    assert steps["torch_allocated"][0] == 100 and math.isnan(steps["torch_allocated"][1])
    assert steps["nvml_device_used"][0] == 300
    assert steps["process_rss"][0] == 400 and math.isnan(steps["process_rss"][1])
    epochs = store.epoch_metrics(recorder.run_id)
    assert epochs["epoch"].tolist() == [1]
    assert epochs["step"].tolist() == [3] and epochs["test_accuracy"].tolist() == [0.5]


def test_default_name_says_data_model_batch_precision(store):
    recorder = store.start_run(RunConfig(model="resnet18", batch_size=256, precision="fp16"))
    assert store.get_run(recorder.run_id).name == "synthetic: resnet18, batch 256, fp16"


def test_list_runs_is_newest_first(store):
    ids = [record_complete_run(store, steps=2) for _ in range(3)]
    assert [record.id for record in store.list_runs()] == ids[::-1]


def test_steps_are_buffered_until_the_flush_interval(store, tmp_path):
    recorder = store.start_run(RunConfig(device="cpu"))
    recorder.flush_interval_s = 3600
    recorder.record(started(RunConfig(device="cpu")))
    recorder.record(step(1))
    recorder.record(step(2))
    with HistoryStore.open(tmp_path) as reader:  # another connection sees only what was committed
        assert reader.step_metrics(recorder.run_id)["step"].tolist() == []
        recorder.flush()
        assert reader.step_metrics(recorder.run_id)["step"].tolist() == [1, 2]
        recorder.flush_interval_s = 0
        recorder.record(step(3))
        assert reader.step_metrics(recorder.run_id)["step"].tolist() == [1, 2, 3]


def test_status_and_epoch_events_flush_buffered_steps(store, tmp_path):
    recorder = store.start_run(RunConfig(device="cpu"))
    recorder.flush_interval_s = 3600
    recorder.record(step(1))
    recorder.record(StatusChanged(message="Evaluating…"))
    recorder.record(step(2))
    recorder.record(epoch(2))
    with HistoryStore.open(tmp_path) as reader:
        assert reader.step_metrics(recorder.run_id)["step"].tolist() == [1, 2]
        assert reader.epoch_metrics(recorder.run_id)["epoch"].tolist() == [1]


def test_a_running_run_carries_its_summary_so_far(store):
    recorder = store.start_run(RunConfig(device="cpu"))
    recorder.flush_interval_s = 0
    recorder.record(started(RunConfig(device="cpu")))
    recorder.record(step(1))
    recorder.record(step(2, loss=0.75))
    record = store.get_run(recorder.run_id)
    assert record.status == "running" and record.finished_at is None
    assert record.summary.steps == 2 and record.summary.final_loss == 0.75
    assert record.summary.images_per_sec == pytest.approx(32 / 0.04)  # the second window: steady state so far
    assert record.summary.device_name == CPU.name


def test_fail_marks_the_run_failed_with_the_reason(store):
    recorder = store.start_run(RunConfig(device="cpu"))
    recorder.record(step(1))
    recorder.fail("the command was interrupted before the run ended")
    record = store.get_run(recorder.run_id)
    assert (record.status, record.reason, record.failure_kind) == (
        "failed", "the command was interrupted before the run ended", "error",
    )
    assert record.finished_at is not None
    assert store.step_metrics(recorder.run_id)["step"].tolist() == [1]


def test_failed_run_end_keeps_reason_and_kind(store):
    recorder = store.start_run(RunConfig(device="cpu"))
    recorder.record(RunEnded(status="failed", summary=summary(0, status="failed"), reason="CUDA out of memory", kind="out_of_memory"))
    record = store.get_run(recorder.run_id)
    assert (record.status, record.reason, record.failure_kind) == ("failed", "CUDA out of memory", "out_of_memory")


def test_an_ended_run_takes_no_more_events_and_fail_is_a_no_op(store):
    run_id = record_complete_run(store)
    recorder = store.start_run(RunConfig())
    recorder.record(RunEnded(status="stopped", summary=summary(0, status="stopped"), reason="stopped by the user"))
    recorder.fail("too late")
    assert store.get_run(recorder.run_id).status == "stopped"
    with pytest.raises(RuntimeError, match="already ended"):
        recorder.record(step(1))
    assert store.get_run(run_id).status == "finished"


def test_rename_note_and_delete(store):
    keep = record_complete_run(store)
    gone = record_complete_run(store)
    store.rename(keep, "  wider batch  ")
    store.set_note(keep, "first try, with pinned memory\nsecond line")
    store.delete(gone)
    record = store.get_run(keep)
    assert (record.name, record.note) == ("wider batch", "first try, with pinned memory\nsecond line")
    assert [record.id for record in store.list_runs()] == [keep]
    with pytest.raises(RunNotFound):
        store.get_run(gone)
    # The metrics go with the run.
    assert store.step_metrics(gone)["step"].size == 0
    assert store._conn.execute("SELECT COUNT(*) FROM epoch_metrics WHERE run_id = ?", (gone,)).fetchone()[0] == 0
    assert store.step_metrics(keep)["step"].size == 10


def test_rename_refuses_an_empty_name_and_unknown_runs(store):
    run_id = record_complete_run(store)
    with pytest.raises(HistoryError, match="cannot be empty"):
        store.rename(run_id, "   ")
    with pytest.raises(RunNotFound, match="no run with id 999"):
        store.rename(999, "x")
    with pytest.raises(RunNotFound):
        store.set_note(999, "x")
    with pytest.raises(RunNotFound):
        store.delete(999)


def test_get_runs_lists_every_unknown_id(store):
    run_id = record_complete_run(store)
    assert [record.id for record in store.get_runs([run_id, run_id])] == [run_id]
    with pytest.raises(RunNotFound, match="no run with ids 7, 8"):
        store.get_runs([8, run_id, 7])


def test_deleting_a_run_its_live_process_is_writing_is_refused(store):
    recorder = store.start_run(RunConfig())
    with pytest.raises(RunInProgress, match="still running"):
        store.delete(recorder.run_id)
    assert store.get_run(recorder.run_id).status == "running"


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _set_owner(store, run_id, **columns):
    assignments = ", ".join(f"{name} = ?" for name in columns)
    with store._transaction() as conn:
        conn.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*columns.values(), run_id))


def test_open_marks_runs_of_dead_processes_interrupted_and_spares_live_ones(tmp_path):
    with HistoryStore.open(tmp_path) as store:
        live = store.start_run(RunConfig()).run_id  # this test's own process: alive
        dead = store.start_run(RunConfig())
        dead.record(step(1))
        dead.flush()
        _set_owner(store, dead.run_id, pid=_dead_pid(), process_identity=None, heartbeat_at=time.time() - 5)
    with HistoryStore.open(tmp_path) as store:
        assert store.get_run(live).status == "running"
        record = store.get_run(dead.run_id)
        assert record.status == "interrupted"
        assert "ended without finishing" in record.reason
        assert record.finished_at == record.heartbeat_at  # the last sign of life
        assert store.step_metrics(dead.run_id)["step"].tolist() == [1]


def test_a_recycled_pid_does_not_keep_a_dead_run_running(store):
    recorder = store.start_run(RunConfig())
    if store.get_run(recorder.run_id).process_identity is None:
        pytest.skip("this platform offers no process start time to tell a recycled pid apart")
    _set_owner(store, recorder.run_id, process_identity="another-boot/12345")  # same pid, another process
    assert store.mark_interrupted_runs() == [recorder.run_id]


def test_runs_of_another_machine_wait_a_day_before_being_presumed_dead(store):
    fresh = store.start_run(RunConfig()).run_id
    stale = store.start_run(RunConfig()).run_id
    other_host = socket.gethostname() + "-elsewhere"
    _set_owner(store, fresh, hostname=other_host, heartbeat_at=time.time() - 60)
    _set_owner(store, stale, hostname=other_host, heartbeat_at=time.time() - 2 * 24 * 3600)
    assert store.mark_interrupted_runs() == [stale]
    assert store.get_run(fresh).status == "running"


def test_records_tolerate_settings_that_were_removed_added_or_retyped(store):
    run_id = record_complete_run(store, RunConfig(batch_size=32))
    old_config = {"batch_size": 32, "model": "resnet18", "removed_setting": 3, "epochs": "many"}
    with store._transaction() as conn:
        conn.execute("UPDATE runs SET config_json = ? WHERE id = ?", (json.dumps(old_config), run_id))
    record = store.get_run(run_id)
    assert record.config == RunConfig(batch_size=32, model="resnet18")  # missing fields take defaults
    assert set(record.config_dropped) == {"removed_setting", "epochs"}


def test_change_token_moves_on_own_and_other_connections_writes(store, tmp_path):
    before = store.change_token()
    run_id = record_complete_run(store)
    after_own = store.change_token()
    assert after_own != before
    with HistoryStore.open(tmp_path) as other:
        other.rename(run_id, "renamed elsewhere")
    assert store.change_token() != after_own


def test_schema_version_is_recorded(store):
    assert store._conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == len(MIGRATIONS)


def test_a_database_from_a_newer_workbench_is_refused_clearly(tmp_path):
    with HistoryStore.open(tmp_path) as store:
        run_id = record_complete_run(store)
    conn = sqlite3.connect(tmp_path / "history.sqlite3")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 2}")
    conn.close()
    with pytest.raises(HistoryTooNew) as raised:
        HistoryStore.open(tmp_path)
    message = str(raised.value)
    assert "written by a newer workbench" in message
    assert f"schema {SCHEMA_VERSION + 2}; this version reads up to {SCHEMA_VERSION}" in message
    conn = sqlite3.connect(tmp_path / "history.sqlite3")  # left untouched
    assert conn.execute("SELECT id FROM runs").fetchall() == [(run_id,)]
    conn.close()


def test_a_file_that_is_not_a_database_is_refused_clearly(tmp_path):
    (tmp_path / "history.sqlite3").write_bytes(b"this is not sqlite, just some text that is long enough" * 20)
    with pytest.raises(HistoryDamaged, match="is not a workbench history database"):
        HistoryStore.open(tmp_path)


def test_an_older_database_is_migrated_and_keeps_its_runs(tmp_path, monkeypatch):
    with HistoryStore.open(tmp_path) as store:
        run_id = record_complete_run(store, name="before the migration")

    def add_tags(conn):
        conn.execute("ALTER TABLE runs ADD COLUMN tags TEXT NOT NULL DEFAULT ''")

    monkeypatch.setattr(store_module, "MIGRATIONS", (*MIGRATIONS, add_tags))
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    with HistoryStore.open(tmp_path) as store:
        assert store._conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
        assert store._conn.execute("SELECT tags FROM runs WHERE id = ?", (run_id,)).fetchone()[0] == ""
        assert store.get_run(run_id).name == "before the migration"
        assert store.step_metrics(run_id)["step"].size == 10


def test_a_failing_migration_leaves_the_database_as_it_was(tmp_path, monkeypatch):
    with HistoryStore.open(tmp_path) as store:
        run_id = record_complete_run(store)

    def broken(conn):
        conn.execute("ALTER TABLE runs ADD COLUMN tags TEXT")
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store_module, "MIGRATIONS", (*MIGRATIONS, broken))
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    with pytest.raises(HistoryError):
        HistoryStore.open(tmp_path)
    monkeypatch.undo()
    with HistoryStore.open(tmp_path) as store:
        assert store._conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        columns = [row[1] for row in store._conn.execute("PRAGMA table_info(runs)")]
        assert "tags" not in columns
        assert store.get_run(run_id).status == "finished"


def test_an_unusable_home_is_reported_in_words(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(HistoryError, match="cannot open the run history"):
        HistoryStore.open(blocker / "home")


def test_importing_the_history_leaves_qt_out():
    code = (
        "import sys\n"
        "import workbench.history, workbench.history.store, workbench.history.export\n"
        "import workbench.history.recorder, workbench.cli.history_commands\n"
        "qt = sorted(name for name in sys.modules if name.startswith(('PySide6', 'shiboken6', 'pyqtgraph')))\n"
        "print(qt)\n"
        "sys.exit(1 if qt else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_polling_a_closed_store_is_a_history_error(tmp_path):
    """A view's refresh timer may fire once after the store closed; it gets an error it handles."""
    store = HistoryStore.open(tmp_path)
    store.close()
    with pytest.raises(HistoryError, match="cannot read the run history"):
        store.change_token()

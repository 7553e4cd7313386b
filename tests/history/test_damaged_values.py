"""A history row holding what no workbench wrote there (text in a figure, a blob in a name, a time past the year
9999, JSON nested past Python's limit): found by a hunt through every column, it failed `workbench runs`, `export`
and the window (a segfault as the Runs tab sized its columns). Each value is now read as its field's type holds it,
and one that cannot be is unknown: the row still lists, compares and exports. No Qt."""

from __future__ import annotations

import math
import sqlite3

import pytest
from builders import GPU, epoch, started, step, summary, trace_record

from workbench.config import RunConfig
from workbench.engine.events import ProfileSample, RunEnded
from workbench.engine.run_summary import NamedTime
from workbench.cli.history_commands import format_runs_table
from workbench.history.compare import compare_runs
from workbench.history.export import export_runs_csv, export_steps_csv, run_row, step_rows
from workbench.history.store import HistoryStore

NESTED = "[" * 3000 + "]" * 3000
DAMAGED_VALUES = ("x", b"\x00\xff\xfe", 1e300, -1e300, 5, NESTED)
SAMPLE = ProfileSample(
    first_step=11, last_step=19, device_type="cuda", steps=8, window_seconds=0.2, images_per_sec=1280.0,
    host_data_wait_seconds=0.01, top_ops=(NamedTime(name="aten::mm", seconds=0.004, count=8),), ops_steps=2,
    kernel_busy_seconds=0.05, kernels=720, launches=740, overhead_seconds=0.3, unprofiled_windows=3)


@pytest.fixture
def history(tmp_path):
    with HistoryStore.open(tmp_path / "home") as store:
        config = RunConfig(profile=True)
        recorder = store.start_run(config)
        recorder.record(started(config, GPU, total_steps=20))
        for index in range(1, 21):
            recorder.record(step(index, 20))
        recorder.record(SAMPLE)
        recorder.record(epoch(20))
        recorder.record(RunEnded(status="finished", summary=summary(20, device_type="cuda", profile_samples=1)))
        run_id = recorder.run_id
        trace_id, _ = store.add_trace(trace_record())
        path = store.path
    return path, run_id, trace_id


def every_view(path, tmp_path, store=None) -> None:
    """What `workbench runs`, `export` (both CSVs) and the Runs tab's comparison read of every record (through
    ``store`` where given: opening the history checks its pages, a second a time)."""
    if store is None:
        with HistoryStore.open(path.parent) as opened:
            return every_view(path, tmp_path, opened)
    records = store.list_runs()
    assert len(records) == 2
    format_runs_table(records)
    compare_runs(records)
    for record in records:
        assert isinstance(record.name, str) and isinstance(record.status, str)
        assert record.duration_seconds is None or math.isfinite(record.duration_seconds)
    for record in records:  # the exports' rows, as written (the files themselves: once, in the last test)
        run_row(record)
        list(step_rows(store, record.id))
        store.step_metrics(record.id)
        store.profile_samples(record.id)
    return None


def columns(path, table: str) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[1] for row in conn.execute(f"PRAGMA table_info({table})") if row[1] not in ("id", "run_id")]


def test_every_column_of_a_run_holding_a_damaged_value_still_lists_compares_and_exports(history, tmp_path):
    path, run_id, trace_id = history
    failures = []
    conn = sqlite3.connect(path, isolation_level=None)  # each write committed at once: the store reads it next
    with HistoryStore.open(path.parent) as store:
        for column in columns(path, "runs"):
            for record_id in (run_id, trace_id):
                (kept,) = conn.execute(f"SELECT {column} FROM runs WHERE id = ?", (record_id,)).fetchone()
                for value in DAMAGED_VALUES:
                    try:
                        conn.execute(f"UPDATE runs SET {column} = ? WHERE id = ?", (value, record_id))
                    except sqlite3.IntegrityError:  # a constraint of the schema refuses it: it cannot be there
                        continue
                    try:
                        every_view(path, tmp_path, store)
                    except Exception as error:  # noqa: BLE001 - every failure is collected and named below
                        failures.append(f"runs.{column} = {value!r:.20} on #{record_id}: {type(error).__name__}: "
                                        f"{error}")
                conn.execute(f"UPDATE runs SET {column} = ? WHERE id = ?", (kept, record_id))
    conn.close()
    assert failures == []


def test_a_time_past_any_date_and_a_figure_of_text_read_as_unknown(history):
    path, run_id, _ = history
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE runs SET started_at = 1e300, images_per_sec = 'fast', findings_json = '5' WHERE id = ?",
                     (run_id,))
    with HistoryStore.open(path.parent) as store:
        record = store.get_run(run_id)
    assert math.isnan(record.started_at) and record.duration_seconds is None
    with HistoryStore.open(path.parent) as store:  # the files written, too
        assert len(export_runs_csv(store, path.parent / "runs.csv")) == 2
        assert export_steps_csv(store, path.parent / "steps.csv") > 0
    assert record.summary.images_per_sec is None and record.summary.findings == ()
    line = format_runs_table([record]).splitlines()[1]
    assert "--:--" in line or "" in line  # listed, with no start and no duration


@pytest.mark.parametrize("table, key", [("step_metrics", "step"), ("epoch_metrics", "epoch"),
                                        ("profile_samples", "first_step")])
def test_metric_rows_holding_damaged_values_are_left_out_or_unknown_not_a_failure(history, tmp_path, table, key):
    path, run_id, _ = history
    every_view(path, tmp_path)  # the history as the workbench wrote it: checkpointed, one file
    original = path.read_bytes()
    with sqlite3.connect(path) as conn:
        assert conn.execute(f"SELECT COUNT(*) FROM {table} WHERE run_id = ?", (run_id,)).fetchone()[0] > 0
    failures = []
    for column in columns(path, table):
        for value in DAMAGED_VALUES:
            path.write_bytes(original)
            conn = sqlite3.connect(path)
            try:
                conn.execute(f"UPDATE {table} SET {column} = ? WHERE run_id = ? AND {key} = "  # one row: keys are unique
                             f"(SELECT MIN({key}) FROM {table} WHERE run_id = ?)", (value, run_id, run_id))
                conn.commit()
            except sqlite3.IntegrityError:  # another row's step: it cannot be there
                continue
            finally:
                conn.close()
            try:
                every_view(path, tmp_path)
            except Exception as error:  # noqa: BLE001
                failures.append(f"{table}.{column} = {value!r:.20}: {type(error).__name__}: {error}")
    assert failures == []

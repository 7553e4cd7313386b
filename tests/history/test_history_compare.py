"""Runs side by side, without a window: which rows differ. No Qt."""

from __future__ import annotations

import pytest
from builders import record_complete_run, summary

from workbench.config import FIELD_NAMES, RunConfig
from workbench.engine.events import RunEnded
from workbench.history.compare import SECTIONS, compare_runs
from workbench.history.store import HistoryStore


@pytest.fixture
def store(tmp_path):
    with HistoryStore.open(tmp_path) as opened:
        yield opened


def rows_by_key(records):
    return {(row.section, row.key): row for row in compare_runs(records)}


def test_every_setting_is_listed_in_order_within_the_sections(store):
    record = store.get_run(record_complete_run(store))
    rows = compare_runs([record])
    assert [row.key for row in rows if row.section == "Settings"] == list(FIELD_NAMES)
    assert [row.section for row in rows] == sorted((row.section for row in rows), key=SECTIONS.index)
    assert not any(row.differs for row in rows)  # one run differs from nothing


def test_settings_that_differ_are_flagged_and_shown_readably(store):
    first = record_complete_run(store, RunConfig(device="cpu", batch_size=32, pin_memory=True), images_per_sec=800.0)
    second = record_complete_run(store, RunConfig(device="cpu", batch_size=64, pin_memory=False), images_per_sec=1500.0)
    rows = rows_by_key(store.get_runs([first, second]))
    differing_settings = [key for (section, key), row in rows.items() if section == "Settings" and row.differs]
    assert differing_settings == ["batch_size"]  # pin_memory did nothing on the CPU either run had
    assert rows["Settings", "batch_size"].texts == ("32", "64")
    assert rows["Settings", "batch_size"].label == "Batch size"  # the form's label, not the field's name
    assert rows["Settings", "batch_size"].tooltip.startswith("batch_size (--batch-size): Images per step")
    assert rows["Settings", "pin_memory"].texts == ("not used", "not used")
    assert rows["Settings", "pin_memory"].notes[0].startswith("on the CPU no batch is copied to a GPU")
    assert rows["Settings", "max_steps"].texts == ("none", "none")
    assert rows["Results", "images_per_sec"].differs
    assert rows["Results", "images_per_sec"].texts == ("800", "1,500")
    assert not rows["Results", "test_accuracy"].differs
    assert rows["Results", "test_accuracy"].texts == ("42.0 %", "42.0 %")
    assert rows["Environment", "device_name"].texts == ("Test CPU (2 cores)",) * 2
    assert not rows["Environment", "torch_version"].differs


def test_status_row_carries_the_reason(store):
    recorder = store.start_run(RunConfig())
    recorder.record(RunEnded(status="failed", summary=summary(0, status="failed"), reason="CUDA out of memory", kind="out_of_memory"))
    row = rows_by_key([store.get_run(recorder.run_id)])["Run", "status"]
    assert row.texts == ("failed: CUDA out of memory",)


def test_start_times_and_figures_that_read_the_same_are_not_flagged(store):
    first = record_complete_run(store, images_per_sec=1000.2)
    second = record_complete_run(store, images_per_sec=1000.4)
    rows = rows_by_key(store.get_runs([first, second]))
    assert rows["Results", "images_per_sec"].texts == ("1,000", "1,000")
    assert not rows["Results", "images_per_sec"].differs
    assert rows["Run", "started_at"].values[0] != rows["Run", "started_at"].values[1]
    assert not rows["Run", "started_at"].differs


def test_settings_that_do_nothing_with_the_others_read_not_used(store):
    """Issue 22: pin_memory read "yes" on CPU runs and synthetic_size showed on npz runs as if they applied."""
    npz = record_complete_run(store, RunConfig(device="cpu", dataset="npz", data_path="/d/pets.npz"))
    resident = record_complete_run(store, RunConfig(device="cpu", pipeline="gpu-resident", num_workers=4))
    rows = rows_by_key(store.get_runs([npz, resident]))
    assert rows["Settings", "synthetic_size"].texts == ("not used", "10000")
    assert rows["Settings", "data_path"].texts == ("/d/pets.npz", "not used")
    assert rows["Settings", "num_workers"].texts == ("2", "not used")
    assert "pipeline=gpu-resident uses no DataLoader" in rows["Settings", "num_workers"].notes[1]
    assert rows["Settings", "num_workers"].differs  # 2 workers against none at all


def test_seconds_under_a_minute_read_in_their_own_unit_and_differ():
    """A kernel's 12 µs against 45 µs, and a compile's 0.4 s, read "0:00" in minutes and seconds: "same"."""
    from workbench.history.metrics import format_metric

    assert format_metric("seconds", 12e-6) == "12 µs" and format_metric("seconds", 45e-6) == "45 µs"
    assert format_metric("seconds", 0.4) == "400 ms" and format_metric("seconds", 42.0) == "42 s"
    assert format_metric("seconds", 125.0) == "2:05"


def test_compile_times_under_a_second_are_told_apart(store):
    first = record_complete_run(store, compile_seconds=0.4)
    second = record_complete_run(store, compile_seconds=0.3)
    row = rows_by_key(store.get_runs([first, second]))["Results", "compile_seconds"]
    assert row.texts == ("400 ms", "300 ms") and row.differs


def test_the_whole_runs_wall_time_is_not_called_training_time(store):
    """wall_seconds runs from set-up to the end, evaluation included: it read "Train time"."""
    first = record_complete_run(store)
    row = rows_by_key([store.get_run(first)])["Results", "wall_seconds"]
    assert row.label == "Wall time"

"""Runs CSV and long step CSV: columns, quoting, formula guard, atomic writes. No Qt."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import pytest
from builders import epoch, record_complete_run, step, summary

from workbench.config import FIELD_NAMES, RunConfig
from workbench.engine.events import MemorySnapshot, RunEnded
from workbench.history import export as export_module
from workbench.history.export import (
    RUNS_CSV_COLUMNS,
    TRACE_COLUMNS,
    ExportError,
    cell,
    export_runs_csv,
    export_steps_csv,
)
from workbench.history.metrics import SUMMARY_METRICS
from workbench.history.store import HistoryStore, RunNotFound

# Summary columns readers of the CSV rely on: each must stay, under this name (more may come).
CONTRACT_SUMMARY_COLUMNS = [
    "images_per_sec", "images_per_sec_low", "images_per_sec_high", "data_wait_fraction", "device_span_fraction",
    "peak_allocated_bytes",
    "peak_reserved_bytes", "peak_nvml_device_used_bytes", "final_loss", "test_accuracy", "wall_seconds",
    "device_name", "torch_version", "kernel_busy_fraction", "memcpy_fraction", "idle_waiting_for_data_fraction",
    "idle_waiting_for_host_fraction", "idle_other_fraction", "kernels_per_step", "ceiling_images_per_sec",
    "pipeline_efficiency", "verdict", "world_size",
    "peak_nvml_process_used_bytes", "skipped_optimizer_steps", "steps", "samples_seen", "epochs_completed",
    "peak_process_rss_bytes",
]
RANK_PEAK_COLUMNS = ["rank_peak_allocated_bytes", "rank_peak_reserved_bytes", "rank_peak_nvml_device_used_bytes"]


@pytest.fixture
def store(tmp_path):
    with HistoryStore.open(tmp_path / "home") as opened:
        yield opened


def read_csv(path):
    with open(path, encoding="utf-8", newline="") as file:
        return list(csv.reader(file))


def test_runs_csv_columns_are_identity_then_every_setting_then_the_summary_then_a_traces(store, tmp_path):
    record_complete_run(store)
    export_runs_csv(store, tmp_path / "runs.csv")
    header = read_csv(tmp_path / "runs.csv")[0]
    figures = [metric.name for metric in SUMMARY_METRICS]  # every RunSummary figure, then the verdict
    assert header == ["run_id", "name", "note", "source", "status", "reason", "started_at", "finished_at",
                      "sequence_id", "sequence_name",
                      *FIELD_NAMES, *figures, *RANK_PEAK_COLUMNS, "tags", *TRACE_COLUMNS]
    assert tuple(header) == RUNS_CSV_COLUMNS
    assert set(CONTRACT_SUMMARY_COLUMNS) <= set(figures)
    assert len(header) == len(set(header))  # no name twice (the summary's device type is device_type)


def test_runs_csv_holds_the_note_the_source_and_how_far_the_run_got(store, tmp_path):
    """What the Runs tab and --json already show: the note, gui or cli, steps and epochs done."""
    run_id = record_complete_run(store, source="gui", steps=7)
    store.set_note(run_id, "workers=0 to see the data wait")
    export_runs_csv(store, tmp_path / "runs.csv")
    header, row = read_csv(tmp_path / "runs.csv")
    values = dict(zip(header, row))
    assert (values["note"], values["source"]) == ("workers=0 to see the data wait", "gui")
    assert (values["steps"], values["samples_seen"], values["epochs_completed"]) == ("7", "224", "1")


def test_runs_csv_row_holds_settings_metrics_and_utc_times(store, tmp_path):
    config = RunConfig(device="cpu", batch_size=64, lr=0.1, max_steps=None, pin_memory=False)
    run_id = record_complete_run(store, config, name="baseline", peak_allocated_bytes=123_456_789)
    record = store.get_run(run_id)
    export_runs_csv(store, tmp_path / "runs.csv")
    header, row = read_csv(tmp_path / "runs.csv")
    values = dict(zip(header, row))
    assert values["run_id"] == str(run_id)
    assert (values["name"], values["status"], values["reason"]) == ("baseline", "finished", "")
    assert values["started_at"].endswith("Z") and values["started_at"][10] == "T"
    assert values["started_at"] <= values["finished_at"]
    assert (values["batch_size"], values["lr"], values["max_steps"], values["pin_memory"]) == ("64", "0.1", "", "false")
    assert values["device"] == "cpu" and values["model"] == "small-cnn"
    assert values["images_per_sec"] == repr(record.summary.images_per_sec)
    assert values["peak_allocated_bytes"] == "123456789"
    assert values["peak_nvml_device_used_bytes"] == ""  # not measured on a CPU run
    assert (values["test_accuracy"], values["final_loss"]) == ("0.42", "0.25")
    assert values["device_name"] == "Test CPU (2 cores)" and values["torch_version"] == "2.14.1"


def test_awkward_text_survives_the_round_trip_and_formulas_are_guarded(store, tmp_path):
    awkward = 'Größe, "quoted"\nsecond line ✓ 日本'
    first = record_complete_run(store, name=awkward)
    second = record_complete_run(store, name="=HYPERLINK(\"http://evil\")", final_loss=-1.5)
    recorder = store.start_run(RunConfig(), name="@SUM(A1)")
    failed = summary(0, status="failed", test_accuracy=None)
    recorder.record(RunEnded(status="failed", summary=failed, reason="-2 steps left; +inf loss"))
    export_runs_csv(store, tmp_path / "runs.csv")

    raw = (tmp_path / "runs.csv").read_bytes()
    assert '"Größe, ""quoted""\nsecond line ✓ 日本"'.encode() in raw  # the csv module's quoting, UTF-8
    rows = {int(row[0]): dict(zip(RUNS_CSV_COLUMNS, row)) for row in read_csv(tmp_path / "runs.csv")[1:]}
    assert rows[first]["name"] == awkward
    assert rows[second]["name"] == "'=HYPERLINK(\"http://evil\")"
    assert rows[second]["final_loss"] == "-1.5"  # a number, not text: left as it is
    assert rows[recorder.run_id]["name"] == "'@SUM(A1)"
    assert rows[recorder.run_id]["reason"] == "'-2 steps left; +inf loss"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("=1+1", "'=1+1"), ("+1", "'+1"), ("-1", "'-1"), ("@x", "'@x"), ("\tx", "'\tx"), ("\rx", "'\rx"),
        ("a=b", "a=b"), ("", ""), (None, ""), (-3, "-3"), (-0.5, "-0.5"), (True, "true"), (False, "false"),
        (1e-05, "1e-05"),
    ],
)
def test_cell_guards_text_but_not_numbers(value, expected):
    assert cell(value) == expected


def test_only_the_chosen_runs_are_exported_oldest_first(store, tmp_path):
    ids = [record_complete_run(store, name=f"run {index}") for index in range(3)]
    assert [record.id for record in export_runs_csv(store, tmp_path / "runs.csv", [ids[2], ids[0]])] == [ids[0], ids[2]]
    assert [row[0] for row in read_csv(tmp_path / "runs.csv")[1:]] == [str(ids[0]), str(ids[2])]


def test_unknown_run_ids_are_refused_and_nothing_is_written(store, tmp_path):
    record_complete_run(store)
    with pytest.raises(RunNotFound, match="no run with id 99"):
        export_runs_csv(store, tmp_path / "runs.csv", [99])
    assert not (tmp_path / "runs.csv").exists()


def test_exports_are_repeatable_byte_for_byte(store, tmp_path):
    record_complete_run(store, name="a")
    record_complete_run(store, name="b")
    export_runs_csv(store, tmp_path / "one.csv", None)
    export_runs_csv(store, tmp_path / "two.csv", [2, 1])
    assert (tmp_path / "one.csv").read_bytes() == (tmp_path / "two.csv").read_bytes()


def test_steps_csv_is_long_format_with_epoch_figures_and_no_empty_values(store, tmp_path):
    recorder = store.start_run(RunConfig())
    recorder.record(step(1, 2, memory=MemorySnapshot(torch_allocated=1024)))
    recorder.record(step(2, 2, loss=0.5))
    recorder.record(epoch(2, test_accuracy=0.5))
    recorder.record(RunEnded(status="finished", summary=summary(2)))
    other = record_complete_run(store, steps=3)

    rows_written = export_steps_csv(store, tmp_path / "steps.csv", [recorder.run_id])
    rows = read_csv(tmp_path / "steps.csv")
    assert rows[0] == ["run_id", "step", "metric", "value"]
    assert len(rows) - 1 == rows_written
    assert {row[0] for row in rows[1:]} == {str(recorder.run_id)}
    values = {(int(row[1]), row[2]): row[3] for row in rows[1:]}
    assert values[(1, "loss")] == "2.5" and values[(2, "loss")] == "0.5"
    assert values[(1, "torch_allocated")] == "1024"
    assert (2, "torch_allocated") not in values  # never measured: no row rather than an empty one
    assert values[(2, "epoch_test_accuracy")] == "0.5"
    assert [int(row[1]) for row in rows[1:]] == sorted(int(row[1]) for row in rows[1:])
    # Within a step, the window's figures come before the epoch's.
    step_two = [row[2] for row in rows[1:] if row[1] == "2"]
    assert step_two.index("loss") < step_two.index("epoch_test_accuracy")

    export_steps_csv(store, tmp_path / "all.csv")
    assert {row[0] for row in read_csv(tmp_path / "all.csv")[1:]} == {str(recorder.run_id), str(other)}


def test_a_missing_folder_is_a_clear_error(store, tmp_path):
    record_complete_run(store)
    target = tmp_path / "no" / "such" / "folder" / "runs.csv"
    with pytest.raises(ExportError, match=r"cannot write .*runs\.csv: its folder does not exist"):
        export_runs_csv(store, target)


@pytest.mark.skipif(not Path("/proc/version").is_file(), reason="no /proc here")
@pytest.mark.parametrize("target", ["/proc/version", "/proc/runs.csv"])
def test_a_folder_that_makes_no_files_is_not_called_missing(store, target):
    """/proc is there, but creating a file in it fails as a missing folder does (ENOENT)."""
    record_complete_run(store)
    with pytest.raises(ExportError, match=f"cannot write {target}: its folder takes no new files$"):
        export_runs_csv(store, Path(target))


def test_a_folder_as_target_is_a_clear_error(store, tmp_path):
    record_complete_run(store)
    with pytest.raises(ExportError, match="it is a folder"):
        export_runs_csv(store, tmp_path)


def test_a_file_in_place_of_the_folder_is_a_clear_error(store, tmp_path):
    (tmp_path / "blocker").write_text("a file, not a folder")
    with pytest.raises(ExportError, match="cannot write"):
        export_steps_csv(store, tmp_path / "blocker" / "steps.csv")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes to read-only folders")
def test_a_read_only_folder_is_a_clear_error(store, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(ExportError, match="permission denied"):
            export_runs_csv(store, locked / "runs.csv")
    finally:
        locked.chmod(0o700)


def test_a_failed_export_leaves_the_old_file_and_no_temporary(store, tmp_path, monkeypatch):
    record_complete_run(store)
    target = tmp_path / "runs.csv"
    target.write_text("the previous export\n", encoding="utf-8")

    def fail_midway(record):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_module, "run_row", fail_midway)
    with pytest.raises(ExportError, match="no space left on device"):
        export_runs_csv(store, target)
    assert target.read_text(encoding="utf-8") == "the previous export\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["home", "runs.csv"]


def test_a_new_file_gets_ordinary_permissions(store, tmp_path):
    if os.name != "posix":
        pytest.skip("POSIX permission bits")
    record_complete_run(store)
    umask = os.umask(0o022)
    try:
        export_runs_csv(store, tmp_path / "runs.csv")
    finally:
        os.umask(umask)
    assert (tmp_path / "runs.csv").stat().st_mode & 0o777 == 0o644


def test_csv_uses_crlf_rows_and_utf8_without_bom(store, tmp_path):
    record_complete_run(store, name="ü")
    export_runs_csv(store, tmp_path / "runs.csv")
    raw = (tmp_path / "runs.csv").read_bytes()
    assert raw.startswith(b"run_id,name,")
    assert raw.count(b"\r\n") == 2
    assert list(csv.reader(io.StringIO(raw.decode("utf-8"))))[1][1] == "ü"

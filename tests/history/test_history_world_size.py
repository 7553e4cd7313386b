"""Data-parallel runs in the history: world size and each rank's peaks are stored (schema 4), exported
to CSV, shown by `workbench runs`, and a one-process run reads world size 1. No torch, no Qt."""

from __future__ import annotations

import csv
import dataclasses

from builders import started, step, summary

from workbench.cli import main
from workbench.config import RunConfig
from workbench.engine.events import RunEnded
from workbench.history.export import export_runs_csv
from workbench.history.naming import run_name
from workbench.history.store import HistoryStore


def record_two_rank_run(store: HistoryStore) -> int:
    config = RunConfig(device="cpu", devices=2)
    recorder = store.start_run(config, source="cli")
    recorder.record(dataclasses.replace(started(config), world_size=2))
    for index in (1, 2):
        recorder.record(step(index, 2))
    recorder.record(RunEnded(status="finished", summary=summary(2, world_size=2, rank_peak_allocated_bytes=(1024, 2048),
                                                 rank_peak_reserved_bytes=(4096, None),
                                                 rank_peak_nvml_device_used_bytes=(None, None))))
    return recorder.run_id


def read_rows(path):
    with open(path, encoding="utf-8", newline="") as file:
        return list(csv.DictReader(file))


def test_world_size_and_rank_peaks_survive_the_round_trip(tmp_path):
    with HistoryStore.open(tmp_path) as store:
        run_id = record_two_rank_run(store)
        record = store.get_run(run_id)
    assert record.summary.world_size == 2 and record.config.devices == 2
    assert record.summary.rank_peak_allocated_bytes == (1024, 2048)
    assert record.summary.rank_peak_reserved_bytes == (4096, None)
    assert record.summary.rank_peak_nvml_device_used_bytes == (None, None)


def test_the_runs_csv_carries_world_size_and_each_ranks_peaks(tmp_path):
    with HistoryStore.open(tmp_path / "home") as store:
        record_two_rank_run(store)
        recorder = store.start_run(RunConfig(device="cpu"), source="cli")  # a one-process run
        recorder.record(started(RunConfig(device="cpu")))
        recorder.record(RunEnded(status="finished", summary=summary(1)))
        export_runs_csv(store, tmp_path / "runs.csv")
    two, one = read_rows(tmp_path / "runs.csv")
    assert (two["world_size"], two["devices"]) == ("2", "2")
    assert two["rank_peak_allocated_bytes"] == "1024;2048" and two["rank_peak_reserved_bytes"] == "4096;"
    assert (one["world_size"], one["rank_peak_allocated_bytes"]) == ("1", "")


def test_workbench_runs_shows_the_world_size(tmp_path, capsys):
    with HistoryStore.open(tmp_path) as store:
        record_two_rank_run(store)
    assert main(["--home", str(tmp_path), "runs"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    column = header.index("WORLD SIZE")
    assert row[column: column + len("WORLD SIZE")].strip() == "2"


def test_a_multi_process_run_is_named_with_its_devices():
    assert run_name(RunConfig(devices=4)) == "synthetic: small-cnn, batch 128 × 4, fp32"
    assert run_name(RunConfig(devices=0)) == "synthetic: small-cnn, batch 128 × every GPU, fp32"

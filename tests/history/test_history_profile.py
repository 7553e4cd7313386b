"""Profile samples, timeline figures, the ceiling and the findings are stored with the run (schema 4)."""

from __future__ import annotations

import csv
import dataclasses

import pytest
from builders import GPU, epoch, started, step, summary

from workbench.config import RunConfig
from workbench.engine.events import ProfileSample, RunEnded
from workbench.engine.run_summary import Finding, NamedTime
from workbench.history.export import export_runs_csv
from workbench.history.store import HistoryStore

SAMPLE = ProfileSample(
    first_step=21, last_step=31, device_type="cuda", steps=8, window_seconds=0.2, images_per_sec=1280.0,
    host_data_wait_seconds=0.01, top_ops=(NamedTime(name="aten::convolution_backward", seconds=0.004, count=8),), ops_steps=2,
    kernel_busy_seconds=0.05, memcpy_seconds=0.001, memset_seconds=0.0, idle_waiting_for_data_seconds=0.009,
    idle_waiting_for_host_seconds=0.13, idle_other_seconds=0.01, kernels=720, launches=740,
    median_kernel_seconds=2.5e-6, top_kernels=(NamedTime(name="void at::native::elementwise", seconds=0.01, count=300),),
    trace_path="/home/traces/step-0000022.trace.json.gz", ops_trace_path="/home/traces/step-0000022-ops.trace.json.gz",
    overhead_seconds=0.3, unprofiled_step_seconds=0.012, unprofiled_data_wait_seconds=0.001, unprofiled_windows=3,
)
FINDING = Finding(kind="launch-bound", headline="Launch-bound: the GPU sat idle waiting for the host 65% of the sampled time.",
                  text="Launch-bound: … Try batch_size=256: each kernel does more work per launch.", figure=0.65,
                  figure_name="idle_waiting_for_host_fraction", threshold=0.2, field="batch_size", value=256)


@pytest.fixture
def store(tmp_path):
    with HistoryStore.open(tmp_path) as opened:
        yield opened


def record_profiled_run(store) -> int:
    config = RunConfig(profile=True)
    recorder = store.start_run(config)
    recorder.record(started(config, GPU, total_steps=40))
    for index in range(1, 41):
        recorder.record(step(index, 40))
        if index == 31:
            recorder.record(SAMPLE)
    recorder.record(epoch(40))
    recorder.record(RunEnded(status="finished", summary=summary(
        40, device_type="cuda", profile_samples=1, kernel_busy_fraction=0.25, memcpy_fraction=0.005,
        idle_waiting_for_data_fraction=0.045, idle_waiting_for_host_fraction=0.65, idle_other_fraction=0.05,
        kernels_per_step=90.0, launches_per_step=92.5, median_kernel_seconds=2.5e-6, ceiling_images_per_sec=2000.0,
        pipeline_efficiency=0.5, findings=(FINDING,),
    )))
    return recorder.run_id


def test_samples_round_trip(store):
    run_id = record_profiled_run(store)
    assert store.profile_samples(run_id) == [SAMPLE]


def test_the_run_keeps_its_timeline_figures_ceiling_and_findings(store):
    record = store.get_run(record_profiled_run(store))
    assert record.summary.kernel_busy_fraction == 0.25 and record.summary.idle_waiting_for_host_fraction == 0.65
    assert record.summary.kernels_per_step == 90.0 and record.summary.profile_samples == 1
    assert record.summary.ceiling_images_per_sec == 2000.0 and record.summary.pipeline_efficiency == 0.5
    assert record.summary.findings == (FINDING,)
    assert record.verdict == FINDING.headline


def test_deleting_a_run_deletes_its_samples(store):
    run_id = record_profiled_run(store)
    store.delete(run_id)
    assert store.profile_samples(run_id) == []


def test_the_csv_has_the_timeline_efficiency_and_verdict(store, tmp_path):
    record_profiled_run(store)
    export_runs_csv(store, tmp_path / "runs.csv")
    with open(tmp_path / "runs.csv", encoding="utf-8", newline="") as file:
        row = next(csv.DictReader(file))
    assert row["kernel_busy_fraction"] == "0.25" and row["idle_waiting_for_host_fraction"] == "0.65"
    assert row["ceiling_images_per_sec"] == "2000.0" and row["pipeline_efficiency"] == "0.5"
    assert row["verdict"] == FINDING.headline


def test_deleting_a_run_deletes_its_traces_and_nothing_else(store, tmp_path):
    folder = tmp_path / "home" / "traces" / "20261123-010203-42"
    folder.mkdir(parents=True)
    main, ops = folder / "step-0000022.trace.json.gz", folder / "step-0000022-ops.trace.json.gz"
    stranger = tmp_path / "mine.trace.json.gz"  # a path not in a run's trace folder: never touched
    for path in (main, ops, stranger):
        path.write_bytes(b"x")
    config = RunConfig(profile=True)
    recorder = store.start_run(config)
    recorder.record(started(config, GPU, total_steps=40))
    recorder.record(step(1, 40))
    recorder.record(dataclasses.replace(SAMPLE, trace_path=str(main), ops_trace_path=str(ops)))
    recorder.record(dataclasses.replace(SAMPLE, first_step=30, trace_path=str(stranger), ops_trace_path=None))
    recorder.record(RunEnded(status="stopped", summary=summary(1, device_type="cuda")))
    store.delete(recorder.run_id)
    assert not main.exists() and not ops.exists() and not folder.exists()
    assert stranger.exists()

"""Every figure of a run's summary reaches every place that carries summaries: the history, the CSV, --json and the
findings' facts. RunSummary (engine/events.py) is the one list; a field one of them drops fails here."""

from __future__ import annotations

import dataclasses
import json
import typing

from builders import CPU, epoch, started, step

from workbench.cli.summary_json import SHAPED, summary_json
from workbench.config import RunConfig
from workbench.engine.events import RunEnded
from workbench.engine.run_facts import RunFacts
from workbench.engine.run_summary import Finding, NamedTime, RunSummary
from workbench.history.export import RUNS_CSV_COLUMNS
from workbench.history.metrics import SUMMARY_METRICS
from workbench.history.schema import SUMMARY_COLUMNS, SUMMARY_STORED_ELSEWHERE
from workbench.history.store import HistoryStore

STATUS_FIELDS = ("status", "reason", "failure_kind")  # the record's own, also kept as the summary's


def every_field_set() -> RunSummary:
    """A summary whose every field holds a value of its type that differs from its default and from the others."""
    values: dict = {}
    hints = typing.get_type_hints(RunSummary)
    for number, item in enumerate(dataclasses.fields(RunSummary), start=1):
        hint = hints[item.name]
        kind = hint
        if typing.get_origin(hint) is typing.Union:  # Optional[X]: fill it with an X
            kind = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        if item.name == "status":
            values[item.name] = "failed"
        elif item.name == "failure_kind":
            values[item.name] = "data_loader"
        elif item.name == "device_type":
            values[item.name] = "cpu"
        elif item.name == "findings":
            values[item.name] = (Finding(kind="input-bound", headline="Input-bound.", text="Input-bound: more workers.",
                                         figure=0.4, figure_name="data_wait_fraction", threshold=0.15,
                                         field="num_workers", value=4),)
        elif item.name in ("top_ops", "top_kernels"):
            values[item.name] = ()  # kept per profile sample, not with the run (test_history_profile.py)
        elif item.name == "trace_paths":
            values[item.name] = ()  # likewise
        elif typing.get_origin(kind) is tuple:
            values[item.name] = (number * 1000, None, number * 1001)
        elif kind is bool:
            values[item.name] = True
        elif kind is int:
            values[item.name] = number * 7
        elif kind is float:
            values[item.name] = number + 0.25
        elif kind is str:
            values[item.name] = f"text {number}"
        else:
            raise AssertionError(f"{item.name}: a type this test cannot fill ({hint}); teach it")
    return RunSummary(**values)


def test_every_summary_field_is_a_column_or_named_as_stored_elsewhere():
    names = [item.name for item in dataclasses.fields(RunSummary)]
    assert sorted(SUMMARY_COLUMNS + tuple(SUMMARY_STORED_ELSEWHERE)) == sorted(names)
    assert set(SUMMARY_STORED_ELSEWHERE) <= set(names)  # no stale entry


def test_every_summary_field_survives_the_history(tmp_path):
    summary = every_field_set()
    config = RunConfig(device="cpu")
    with HistoryStore.open(tmp_path) as store:
        recorder = store.start_run(config)
        recorder.record(started(config, CPU))
        recorder.record(step(1))
        recorder.record(epoch(1))
        recorder.record(RunEnded(status="failed", summary=summary, reason=summary.reason, kind=summary.failure_kind))
        record = store.get_run(recorder.run_id)
    stored = record.summary
    lost = [item.name for item in dataclasses.fields(RunSummary)
            if getattr(stored, item.name) != getattr(summary, item.name)]
    assert lost == []
    assert (record.status, record.reason, record.failure_kind) == tuple(getattr(summary, n) for n in STATUS_FIELDS)


def test_every_figure_is_a_csv_column():
    summary = every_field_set()
    figures = {item.name for item in dataclasses.fields(RunSummary) if "label" in item.metadata}
    assert {metric.name for metric in SUMMARY_METRICS} >= figures
    # The rest are the record's status, the findings (their headline is the verdict column), the per-sample
    # tops and traces, and each rank's peaks (their own columns).
    rest = {item.name for item in dataclasses.fields(RunSummary)} - figures
    assert rest - set(STATUS_FIELDS) == {"top_ops", "top_kernels", "trace_paths", "findings",
                                         "rank_peak_allocated_bytes", "rank_peak_reserved_bytes",
                                         "rank_peak_nvml_device_used_bytes"}
    assert {"rank_peak_allocated_bytes", "rank_peak_reserved_bytes", "rank_peak_nvml_device_used_bytes",
            "verdict"} <= set(RUNS_CSV_COLUMNS)
    assert summary.findings[0].headline == summary.verdict


def test_every_summary_field_is_in_the_json(tmp_path):
    summary = every_field_set()
    data = json.loads(json.dumps(summary_json(summary, run_id=1, config=RunConfig(profile=True))))
    missing = [item.name for item in dataclasses.fields(RunSummary)
               if item.name not in data and item.name not in SHAPED]
    assert missing == []
    assert data["profile"]["samples"] == summary.profile_samples
    assert data["images_per_sec"] == summary.images_per_sec  # one figure, a number


def test_the_findings_read_the_whole_summary():
    summary = every_field_set()
    facts = RunFacts.of(summary, RunConfig(), CPU)
    assert facts.summary is summary


def test_a_new_field_that_no_place_carries_fails_these_checks():
    """The checks above, against a summary with one field more than the history has columns for."""
    extended = dataclasses.make_dataclass("Extended", [("new_figure", typing.Optional[float], None)],
                                          bases=(RunSummary,), frozen=True, kw_only=True)
    names = [item.name for item in dataclasses.fields(extended)]
    assert sorted(SUMMARY_COLUMNS + tuple(SUMMARY_STORED_ELSEWHERE)) != sorted(names)


def test_named_times_are_plain_json():
    summary = dataclasses.replace(every_field_set(), top_ops=(NamedTime(name="aten::conv2d", seconds=0.5, count=3),))
    data = summary_json(summary, config=RunConfig(profile=True))
    assert data["profile"]["top_ops"] == [{"name": "aten::conv2d", "host_seconds": 0.5, "calls": 3}]

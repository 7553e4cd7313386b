"""`workbench trace` on the traces PyTorch Lightning's PyTorchProfiler and Hugging Face's Trainer write for their
users: real CPU-only traces of a small model trained a few steps with each (scripts/make_framework_traces.py; how
each was taken in data/frameworks/README.md). The frameworks are not needed here: the traces are read as data.

Each framework calls profiler.step() itself (Lightning at the end of training_step, HF Trainer's users from a
callback's on_step_end) and wraps its own hooks in record_functions; the report must find the steps, count the wait
for data wherever the framework's spans hold it, and keep its wrapper spans out of the host ops' self time.
"""

from __future__ import annotations

from pathlib import Path

from trace_builders import op, step, trace, write

from workbench.trace_analysis import read_report
from workbench.trace_analysis.report_text import rank_lines
from workbench.trace_analysis.script_findings import findings_for

FRAMEWORKS = Path(__file__).resolve().parent / "data" / "frameworks"
_read: dict[str, object] = {}


def rank(case: str):
    if case not in _read:
        (_read[case],) = read_report(FRAMEWORKS / f"{case}.pt.trace.json.gz").ranks
    return _read[case]


def findings(case: str) -> dict:
    return {finding.kind: finding for finding in findings_for(rank(case))}


def test_each_frameworks_schedule_gives_three_steps_and_a_cpu_only_rank():
    """schedule(wait=1, warmup=1, active=3): three ProfilerStep#N, whichever calls profiler.step()."""
    for case in ("lightning-input-heavy", "lightning-loader-keeps-up", "lightning-iterable-input-heavy",
                 "hf-trainer-input-heavy", "hf-trainer-loader-keeps-up"):
        report = rank(case)
        assert report.steps == 3, case
        assert report.cpu_only and report.idle_share is None, case


def test_a_costly_getitem_with_num_workers_0_is_input_bound_under_either_framework():
    for case in ("lightning-input-heavy", "hf-trainer-input-heavy"):
        report = rank(case)
        assert report.dataloader_share is not None and report.dataloader_share > 0.5, case
        assert report.traits.loader_workers is False, case  # _SingleProcessDataLoaderIter: num_workers=0
        finding = findings(case)["input-bound"]
        assert "DataLoader's __next__" in finding.text
        assert "num_workers=4" in finding.change, case


def test_a_loader_that_keeps_up_gives_no_finding_under_either_framework():
    for case in ("lightning-loader-keeps-up", "hf-trainer-loader-keeps-up"):
        report = rank(case)
        assert report.dataloader_share is not None and report.dataloader_share < 0.15, case
        assert findings(case) == {}, case


def test_around_a_dataloader_its_own_spans_alone_are_the_wait_for_data_not_lightnings_around_them():
    """Lightning's fetch span holds the DataLoader's __next__ and Lightning's own work around it: counted with it,
    the share read 1.06 % of the step where the DataLoader's spans (what the line names) held 0.87 %."""
    import gzip
    import json

    from workbench.engine import intervals
    from workbench.trace_analysis.trace_events import DATALOADER_NEXT

    for case in ("lightning-input-heavy", "lightning-loader-keeps-up"):
        with gzip.open(FRAMEWORKS / f"{case}.pt.trace.json.gz", "rt") as file:
            spans = [event for event in json.load(file)["traceEvents"] if event.get("ph") == "X"]
        steps = [(round(event["ts"] * 1000), round((event["ts"] + event["dur"]) * 1000)) for event in spans
                 if event["name"].startswith("ProfilerStep#")]
        loader = [(round(event["ts"] * 1000), round((event["ts"] + event["dur"]) * 1000)) for event in spans
                  if DATALOADER_NEXT.match(event["name"])]
        begin, end = min(start for start, _ in steps), max(stop for _, stop in steps)
        share = intervals.total(intervals.clip(intervals.union(loader), begin, end)) / (end - begin)
        assert abs(rank(case).dataloader_share - share) < 1e-4, case


def test_lightnings_fetch_span_is_the_wait_for_data_where_no_dataloader_runs():
    """Batches from a plain iterable (DALI's, a stream's): no enumerate(DataLoader) span, only Lightning's
    [pl][profile][_TrainingEpochLoop].train_dataloader_next around the wait. Read as no data wait at all, the steps'
    time in it went unsaid and the input-bound rule did not fire."""
    report = rank("lightning-iterable-input-heavy")
    assert report.dataloader_share is not None and report.dataloader_share > 0.5
    assert report.traits.lightning_fetch_only and report.traits.loader_workers is None
    finding = findings("lightning-iterable-input-heavy")["input-bound"]
    assert "Lightning's [pl][profile]…_next" in finding.text and "DataLoader's __next__" not in finding.text
    assert finding.change.startswith("the batches come from an iterable of your own, not a torch DataLoader")
    assert any("DataLoader (host in Lightning's [pl][profile]…_next" in line for line in rank_lines(report))


def test_lightnings_fetch_span_around_a_dataloader_counts_its_wait_once():
    """Around a DataLoader, Lightning's span holds the DataLoader's own: the wait is their union, and the report
    names the DataLoader (its iterator says whether it has workers)."""
    report = rank("lightning-input-heavy")
    assert report.data_wait_seconds <= report.window_seconds
    assert not report.traits.lightning_fetch_only
    assert any("DataLoader (host in enumerate(DataLoader)#…__next__)" in line for line in rank_lines(report))


def test_lightnings_wrapper_spans_do_not_take_the_ops_self_time():
    """Lightning calls profiler.step() inside its own spans (training_step's end is within optimizer_step within
    run_training_batch), so a ProfilerStep span crosses them. Nested among them, a step hid the steps after it from
    [pl][profile]run_training_epoch, whose self time then held theirs: it read as the top host op (1.55 s of a
    3.9 s window whose ops are the dataset's aten::sort and kin)."""
    report = rank("lightning-validation-input-heavy")
    names = [op.name for op in report.top_host_ops]
    assert names[0] == "aten::sort"
    assert not any(name.startswith("[pl][profile]") for name in names)


def test_lightnings_validation_steps_numbered_apart_are_said_to_be_so():
    """Validation inside the profiled window: Lightning numbers its validation steps from 1 beside the training
    steps, so one number appears twice; the note names that cause, not only two threads or two profilers."""
    report = rank("lightning-validation-input-heavy")
    assert report.steps == 4  # 5 ProfilerStep spans, #2 twice: the longer kept
    assert any("Lightning's validation steps" in note for note in report.notes)


def test_a_step_that_crosses_the_programs_spans_leaves_their_self_time_alone(tmp_path):
    """Hand-made: "batch" runs across the step boundary (profiler.step() called inside it); "epoch" holds it and
    an op of the next step. epoch's own time is what neither child covers: 99 - 50 - 38 = 11 µs."""
    events = [step(1, 0, 50), step(2, 50, 50), op("epoch", 1, 99, cat="user_annotation"),
              op("batch", 10, 50, cat="user_annotation"), op("aten::mm", 61, 38)]
    (report,) = read_report(write(tmp_path / "crossing.json", trace(events))).ranks
    own = {named.name: named.seconds for named in report.top_host_ops}
    assert round(own["epoch"] * 1e6) == 11
    assert round(own["aten::mm"] * 1e6) == 38

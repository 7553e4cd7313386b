"""Traces torch.profiler wrote on a CPU with the options a user may leave on (scripts/make_profiler_option_traces.py:
record_shapes/with_stack/profile_memory/with_flops, DataLoader workers, torch.compile, nested and step-named
record_functions (inside a step, and over several), no profiler.step(), export_chrome_trace, a gzip handler,
repeat=2, two threads, acc_events), read back: the steps found are the profiler's, the DataLoader's share is its
spans over the steps, nothing is dropped unsaid. Step times depend on the machine that wrote them: they are
checked against the file's own ProfilerStep spans, not against numbers."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from trace_builders import op, step, trace, write
from workbench.trace_analysis import read_report
from workbench.trace_analysis.model import RankReport
from workbench.trace_analysis.script_findings import findings_for

DATA = Path(__file__).resolve().parent / "data" / "profiler-options"
# What each trace's loop did: schedule(wait=1, warmup=1, active=3) records ProfilerStep#2-#4 (#7-#9 in a second
# cycle); the variant without profiler.step() records none.
SCHEDULED = ("cpu-all-options", "cpu-loader-workers", "cpu-compiled", "cpu-annotations", "cpu-export-chrome-trace",
             "cpu-gzip-handler", "cpu-two-threads")
CYCLES = ("cpu-repeat-2", "cpu-acc-events")  # one file per cycle, in a folder
PYTHON_FRAME = re.compile(r"\.py\(\d+\)|^<built-in|^nn\.Module:")  # a python_function span's name


def profiler_steps(path: Path) -> dict[str, tuple[float, float]]:
    """The file's ProfilerStep#N spans the profiler wrote (not the record_function named like one: #999): (start,
    end) in s."""
    with gzip.open(path, "rt", encoding="utf-8") as file:
        events = json.load(file)["traceEvents"]
    return {event["name"]: (event["ts"] / 1e6, (event["ts"] + event["dur"]) / 1e6) for event in events
            if event.get("ph") == "X" and re.fullmatch(r"ProfilerStep#[0-9]", str(event.get("name")))}


def assert_read_as_the_profiler_wrote_it(rank: RankReport, path: Path, step_names: set[str]) -> None:
    steps = profiler_steps(path)
    assert set(steps) == step_names
    assert rank.steps == len(step_names)
    assert sorted(rank.step_seconds) == pytest.approx(sorted(end - start for start, end in steps.values()))
    assert rank.cpu_only and rank.compute_share is None
    assert any("CPU-only" in note for note in rank.notes)
    # the DataLoader ran in every loop: its spans over the steps, never a made-up 0
    assert rank.data_spans >= rank.steps and rank.dataloader_share is not None and rank.dataloader_share > 0
    assert rank.dataloader_share == pytest.approx(rank.data_wait_seconds / rank.window_seconds)
    window = max(end for _, end in steps.values()) - min(start for start, _ in steps.values())
    assert rank.window_seconds == pytest.approx(window, rel=1e-6)  # the first step's start to the last one's end
    assert rank.top_host_ops and not [op.name for op in rank.top_host_ops if PYTHON_FRAME.search(op.name)]
    options_noted = [note for note in rank.notes if note.startswith("taken with")]
    assert len(options_noted) == (path.name.startswith("cpu-all-options"))


@pytest.mark.parametrize("name", SCHEDULED)
def test_a_scheduled_trace_reads_the_profilers_three_steps(name):
    path = DATA / f"{name}.pt.trace.json.gz"
    (rank,) = read_report(path).ranks
    assert_read_as_the_profiler_wrote_it(rank, path, {"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"})


@pytest.mark.parametrize("name", CYCLES)
def test_one_process_cycles_are_one_rank_a_section_each(name):
    report = read_report(DATA / name)
    assert [rank.rank for rank in report.ranks] == [0, 0]
    assert any("one process's profiling cycles" in note for note in report.notes)
    for rank, numbers in zip(report.ranks, ((2, 3, 4), (7, 8, 9))):
        assert_read_as_the_profiler_wrote_it(rank, Path(rank.file), {f"ProfilerStep#{n}" for n in numbers})


def test_without_profiler_step_the_figures_are_over_the_traced_window():
    (rank,) = read_report(DATA / "cpu-no-step-calls.pt.trace.json.gz").ranks
    assert rank.steps == 0 and rank.step_seconds == () and rank.step_seconds_median is None
    assert rank.data_spans == 3 and rank.dataloader_share is not None  # three iterations, three batches
    assert rank.dataloader_share == pytest.approx(rank.data_wait_seconds / rank.window_seconds)
    assert rank.window_seconds > rank.data_wait_seconds > 0
    with gzip.open(DATA / "cpu-no-step-calls.pt.trace.json.gz", "rt", encoding="utf-8") as file:
        host = [event for event in json.load(file)["traceEvents"]
                if event.get("ph") == "X" and event.get("cat") in ("cpu_op", "user_annotation")]
    first, last = min(event["ts"] for event in host), max(event["ts"] + event["dur"] for event in host)
    assert rank.window_seconds == pytest.approx((last - first) / 1e6, rel=1e-6)  # first to last host event


def test_the_options_that_lengthen_the_hosts_time_are_said():
    """record_shapes, with_stack, profile_memory and with_flops on: the trace's steps were 1.7× as long as without
    (2.2 ms against 1.3 ms), SGD.step's own time 2.2× (607 µs against 270 µs: with_stack's Python tracing inside
    it), and nothing said so."""
    (rank,) = read_report(DATA / "cpu-all-options.pt.trace.json.gz").ranks
    (note,) = [note for note in rank.notes if note.startswith("taken with")]
    assert note.startswith("taken with with_stack=True, record_shapes=True, profile_memory=True, with_flops=True (the "
                           "file says so): the profiler records more for every op, which lengthens the host's time")


def test_two_traces_taken_with_different_options_are_said_to_differ_by_the_profiler_too(capsys):
    """The loop without the options beside the same loop with all four on read "the median step is 1.73× as long
    ...: a loss", with no word that the profiler made the difference."""
    from workbench.cli import main

    plain, costly = DATA / "cpu-gzip-handler.pt.trace.json.gz", DATA / "cpu-all-options.pt.trace.json.gz"
    assert main(["trace", str(plain), str(costly)]) == 0
    out = capsys.readouterr().out
    assert ("the two traces were taken with different profiler options (before: none; after: with_stack=True, "
            "record_shapes=True, profile_memory=True, with_flops=True): they lengthen the host's time, so what "
            "changed is the profiler's as much as the script's") in out, out
    assert main(["trace", str(plain), str(DATA / "cpu-export-chrome-trace.pt.trace.json.gz")]) == 0
    assert "profiler options" not in capsys.readouterr().out


def test_the_json_comparison_holds_the_caveats_the_text_says(capsys):
    """A tool reading `--json` saw no sign that the profiler (or the device) changed beside the script."""
    import json

    from workbench.cli import main

    plain, costly = DATA / "cpu-gzip-handler.pt.trace.json.gz", DATA / "cpu-all-options.pt.trace.json.gz"
    assert main(["trace", str(plain), str(costly), "--json"]) == 0
    (comparison,) = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["comparison"]
    (caveat,) = comparison["caveats"]
    assert caveat.startswith("the two traces were taken with different profiler options (before: none; after: "
                             "with_stack=True")
    assert main(["trace", str(plain), str(DATA / "cpu-export-chrome-trace.pt.trace.json.gz"), "--json"]) == 0
    (comparison,) = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["comparison"]
    assert comparison["caveats"] == []


def test_an_option_is_noted_only_where_the_file_says_it_was_on(tmp_path):
    events = [step(1, 0, 1000), op("aten::mm", 10, 500)]
    for top, noted in (({"with_stack": 1, "record_shapes": 0}, "taken with with_stack=True (the file says so)"),
                       ({"profile_memory": True}, "taken with profile_memory=True (the file says so)"),
                       ({"with_stack": "1", "record_shapes": [1], "with_flops": None}, None),
                       ({"with_modules": 1}, None)):  # with_modules records nothing in eager mode
        (rank,) = read_report(write(tmp_path / "t.json", trace(events, **top))).ranks
        assert [note.split(":")[0] for note in rank.notes if note.startswith("taken with")] == (
            [noted] if noted else []), top


def test_a_record_function_named_like_a_step_in_every_step_is_left_out_once_each():
    """A record_function("ProfilerStep#999") inside each of the three steps was said to be "1 ProfilerStep number
    more than once apart in time (steps of two threads, or of two profilers)" and "1 span wholly inside another
    step": three spans inside steps, no second thread or profiler."""
    (rank,) = read_report(DATA / "cpu-annotations.pt.trace.json.gz").ranks
    assert ("3 ProfilerStep spans wholly inside another step: left out (a record_function named like a step, not a "
            "step of the loop)") in rank.notes
    assert not [note for note in rank.notes if "apart in time" in note]
    assert rank.steps == 3


def test_a_record_function_named_like_a_step_over_several_steps_is_said_to_make_the_step_times_doubtful():
    """record_function("ProfilerStep#1000") opened in step #2 and closed in step #4: it covers the three steps and
    the 30 µs between them, so neither the time covered nor the nesting tells it from the steps. The step times
    then hold it and step #3 is left out as a span inside it; the note said only "ProfilerStep spans overlap"."""
    (rank,) = read_report(DATA / "cpu-step-named-over-steps.pt.trace.json.gz").ranks
    assert rank.steps == 3
    (note,) = [note for note in rank.notes if note.startswith("ProfilerStep spans overlap")]
    assert "a record_function named like a step and over more than one step is then read as a step" in note
    assert "the step times may not be the loop's" in note
    (rank,) = read_report(DATA / "cpu-annotations.pt.trace.json.gz").ranks  # nested alone: no overlap
    assert not [note for note in rank.notes if "overlap" in note]


def test_the_loader_with_workers_is_read_as_one():
    (rank,) = read_report(DATA / "cpu-loader-workers.pt.trace.json.gz").ranks
    assert rank.traits.loader_workers is True
    findings = findings_for(rank)
    assert findings and findings[0].kind == "input-bound" and findings[0].figure == rank.dataloader_share
    assert "already runs worker processes" in findings[0].change


def test_the_compiled_model_is_read_as_compiled():
    (rank,) = read_report(DATA / "cpu-compiled.pt.trace.json.gz").ranks
    assert rank.traits.compiled


def test_the_second_threads_ops_are_host_ops_of_the_rank():
    """The background thread's aten::tanh runs only there (the tiny CNN has none)."""
    (rank,) = read_report(DATA / "cpu-two-threads.pt.trace.json.gz").ranks
    assert "aten::tanh" in {op.name for op in rank.top_host_ops}

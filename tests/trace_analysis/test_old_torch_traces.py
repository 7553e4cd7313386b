"""`workbench trace` on the traces the oldest torch the project supports writes (pyproject: torch>=2.4): real CPU
traces of a tiny training loop taken with torch 2.4.1 (scripts/make_old_torch_traces.py; how in
data/torch-2.4/README.md), read as data (no torch 2.4 is needed here). The loop is profiled as docs/own-script.md's
snippet does; the report must find the profiler's three steps, read the DataLoader's share from its spans, give the
input-bound finding (naming num_workers) where the loader holds the steps up and none where it keeps up, and say
nothing but that the trace is CPU-only. Step times depend on the machine that wrote them: they are checked against
each file's own spans, never against numbers."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from workbench.engine import intervals
from workbench.trace_analysis import read_report
from workbench.trace_analysis.comparing import straggler
from workbench.trace_analysis.model import RankReport
from workbench.trace_analysis.report_json import to_json
from workbench.trace_analysis.script_findings import findings_for
from workbench.trace_analysis.trace_events import DATALOADER_NEXT

DATA = Path(__file__).resolve().parent / "data"
OLD = DATA / "torch-2.4"
INPUT_BOUND = ("input-bound", "export-chrome-trace", "loader-workers")
LOADER_KEEPS_UP = ("loader-keeps-up", "gzip-handler", "compiled")
CPU_ONLY_NOTE = "a CPU-only trace: it holds no kernel, copy or fill events, so the GPU figures cannot be read"
_read: dict[str, RankReport] = {}


def path(case: str) -> Path:
    return OLD / f"torch-2.4.1-{case}.pt.trace.json.gz"


def rank(case: str) -> RankReport:
    if case not in _read:
        report = read_report(path(case))
        assert report.notes == ()
        (_read[case],) = report.ranks
    return _read[case]


def load(case: str) -> dict:
    with gzip.open(path(case), "rt", encoding="utf-8") as file:
        return json.load(file)


def spans_ns(trace: dict, keep) -> list[tuple[int, int]]:
    return [(round(event["ts"] * 1000), round((event["ts"] + event["dur"]) * 1000)) for event in trace["traceEvents"]
            if event.get("ph") == "X" and keep(str(event.get("name")))]


def test_every_fixture_is_listed_here():
    assert sorted(OLD.glob("*.json.gz")) == sorted(path(case) for case in INPUT_BOUND + LOADER_KEEPS_UP)


@pytest.mark.parametrize("case", INPUT_BOUND + LOADER_KEEPS_UP)
def test_the_profilers_three_steps_are_read_and_the_notes_say_only_cpu_only(case):
    """schedule(wait=1, warmup=1, active=3): ProfilerStep#2-#4, each as long as its span in the file."""
    trace = load(case)
    steps = {event["name"]: event["dur"] / 1e6 for event in trace["traceEvents"]
             if event.get("ph") == "X" and str(event.get("name")).startswith("ProfilerStep#")}
    assert sorted(steps) == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    report = rank(case)
    assert report.steps == 3
    assert sorted(report.step_seconds) == pytest.approx(sorted(steps.values()))
    assert report.cpu_only and report.compute_share is None and report.idle_share is None
    assert report.notes == (CPU_ONLY_NOTE,)
    assert report.profiler_options == ()
    assert report.traits.optimizer == "SGD"
    assert report.top_host_ops and all(op.seconds > 0 for op in report.top_host_ops)


@pytest.mark.parametrize("case", INPUT_BOUND + LOADER_KEEPS_UP)
def test_the_dataloaders_share_is_its_spans_over_the_steps(case):
    trace = load(case)
    steps = spans_ns(trace, lambda name: name.startswith("ProfilerStep#"))
    loader = spans_ns(trace, lambda name: bool(DATALOADER_NEXT.match(name)))
    begin, end = min(start for start, _ in steps), max(stop for _, stop in steps)
    share = intervals.total(intervals.clip(intervals.union(loader), begin, end)) / (end - begin)
    assert rank(case).data_spans == len(loader) >= 3
    assert rank(case).dataloader_share == pytest.approx(share, abs=1e-4)


@pytest.mark.parametrize("case", INPUT_BOUND)
def test_a_loader_that_holds_the_steps_up_gives_the_input_bound_finding_naming_num_workers(case):
    report = rank(case)
    assert report.dataloader_share is not None and report.dataloader_share > 0.5
    (finding,) = findings_for(report)
    assert finding.kind == "input-bound" and "DataLoader's __next__" in finding.text
    if case == "loader-workers":  # _MultiProcessingDataLoaderIter: workers already run, too few
        assert report.traits.loader_workers is True
        assert "num_workers=<more than now>" in finding.change
    else:  # _SingleProcessDataLoaderIter: num_workers=0
        assert report.traits.loader_workers is False
        assert "num_workers=4" in finding.change


@pytest.mark.parametrize("case", LOADER_KEEPS_UP)
def test_a_loader_that_keeps_up_gives_no_finding(case):
    report = rank(case)
    assert report.dataloader_share is not None and report.dataloader_share < 0.15
    assert report.traits.loader_workers is False
    assert findings_for(report) == ()


def test_torch_2_4s_compiled_code_is_read_as_compiled():
    """torch 2.4 names Dynamo's region "Torch-Compiled Region" (2.14: "Torch-Compiled Region: 0/0") and writes no
    "## Call CompiledFxGraph … ##" span: the graphs' time is CompiledFunction's and CompiledFunctionBackward's own."""
    names = {str(event.get("name")) for event in load("compiled")["traceEvents"]}
    assert "Torch-Compiled Region" in names and not any(name.startswith("## Call CompiledFxGraph") for name in names)
    report = rank("compiled")
    assert report.traits.compiled
    assert {"CompiledFunction", "CompiledFunctionBackward"} <= {op.name for op in report.top_host_ops}


def test_the_json_report_has_the_same_fields_as_for_a_trace_of_the_projects_own_torch():
    """The file's top level lacks trace_id and host_name (torch 2.14 writes both): nothing read from it is lost."""
    assert not {"trace_id", "host_name"} & set(load("gzip-handler"))

    def shape(value):
        if isinstance(value, dict):
            return {key: shape(item) for key, item in value.items() if key not in ("path", "file")}
        if isinstance(value, list):
            return [shape(value[0])] if value else []
        return type(value).__name__

    old = to_json(read_report(path("gzip-handler")))
    new = to_json(read_report(DATA / "profiler-options" / "cpu-gzip-handler.pt.trace.json.gz"))
    assert shape(old) == shape(new)


@pytest.mark.parametrize("job", ("gloo-straggler", "gloo-unnamed"))
def test_a_two_rank_gloo_jobs_ranks_are_read_from_torch_2_4s_distributedinfo(job):
    """scripts/make_gloo_rank_traces.py under torch 2.4.1: its distributedInfo (backend, rank, world_size, pg_count,
    pg_config, as torch 2.14 writes it) numbers the ranks; gloo's collectives are on the host in every step."""
    report = read_report(OLD / job)
    assert [rank.rank for rank in report.ranks] == [0, 1] and report.notes == ()
    for rank in report.ranks:
        assert rank.rank_named and rank.steps == 3 and rank.notes == (CPU_ONLY_NOTE,)
        assert rank.communication_by_step is not None and all(seconds > 0 for seconds in rank.communication_by_step)
        assert "gloo:all_reduce" in [item.name for item in rank.top_host_ops]
    if job == "gloo-unnamed":  # the handler's default names (<host>_<pid>.<time>…): distributedInfo alone says
        assert all("rank" not in Path(rank.file).name for rank in report.ranks)


def test_the_rank_the_other_waits_for_in_a_torch_2_4_job_is_named():
    """Rank 1 sorts a million floats before each backward; rank 0 waits for it in DDP's all-reduce."""
    report = read_report(OLD / "gloo-straggler")
    verdict = straggler(report.ranks)
    assert verdict.startswith("rank 1, by the others' wait:") and "in 3 of the 3 steps" in verdict
    assert [rank.top_host_ops[0].name for rank in report.ranks] == ["gloo:all_reduce", "aten::sort"]

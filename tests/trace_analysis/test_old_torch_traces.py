"""`workbench trace` on the traces the oldest torch the project supports writes (pyproject: torch>=2.4): real CPU
traces of a tiny training loop taken with torch 2.4.1 and 2.6.0 (scripts/make_old_torch_traces.py; how in
data/torch-2.4/README.md and data/torch-2.6/README.md), read as data (no old torch is needed here). The loop is
profiled as docs/own-script.md's snippet does; the report must find the profiler's three steps, read the
DataLoader's share from its spans, give the input-bound finding (naming num_workers) where the loader holds the
steps up and none where it keeps up, and say nothing but that the trace is CPU-only. Step times depend on the
machine that wrote them: they are checked against each file's own spans, never against numbers. Kineto's log lines,
written after the events by these torches and unescaped, are passed over where they are not JSON."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from workbench.engine import intervals
from workbench.trace_analysis import json_stream, read_report
from workbench.trace_analysis.comparing import straggler
from workbench.trace_analysis.model import RankReport, TraceError
from workbench.trace_analysis.report_json import to_json
from workbench.trace_analysis.script_findings import findings_for
from workbench.trace_analysis.trace_events import DATALOADER_NEXT

DATA = Path(__file__).resolve().parent / "data"
OLD = DATA / "torch-2.4"
VERSIONS = {"2.4.1": OLD, "2.6.0": DATA / "torch-2.6"}
INPUT_BOUND = [(version, case) for version in VERSIONS
               for case in ("input-bound", "export-chrome-trace", "loader-workers")]
LOADER_KEEPS_UP = [(version, case) for version in VERSIONS for case in ("loader-keeps-up", "gzip-handler", "compiled")]
CPU_ONLY_NOTE = "a CPU-only trace: it holds no kernel, copy or fill events, so the GPU figures cannot be read"
_read: dict[tuple[str, str], RankReport] = {}


def path(version: str, case: str) -> Path:
    return VERSIONS[version] / f"torch-{version}-{case}.pt.trace.json.gz"


def rank(version: str, case: str) -> RankReport:
    if (version, case) not in _read:
        report = read_report(path(version, case))
        assert report.notes == ()
        (_read[version, case],) = report.ranks
    return _read[version, case]


def load(version: str, case: str) -> dict:
    with gzip.open(path(version, case), "rt", encoding="utf-8") as file:
        return json.load(file)


def spans_ns(trace: dict, keep) -> list[tuple[int, int]]:
    return [(round(event["ts"] * 1000), round((event["ts"] + event["dur"]) * 1000)) for event in trace["traceEvents"]
            if event.get("ph") == "X" and keep(str(event.get("name")))]


def test_every_fixture_is_listed_here():
    assert sorted(file for folder in VERSIONS.values() for file in folder.glob("*.json.gz")) == sorted(
        path(*case) for case in INPUT_BOUND + LOADER_KEEPS_UP)


@pytest.mark.parametrize("version, case", INPUT_BOUND + LOADER_KEEPS_UP)
def test_the_profilers_three_steps_are_read_and_the_notes_say_only_cpu_only(version, case):
    """schedule(wait=1, warmup=1, active=3): ProfilerStep#2-#4, each as long as its span in the file."""
    trace = load(version, case)
    steps = {event["name"]: event["dur"] / 1e6 for event in trace["traceEvents"]
             if event.get("ph") == "X" and str(event.get("name")).startswith("ProfilerStep#")}
    assert sorted(steps) == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    report = rank(version, case)
    assert report.steps == 3
    assert sorted(report.step_seconds) == pytest.approx(sorted(steps.values()))
    assert report.cpu_only and report.compute_share is None and report.idle_share is None
    assert report.notes == (CPU_ONLY_NOTE,)
    assert report.profiler_options == ()
    assert report.traits.optimizer == "SGD"
    assert report.top_host_ops and all(op.seconds > 0 for op in report.top_host_ops)


@pytest.mark.parametrize("version, case", INPUT_BOUND + LOADER_KEEPS_UP)
def test_the_dataloaders_share_is_its_spans_over_the_steps(version, case):
    trace = load(version, case)
    steps = spans_ns(trace, lambda name: name.startswith("ProfilerStep#"))
    loader = spans_ns(trace, lambda name: bool(DATALOADER_NEXT.match(name)))
    begin, end = min(start for start, _ in steps), max(stop for _, stop in steps)
    share = intervals.total(intervals.clip(intervals.union(loader), begin, end)) / (end - begin)
    assert rank(version, case).data_spans == len(loader) >= 3
    assert rank(version, case).dataloader_share == pytest.approx(share, abs=1e-4)


@pytest.mark.parametrize("version, case", INPUT_BOUND)
def test_a_loader_that_holds_the_steps_up_gives_the_input_bound_finding_naming_num_workers(version, case):
    report = rank(version, case)
    assert report.dataloader_share is not None and report.dataloader_share > 0.5
    (finding,) = findings_for(report)
    assert finding.kind == "input-bound" and "DataLoader's __next__" in finding.text
    if case == "loader-workers":  # _MultiProcessingDataLoaderIter: workers already run, too few
        assert report.traits.loader_workers is True
        assert "num_workers=<more than now>" in finding.change
    else:  # _SingleProcessDataLoaderIter: num_workers=0
        assert report.traits.loader_workers is False
        assert "num_workers=4" in finding.change


@pytest.mark.parametrize("version, case", LOADER_KEEPS_UP)
def test_a_loader_that_keeps_up_gives_no_finding(version, case):
    report = rank(version, case)
    assert report.dataloader_share is not None and report.dataloader_share < 0.15
    assert report.traits.loader_workers is False
    assert findings_for(report) == ()


@pytest.mark.parametrize("version, region", [("2.4.1", "Torch-Compiled Region"),
                                             ("2.6.0", "Torch-Compiled Region: 0/0")])
def test_old_torchs_compiled_code_is_read_as_compiled(version, region):
    """torch 2.4 names Dynamo's region "Torch-Compiled Region" (2.6 and 2.14: "Torch-Compiled Region: 0/0"); neither
    2.4 nor 2.6 writes a "## Call CompiledFxGraph … ##" span (2.14 does): the graphs' time is CompiledFunction's and
    CompiledFunctionBackward's own."""
    names = {str(event.get("name")) for event in load(version, "compiled")["traceEvents"]}
    assert region in names and not any(name.startswith("## Call CompiledFxGraph") for name in names)
    report = rank(version, "compiled")
    assert report.traits.compiled
    assert {"CompiledFunction", "CompiledFunctionBackward"} <= {op.name for op in report.top_host_ops}


def test_the_json_report_has_the_same_fields_as_for_a_trace_of_the_projects_own_torch():
    """torch 2.4's file lacks trace_id and host_name at its top level, torch 2.6's host_name (torch 2.14 writes
    both): nothing read from them is lost."""
    assert not {"trace_id", "host_name"} & set(load("2.4.1", "gzip-handler"))

    def shape(value):
        if isinstance(value, dict):
            return {key: shape(item) for key, item in value.items() if key not in ("path", "file")}
        if isinstance(value, list):
            return [shape(value[0])] if value else []
        return type(value).__name__

    new = to_json(read_report(DATA / "profiler-options" / "cpu-gzip-handler.pt.trace.json.gz"))
    for version in VERSIONS:
        assert shape(to_json(read_report(path(version, "gzip-handler")))) == shape(new), version


def test_kinetos_log_lines_at_the_top_level_are_passed_over():
    """torch 2.6 (as torches before mid-2026's Kineto) writes the log lines Kineto raised during the trace after
    the events, as top-level "ERROR"/"WARNING"/"INFO" lists (here a CUDA build on a machine without a GPU:
    "gpuGetDeviceCount failed with code 35"): read past, no note, the figures as without them."""
    trace = load("2.6.0", "loader-keeps-up")
    keys = list(trace)
    assert "gpuGetDeviceCount failed" in trace["ERROR"][0] and keys.index("ERROR") > keys.index("traceEvents")
    assert rank("2.6.0", "loader-keeps-up").notes == (CPU_ONLY_NOTE,)


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


def _with_error_line(tmp_path: Path, message: str, name: str = "trace.json") -> Path:
    """torch 2.6.0's real trace, its Kineto ERROR line replaced by ``message`` as Kineto wrote it: unescaped."""
    with gzip.open(path("2.6.0", "loader-keeps-up"), "rt", encoding="utf-8") as file:
        text = file.read()
    logged = "gpuGetDeviceCount failed with code 35"
    assert text.count(logged) == 1
    target = tmp_path / name
    target.write_text(text.replace(logged, message), encoding="utf-8")
    return target


@pytest.mark.parametrize("message", ['cuptiActivityEnable failed for "kernel": CUPTI_ERROR_NOT_INITIALIZED',
                                     "Failed to apply config (\tbad value)"])
@pytest.mark.parametrize("chunk_chars", [None, 64])
def test_kinetos_log_line_that_is_not_json_is_passed_over_and_every_event_read(tmp_path, monkeypatch, message,
                                                                              chunk_chars):
    """Kineto (until mid-2026) wrote its log lines after the events unescaped: a quote or a tab in one made the whole
    trace "not valid JSON" and it was refused, every event read. That line alone is passed over, with a note; the
    figures are the file's as without it (read in 1 MB chunks, and in chunks of 64 characters that cut the line)."""
    if chunk_chars is not None:
        monkeypatch.setattr(json_stream, "CHUNK_CHARS", chunk_chars)
    broken = _with_error_line(tmp_path, message)
    with pytest.raises(json.JSONDecodeError):
        json.loads(broken.read_text(encoding="utf-8"))
    (report,) = read_report(broken).ranks
    original = rank("2.6.0", "loader-keeps-up")
    assert report.step_seconds == original.step_seconds and report.dataloader_share == original.dataloader_share
    assert report.top_host_ops == original.top_host_ops
    assert report.notes == ("Kineto's ERROR log lines after the events are not valid JSON (a quote or tab in a "
                            "message, written unescaped by torch's Kineto until mid-2026): passed over; every event "
                            "was read", CPU_ONLY_NOTE)


def test_text_that_is_not_json_elsewhere_beside_the_events_is_still_refused(tmp_path):
    """Only Kineto's log lines are passed over: a broken traceName (or any other value) is still one line."""
    broken = _with_error_line(tmp_path, "fine")
    text = broken.read_text(encoding="utf-8").replace('"traceName": "', '"traceName": "a "quoted" name ')
    broken.write_text(text, encoding="utf-8")
    with pytest.raises(TraceError, match="is not valid JSON"):
        read_report(broken)


def test_a_trace_cut_inside_kinetos_log_line_is_still_a_truncated_trace(tmp_path):
    broken = _with_error_line(tmp_path, 'a "quoted" word')
    text = broken.read_text(encoding="utf-8")
    broken.write_text(text[:text.index('a "quoted"') + 3], encoding="utf-8")
    with pytest.raises(TraceError, match="ends early"):
        read_report(broken)

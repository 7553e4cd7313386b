"""Real traces that hold no GPU timeline to read (HTA's own test data, tests/trace_analysis/data/hta-tests): each
says why in one note or one line, never "100 % idle" and never "CPU-only" where a device was there."""

from __future__ import annotations

from pathlib import Path

import pytest

from trace_builders import kernel, op, step, trace, write
from workbench.trace_analysis import parsed_trace, read_report
from workbench.trace_analysis.model import TraceError, TraceReport
from workbench.trace_analysis.report_text import report_lines

NO_TIMELINE = Path(__file__).resolve().parent / "data" / "hta-tests" / "no-gpu-timeline"


def test_cuptis_range_profiler_trace_says_the_counters_took_the_timelines_place():
    """torch.profiler with experimental_config's profiler_metrics: CUPTI writes counter ranges, not kernels."""
    (rank,) = read_report(NO_TIMELINE / "a100-cupti-range-profiler.json.gz").ranks
    assert rank.cpu_only and rank.gpu_span is None and rank.idle_share is None
    assert rank.device == "NVIDIA A100-PG509-200"  # no work names its GPU, but the file lists eight of one kind
    assert "figures over the first to the last host event" in "\n".join(report_lines(TraceReport("t", (rank,))))
    (note,) = [note for note in rank.notes if "range profiler" in note]
    assert "profiler_metrics" in note and "cuda_profiler_range" in note
    assert not any("CPU-only" in note for note in rank.notes)


def test_a_cpu_only_gloo_rank_is_called_cpu_only_with_its_rank():
    (rank,) = read_report(NO_TIMELINE / "cpu-only-gloo-rank-34.json.gz").ranks
    assert rank.rank == 34 and rank.cpu_only and rank.steps == 1
    assert any(note.startswith("a CPU-only trace") for note in rank.notes)
    assert rank.top_host_ops[0].name == "gloo:all_reduce"


def test_an_execution_trace_is_named_for_what_it_is():
    with pytest.raises(TraceError, match="a PyTorch execution trace .* not a profiler trace"):
        read_report(NO_TIMELINE / "execution-trace.json.gz")


def test_a_device_the_reader_does_not_read_is_named_not_called_a_cpu(tmp_path):
    """An MTIA's trace (HTA reads its mtia_ccp_events as kernels): its device spans are named, and the GPU figures
    are not made up; Python frames are the host's own and are not named."""
    events = [step(1, 0, 1000), step(2, 1000, 1000), op("aten::mm", 10, 100),
              kernel("mm", 100, 300, 1, cat="mtia_ccp_events"), kernel("mm", 1100, 300, 2, cat="mtia_ccp_events"),
              op("train.py(10): step", 0, 2000, cat="python_function")]
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.cpu_only and rank.gpu_span is None
    (note,) = [note for note in rank.notes if "does not read" in note]
    assert "mtia_ccp_events (2)" in note and "python_function" not in note
    assert not any("CPU-only" in note for note in rank.notes)


def test_a_file_listing_gpus_without_gpu_work_is_not_called_cpu_only(tmp_path):
    """Profiled without ProfilerActivity.CUDA on a GPU machine: the file lists its GPUs, its header names them, and
    the note says no GPU activity was recorded rather than calling the trace CPU-only."""
    properties = [{"id": 0, "name": "NVIDIA A100", "computeMajor": 8, "computeMinor": 0}]
    events = [step(1, 0, 1000), step(2, 1000, 1000), op("aten::mm", 10, 100)]
    (rank,) = read_report(write(tmp_path / "t.json", trace(events, deviceProperties=properties))).ranks
    assert rank.cpu_only and rank.device == "NVIDIA A100"
    assert any(note.startswith("no GPU activity recorded") and "ProfilerActivity.CUDA" in note for note in rank.notes)
    assert not any("CPU-only" in note for note in rank.notes)


def test_gpus_of_several_kinds_listed_without_work_name_none_of_them(tmp_path):
    properties = [{"name": "Tesla V100", "computeMajor": 7, "computeMinor": 0},
                  {"name": "NVIDIA A100", "computeMajor": 8, "computeMinor": 0}]  # no ids, as a hand-made file may
    events = [step(1, 0, 1000), step(2, 1000, 1000), op("aten::mm", 10, 100)]
    (rank,) = read_report(write(tmp_path / "t.json", trace(events, deviceProperties=properties))).ranks
    assert (rank.device, rank.compute_capability) == ("unknown", None)


def test_unknown_categories_are_counted_up_to_a_bound(tmp_path):
    """A hostile file naming a new category on every span: the count keeps MAX_UNREAD_CATEGORIES of them and sums
    the rest, not one entry each."""
    events = [op("x", index, 1, cat=f"c{index}") for index in range(5 * parsed_trace.MAX_UNREAD_CATEGORIES)]
    parsed = parsed_trace.read_trace(write(tmp_path / "t.json", trace([step(1, 0, 1000), *events])))
    assert len(parsed.unread_categories) == parsed_trace.MAX_UNREAD_CATEGORIES + 1
    assert parsed.unread_categories[parsed_trace.MORE_CATEGORIES] == 4 * parsed_trace.MAX_UNREAD_CATEGORIES
    assert "python_function" not in parsed_trace.read_trace(write(tmp_path / "p.json", trace(
        [step(1, 0, 1000), op("f", 0, 1, cat="python_function")]))).unread_categories
    with pytest.raises(TraceError, match=r"320 events, and no span this reader reads \(spans of categories it does not "
                                         r"read: c0 \(1\), c1 \(1\), c2 \(1\), c3 \(1\) and 316 spans of others\)"):
        parsed_trace.read_trace(write(tmp_path / "u.json", trace(events)))

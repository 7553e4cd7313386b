"""Kineto's formats old and new, NVIDIA and AMD, any GPU index, folders of ranks: read into the same figures."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from pathlib import Path

import pytest

from trace_builders import input_bound_steps, kernel, launched, op, runtime, step, trace, write
from trace_reports import rank_report
from workbench.controller.trace_page import trace_page
from workbench.trace_analysis import json_stream, read_report
from workbench.trace_analysis.comparing import straggler
from workbench.trace_analysis.model import Fingerprint, QueuedWait, TraceError
from workbench.trace_analysis.parsed_trace import read_trace
from workbench.trace_analysis.wording import queued_waits_text
from workbench.trace_analysis.report_text import rank_lines, report_lines

SHARED_TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
# input_bound_steps(3): 30 ms of steps; 3 × 3.98 ms of kernel; the host 3 × 6 ms in the DataLoader.
INPUT_BOUND = dict(compute=3 * 3980 / 30000, idle=18060 / 30000, data=18000 / 18060, host=50 / 18060,
                   other=10 / 18060, dataloader=18000 / 30000)


def only_rank(path, **kwargs):
    (rank,) = read_report(path, **kwargs).ranks
    return rank


def as_2021(events):
    """The same events as a 2021 trace writes them: capitalised categories, "stream 7" thread ids."""
    old = {"kernel": "Kernel", "cuda_runtime": "Runtime", "cpu_op": "Operator", "user_annotation": "Operator",
           "gpu_memcpy": "Memcpy", "gpu_memset": "Memset"}
    result = copy.deepcopy(events)
    for event in result:
        event["cat"] = old[event["cat"]]
        if event["cat"] in ("Kernel", "Memcpy", "Memset"):
            event["tid"] = f"stream {event['tid']}"
        else:
            event["tid"] = str(event["tid"])
    return result


def test_an_input_bound_trace_reads_its_steps_shares_and_dataloader_time(tmp_path):
    rank = only_rank(write(tmp_path / "t.json", trace(input_bound_steps())))
    assert rank.steps == 3 and rank.step_seconds == (0.01, 0.01, 0.01)
    assert (rank.step_seconds_median, rank.step_seconds_low, rank.step_seconds_high) == (0.01, 0.01, 0.01)
    assert rank.compute_share == pytest.approx(INPUT_BOUND["compute"])
    assert rank.idle_share == pytest.approx(INPUT_BOUND["idle"])
    assert rank.communication_share == 0 and rank.memory_share == 0
    assert rank.idle_for_data_share == pytest.approx(INPUT_BOUND["data"])
    assert rank.idle_for_host_share == pytest.approx(INPUT_BOUND["host"])
    assert rank.idle_other_share == pytest.approx(INPUT_BOUND["other"])
    assert rank.dataloader_share == pytest.approx(INPUT_BOUND["dataloader"])
    assert rank.compute_share + rank.communication_share + rank.memory_share + rank.idle_share == pytest.approx(1)
    assert rank.kernels == 3 and rank.launches == 3 and rank.top_kernels[0].name == "void gemm_kernel<float>()"


def test_the_2021_format_reads_as_todays(tmp_path):
    """Kernel / Runtime / Operator categories and string thread ids (TensorBoard plugin's samples) read as
    today's kernel / cuda_runtime / cpu_op: before, every event was skipped and the trace read as nothing."""
    today = only_rank(write(tmp_path / "new.json", trace(input_bound_steps())))
    old = only_rank(write(tmp_path / "old.json", trace(as_2021(input_bound_steps()))))
    assert old.kernels == 3 and old.steps == 3
    for field in ("compute_share", "idle_share", "idle_for_data_share", "idle_for_host_share", "dataloader_share"):
        assert getattr(old, field) == pytest.approx(getattr(today, field)), field


def test_a_workbench_data_wait_annotation_counts_as_the_dataloader_does(tmp_path):
    rank = only_rank(write(tmp_path / "t.json", trace(input_bound_steps(loader="workbench.data_wait"))))
    assert rank.idle_for_data_share == pytest.approx(INPUT_BOUND["data"])
    assert rank.dataloader_share == pytest.approx(INPUT_BOUND["dataloader"])


def test_a_trace_without_data_loading_spans_has_no_dataloader_share(tmp_path):
    events = [e for e in input_bound_steps() if "DataLoader" not in e["name"]]
    rank = only_rank(write(tmp_path / "t.json", trace(events)))
    assert rank.dataloader_share is None and rank.idle_for_data_share is None  # unknown, not 0
    assert rank.idle_for_host_share == pytest.approx((18060 - 10) / 18060)  # the launch came late: the host


def test_hip_launches_make_idle_a_host_wait_as_cuda_launches_do(tmp_path):
    """ROCm traces launch with hipLaunchKernel: counted as a launch, the gap before the kernel is the host's."""
    events = [step(1, 0, 1000), step(2, 1000, 1000),
              runtime("hipLaunchKernel", 500, 5, 1), kernel("Cijk_gemm", 600, 300, 1),
              runtime("hipLaunchKernel", 1500, 5, 2), kernel("Cijk_gemm", 1600, 300, 2)]
    rank = only_rank(write(tmp_path / "t.json", trace(events)))
    assert rank.idle_for_host_share == pytest.approx(1300 / 1400)  # all but the 100 µs tail after the last kernel
    assert rank.runtime_calls == {"hipLaunchKernel": pytest.approx(10e-6)}


def test_a_sync_record_on_no_stream_is_left_out_as_hta_leaves_it(tmp_path):
    """CUPTI's Event Sync and Context Sync carry stream -1 (or none): a host's wait, not the GPU's; counting them
    widened HTA's window past the last kernel."""
    events = [*launched("k", 0, 100, 100, 1),
              {**kernel("Event Sync", 300, 50, 2, stream=-1), "cat": "cuda_sync"},
              {**kernel("Context Sync", 400, 50, 3), "cat": "cuda_sync", "args": {"device": 0, "correlation": 3}}]
    rank = only_rank(write(tmp_path / "t.json", trace(events)))
    assert rank.gpu_span_window_ns == (100_000, 200_000) and rank.gpu_span["compute_share"] == pytest.approx(1.0)


def test_rocms_blit_kernels_are_copies_and_fills_in_ours_and_compute_in_htas_rules(tmp_path):
    """ROCm's runtime copies and fills memory with kernels of its own (__amd_rocclr_copyBuffer…,
    __amd_rocclr_fillBufferAligned…): ours counts them as copies and fills, HTA (and its replay) as compute."""
    events = [step(1, 0, 1000), step(2, 1000, 1000),
              runtime("hipMemcpyAsync", 10, 5, 1), kernel("__amd_rocclr_copyBuffer", 100, 200, 1),
              runtime("hipMemsetAsync", 20, 5, 2), kernel("__amd_rocclr_fillBufferAligned", 300, 100, 2),
              runtime("hipLaunchKernel", 30, 5, 3), kernel("Cijk_gemm", 400, 400, 3)]
    rank = only_rank(write(tmp_path / "t.json", trace(events)))
    assert rank.memory_share == pytest.approx(300 / 2000) and rank.compute_share == pytest.approx(400 / 2000)
    assert [(c.name, c.count) for c in rank.top_copies] == [("__amd_rocclr_copyBuffer", 1),
                                                            ("__amd_rocclr_fillBufferAligned", 1)]
    assert [k.name for k in rank.top_kernels] == ["Cijk_gemm"]
    assert rank.gpu_span["compute_share"] == pytest.approx(1.0)  # HTA's window: 100–800 µs, all of it "compute"


def test_htas_rules_count_a_collective_by_its_name_as_hta_does(tmp_path):
    """HTA keeps a kernel out of compute by its name's start ("nccl…"); ours knows "void ncclKernel…" as
    communication too, but the figures over HTA's window follow HTA's rule to the letter."""
    events = [*launched("ncclKernel_AllReduce", 0, 100, 100, 1),
              *launched("void ncclKernel_Broadcast", 10, 200, 100, 2)]
    rank = only_rank(write(tmp_path / "t.json", trace(events)))
    assert rank.communication_share == pytest.approx(1.0)
    assert rank.gpu_span["compute_share"] == pytest.approx(0.5)


def test_the_gpu_is_read_from_the_trace_not_assumed_to_be_device_0(tmp_path):
    events = [step(1, 0, 1000), step(2, 1000, 1000), *launched("k", 10, 100, 500, 1, device=1),
              *launched("k", 1010, 1100, 500, 2, device=1)]
    rank = only_rank(write(tmp_path / "t.json", trace(events, distributedInfo={"rank": 1})))
    assert (rank.rank, rank.device_index, rank.device, rank.kernels) == (1, 1, "cuda:1", 2)
    assert rank.compute_share == pytest.approx(0.5)


def test_the_device_name_and_compute_capability_come_from_the_trace_properties(tmp_path):
    events = [*launched("k", 10, 100, 500, 1, device=2)]
    properties = [{"id": 0, "name": "NVIDIA A100", "computeMajor": 8, "computeMinor": 0},
                  {"id": 2, "name": "Tesla T4", "computeMajor": 7, "computeMinor": 5}]
    rank = only_rank(write(tmp_path / "t.json", trace(events, deviceProperties=properties)))
    assert (rank.device, rank.compute_capability) == ("Tesla T4", (7, 5))
    for mistyped in ({"computeMajor": "seven"}, {"computeMajor": "sm_70", "computeMinor": 0},
                     {"computeMajor": 7, "computeMinor": 10**18}, {"computeMajor": True, "computeMinor": 0},
                     {"computeMajor": 7, "computeMinor": -3}):  # not known, never guessed
        properties[1] = {"id": 2, "name": "Tesla T4", **mistyped}
        rank = only_rank(write(tmp_path / "t.json", trace(events, deviceProperties=properties)))
        assert rank.compute_capability is None, mistyped


def test_a_file_with_two_gpus_gives_one_report_per_gpu(tmp_path):
    events = [*launched("a", 10, 100, 500, 1, device=0), *launched("b", 10, 100, 200, 2, device=3)]
    report = read_report(write(tmp_path / "t.json", trace(events)))
    assert [(r.rank, r.device_index, r.kernels) for r in report.ranks] == [(0, 0, 1), (1, 3, 1)]
    assert any("2 GPUs" in note for note in report.ranks[0].notes)


def test_a_folder_of_ranks_reads_each_file_as_its_rank(tmp_path):
    for rank in (1, 0):
        events = [step(1, 0, 1000), step(2, 1000, 1000), *launched("k", 10, 100, 300 + 100 * rank, 1, device=rank)]
        write(tmp_path / f"worker{rank}.pt.trace.json.gz", trace(events, distributedInfo={"rank": rank}))
    report = read_report(tmp_path)
    assert [(r.rank, r.device_index) for r in report.ranks] == [(0, 0), (1, 1)]
    assert [r.rank for r in read_report(tmp_path, rank=1).ranks] == [1]
    assert len(report.files) == 2


def test_a_rank_in_two_files_is_named_once_and_in_the_singular(tmp_path):
    """Two captures of one rank in a folder: both are shown, and the note names the rank read twice."""
    events = [step(1, 0, 1000), *launched("k", 10, 100, 300, 1)]
    for name in ("first", "second"):
        write(tmp_path / f"{name}.json", trace(events, distributedInfo={"rank": 0}))
    report = read_report(tmp_path)
    assert [rank.rank for rank in report.ranks] == [0, 0]
    assert "rank 0 appears in more than one file" in report.notes
    assert straggler(report.ranks) == ("none named: rank 0 appears in more than one file, so these are not the "
                                       "ranks of one job")
    for name in ("third", "fourth"):
        write(tmp_path / f"{name}.json", trace(events, distributedInfo={"rank": 1}))
    report = read_report(tmp_path)
    assert "ranks 0, 1 appear in more than one file" in report.notes
    assert straggler(report.ranks).startswith("none named: ranks 0, 1 appear in more than one file")


def test_files_that_name_no_rank_are_numbered_in_name_order_with_numbers_as_numbers(tmp_path):
    """worker10 is rank 10, not rank 2 (names sorted as strings put it after worker1); the note says how ranks
    were told."""
    for number in range(12):
        events = [step(1, 0, 1000), *launched("k", 10, 100, 100 + number, 1, device=0)]
        write(tmp_path / f"worker{number}.pt.trace.json.gz", trace(events))
    report = read_report(tmp_path)
    assert [(rank.rank, rank.file.rsplit("/", 1)[-1]) for rank in report.ranks][9:] == [
        (9, "worker9.pt.trace.json.gz"), (10, "worker10.pt.trace.json.gz"), (11, "worker11.pt.trace.json.gz")]
    assert any(note.startswith("12 files name no rank (no distributedInfo, no rank-N in the name): numbered by their "
                               "place among the folder's files, in name order with numbers as numbers")
               for note in report.notes)


def test_one_processs_profiling_cycles_are_one_rank_not_a_job_of_ranks(tmp_path):
    """A schedule that repeats (repeat=0, torch's default, or repeat > 1) makes tensorboard_trace_handler write one
    file per cycle, <host>_<pid>.<time_ns>.pt.trace.json: one process's cycles, numbered as one rank, and no cycle
    named the slowest rank of a job (each numbered by its place, the slower cycle was "rank 1")."""
    for worker, cycles in (("node_400", (1.0, 2.0)), ("node_77", (1.0, 1.0, 1.0))):
        for cycle, milliseconds in enumerate(cycles):
            steps = [step(5 * cycle + n, 10_000 * cycle + n * milliseconds * 1000, milliseconds * 1000)
                     for n in range(4)]
            write(tmp_path / f"{worker}.17958967005{cycle}3822722{cycle}.pt.trace.json.gz", trace(steps))
    report = read_report(tmp_path)
    assert [(rank.rank, rank.file.rsplit("/", 1)[-1][:9]) for rank in report.ranks] == [
        (0, "node_77.1"), (0, "node_77.1"), (0, "node_77.1"), (1, "node_400."), (1, "node_400.")]
    assert straggler(report.ranks).startswith("none named: ranks 0, 1 appear in more than one file")
    cycles_note = next(note for note in report.notes if note.startswith("node_400: 2 files"))
    assert "one process's profiling cycles" in cycles_note and "each read as rank 1" in cycles_note
    assert not any("more than one file" in note for note in report.notes)  # the cycles' notes say why, once
    assert report_lines(report)[0] == f"{tmp_path}: 2 ranks in 5 files"
    # --rank 1 reads that worker's cycles, and only them
    assert [r.file.rsplit("/", 1)[-1][:9] for r in read_report(tmp_path, rank=1).ranks] == ["node_400."] * 2
    # a thousand cycles are named by the first few and the last, not a page of names
    (tmp_path / "many").mkdir()
    for cycle in range(1000):
        write(tmp_path / "many" / f"node_3.{10_000 + cycle}.pt.trace.json", trace([step(cycle, 10 * cycle, 1)]))
    (note,) = [note for note in read_report(tmp_path / "many").notes if note.startswith("node_3: 1,000 files")]
    assert ("node_3.10000.pt.trace.json, node_3.10001.pt.trace.json, node_3.10002.pt.trace.json, … (996 more) …, "
            "node_3.10999.pt.trace.json; together: 1,000 steps") in note
    # A worker with one file, beside files of no worker name, keeps its place among them
    (tmp_path / "mixed").mkdir()
    for name in ("a.json", "node_9.1795.pt.trace.json", "z.json"):
        write(tmp_path / "mixed" / name, trace([step(1, 0, 1000)]))
    assert [(r.rank, r.file.rsplit("/", 1)[-1]) for r in read_report(tmp_path / "mixed").ranks] == [
        (0, "a.json"), (1, "node_9.1795.pt.trace.json"), (2, "z.json")]


def test_one_processs_cycles_are_also_told_together_as_one_answer(tmp_path):
    """Each cycle is a section, and the note tells them together: all their steps, and each GPU share over the
    union of their windows (each cycle's share weighted by its window: 2 + 1 ms of kernels in 4 + 6 ms is 30 %)."""
    first = [step(1, 0, 2000), step(2, 2000, 2000), *launched("k", 10, 100, 1000, 1),
             *launched("k", 2010, 2100, 1000, 2)]
    second = [step(6, 50_000, 2000), step(7, 52_000, 2000), step(8, 54_000, 2000),
              *launched("k", 50_010, 50_100, 1000, 3)]
    for time_ns, events in ((111, first), (222, second)):
        write(tmp_path / f"gpu_9.{time_ns}.pt.trace.json", trace(events))
    report = read_report(tmp_path)
    assert [round(rank.compute_share, 3) for rank in report.ranks] == [0.5, 0.167]
    (note,) = [note for note in report.notes if note.startswith("gpu_9: 2 files")]
    assert note.endswith("; together: 5 steps, median 2.0 ms (2.0 ms–2.0 ms), compute 30.0% · communication 0.0% · "
                         "memory 0.0% · idle 70.0%")


def test_a_folder_of_unrelated_traces_names_no_slowest_rank(tmp_path):
    """Files that name no rank (no distributedInfo, no rank-N) are numbered by place, and are not known to be one
    job's ranks: a folder of separate runs' traces (the H100 traces here: "rank 2 … longer than rank 6's; in a
    data-parallel job every other rank waits for it") names no straggler. The same steps in rank-N files do."""
    for folder, names in (("runs", ("fast.json", "slow.json")), ("job", ("rank-0.json", "rank-1.json"))):
        (tmp_path / folder).mkdir()
        for name, milliseconds in zip(names, (1.0, 3.0)):
            steps = [step(n, n * milliseconds * 1000, milliseconds * 1000) for n in range(5)]
            write(tmp_path / folder / name, trace(steps))
    assert straggler(read_report(tmp_path / "runs").ranks) == (
        "none named: 2 files name no rank (no distributedInfo, no rank-N in the name), so these are not known to be "
        "one job's ranks")
    assert straggler(read_report(tmp_path / "job").ranks).startswith("rank 1, its median step 2 ms (200%) longer")


def test_a_log_folder_of_run_folders_says_which_hold_traces(tmp_path):
    """A TensorBoard log folder holds a folder per run: opened itself, it says which of them hold traces."""
    for run in ("run2", "run10", "notes"):
        (tmp_path / run).mkdir()
    for run in ("run2", "run10"):
        write(tmp_path / run / "host_1.1795.pt.trace.json", trace([step(1, 0, 1000)]))
    (tmp_path / "loop").symlink_to(tmp_path)  # one level down only: a loop is listed once
    with pytest.raises(TraceError, match=r"holds no readable trace files \(\*\.json, \*\.json\.gz\), but its folders "
                                         r"run2, run10 hold some: open one"):
        read_report(tmp_path)
    with pytest.raises(TraceError, match=r"trace files \(\*\.json, \*\.json\.gz\)$"):
        read_report(tmp_path / "notes")


def test_processes_driving_two_gpus_each_number_their_gpus_apart(tmp_path):
    """Two DDP processes of two GPUs each: ranks 0–3 (process rank × GPUs + place), never 0, 1, 1, 2."""
    for process in (0, 1):
        events = [step(1, 0, 1000), *launched("a", 10, 100, 500, 1, device=2 * process),
                  *launched("b", 10, 100, 200, 2, device=2 * process + 1)]
        write(tmp_path / f"rank-{process}.json", trace(events, distributedInfo={"rank": process}))
    report = read_report(tmp_path)
    assert [(rank.rank, rank.device_index) for rank in report.ranks] == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert not any("more than one file" in note for note in report.notes)


def test_one_rank_of_a_folder_reads_only_the_files_whose_head_names_it(tmp_path):
    """--rank N of a 64-rank job reads one file, not 64: the others are told apart by their heads (distributedInfo,
    written before the events), else by rank-N in their names, else by their place."""
    for rank in range(3):
        events = [step(1, 0, 1000), *launched("k", 10, 100, 300 + 100 * rank, 1, device=rank)]
        write(tmp_path / f"worker{rank}.json", trace(events, distributedInfo={"rank": 2 - rank}))
    fingerprints: dict = {}
    report = read_report(tmp_path, rank=2, fingerprints=fingerprints)
    assert [(r.rank, r.file.rsplit("/", 1)[-1]) for r in report.ranks] == [(2, "worker0.json")]
    assert [name.rsplit("/", 1)[-1] for name in report.files] == ["worker0.json"]
    assert [name.rsplit("/", 1)[-1] for name in fingerprints] == ["worker0.json"]
    assert ("rank 2 asked for: 1 of the folder's 3 files read, the one of that rank by the distributedInfo in its "
            "head, else rank-N in its name, else its place in the folder") in report.notes
    assert read_report(tmp_path).ranks[2] == report.ranks[0]  # as the whole folder's read gives it
    with pytest.raises(TraceError, match=r"no rank 5 \(ranks: 0, 1, 2\)"):  # in order, not the files' order
        read_report(tmp_path, rank=5)


def test_one_rank_of_a_folder_is_told_by_name_or_place_where_no_head_names_it(tmp_path):
    for name in ("job-rank-1.json", "job-rank-0.json"):
        write(tmp_path / name, trace([step(1, 0, 1000), *launched("k", 10, 100, 300, 1)]))
    assert read_report(tmp_path, rank=1).files == (str(tmp_path / "job-rank-1.json"),)
    (tmp_path / "by-place").mkdir()
    for name in ("b.json", "a.json"):
        write(tmp_path / "by-place" / name, trace([step(1, 0, 1000), *launched("k", 10, 100, 300, 1)]))
    report = read_report(tmp_path / "by-place", rank=1)
    assert (report.files, [r.rank for r in report.ranks]) == ((str(tmp_path / "by-place" / "b.json"),), [1])
    assert any(note.startswith("1 file names no rank (no distributedInfo, no rank-N in the name): numbered by their "
                               "place among the folder's files, in name order with numbers as numbers")
               for note in report.notes)


def test_one_rank_of_processes_driving_two_gpus_each_is_found_past_the_head(tmp_path):
    """Rank 1 is process 0's second GPU: the head of process 1's file names rank 1, and that file holds ranks 2
    and 3, so the rest are read too."""
    for process in (0, 1):
        events = [step(1, 0, 1000), *launched("a", 10, 100, 500, 1, device=2 * process),
                  *launched("b", 10, 100, 200, 2, device=2 * process + 1)]
        write(tmp_path / f"rank-{process}.json", trace(events, distributedInfo={"rank": process}))
    report = read_report(tmp_path, rank=1)
    assert [(r.rank, r.device_index) for r in report.ranks] == [(1, 1)]
    assert len(report.files) == 2 and not any("asked for" in note for note in report.notes)


def test_nccl_kernels_are_communication_not_compute(tmp_path):
    events = [step(1, 0, 1000), step(2, 1000, 1000),
              *launched("void gemm()", 10, 100, 400, 1),
              *launched("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                        20, 300, 600, 2, stream=20),  # 300–900: 200 µs under the gemm, 400 µs alone
              *launched("ncclKernel_Broadcast_RING_LL_Sum_int8_t", 1000, 1100, 100, 3, stream=20)]
    rank = only_rank(write(tmp_path / "t.json", trace(events)))
    assert rank.compute_share == pytest.approx(400 / 2000)
    assert rank.communication_share == pytest.approx(500 / 2000)
    assert rank.gpu_span["compute_share"] == pytest.approx(400 / 1100)  # HTA's window: 100–1200 µs
    assert rank.gpu_span["non_compute_share"] == pytest.approx(500 / 1100)


def test_copies_and_fills_hidden_behind_compute_cost_nothing(tmp_path):
    events = [step(1, 0, 1000), step(2, 1000, 1000), *launched("gemm", 10, 100, 400, 1),
              runtime("cudaMemcpyAsync", 20, 5, 2), kernel("Memcpy HtoD (Pinned -> Device)", 300, 400, 2,
                                                            stream=9, cat="gpu_memcpy")]
    rank = only_rank(write(tmp_path / "t.json", trace(events)))
    assert rank.memory_share == pytest.approx(200 / 2000)  # 500–700 µs is not under the gemm


def test_a_sync_is_named_by_the_host_op_that_called_it(tmp_path):
    """`.item()` every step: aten::item → aten::_local_scalar_dense → cudaStreamSynchronize."""
    events = [step(1, 0, 1000), step(2, 1000, 1000), *launched("k", 10, 100, 500, 1)]
    for begin in (0, 1000):
        events += [op("aten::item", begin + 600, 300), op("aten::_local_scalar_dense", begin + 601, 298),
                   runtime("cudaStreamSynchronize", begin + 620, 200)]
    events.append(runtime("cudaDeviceSynchronize", 1950, 20))  # outside every op
    rank = only_rank(write(tmp_path / "t.json", trace(events)))
    assert [(s.name, s.count) for s in rank.sync_calls] == [
        ("aten::item → cudaStreamSynchronize", 2), ("(no host op) → cudaDeviceSynchronize", 1)]
    assert rank.sync_calls[0].seconds == pytest.approx(400e-6)


def test_a_sync_inside_torch_compiles_region_is_named_by_the_op_the_script_wrote(tmp_path):
    """@torch.compile on a step whose .item() breaks the graph: the item runs inside the frame's region, and the
    sync is the item's (named "Torch-Compiled Region: 0/0" before, which also chose the wrong advice)."""
    events = [step(1, 0, 1000), *launched("k", 10, 100, 500, 1), op("Torch-Compiled Region: 0/0", 5, 990),
              op("aten::item", 600, 300), op("aten::_local_scalar_dense", 601, 298),
              runtime("cudaStreamSynchronize", 620, 200)]
    rank = only_rank(write(tmp_path / "t.json", trace(events)))
    assert [s.name for s in rank.sync_calls] == ["aten::item → cudaStreamSynchronize"]


def test_without_steps_the_window_is_first_to_last_gpu_event(tmp_path):
    rank = only_rank(write(tmp_path / "t.json", trace([*launched("k", 10, 100, 500, 1),
                                                        *launched("k", 20, 800, 200, 2)])))
    assert rank.steps == 0 and rank.step_seconds_median is None
    assert rank.window_seconds == pytest.approx(900e-6) and rank.idle_share == pytest.approx(200 / 900)
    assert any("no ProfilerStep" in note for note in rank.notes)


def test_a_trace_read_in_small_chunks_gives_the_same_report(tmp_path, monkeypatch):
    """The streaming reader cuts the text anywhere: a batch boundary inside a string or an args object must
    not change what is read."""
    events = input_bound_steps()
    events[0]["name"] = 'ProfilerStep#1'
    events.append(op('odd "},{" name', 5, 1))
    for event in events:
        event["args"]["nested"] = [{"a": 1}, {"b": "},{"}]
    path = write(tmp_path / "t.json", trace(events))
    whole = read_report(path)
    for chunk in (7, 64, 333):
        monkeypatch.setattr(json_stream, "CHUNK_CHARS", chunk)
        assert read_report(path) == whole, chunk


def test_a_bare_event_array_is_read_too(tmp_path):
    """Chrome's JSON Array Format: the events alone, no object around them."""
    assert only_rank(write(tmp_path / "t.json", input_bound_steps())).kernels == 3


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_the_fingerprint_is_of_every_byte_of_the_file_read_in_the_same_pass(tmp_path, monkeypatch, name):
    """What the window keeps a trace by: the sha256 of the bytes the figures came from, trailing bytes included."""
    path = write(tmp_path / name, trace(input_bound_steps()))
    if not name.endswith(".gz"):
        path.write_bytes(path.read_bytes() + b"\n" * 5000)
    monkeypatch.setattr(json_stream, "CHUNK_CHARS", 333)
    fingerprints = {}
    report = read_report(path, fingerprints=fingerprints)
    data = path.read_bytes()
    assert fingerprints == {str(path): Fingerprint(hashlib.sha256(data).hexdigest(), len(data))}
    assert report == read_report(path)  # hashing changes nothing read


def test_without_steps_the_dataloader_share_is_over_the_window_the_other_figures_are_over(tmp_path):
    """A trace taken without a schedule has no ProfilerStep#N: its DataLoader spans still give their share (it read
    "n/a (no DataLoader spans)" beside an input-bound finding built on those spans)."""
    events = [event for event in input_bound_steps() if not event["name"].startswith("ProfilerStep#")]
    rank = only_rank(write(tmp_path / "t.json", trace(events)))
    # the window runs from the first kernel to the last: the 2nd and 3rd steps' 6 ms waits fall in it
    assert rank.steps == 0 and rank.dataloader_share == pytest.approx(12000 / (rank.window_seconds * 1e6))


def test_steps_annotated_only_on_the_gpus_timeline_are_the_steps(tmp_path):
    """HTA's replay read these spans while the report said "no ProfilerStep#N": one report, two answers."""
    events = [*launched("k", 10, 100, 500, 1), *launched("k", 1010, 1100, 500, 2)]
    events += [dict(step(number, 50 + 1000 * (number - 1), 1000), cat="gpu_user_annotation", pid=0, tid=7)
               for number in (1, 2)]
    rank = only_rank(write(tmp_path / "t.json", trace(events)))
    assert rank.steps == 2 and rank.step_seconds == (0.001, 0.001)
    assert "ProfilerStep#N appears only on the GPU's timeline: the steps are its spans there" in rank.notes


def test_a_gpu_never_idle_has_no_idle_split_and_the_report_says_so(tmp_path):
    """A split of no idle time is no figure: the causes are None, not a row of 0 % that reads as measured."""
    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    events = [step(1, 0, 1000), *launched("gemm", 0, 0, 1000, 1), op(loader, 0, 300)]
    report = read_report(write(tmp_path / "t.json", trace(events)))
    (rank,) = report.ranks
    assert rank.idle_share == 0 and rank.compute_share == pytest.approx(1.0)
    assert (rank.idle_for_data_share, rank.idle_for_host_share, rank.idle_kernel_wait_share,
            rank.idle_other_share) == (None, None, None, None)
    assert rank.dataloader_share == pytest.approx(0.3)  # the host's figure still is one
    text = "\n".join(rank_lines(rank))
    assert "idle: none (the GPU was never idle, so there is no idle time to split by cause)" in text
    (section,) = trace_page(report, "").sections
    assert not any(fact.startswith("Waiting for data: n/a") for fact in section.facts)  # the trace has the spans
    assert any(fact.startswith("DataLoader: 30.0 % of the step") for fact in section.facts)


def test_zero_length_kernels_give_no_idle_figures_and_no_claim_about_idle(tmp_path):
    """No steps and a GPU window of no length: idle is n/a (no figure), which is not "never idle"."""
    events = [kernel("k", 10, 0, 1), kernel("k", 10, 0, 2)]
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.idle_share is None
    text = "\n".join(rank_lines(rank))
    assert "never idle" not in text and "idle: n/a (the time the figures are over has no length)" in text


def test_idle_ended_by_work_launched_before_it_is_named_by_that_work_and_its_launch(tmp_path):
    """The "other" idle, which no finding names: the report says which work waited and what launched it (on a
    real A100 trace, a CUDA graph's work: a memset, launched by cudaGraphLaunch)."""
    events = [step(1, 0, 1000), *launched("gemm", 0, 0, 200, 1),
              # launched at 10 µs, started at 600 µs: 400 µs of idle that no launch explains
              *launched("waits_for_an_event", 10, 600, 100, 2, stream=9),
              runtime("cudaGraphLaunch", 20, 5, 3), kernel("Memset (Device)", 800, 50, 3, cat="gpu_memset"),
              *launched("late_launch", 870, 880, 100, 4)]  # a host wait, not "other"
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert [(wait.name, wait.launched_by, round(wait.seconds * 1e6), wait.count) for wait in rank.queued_waits] == [
        ("waits_for_an_event", "cudaLaunchKernel", 400, 1), ("Memset (Device)", "cudaGraphLaunch", 100, 1)]
    (text,) = queued_waits_text(rank)
    assert text.startswith('idle with its next work already launched ("other", 500 µs: ')
    assert text.endswith("by the work that then waited: waits_for_an_event (launched by cudaLaunchKernel) 80%, "
                         "Memset (Device) (launched by cudaGraphLaunch) 20%")
    assert text in "\n".join(rank_lines(rank))


def test_the_queued_total_is_of_every_gap_and_of_its_other_part_only(tmp_path):
    """The total is over all the works, not the top ten shown; a gap's wait for data is not counted in it."""
    events = [step(1, 0, 100_000)]
    for n in range(12):  # twelve works, each launched long before and each after a 1 ms gap
        events += launched(f"work{n}", 10 + n, 2000 * n + 1000, 1000, n + 1)
    events.append(op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 22_000, 500))  # half gap 11
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    # the first gap is the host's (work0's launch came in it); of the eleven others, 10.5 ms are "other"
    assert len(rank.queued_waits) == 10 and rank.queued_wait_seconds == pytest.approx(0.0105)
    assert rank.idle_share * rank.idle_other_share * rank.window_seconds >= rank.queued_wait_seconds


def test_a_launch_call_still_running_when_the_gpu_went_idle_is_said_apart(tmp_path):
    """A cudaLaunchKernel that began before the gap and returned in it: the host was inside a launch that blocked
    (1.56 s on a TensorBoard tutorial trace), not queued work waiting on something else."""
    events = [step(1, 0, 10_000), *launched("first", 0, 0, 1000, 1),
              runtime("cudaLaunchKernel", 900, 6000, 2), kernel("after_a_slow_launch", 6905, 1000, 2)]
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.queued_waits == () and rank.queued_wait_seconds == 0
    assert [(call.name, round(call.seconds * 1e6), call.count) for call in rank.blocked_launches] == [
        ("cudaLaunchKernel", 5905, 1)]
    (text,) = queued_waits_text(rank)
    assert text.startswith('idle while the call launching its next work was still running (counted as "other", '
                           '5.9 ms: ') and text.endswith("launch that blocked): cudaLaunchKernel 100%")


def test_a_little_queued_idle_is_not_said():
    """Under 5 % of the window the "other" idle is not what bounds the step: the line would be noise."""
    wait = QueuedWait("k", "cudaLaunchKernel", 0.004, 1)
    assert queued_waits_text(rank_report(window_seconds=0.1, queued_waits=(wait,), queued_wait_seconds=0.004)) == []
    assert len(queued_waits_text(rank_report(window_seconds=0.08, queued_waits=(wait,),
                                             queued_wait_seconds=0.004))) == 1


def test_a_launch_that_began_in_the_gap_is_not_called_a_launch_that_blocked(tmp_path):
    """Two kernels start as the gap ends: the gap is judged by the earlier launched (its call returned before the
    gap: queued work), as the idle split judged it; the other's launch began inside the gap."""
    events = [step(1, 0, 3000), *launched("first", 0, 0, 1000, 1),  # the file lists the later launched first
              runtime("cudaLaunchKernel", 1500, 600, 3), kernel("launched_in_the_gap", 2000, 100, 3),
              runtime("cudaLaunchKernel", 500, 5, 2), kernel("queued", 2000, 100, 2, stream=9)]
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.blocked_launches == ()
    assert [(wait.name, round(wait.seconds * 1e6)) for wait in rank.queued_waits] == [("queued", 1000)]


def test_a_window_of_no_length_says_so_not_that_the_trace_has_no_dataloader_spans(tmp_path):
    """One GPU event of no duration and no steps: no share can be given. The DataLoader's figure read "n/a (no
    DataLoader spans in this trace)" beside the trace's DataLoader span, and the idle split the same."""
    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    report = read_report(write(tmp_path / "t.json", trace([*launched("gemm", 0, 100, 0, 1), op(loader, 0, 300)])))
    (rank,) = report.ranks
    assert (rank.idle_share, rank.dataloader_share, rank.data_spans) == (None, None, 1)
    text = "\n".join(rank_lines(rank))
    assert "no DataLoader spans" not in text
    assert "idle: n/a (the time the figures are over has no length)" in text
    assert "DataLoader (host in enumerate(DataLoader)#…__next__): n/a (the time the figures are over has no length)" in text
    assert any(note.startswith("the time the figures are over has no length") for note in rank.notes)
    (section,) = trace_page(report, "").sections
    assert not any("no DataLoader spans" in fact for fact in section.facts)


@pytest.mark.parametrize("odd", [None, {"ph": "Q", "ts": 3}, {"ts": 3, "name": "no phase"}],
                         ids=["every-phase", "unknown-phase", "no-phase"])
def test_events_of_every_phase_leave_the_spans_figures_as_they_are(tmp_path, odd):
    """The decoder reads a span ("X") whole and any other phase as its ts alone (flow arrows and instants are
    43 % of a real trace); an event of a phase no format names, or of none, sends its batch to the stdlib's
    decoder. Either way the spans' figures are those of the spans alone, and a fraction in any event's ts
    still marks the trace's timestamps fractional, as HTA reads its ts column."""
    spans = input_bound_steps(3)
    others = [{"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 1, "ts": 5, "pid": 0, "tid": 1},
              {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 1, "ts": 6, "pid": 0, "tid": 7, "bp": "e"},
              {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 7.5, "s": "t", "pid": 0, "tid": 1,
               "args": {"Bytes": 512}},
              {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "python"}},
              {"ph": "C", "name": "counter", "ts": 8, "pid": 0, "args": {"value": [1, 2]}}]
    if odd is not None:
        others.append(odd)
    alone = only_rank(write(tmp_path / "alone.json", trace(spans)))
    mixed = only_rank(write(tmp_path / "mixed.json", trace([*others[:2], *spans, *others[2:]])))
    assert dataclasses.replace(mixed, file=alone.file) == alone
    assert read_trace(tmp_path / "mixed.json").fractional_timestamps  # the instant's 7.5
    assert not read_trace(tmp_path / "alone.json").fractional_timestamps


def test_the_rank_the_others_wait_for_in_communication_is_named_though_the_steps_match(tmp_path):
    """A data-parallel job's steps all end in one all-reduce, which waits for the slowest rank: the step times
    match, and the straggler shows as the others' longer communication. Named by step time alone, it read
    "none stands out"; a difference in communication under a tenth of the step (the two real ranks here: 17 ms
    of 615 ms) names none."""
    (tmp_path / "job").mkdir()
    for rank, (compute_us, wait_us) in enumerate([(2000, 6500), (8000, 500)]):
        events = []
        for number in range(5):
            begin = number * 10_000
            events.append(step(number + 1, begin, 10_000))
            events += launched("void gemm_kernel<float>()", begin + 10, begin + 100, compute_us, 2 * number + 1)
            events += launched("ncclDevKernel_AllReduce_Sum_f32_RING_LL", begin + 20, begin + 100 + compute_us,
                               wait_us + 1000, 2 * number + 2, stream=9)
        write(tmp_path / "job" / f"rank-{rank}.json", trace(events))
    ranks = read_report(tmp_path / "job").ranks
    assert straggler(ranks) == (
        "rank 1, by the others' wait: every rank's step meets the others' in the same collectives, so the step "
        "times match, but "
        "rank 1 spends 1.5 ms a step in communication where rank 0 spends 7.5 ms, waiting 6 ms a step for it (60% "
        "of the step; threshold 10%), in 5 of the 5 steps by more than the steps' own spread (0 µs)")


@pytest.mark.skipif(not (SHARED_TRACES / "two-ranks").is_dir(), reason="the shared real traces are not here")
def test_two_real_ranks_whose_communication_differs_by_a_few_percent_of_the_step_name_no_straggler():
    # communication 27.4 % and 24.5 % of steps of about 615 ms: 17 ms a step apart, under a tenth of the step
    assert straggler(read_report(SHARED_TRACES / "two-ranks").ranks).startswith("none named: rank 1's median step is")


def test_on_cpu_ranks_the_straggler_is_named_by_the_others_wait_in_gloos_collectives(tmp_path):
    """A CPU (gloo) job has no communication kernels: its collectives wait on the host, in gloo's ops. A real
    two-process job whose rank 1 did 20 more matmuls a step read "none stands out" (steps of 110 ms on both),
    while rank 0's report held gloo:all_reduce at 97 ms a step."""
    (tmp_path / "job").mkdir()
    for rank, (work_us, wait_us) in enumerate([(1000, 8000), (8500, 500)]):
        events = []
        for number in range(5):
            begin = number * 10_000
            # gloo runs the collective on a thread of its own, as an annotation; the straggler's is short enough
            # to be outside its top host ops, which its own work fills
            events += [step(number + 1, begin, 10_000),
                       *(op(f"aten::op{index}", begin + 10 + index * work_us // 12, work_us // 12)
                         for index in range(12)),
                       op("gloo:all_reduce", begin + 20 + work_us, wait_us, tid=7, cat="user_annotation")]
        write(tmp_path / "job" / f"rank-{rank}.json", trace(events))
    ranks = read_report(tmp_path / "job").ranks
    assert all(op.name != "gloo:all_reduce" for op in ranks[1].top_host_ops)
    assert straggler(ranks) == (
        "rank 1, by the others' wait: every rank's step meets the others' in the same collectives, so the step "
        "times match, but "
        "rank 1 spends 500 µs a step in collectives (gloo's ops on the host) where rank 0 spends 8 ms (the most in "
        "gloo:all_reduce), waiting 7.5 ms a step for it (75% of the step; threshold 10%), in 5 of the 5 steps by "
        "more than the steps' own spread (0 µs)")

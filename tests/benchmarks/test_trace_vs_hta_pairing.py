"""benchmarks/trace_vs_hta.py sets each of our ranks beside HTA's row of the same file: HTA gives a file one row
over every GPU it holds, ours a rank per GPU, so a file of several GPUs is compared as one (ours and HTA's rules
replayed over all its GPUs) and never paired by rank number with another process's row. No HTA needed: its rows
are given as HTA 0.5.0 printed them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trace_vs_hta

# HTA 0.5.0's get_temporal_breakdown() of write_two_gpus(…, 0) alone in a folder: one row, rank 0, over both
# GPUs' events.
HTA_ROW_OF_TWO_GPUS = {"idle_share": 31.25, "compute_share": 62.5, "non_compute_share": 6.25}


def launched(name, launch_at, start, dur, correlation, device, stream):
    """A kernel (Kineto's fields, times in µs) and the cudaLaunchKernel that put it on the GPU."""
    return [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1, "ts": launch_at,
             "dur": 5, "args": {"correlation": correlation}},
            {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream, "ts": start, "dur": dur,
             "args": {"device": device, "stream": stream, "correlation": correlation}}]


def write_two_gpus(path: Path, rank: int) -> Path:
    """One process driving two GPUs for three steps: a GEMM on cuda:0; a GEMM and an all-reduce on cuda:1."""
    events = []
    for index in range(3):
        begin, correlation = 10000 + index * 1000, 1 + 3 * index
        events += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{index + 1}", "pid": 100, "tid": 1,
                    "ts": begin, "dur": 1000, "args": {}},
                   *launched("void gemm_a()", begin + 10, begin + 100, 300, correlation, 0, 7),
                   *launched("void gemm_b()", begin + 20, begin + 500, 200, correlation + 1, 1, 8),
                   *launched("ncclKernel_AllReduce_RING_LL_Sum_float", begin + 30, begin + 450, 100,
                             correlation + 2, 1, 9)]
    path.write_text(json.dumps({"distributedInfo": {"rank": rank}, "traceEvents": events}), encoding="utf-8")
    return path


def test_htas_row_of_a_file_of_two_gpus_is_its_rules_over_both_gpus_as_one(tmp_path):
    path = write_two_gpus(tmp_path / "two-gpus.json", 0)
    (view,) = trace_vs_hta.file_views(path)
    assert view["hta_rank"] == 0 and [gpu["device_index"] for gpu in view["gpus"]] == [0, 1]
    assert view["as_one"]["with_hta_rules_pct"] == pytest.approx(HTA_ROW_OF_TWO_GPUS)
    for gpu in view["gpus"]:  # either GPU alone is far from HTA's row: pairing one with it read a 20-point gap
        assert abs(gpu["with_hta_rules_pct"]["idle_share"] - HTA_ROW_OF_TWO_GPUS["idle_share"]) > 20


def test_each_processs_row_of_htas_pairs_with_its_own_files_gpus_not_our_rank_of_that_number(tmp_path):
    folder = tmp_path / "job"
    folder.mkdir()
    for rank in (0, 1):
        write_two_gpus(folder / f"rank-{rank}.json", rank)
    other = {"idle_share": 50.0, "compute_share": 40.0, "non_compute_share": 10.0}
    live = {"ranks": {"0": HTA_ROW_OF_TWO_GPUS, "1": other}}
    rows = trace_vs_hta.paired_rows("job/", trace_vs_hta.file_views(folder), trace_vs_hta.ours_worker(str(folder)),
                                    live, {})
    assert [(row["rank"], row.get("device_index"), row.get("gpus_as_one"), row["hta_live_pct"]) for row in rows] == [
        (0, 0, None, None), (1, 1, None, None), (0, None, [0, 1], HTA_ROW_OF_TWO_GPUS),
        (2, 0, None, None), (3, 1, None, None), (1, None, [0, 1], other)]
    assert rows[2]["ours_with_hta_rules_pct"] == pytest.approx(HTA_ROW_OF_TWO_GPUS)
    lines = trace_vs_hta.table([{**rows[0], "speed": None}, *rows[1:3]])
    assert trace_vs_hta.FILE_ROW in lines[2] and "(cuda:0, one of the file's 2 GPUs)" in lines[2]
    assert "| cuda:0 + cuda:1 as one (HTA's rank 0) | 36.54 / 31.25 |" in lines[4]
    assert lines[4].count("0.00 pt") == 1  # the replay's gap to HTA's row


def test_a_folders_committed_figures_are_found_by_file():
    committed = {"two-ranks/rank-0.json.gz": {"rank": 0, "hta_temporal_pct": {"idle": 1, "compute": 2,
                                                                              "non_compute": 3}},
                 "two-ranks/rank-1.json.gz": {"rank": 1, "hta_temporal_pct": {"idle": 4, "compute": 5,
                                                                              "non_compute": 6}}}
    assert trace_vs_hta.committed_for(committed, "two-ranks/", "rank-1.json.gz") == {
        "idle_share": 4, "compute_share": 5, "non_compute_share": 6}
    assert trace_vs_hta.committed_for({"a.json.gz": committed["two-ranks/rank-0.json.gz"]}, "a.json.gz",
                                      "a.json.gz")["idle_share"] == 1

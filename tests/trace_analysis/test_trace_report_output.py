"""`workbench trace`'s report: the --json contract's keys exactly, the text per rank, the ranks side by side,
and two traces compared without calling a change within the steps' spread a gain."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from trace_reports import CONTRACT_RANK_KEYS, null_figures, rank_report, trace_report

from workbench.trace_analysis.comparing import compare, straggler
from workbench.trace_analysis.model import Finding, NamedSeconds
from workbench.trace_analysis.report_json import comparison_json, to_json
from workbench.trace_analysis.report_text import comparison_lines, rank_lines, report_lines


def test_json_has_exactly_the_contracts_keys():
    finding = Finding(kind="input-bound", text="Input-bound: …", figure=0.33, threshold=0.15, change="DataLoader(…)")
    data = to_json(trace_report(rank_report(findings=(finding,))))
    assert set(data) == {"path", "ranks", "notes", "slowest"}  # the contract's two, and the report's own beside them
    assert data["notes"] == [] and data["slowest"] is None  # one rank: no slowest among ranks
    (rank,) = data["ranks"]
    assert set(rank) == CONTRACT_RANK_KEYS
    assert set(rank["gpu_span"]) == {"idle_share", "compute_share", "non_compute_share"}
    assert rank["findings"] == [{"kind": "input-bound", "text": "Input-bound: …", "figure": 0.33, "threshold": 0.15,
                                 "change": "DataLoader(…)"}]
    json.dumps(data, allow_nan=False)


def test_json_writes_an_unread_figure_as_null_never_zero_or_nan():
    data = to_json(trace_report(rank_report(steps=0, step_seconds=(), step_seconds_median=None,
                                            step_seconds_low=None, step_seconds_high=None, dataloader_share=None,
                                            gpu_span={"idle_share": float("nan")})))
    (rank,) = data["ranks"]
    assert rank["step_seconds_median"] is None and rank["dataloader_share"] is None
    assert rank["gpu_span"] == {"idle_share": None, "compute_share": None, "non_compute_share": None}
    json.dumps(data, allow_nan=False)


def test_json_says_why_each_null_figure_is_null():
    read = to_json(trace_report(rank_report(notes=("12 events with a negative duration",), window_seconds=0.5)))
    (rank,) = read["ranks"]
    assert rank["unavailable_reasons"] == {} and rank["notes"] == ["12 events with a negative duration"]

    no_loader = to_json(trace_report(rank_report(idle_for_data_share=None, dataloader_share=None, window_seconds=0.5)))
    assert no_loader["ranks"][0]["unavailable_reasons"] == {"idle_for_data_share": "no DataLoader spans in this trace",
                                                            "dataloader_share": "no DataLoader spans in this trace"}

    never_idle = to_json(trace_report(rank_report(idle_share=0.0, idle_for_data_share=None, idle_for_host_share=None,
                                                  idle_kernel_wait_share=None, idle_other_share=None,
                                                  window_seconds=0.5)))
    reasons = never_idle["ranks"][0]["unavailable_reasons"]
    assert set(reasons) == {"idle_for_data_share", "idle_for_host_share", "idle_kernel_wait_share",
                            "idle_other_share"}
    assert set(reasons.values()) == {"the GPU was never idle: a split of no idle time is no figure"}

    cpu_only = to_json(trace_report(rank_report(
        cpu_only=True, steps=0, step_seconds=(), step_seconds_median=None, step_seconds_low=None,
        step_seconds_high=None, compute_share=None, communication_share=None, memory_share=None, idle_share=None,
        idle_for_data_share=None, idle_for_host_share=None, idle_kernel_wait_share=None, idle_other_share=None,
        gpu_span=None, window_seconds=0.5)))
    reasons = cpu_only["ranks"][0]["unavailable_reasons"]
    assert reasons["step_seconds_median"] == reasons["step_seconds_high"] == "no ProfilerStep#N spans in this trace"
    assert {reasons[key] for key in ("compute_share", "idle_share", "idle_other_share", "gpu_span")} == {
        "no GPU work read from this trace"}
    assert "dataloader_share" not in reasons  # read (0.01): a figure, so no reason
    assert set(reasons) == null_figures(cpu_only["ranks"][0])


def test_text_names_steps_spread_split_idle_top_and_findings():
    finding = Finding(kind="input-bound", text="Input-bound: 33% (threshold 15%).", figure=0.33, threshold=0.15,
                      change="DataLoader(..., num_workers=4)")
    text = "\n".join(rank_lines(rank_report(findings=(finding,), sync_calls=(NamedSeconds("aten::item", 0.002),))))
    assert "5 steps: median 100.0 ms (spread 99.0 ms–102.0 ms)" in text
    assert "compute 70.0% · communication 5.0% · memory 5.0% · idle 20.0%" in text
    assert "waiting for data 0.0% · for the host 50.0% · kernel wait 20.0% · other 30.0%" in text
    assert "volta_sgemm_128x64_nn 200.0 ms" in text
    assert "top host ops by self time: aten::conv2d 150.0 ms" in text  # the figure _top_ops gives, named so
    assert "aten::item 2.0 ms" in text
    assert "Try: DataLoader(..., num_workers=4)." in text


def test_a_report_with_a_finding_ends_with_how_to_prove_its_change_and_one_without_does_not():
    finding = Finding(kind="input-bound", text="Input-bound: 33% (threshold 15%).", figure=0.33, threshold=0.15,
                      change="DataLoader(..., num_workers=4)")
    lines = report_lines(trace_report(rank_report(findings=(finding,)), rank_report(rank=1, findings=())))
    assert lines[-1] == ("to see what a change did: make one, trace again, and run `workbench trace BEFORE AFTER`: "
                         "the steps are compared with their spread, and a gain is called only beyond it")
    assert sum("to see what a change did" in line for line in lines) == 1  # once for the report, not per rank
    assert not any("to see what a change did" in line
                   for line in report_lines(trace_report(rank_report(findings=()))))


def test_a_cpu_only_rank_says_so_and_no_gpu_figure_is_printed():
    rank = rank_report(kernels=0, cpu_only=True, top_kernels=(), steps=0, step_seconds=(), step_seconds_median=None,
                       step_seconds_low=None, step_seconds_high=None, dataloader_share=None)
    text = "\n".join(rank_lines(rank))
    assert "GPU time: no GPU work read from this trace (the notes say why): only the host's figures below" in text
    assert "compute 70.0%" not in text and "n/a (no DataLoader spans" in text


def test_a_folder_of_ranks_names_the_slowest_and_its_difference():
    fast = rank_report(rank=0)
    slow = rank_report(rank=1, step_seconds=(0.120, 0.121, 0.119, 0.120, 0.122), step_seconds_median=0.120,
                       step_seconds_low=0.119, step_seconds_high=0.122)
    text = "\n".join(report_lines(trace_report(fast, slow, path="job/")))
    assert "ranks side by side:" in text
    assert "slowest: rank 1, its median step 20 ms (20%) longer than rank 0's" in text


def test_a_rank_slower_within_the_steps_spread_or_on_two_steps_is_not_named():
    """A 1 % difference inside the steps' spread names no straggler, nor does one read off 2 steps a rank."""
    fast = rank_report(rank=0, step_seconds=(0.100, 0.130, 0.090, 0.110, 0.101), step_seconds_median=0.101)
    slow = rank_report(rank=1, step_seconds=(0.102, 0.128, 0.092, 0.112, 0.100), step_seconds_median=0.102)
    assert straggler([fast, slow]).startswith("none stands out: rank 1's median step is 1 ms (1%) longer than rank 0's")
    two = [rank_report(rank=0, steps=2, step_seconds=(0.1, 0.1), step_seconds_median=0.1),
           rank_report(rank=1, steps=2, step_seconds=(0.2, 0.2), step_seconds_median=0.2)]
    assert straggler(two).endswith("fewer than 3 steps a rank give no interval")


def test_ranks_repeated_across_files_are_not_one_jobs_and_name_no_straggler():
    """A folder of traces from different jobs (each rank 0) is not a job whose ranks wait for each other."""
    slow = rank_report(rank=0, step_seconds=(0.3, 0.31, 0.29, 0.3, 0.3), step_seconds_median=0.3)
    assert straggler([rank_report(rank=0), slow, rank_report(rank=1)]).startswith(
        "none named: rank 0 appears in more than one file")


def test_a_change_within_the_steps_spread_is_not_a_gain():
    before = rank_report(step_seconds=(0.100, 0.110, 0.095, 0.105, 0.100), step_seconds_median=0.100)
    after = rank_report(step_seconds=(0.098, 0.108, 0.094, 0.103, 0.099), step_seconds_median=0.099)
    comparison = compare(before, after)
    assert comparison.step_time.verdict == "within_noise"
    text = "\n".join(comparison_lines("a.json", "b.json", comparison))
    assert "within the steps' own spread: not a gain" in text


def test_shorter_steps_beyond_the_spread_are_a_gain_and_the_kernels_that_moved_are_named():
    before = rank_report(step_seconds=(0.100, 0.101, 0.099, 0.100, 0.102),
                         top_kernels=(NamedSeconds("gemm", 0.30), NamedSeconds("copy", 0.10)))
    after = rank_report(step_seconds=(0.060, 0.061, 0.059, 0.060, 0.062), step_seconds_median=0.060,
                        window_seconds=0.302,
                        top_kernels=(NamedSeconds("gemm", 0.28), NamedSeconds("copy", 0.01),
                                     NamedSeconds("fused", 0.01)))
    comparison = compare(before, after)
    assert comparison.step_time.verdict == "faster"
    assert abs(comparison.step_time_ratio - 0.6) < 1e-9
    assert [change.name for change in comparison.kernels] == ["copy", "gemm", "fused"]  # by |change| per step
    text = "\n".join(comparison_lines("a.json", "b.json", comparison))
    # the before list names all its kernels (fewer than the top's ten): fused did not run there
    assert "shorter steps in these two traces: a gain" in text and "0 µs → 2.0 ms (+2.0 ms)  fused" in text
    data = comparison_json(comparison)
    assert data["verdict"] == "faster" and data["step_time_ratio_low"] <= 0.6 <= data["step_time_ratio_high"]
    assert data["categories"]["compute"]["after_seconds_per_step"] == pytest.approx(0.70 * 0.302 / 5)


def test_traces_from_gpus_of_two_kinds_say_the_change_is_the_gpus_as_much_as_the_scripts():
    before = rank_report(device="NVIDIA A100-PG509-200")
    after = rank_report(device="Tesla V100-SXM2-16GB", step_seconds=(0.150, 0.151, 0.149, 0.150, 0.152),
                        step_seconds_median=0.150)
    text = "\n".join(comparison_lines("a.json", "b.json", compare(before, after)))
    assert ("the two traces ran on different GPUs (NVIDIA A100-PG509-200, then Tesla V100-SXM2-16GB): what changed "
            "is the GPU's as much as the script's") in text
    same = "\n".join(comparison_lines("a.json", "b.json", compare(before, dataclasses.replace(after, device="cuda:0"))))
    assert "different GPUs" not in same


def test_compute_per_step_moved_on_two_gpus_says_the_device_moves_it_beside_the_batch_hint():
    """Four times the compute per step, an A100 then a V100: the hint pointed at the batch size alone."""
    before = rank_report(device="NVIDIA A100-PG509-200", compute_share=0.2, window_seconds=0.5)
    after = rank_report(device="Tesla V100-SXM2-16GB", compute_share=0.8, window_seconds=0.5)
    text = "\n".join(comparison_lines("a.json", "b.json", compare(before, after)))
    assert ("the GPU's compute per step is 4.0× what it was: the two traces ran on different devices, and a kernel's "
            "time moves with its device as much as with its batch; if the batch size changed") in text
    same = "\n".join(comparison_lines("a.json", "b.json", compare(before, dataclasses.replace(
        after, device=before.device))))
    assert "the GPU's compute per step is 4.0× what it was: if the batch size changed" in same


def test_a_trace_without_gpu_work_against_a_gpus_says_the_steps_ran_on_other_devices():
    """A torch.profiler CPU trace against the A100's: "longer steps in these two traces: a loss" with no word that one
    ran no GPU work, where two GPUs of two kinds are said."""
    cpu_only = rank_report(device="unknown", cpu_only=True, top_kernels=(), kernels=0, compute_share=None,
                           communication_share=None, memory_share=None, idle_share=None, gpu_span=None)
    text = "\n".join(comparison_lines("a.json", "b.json", compare(cpu_only, rank_report())))
    assert ("the before trace holds no GPU work read (a CPU-only run, or its GPU's events left out or unreadable), "
            "the after trace ran on NVIDIA A100-SXM4-80GB: the steps may have run on different devices, and what "
            "changed is theirs as much as the script's") in text
    both = "\n".join(comparison_lines("a.json", "b.json", compare(cpu_only, cpu_only)))
    assert "different devices" not in both


@pytest.mark.parametrize("steps_before", [2, 5])
def test_two_steps_in_either_trace_give_no_verdict(steps_before):
    """The statistic alone would give 5+2 steps a 90 % interval (and 3+2 none): the rule is MIN_STEPS a trace."""
    before = rank_report(steps=steps_before, step_seconds=(0.1, 0.101, 0.099, 0.1, 0.102)[:steps_before],
                         step_seconds_median=0.1)
    after = rank_report(steps=2, step_seconds=(0.05, 0.051), step_seconds_median=0.05)
    comparison = compare(before, after, samples_per_step=(64, 64))
    assert comparison.step_time.speedup_low is None and comparison.throughput.speedup_low is None
    data = comparison_json(comparison)
    assert data["verdict"] == "no_verdict" and data["samples_verdict"] == "no_verdict"
    text = "\n".join(comparison_lines("a", "b", comparison))
    assert "no verdict: fewer than 3 steps in a trace give no interval" in text


def test_a_folder_names_each_ranks_file_and_one_file_does_not():
    first = rank_report(rank=0, file="/job/a.json.gz")
    second = rank_report(rank=0, file="/job/b.json.gz")
    text = report_lines(trace_report(first, second, path="/job"))
    assert "rank 0 · NVIDIA A100-SXM4-80GB · a.json.gz" in text
    assert "rank 0 · NVIDIA A100-SXM4-80GB · b.json.gz" in text
    assert report_lines(trace_report(first))[2] == "rank 0 · NVIDIA A100-SXM4-80GB"


def test_seconds_per_step_are_of_the_mean_step_the_shares_are_taken_over():
    """The same 3.94 ms of compute over 5 steps in both traces: 788 µs a step each, whatever the steps' skew (share ×
    median step read 804 → 729 µs, a change that was not there)."""
    before = rank_report(step_seconds=(0.0121, 0.0131, 0.0134, 0.0131, 0.0126), step_seconds_median=0.0131,
                         window_seconds=0.0643, compute_share=0.00394 / 0.0643)
    after = rank_report(step_seconds=(0.0086, 0.0087, 0.0117, 0.0087, 0.0095), step_seconds_median=0.0087,
                        window_seconds=0.0472, compute_share=0.00394 / 0.0472)
    compute = compare(before, after).categories[0]
    assert compute.before_seconds_per_step == pytest.approx(0.000788)
    assert compute.after_seconds_per_step == pytest.approx(0.000788)


def test_a_verdict_inside_what_runs_vary_by_says_to_trace_both_again():
    """1.08–1.35× clears the steps' spread in each trace, not the 8–15 % identical runs vary by: one trace of each
    is one run of each, and the line says so."""
    before = rank_report(step_seconds=(0.100, 0.101, 0.099, 0.100, 0.102))
    after = rank_report(step_seconds=(0.110, 0.135, 0.108, 0.118, 0.112), step_seconds_median=0.112)
    text = "\n".join(comparison_lines("a", "b", compare(before, after)))
    assert "longer steps in these two traces: a loss; but identical runs of one script vary 8–15 %" in text
    far = rank_report(step_seconds=(0.200, 0.201, 0.199, 0.200, 0.202), step_seconds_median=0.200)
    assert "identical runs" not in "\n".join(comparison_lines("a", "b", compare(before, far)))


def test_one_step_and_one_kernel_read_in_the_singular_without_a_spread():
    rank = rank_report(steps=1, step_seconds=(13.34,), step_seconds_median=13.34, step_seconds_low=13.34,
                       step_seconds_high=13.34, kernels=1)
    text = "\n".join(rank_lines(rank))
    assert "1 step: 13.34 s (no spread from one step)" in text and "(1 kernel)" in text
    assert "1 steps" not in text and "1 kernels" not in text
    compared = "\n".join(comparison_lines("a", "b", compare(rank, rank)))
    assert "step time: 13.34 s (no spread from one step) → 13.34 s (no spread from one step)" in compared


def test_the_comparisons_table_keeps_its_columns_whatever_the_widths_of_its_figures():
    before = rank_report(compute_share=0.016, memory_share=0.001, idle_share=0.983, communication_share=0.0,
                         window_seconds=0.016, dataloader_share=None)
    after = rank_report(compute_share=0.0, memory_share=0.0, idle_share=1.0, communication_share=0.0,
                        window_seconds=66.7, dataloader_share=0.947)
    lines = comparison_lines("a", "b", compare(before, after))
    header = next(i for i, line in enumerate(lines) if line.split() == ["before", "after"])
    table = lines[header + 1:header + 6]
    assert [line.split()[0] for line in table] == ["compute", "communication", "memory", "idle", "DataLoader"]
    # every figure ends in its column: the shares' ends, and the seconds per step's, line up under the header's words
    ends = [{match.end() for match in re.finditer(r"%|/step|n/a", line[16:])} for line in table]
    assert ends[0] == ends[1] == ends[2] == ends[3] and len(ends[0]) == 4, table  # "1.6%", "51 µs/step", ×2
    assert ends[4] <= ends[0], table  # the DataLoader's shares, with no seconds
    assert lines[header].rstrip().endswith("after") and len(lines[header]) - 16 == max(ends[0])
    assert all(line == line.rstrip() for line in lines)


def test_a_share_that_rounds_to_zero_is_never_minus_zero():
    """HTA's rules replayed can leave a non-compute share of -0.00004 (docs/gpu-time.md): 0.0%, not -0.0%."""
    rank = rank_report(gpu_span_as_hta={"idle_share": 0.9, "compute_share": 0.1, "non_compute_share": -0.00004})
    (line,) = [line for line in rank_lines(rank) if "by HTA's rules" in line]
    assert "non-compute 0.0%" in line and "-0.0" not in line


def test_a_kernel_out_of_a_full_top_list_is_not_in_the_top_and_unmoved_names_are_not_changes():
    """Out of a full top list a name's time is anywhere from 0 to the list's smallest: a name that only swapped
    places at the cut (h100-input-bound against h100-input-workers: both ~63 µs a step) is no change; one that came
    in above the other list's smallest is, by at least the difference."""
    ten = tuple(NamedSeconds(f"k{n}", 0.1 - 0.001 * n) for n in range(10))  # 20.0 … 18.2 ms a step
    before = rank_report(top_kernels=ten)
    after = rank_report(top_kernels=(*ten[:8], NamedSeconds("swapped", 0.0909), NamedSeconds("fused", 0.2)))
    comparison = compare(before, after)
    # k0–k7 did not move; k8 and k9 fell out of the list, under its smallest (18.18 ms), so they fell by at least
    # 0.22 and 0.02 ms; "swapped" came in under the other list's smallest, so its change may be none
    assert [change.name for change in comparison.kernels] == ["fused", "k8", "k9"]
    text = "\n".join(comparison_lines("a.json", "b.json", comparison))
    assert "not in the top → 40.0 ms" in text  # its time before is unknown, at most 18.2 ms, not 0
    assert "swapped" not in text
    assert compare(before, before).kernels == () and compare(before, before).host_ops == ()


def test_a_move_that_would_print_as_zero_is_no_change():
    """Float noise (5 × 2 µs summed against 10 µs, over 5 steps: 2.0000000000000003e-06 against 2e-06 a step) and a
    move under the µs the lines show (17.4 → 17.0 µs) read "2 µs → 2 µs (−0 µs)": neither is a change; 1 µs is."""
    before = rank_report(top_host_ops=(NamedSeconds("cudaLaunchKernel", sum([2e-6] * 5)),
                                       NamedSeconds("aten::add_", 0.000087), NamedSeconds("aten::mm", 0.0001)))
    after = rank_report(top_host_ops=(NamedSeconds("cudaLaunchKernel", 1e-5), NamedSeconds("aten::add_", 0.000085),
                                      NamedSeconds("aten::mm", 0.000095)))
    assert before.top_host_ops[0].seconds != after.top_host_ops[0].seconds  # the noise is there
    comparison = compare(before, after)
    assert [change.name for change in comparison.host_ops] == ["aten::mm"]  # 20 → 19 µs a step
    assert "(−0 µs)" not in "\n".join(comparison_lines("a", "b", comparison))


def test_a_trace_without_steps_is_not_compared_per_step_by_name():
    """Its top lists are totals over its window: set beside another's per-step figures they would read as a
    5× change of the same run (h100-launch-bound with and without its ProfilerStep spans)."""
    no_steps = rank_report(steps=0, step_seconds=(), step_seconds_median=None, step_seconds_low=None,
                           step_seconds_high=None)
    comparison = compare(no_steps, rank_report())
    assert comparison.kernels == () and comparison.host_ops == ()
    assert "not set side by side per step" in "\n".join(comparison_lines("a.json", "b.json", comparison))
    # with the batches given, no steps is no verdict on samples per second, not the null of no flag
    data = comparison_json(compare(no_steps, rank_report(), samples_per_step=(32, 64)))
    assert data["samples_per_second_ratio"] is None and data["samples_verdict"] == "no_verdict"
    assert comparison_json(comparison)["samples_verdict"] is None


def test_kernels_are_not_compared_with_a_trace_without_gpu_figures():
    cpu_only = rank_report(cpu_only=True, top_kernels=(), kernels=0)
    assert compare(cpu_only, rank_report(top_kernels=(NamedSeconds("gemm", 0.3),))).kernels == ()


def test_names_not_compared_are_null_in_json_and_said_in_text_never_an_empty_list():
    """A CPU-only trace beside a GPU one (or a trace without steps beside one with) sets no kernels side by side:
    --json wrote "kernels": [] (no kernel changed) and the text said nothing of them."""
    cpu_only = rank_report(cpu_only=True, top_kernels=(), kernels=0, compute_share=None, communication_share=None,
                           memory_share=None, idle_share=None, gpu_span=None)
    data = comparison_json(compare(cpu_only, rank_report()))
    assert data["kernels"] is None
    assert data["kernels_not_compared"].startswith("a trace without GPU figures has no kernels read")
    assert data["host_ops"] is not None and data["host_ops_not_compared"] is None
    text = "\n".join(comparison_lines("a.json", "b.json", compare(cpu_only, rank_report())))
    assert "kernels: not set side by side (a trace without GPU figures has no kernels read" in text
    no_steps = rank_report(steps=0, step_seconds=(), step_seconds_median=None, step_seconds_low=None,
                           step_seconds_high=None)
    data = comparison_json(compare(no_steps, rank_report()))
    assert data["kernels"] is None and data["host_ops"] is None
    assert "ProfilerStep#N" in data["host_ops_not_compared"]
    compared = comparison_json(compare(rank_report(), rank_report()))
    assert compared["kernels"] == [] and compared["kernels_not_compared"] is None  # compared: none moved


def test_kernels_that_changed_whose_names_share_a_long_head_read_apart():
    """Five multi_tensor_apply_kernel instances read alike, cut at 69 characters (h100-launch-graphs against its
    fused AdamW): the one change the pair is about could not be told from the others."""
    head = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
    before = rank_report(top_kernels=(NamedSeconds(head + "TensorListMetadata<3>, AdamFunctor<float>)", 0.3),
                                      NamedSeconds(head + "TensorListMetadata<1>, ZeroFunctor<float>)", 0.2)))
    after = rank_report(top_kernels=(NamedSeconds(head + "FusedAdamWMathFunctor<float, 4>)", 0.1),))
    lines = comparison_lines("a", "b", compare(before, after))
    start = lines.index("kernels that changed most (seconds per step):") + 1
    shown = [line.split("  void", 1)[1] for line in lines[start:start + 3]]  # "60.0 ms → 0 µs (−60.0 ms)  void …"
    assert len(set(shown)) == 3, shown


def test_two_traces_one_without_steps_say_which_window_each_share_is_over():
    """Steps against a trace without ProfilerStep#N: the shares were set side by side (compute 17.3 % | 0.1 %)
    with the reason only in a note on stderr, though one is over the steps and the other over the whole trace."""
    before = rank_report()
    after = rank_report(steps=0, step_seconds=(), step_seconds_median=None, step_seconds_low=None,
                        step_seconds_high=None)
    text = comparison_lines("a.json", "b.json", compare(before, after))
    assert ("  the shares below are over each trace's own window: before's steps, after's first to last GPU event (it "
            "has no ProfilerStep#N)") in text
    assert not any("own window" in line for line in comparison_lines("a.json", "b.json", compare(before, before)))

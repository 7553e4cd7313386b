"""Findings phrased for a user's own script: each fires past the workbench's own threshold, names the change in
PyTorch's terms, and carries its figure and threshold."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path

import pytest

from trace_builders import kernel, launched, op, runtime, step, trace, write
from trace_reports import rank_report

from workbench.controller.trace_page import trace_page
from workbench.engine import kineto
from workbench.engine.findings import COMPUTE_BOUND_BUSY, INPUT_BOUND_WAIT, LAUNCH_BOUND_HOST_WAIT
from workbench.trace_analysis import read_report
from workbench.trace_analysis.model import NamedSeconds, ScriptTraits, TraceReport
from workbench.trace_analysis.report_text import rank_lines
from workbench.trace_analysis.script_findings import (
    COMMUNICATION_BOUND_SHARE,
    EXPOSED_MEMORY_SHARE,
    SYNC_WAIT_SHARE,
    findings_for,
    with_findings,
)


SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "traces"


def kinds(rank) -> list[str]:
    return [finding.kind for finding in findings_for(rank)]


def test_a_balanced_rank_has_no_finding():
    assert findings_for(rank_report()) == ()


def waiting_for_data(share: float, **changes):
    """A rank whose GPU sat idle waiting for data ``share`` of the steps (half its idle time), the host in the
    DataLoader a little longer."""
    return rank_report(idle_share=2 * share, idle_for_data_share=0.5, idle_for_host_share=0.1, idle_other_share=0.4,
                       idle_kernel_wait_share=0.0,
                       compute_share=0.95 - 2 * share, dataloader_share=share + 0.05, **changes)


def test_input_bound_fires_from_the_gpus_wait_for_data_and_names_num_workers():
    rank = waiting_for_data(0.3)
    (finding,) = findings_for(rank)
    assert finding.kind == "input-bound"
    assert finding.figure == pytest.approx(0.3) and finding.threshold == INPUT_BOUND_WAIT
    assert "num_workers=" in finding.change and "persistent_workers=True" in finding.change
    assert "pin_memory=True" in finding.change
    assert "the GPU sat idle waiting for data 30% of the steps' GPU time" in finding.text and "15%" in finding.text
    assert "35% of the steps inside the DataLoader's __next__" in finding.text  # the plugin's figure, said too


def test_input_bound_with_workers_already_asks_for_more_of_them_not_four():
    """The DataLoader's spans name its iterator: a loader that already runs workers
    (_MultiProcessingDataLoaderIter) and still does not keep up was told "num_workers=4", which may be fewer
    than it runs; batches whose copies to the GPU are all from pinned memory were told "pin_memory=True"."""
    pinned = (NamedSeconds("Memcpy HtoD (Pinned -> Device)", 0.01),)
    workers = waiting_for_data(0.3, traits=ScriptTraits(loader_workers=True), top_copies=pinned)
    (finding,) = findings_for(workers)
    assert finding.change.startswith("DataLoader(..., num_workers=<more than now>, persistent_workers=True): the "
                                     "DataLoader already runs worker processes (its spans name "
                                     "_MultiProcessingDataLoaderIter) and they do not keep up")
    assert "num_workers=4" not in finding.change and "pin_memory" not in finding.change
    assert finding.change.endswith("out of __getitem__ (decode and augment on the GPU)")
    cpu_only = dataclasses.replace(workers, cpu_only=True, idle_share=None, idle_for_data_share=None)
    (finding,) = findings_for(cpu_only)  # a trace without a GPU is not told to move work to one
    assert finding.change.endswith("out of __getitem__") and "GPU" not in finding.change
    pageable = (*pinned, NamedSeconds("Memcpy HtoD (Pageable -> Device)", 0.01))
    (finding,) = findings_for(waiting_for_data(0.3, traits=ScriptTraits(loader_workers=False), top_copies=pageable))
    assert finding.change.startswith("DataLoader(..., num_workers=4, pin_memory=True, persistent_workers=True)")


@pytest.mark.parametrize("iterators, workers", [(["_MultiProcessingDataLoaderIter"], True),
                                                (["_SingleProcessDataLoaderIter"], False),
                                                (["_SingleProcessDataLoaderIter", "_MultiProcessingDataLoaderIter"],
                                                 None)])
def test_the_trace_says_whether_the_dataloader_runs_workers(tmp_path, iterators, workers):
    events = [step(1, 0, 10_000), *launched("k", 10, 20, 9_000, 1)]
    events += [op(f"enumerate(DataLoader)#{name}.__next__", 100 + 10 * index, 5, cat="user_annotation")
               for index, name in enumerate(iterators)]
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.traits.loader_workers is workers


def test_input_bound_holds_at_the_threshold_and_not_below():
    assert kinds(waiting_for_data(INPUT_BOUND_WAIT)) == ["input-bound"]
    assert kinds(waiting_for_data(0.10)) == []
    assert kinds(rank_report(dataloader_share=0.008)) == []


def test_a_loader_that_keeps_ahead_of_a_busy_gpu_is_not_called_input_bound():
    # The host spends a third of each step in the DataLoader, but the GPU never waits for it: the host was ahead
    # (kernels queued), so more workers would not shorten the step; the GPU's own figure says what bounds it.
    rank = rank_report(dataloader_share=0.334, idle_share=0.02, idle_for_data_share=0.0, compute_share=0.95,
                       communication_share=0.0, memory_share=0.03)
    assert kinds(rank) == ["compute-bound"]


def test_a_gpu_never_idle_is_not_input_bound_however_long_the_loader_took():
    """With no idle time the idle split is None (no time to split): that is no wait for data, not an unknown one."""
    rank = rank_report(dataloader_share=0.4, idle_share=0.0, idle_for_data_share=None, idle_for_host_share=None,
                       idle_kernel_wait_share=None, idle_other_share=None, compute_share=0.97,
                       communication_share=0.0, memory_share=0.03)
    assert kinds(rank) == ["compute-bound"]


def test_on_a_cpu_only_trace_the_dataloader_share_still_fires_without_pin_memory():
    rank = rank_report(kernels=0, cpu_only=True, compute_share=0.0, communication_share=0.0, memory_share=0.0,
                       idle_share=0.0,
                       idle_for_host_share=0.0, idle_kernel_wait_share=0.0, idle_other_share=0.0,
                       dataloader_share=0.9, top_kernels=(), device="unknown")
    (finding,) = findings_for(rank)
    assert finding.kind == "input-bound" and "num_workers=" in finding.change
    assert "pin_memory" not in finding.change  # pinned memory only speeds copies to a GPU


def test_without_steps_the_dataloader_share_of_the_window_fires_and_says_so():
    rank = waiting_for_data(0.42, steps=0, step_seconds=(), step_seconds_median=None)
    (finding,) = findings_for(rank)
    assert finding.kind == "input-bound" and finding.figure == pytest.approx(0.42)
    assert "the GPU sat idle waiting for data 42% of the traced GPU time (first to last GPU event: no steps)" in (
        finding.text)
    assert "the host spent 47% of the traced window (no steps) inside the DataLoader's __next__" in finding.text


def test_launch_bound_offers_a_larger_batch_then_cuda_graphs():
    rank = rank_report(idle_share=0.5, idle_for_host_share=0.8, idle_other_share=0.0, idle_kernel_wait_share=0.2,
                       compute_share=0.4, memory_share=0.05, communication_share=0.05)
    findings = findings_for(rank)
    assert [f.kind for f in findings] == ["launch-bound", "launch-bound"]
    assert abs(findings[0].figure - 0.4) < 1e-12 and findings[0].threshold == LAUNCH_BOUND_HOST_WAIT
    assert "larger batch" in findings[0].change
    assert 'torch.compile(model, mode="reduce-overhead")' in findings[1].change
    assert "1,000 kernels" in findings[0].text  # 5,000 kernels over 5 steps


def test_launch_bound_on_a_compiled_script_names_only_the_mode_left():
    """torch.compile's code in the trace and no graph launches: the change is the mode, not "wrap the model"."""
    rank = rank_report(idle_share=0.5, idle_for_host_share=0.8, idle_other_share=0.0, idle_kernel_wait_share=0.2,
                       compute_share=0.4, traits=ScriptTraits(compiled=True))
    graphs = findings_for(rank)[1]
    assert graphs.change.startswith('mode="reduce-overhead" on the torch.compile the script already calls')
    assert "model = torch.compile(model" not in graphs.change


def test_a_sync_in_the_loop_is_named_by_its_host_op_first():
    rank = rank_report(idle_share=0.5, idle_for_host_share=0.8, idle_other_share=0.0, idle_kernel_wait_share=0.2,
                       compute_share=0.4, sync_calls=(NamedSeconds("aten::item", 0.1),
                                                     NamedSeconds("aten::_local_scalar_dense", 0.01)))
    findings = findings_for(rank)
    assert findings[0].kind == "sync-in-loop"
    assert findings[0].text.startswith("A sync in the loop: every step waits in")  # not the launch-bound headline
    # the idle is the sync's: no larger batch or CUDA graphs offered for it beside (they were, on an H100 trace
    # whose idle went from 24 % to 2 % with the .item() alone taken out)
    assert [finding.kind for finding in findings] == ["sync-in-loop"]
    assert "aten::item" in findings[0].text and "aten::item" in findings[0].change
    assert ".item()" in findings[0].change
    # its figure is the host's wait in the sync over the steps (0.1 s of 0.502 s), held to its own threshold
    assert abs(findings[0].figure - 0.1 / 0.502) < 1e-12 and findings[0].threshold == SYNC_WAIT_SHARE


def test_a_sync_the_host_barely_waits_in_is_not_named():
    """The host waited 3 % of the steps in the sync: it was hardly ahead of the GPU, so the sync is not what
    keeps the GPU waiting (the launches are)."""
    rank = rank_report(idle_share=0.5, idle_for_host_share=0.8, idle_other_share=0.0, idle_kernel_wait_share=0.2,
                       compute_share=0.4, sync_calls=(NamedSeconds("aten::item", 0.015),))
    assert [finding.kind for finding in findings_for(rank)] == ["launch-bound", "launch-bound"]


def test_a_sync_with_no_gap_after_it_is_not_a_finding():
    rank = rank_report(sync_calls=(NamedSeconds("aten::item", 0.03),))
    assert findings_for(rank) == ()


def test_communication_bound_names_ddp_buckets_and_overlap():
    rank = rank_report(communication_share=0.25, compute_share=0.5)
    (finding,) = findings_for(rank)
    assert finding.kind == "communication-bound" and finding.threshold == COMMUNICATION_BOUND_SHARE
    assert "bucket_cap_mb" in finding.change and "no_sync()" in finding.change


def test_exposed_copies_name_non_blocking():
    rank = rank_report(memory_share=0.2, compute_share=0.55)
    (finding,) = findings_for(rank)
    assert finding.kind == "copy-bound" and finding.threshold == EXPOSED_MEMORY_SHARE
    assert "non_blocking=True" in finding.change


def copy_bound_change(*copies: tuple[str, float]) -> str:
    """The copy-bound change where each named copy's time is all exposed (no kernel hides any of it)."""
    exposed: dict[str, float] = defaultdict(float)
    for name, seconds in copies:
        exposed[kineto.copy_direction(name)] += seconds
    rank = rank_report(memory_share=0.2, compute_share=0.55,
                       top_copies=tuple(NamedSeconds(name, seconds) for name, seconds in copies),
                       exposed_copies=tuple(NamedSeconds(where, seconds) for where, seconds in
                                            sorted(exposed.items(), key=lambda item: -item[1])))
    (finding,) = findings_for(rank)
    return finding.change


def test_the_copy_bound_change_follows_where_most_of_the_exposed_copy_time_goes():
    """Pinning and non_blocking are for batches copied to the GPU; copies back to the host, within the GPU or
    fills (ROCm's blit kernels among them) get a change of their own, by where most of the exposed time goes."""
    assert "pin_memory=True" in copy_bound_change(("Memcpy HtoD (Pageable -> Device)", 0.3),
                                                  ("Memcpy DtoH (Device -> Pageable)", 0.1))
    assert "uint8" in copy_bound_change(("Memcpy HtoD (Pinned -> Device)", 0.3), ("Memset (Device)", 0.1))
    to_host = copy_bound_change(("Memcpy HtoD (Pinned -> Device)", 0.1), ("Memcpy DtoH (Device -> Pageable)", 0.3))
    assert "DtoH" in to_host and "every N steps" in to_host and "pin_memory" not in to_host
    for on_gpu in (copy_bound_change(("Memcpy DtoD (Device -> Device)", 0.2), ("Memset (Device)", 0.2),
                                     ("Memcpy HtoD (Pageable -> Device)", 0.3)),
                   copy_bound_change(("__amd_rocclr_fillBufferAligned", 0.1),)):
        assert "on the GPU itself" in on_gpu and "pin_memory" not in on_gpu and "non_blocking" not in on_gpu
    # ROCm's blit copies may go either way: they do not decide it (the batches-to-the-GPU change, as without names)
    assert "pin_memory=True" in copy_bound_change(("__amd_rocclr_copyBuffer", 0.3))
    assert "pin_memory=True" in copy_bound_change(("__amd_rocclr_copyBuffer", 0.3), ("Memset (Device)", 0.1))
    assert "on the GPU itself" in copy_bound_change(("__amd_rocclr_copyBuffer", 0.1), ("Memset (Device)", 0.3))
    # pinned or pageable by the exposed time too; a copy whose name does not say (ROCm's) is not called pinned
    assert "uint8" in copy_bound_change(("Memcpy HtoD (Pinned -> Device)", 0.3),
                                        ("Memcpy HtoD (Pageable -> Device)", 0.1))
    assert "pin_memory=True" in copy_bound_change(("Memcpy HtoD (Host -> Device)", 0.3))


def test_a_hidden_pageable_copy_does_not_call_pinned_batches_pageable():
    """The batches' copies from pinned memory stall the GPU; a pageable copy runs under a kernel: fewer bytes."""
    rank = rank_report(memory_share=0.2, compute_share=0.55,
                       top_copies=(NamedSeconds("Memcpy HtoD (Pageable -> Device)", 0.5),
                                   NamedSeconds("Memcpy HtoD (Pinned -> Device)", 0.3)),
                       exposed_copies=(NamedSeconds(kineto.TO_GPU_PINNED, 0.3),))
    (finding,) = findings_for(rank)
    assert "uint8" in finding.change and "pin_memory=True" not in finding.change


def test_copies_that_kernels_hide_do_not_choose_the_copy_bound_change(tmp_path):
    """Each step copies its loss back (DtoH) for 4 ms under a kernel, and its batch in (HtoD, pageable) for 3 ms
    with nothing beside it: the exposed time is the batch's, so the change is pin_memory and non_blocking, though
    DtoH holds the most copy time."""
    events = []
    for number in range(1, 4):
        begin = number * 10_000
        events.append(step(number, begin, 10_000))
        events += launched("gemm", begin + 10, begin + 100, 5_000, 10 * number)
        events.append(kernel("Memcpy DtoH (Device -> Pageable)", begin + 500, 4_000, 10 * number + 1, stream=8,
                             cat="gpu_memcpy"))
        events.append(kernel("Memcpy HtoD (Pageable -> Device)", begin + 6_000, 3_000, 10 * number + 2, stream=9,
                             cat="gpu_memcpy"))
    (rank,) = read_report(write(tmp_path / "copies.json", trace(events))).ranks
    assert rank.top_copies[0].name.startswith("Memcpy DtoH")  # the most copy time
    assert [(c.name, round(c.seconds, 6)) for c in rank.exposed_copies] == [(kineto.TO_GPU_PAGEABLE, 0.009)]
    (finding,) = [f for f in findings_for(rank) if f.kind == "copy-bound"]
    assert "pin_memory=True" in finding.change and "DtoH" not in finding.change
    # what the change was chosen by is shown beside it, in the CLI's text and the window's page
    said = "not hidden behind compute, by where the bytes go: to the GPU from pageable memory 9.0 ms"
    assert said in "\n".join(rank_lines(rank))
    (section,) = trace_page(TraceReport("t", (rank,)), "").sections
    assert any(said.lower() in fact.lower() for fact in section.facts)


def test_compute_bound_offers_autocast_unless_the_kernels_already_run_in_16_bit():
    rank = rank_report(compute_share=0.9, idle_share=0.05, memory_share=0.03, communication_share=0.02)
    (finding,) = findings_for(rank)
    assert finding.kind == "compute-bound" and finding.threshold == COMPUTE_BOUND_BUSY
    assert "torch.autocast" in finding.change and "bfloat16" in finding.change
    half = rank_report(compute_share=0.9, idle_share=0.05, memory_share=0.03, communication_share=0.02,
                       top_kernels=(NamedSeconds("ampere_bf16_s16816gemm_bf16_128x128", 0.3),))
    (finding,) = findings_for(half)
    assert "torch.autocast" not in finding.change and "torch.compile" in finding.change


def test_compute_bound_names_float16_and_a_grad_scaler_on_a_gpu_without_bfloat16_tensor_cores():
    """A V100 (7.0) or a T4 (7.5) has float16 tensor cores, not bfloat16 ones: the trace's deviceProperties say
    which GPU ran it, so the change names the one that helps there."""
    busy = dict(compute_share=0.9, idle_share=0.05, memory_share=0.03, communication_share=0.02)
    (v100,) = findings_for(rank_report(**busy, compute_capability=(7, 0)))
    assert "dtype=torch.float16" in v100.change and "GradScaler" in v100.change and "7.0" in v100.change
    (a100,) = findings_for(rank_report(**busy, compute_capability=(8, 0)))
    assert "dtype=torch.bfloat16" in a100.change and "GradScaler" not in a100.change
    (p100,) = findings_for(rank_report(**busy, compute_capability=(6, 0)))
    assert "no tensor cores" in p100.change and "dtype=torch.bfloat16" not in p100.change
    (unknown,) = findings_for(rank_report(**busy))
    assert "dtype=torch.bfloat16" in unknown.change and "float16 with torch.amp.GradScaler before" in unknown.change


def test_the_costliest_problem_comes_first():
    rank = rank_report(dataloader_share=0.25, idle_share=0.2, idle_for_data_share=1.0, idle_for_host_share=0.0,
                       idle_other_share=0.0, communication_share=0.3, compute_share=0.45)
    assert kinds(rank) == ["communication-bound", "input-bound"]


def test_with_findings_fills_every_rank():
    report = TraceReport(path="x", ranks=(rank_report(rank=0), waiting_for_data(0.3, rank=1)))
    filled = with_findings(report)
    assert [len(rank.findings) for rank in filled.ranks] == [0, 1]


def test_copies_without_kernels_are_gpu_work_a_copy_bound_finding_reads():
    """A loop that only moves batches to the GPU: no kernel, 59 % of the steps in copies (no finding fired: the
    rules asked for a kernel)."""
    rank = rank_report(kernels=0, top_kernels=(), compute_share=0.0, communication_share=0.0, memory_share=0.59,
                       idle_share=0.41, idle_for_host_share=0.1, idle_other_share=0.9, idle_kernel_wait_share=0.0)
    assert kinds(rank) == ["copy-bound"]


def host_waits_in(folder: Path, call: str):
    """A step whose GPU waits 625 of its 1,000 µs for the host (0–5 µs and 100–720 µs: each gap ends with a launch
    made in it), the host in ``call`` for 590 µs of that wait."""
    events = [step(1, 0, 1000), *launched("a", 0, 5, 95, 1), *launched("b", 710, 720, 80, 2)]
    events.append(runtime(call, 110, 590) if call.startswith("cu") else op(call, 110, 590))
    (rank,) = read_report(write(folder / f"{call}.json", trace(events))).ranks
    return with_findings(TraceReport("t.json", (rank,))).ranks[0]


def test_a_host_waiting_in_the_allocator_is_allocator_bound_not_launch_bound(tmp_path):
    """Larger batches and CUDA graphs would not shorten a wait the host spends in cudaFree: the finding names
    the allocator, with its share of the wait (the A100 alexnet trace: 66 %)."""
    rank = host_waits_in(tmp_path, "cudaFree")
    assert [call.name for call in rank.host_wait_calls] == ["cudaFree", "cudaLaunchKernel"]
    assert rank.host_wait_seconds == pytest.approx(625e-6)
    (finding,) = rank.findings
    assert finding.kind == "allocator-bound" and finding.figure == pytest.approx(590 / 625)
    assert "cudaFree 94%" in finding.text and "torch.cuda.empty_cache()" in finding.change
    assert ("while the GPU waited for the host (625 µs), the host was in: cudaFree 94%, cudaLaunchKernel 2% of that "
            "wait") in "\n".join(rank_lines(rank))
    # the host in its own Python (an op, no runtime call): the launches' finding, as before
    assert {finding.kind for finding in host_waits_in(tmp_path, "aten::add").findings} == {"launch-bound"}


@pytest.mark.skipif(not (SHARED / "a100-alexnet-benchmark.json.gz").is_file(), reason="no shared traces")
def test_the_real_a100_trace_whose_host_frees_memory_is_allocator_bound():
    (rank,) = with_findings(read_report(SHARED / "a100-alexnet-benchmark.json.gz")).ranks
    assert [finding.kind for finding in rank.findings] == ["allocator-bound"]
    assert 0.6 < rank.findings[0].figure < 0.7  # cudaFree 51 %, cudaMalloc 15 % of the wait


def test_every_finding_says_its_threshold_in_its_own_words(tmp_path):
    """The text report and the window's page show a finding's text alone: it must name the threshold that fired
    it, as the JSON's ``threshold`` holds it (the page once added it again, and said it twice)."""
    launch = dict(idle_share=0.5, idle_for_host_share=0.8, idle_other_share=0.0, idle_kernel_wait_share=0.2,
                  compute_share=0.4)
    ranks = [waiting_for_data(0.3), rank_report(**launch),
             rank_report(**launch, sync_calls=(NamedSeconds("aten::item", 0.1),)),
             rank_report(communication_share=0.25, compute_share=0.5), rank_report(memory_share=0.2, compute_share=0.55),
             rank_report(compute_share=0.9, idle_share=0.05, memory_share=0.03, communication_share=0.02),
             host_waits_in(tmp_path, "cudaFree")]
    findings = [finding for rank in ranks for finding in findings_for(rank)]
    assert {finding.kind for finding in findings} == {"input-bound", "launch-bound", "sync-in-loop",
                                                      "communication-bound", "copy-bound", "compute-bound",
                                                      "allocator-bound"}
    for finding in findings:
        assert f"threshold {finding.threshold:.0%}" in finding.text, finding.text

"""The own-script findings on real GPU traces: user-style loops on an H100, each built to provoke one finding
(scripts/make_own_script_gpu_traces.py, traces in data/h100, how each was taken in data/h100/README.md).

Each rule is held to the case it describes: it fires where the loop was made to be bound that way, names the
change in that script's terms, and says nothing the trace contradicts (CUDA graphs already replaying, a model
already compiled). Each named change was then made and traced: `workbench trace BEFORE AFTER` says whether the
steps got shorter beyond their own spread.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.trace_analysis import read_report
from workbench.trace_analysis.comparing import compare
from workbench.trace_analysis.script_findings import SYNC_WAIT_SHARE, findings_for

H100 = Path(__file__).resolve().parent / "data" / "h100"
_read: dict[str, object] = {}


def rank(case: str):
    if case not in _read:
        (_read[case],) = read_report(H100 / f"h100-{case}.pt.trace.json.gz").ranks
    return _read[case]


def kinds(case: str) -> list[str]:
    return [finding.kind for finding in findings_for(rank(case))]


def changes(case: str) -> str:
    return " | ".join(finding.change for finding in findings_for(rank(case)))


def test_each_trace_is_a_real_h100_trace_with_five_steps():
    for path in sorted(H100.glob("h100-*.pt.trace.json.gz")):
        report = rank(path.name.removeprefix("h100-").removesuffix(".pt.trace.json.gz"))
        assert report.device == "NVIDIA H100 80GB HBM3" and report.steps == 5 and report.kernels > 0, path.name


def test_a_loader_with_no_workers_is_input_bound_and_eight_workers_fix_it():
    assert kinds("input-bound")[0] == "input-bound"
    assert rank("input-bound").dataloader_share > 0.8
    assert "num_workers=" in changes("input-bound") and "pin_memory=True" in changes("input-bound")
    assert "input-bound" not in kinds("input-workers") and rank("input-workers").dataloader_share < 0.02
    assert compare(rank("input-bound"), rank("input-workers")).step_time.verdict == "faster"


def test_a_small_model_is_launch_bound_and_names_no_sync_it_does_not_have():
    assert kinds("launch-bound") == ["launch-bound", "launch-bound"]
    assert "larger batch" in changes("launch-bound") and 'mode="reduce-overhead"' in changes("launch-bound")


def test_a_sync_the_host_waits_long_in_is_named_by_its_op_and_removing_it_pays():
    """ResNet-50 with loss.item() and 30 ms of host work each step: the host waits 26 ms a step in the sync (it
    was that far ahead), then the GPU waits for its launches; without the .item() the steps are 0.68x as long."""
    found = findings_for(rank("sync-ahead"))
    assert found[0].kind == "sync-in-loop" and found[0].threshold == SYNC_WAIT_SHARE
    assert found[0].figure > 0.2
    assert "cudaStreamSynchronize called from aten::item" in found[0].text and ".item()" in found[0].change
    assert compare(rank("sync-ahead"), rank("sync-ahead-removed")).step_time.verdict == "faster"


def test_a_sync_the_host_hardly_waits_in_is_not_named():
    """The launch-bound MLP with loss.item(): the host waits 12 us a step in the sync (it was not ahead), and the
    loop without it was not faster: the finding is launch-bound, the sync only listed."""
    assert kinds("sync-in-loop") == ["launch-bound", "launch-bound"]
    assert any("aten::item" in call.name for call in rank("sync-in-loop").sync_calls)
    assert compare(rank("sync-in-loop"), rank("launch-bound")).step_time.verdict != "faster"


def test_cuda_graphs_already_in_the_trace_are_not_advised_again():
    """torch.compile(mode="reduce-overhead") made the steps 3x shorter, and the GPU still waits for the host (the
    optimizer and autograd run outside the graphs): still launch-bound, but the finding must say that graphs
    already run, not advise them."""
    assert compare(rank("launch-bound"), rank("launch-graphs")).step_time.verdict == "faster"
    for case in ("launch-graphs", "launch-graphs-fused"):
        assert "launch-bound" in kinds(case)
        assert "reduce-overhead" not in changes(case)
        assert "CUDA graphs already launch part of each step" in findings_for(rank(case))[0].text
    # With graphs on the model, the optimizer's loop over parameters is what is left to fuse: named, and made.
    assert "torch.optim.AdamW(..., fused=True)" in changes("launch-graphs")
    assert rank("launch-graphs-fused").traits.fused_optimizer and "fused=True" not in changes("launch-graphs-fused")
    assert compare(rank("launch-graphs"), rank("launch-graphs-fused")).step_time.verdict == "faster"


def test_a_larger_batch_keeps_the_step_time_and_does_256_times_the_work():
    """Batch 32 → 8192 of the launch-bound MLP: the step takes as long (the host's launches set it), each step
    carries 256x the samples, and the GPU's compute share rises from 6 % to 24 %."""
    assert compare(rank("launch-bound"), rank("launch-larger-batch")).step_time.verdict == "within_noise"
    assert rank("launch-larger-batch").compute_share > 3 * rank("launch-bound").compute_share


def test_pageable_copies_name_pinned_memory_and_pinned_ones_name_fewer_bytes():
    assert kinds("copy-bound")[0] == "copy-bound"
    assert "pin_memory=True" in changes("copy-bound") and "non_blocking=True" in changes("copy-bound")
    assert any("Pageable" in copy.name for copy in rank("copy-bound").top_copies)
    # Pinned and non_blocking: the steps are 0.31x as long; the copy, on the step's own stream, is still 36 % of
    # the GPU time, and the finding now names the bytes, not the pinning it sees done.
    assert compare(rank("copy-bound"), rank("copy-pinned")).step_time.verdict == "faster"
    pinned = next(finding for finding in findings_for(rank("copy-pinned")) if finding.kind == "copy-bound")
    assert "pin_memory" not in pinned.change and "uint8" in pinned.change
    # uint8 batches: the exposed copies fall from 36 % to 10 % (no copy-bound finding); the steps, bound by the
    # host's launches, stay within their spread. A side-stream prefetcher was slower here, and is not named.
    assert "copy-bound" not in kinds("copy-uint8")
    assert rank("copy-uint8").memory_share < rank("copy-pinned").memory_share / 3
    assert compare(rank("copy-pinned"), rank("copy-uint8")).step_time.verdict == "within_noise"
    assert compare(rank("copy-pinned"), rank("copy-prefetch")).step_time.verdict == "slower"
    assert "stream" not in changes("copy-pinned")


def test_compute_bound_names_autocast_then_compile_then_neither_once_both_are_done():
    assert kinds("compute-fp32") == ["compute-bound"] and "torch.autocast" in changes("compute-fp32")
    assert kinds("compute-bf16") == ["compute-bound"] and "torch.compile(model)" in changes("compute-bf16")
    assert not rank("compute-bf16").traits.compiled and rank("compute-bf16-compiled").traits.compiled
    assert kinds("compute-bf16-compiled") == ["compute-bound"]
    assert "torch.compile(model)" not in changes("compute-bf16-compiled")
    assert "torch.autocast" not in changes("compute-bf16-compiled")
    assert compare(rank("compute-fp32"), rank("compute-bf16")).step_time.verdict == "faster"
    assert compare(rank("compute-bf16"), rank("compute-bf16-compiled")).step_time.verdict == "faster"


@pytest.mark.parametrize("case", ["input-bound", "launch-bound", "copy-bound", "compute-fp32"])
def test_every_finding_carries_the_figure_and_threshold_that_fired_it(case):
    for finding in findings_for(rank(case)):
        assert finding.figure >= finding.threshold > 0

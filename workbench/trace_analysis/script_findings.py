"""What bounds a user's own script, from its profiler trace, and the change to make in that script's terms.

The workbench's own findings (engine/findings.py) name a RunConfig field to change; a user's script has no
RunConfig, so these name the line of PyTorch to write instead: ``DataLoader(num_workers=…)``,
``non_blocking=True``, ``torch.autocast``, ``torch.compile(mode="reduce-overhead")``, a larger batch, DDP's
bucket and overlap settings, a sync taken out of the loop. Each finding carries the figure that fired it and
the threshold it was held against. The thresholds are the workbench's own where the figure means the same
thing (a wait for data, a GPU waiting for the host, kernels busy); the two figures it has no rule for
(communication and exposed copies) are held to the same "a sixth of the time is worth fixing first" as a wait
for data. Pure Python: no torch, no Qt.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from workbench.engine.findings import COMPUTE_BOUND_BUSY, INPUT_BOUND_WAIT, LAUNCH_BOUND_HOST_WAIT
from workbench.engine.kineto import (ALLOCATOR_CALLS, EITHER_WAY, ON_GPU, TO_GPU, TO_GPU_KINDS, TO_GPU_PAGEABLE,
                                    TO_GPU_PINNED, TO_HOST, copy_direction)
from workbench.formatting import format_step_seconds
from workbench.trace_analysis.model import Finding, NamedSeconds, RankReport, TraceReport
from workbench.trace_analysis.wording import LIGHTNING_FETCH_WORDS

# Communication kernels (NCCL/RCCL) not hidden behind compute, and copies or fills not hidden behind it, as a
# share of the steps' GPU time: worth fixing from the same share as a wait for data.
COMMUNICATION_BOUND_SHARE = INPUT_BOUND_WAIT
EXPOSED_MEMORY_SHARE = INPUT_BOUND_WAIT
# Kernel names that say the math already runs in 16-bit (cuBLAS/cuDNN and CUTLASS spell it these ways).
# A sync every step is named only where the host waits in it this share of the steps or more: that is how far
# ahead of the GPU the host was, the lead each sync throws away. On an H100 a ResNet-50 loop whose loss.item()
# waited 25 % of the step ran 0.68x as long without it; an MLP loop whose sync waited 0.1 % was not faster
# without it (tests/trace_analysis/data/h100). Below a tenth, what removing it could win is within the 8-15 %
# that identical runs vary by.
SYNC_WAIT_SHARE = 0.10
# The host ops under which a copy's sync is the copy waiting (from pageable memory, or back to the host).
COPY_OPS = frozenset({"aten::to", "aten::_to_copy", "aten::copy_"})
# The GPU's wait for the host is the allocator's, not the launches', where the host spent half of it in calls that
# take memory from the driver or give it back (kineto.ALLOCATOR_CALLS).
ALLOCATOR_WAIT_SHARE = 0.5
GRAPH_LAUNCH_MARK = "GraphLaunch"  # cudaGraphLaunch, hipGraphLaunch
FUSABLE_OPTIMIZERS = frozenset({"Adam", "AdamW", "SGD"})  # torch.optim classes that take fused=True on CUDA
# Tensor cores came with Volta (compute capability 7.0), bfloat16 ones with Ampere (8.0): a V100 (7.0) or a T4 (7.5)
# has float16 ones only; a P100 (6.0) or a GTX 1080 (6.1) none.
TENSOR_CORES, BFLOAT16_TENSOR_CORES = (7, 0), (8, 0)
HALF_PRECISION_MARKS = ("bf16", "fp16", "f16", "half", "h884", "h1688", "h16816", "hmma", "bfloat16")


def findings_for(rank: RankReport) -> tuple[Finding, ...]:
    """The findings of one rank, the costliest problem first; each problem's remedies in the order to try them."""
    problems: list[tuple[float, list[Finding]]] = []
    for rule in (_input_bound, _launch_bound, _communication_bound, _exposed_memory):
        found = rule(rank)
        if found:
            problems.append(found)
    problems.sort(key=lambda item: -item[0])
    findings = [finding for _, group in problems for finding in group]
    if not problems:
        findings += _compute_bound(rank)
    return tuple(findings)


def _input_bound(rank: RankReport) -> Optional[tuple[float, list[Finding]]]:
    """The GPU sat idle while the host was inside the DataLoader (the workbench's own rule with a timeline); on a
    CPU-only trace, the host's time in the DataLoader, as the TensorBoard plugin read it. A loader that takes a
    third of the host's step while the GPU stays busy (the host was ahead) is not what bounds the step."""
    loading = rank.dataloader_share  # host inside enumerate(DataLoader)#…__next__ ÷ the step (or the window)
    if loading is None:  # without DataLoader spans nothing says the host waited for data
        return None
    where = "the steps" if rank.steps else "the traced window (no steps)"
    inside = LIGHTNING_FETCH_WORDS if rank.traits.lightning_fetch_only else "the DataLoader's __next__"
    loader = f"the host spent {_pct(loading)} of {where} inside {inside}"
    idle = _gpu_share(rank, rank.idle_share)
    # a GPU never idle never waited for data (its idle split is None then: no idle time to split)
    gpu_wait = None if idle is None else idle * (rank.idle_for_data_share or 0.0)
    threshold = f"(threshold {_pct(INPUT_BOUND_WAIT)})"
    if gpu_wait is not None:
        figure = gpu_wait
        said = f"the GPU sat idle waiting for data {_pct(gpu_wait)} of {_window(rank)} {threshold}; {loader}"
    else:
        figure = loading
        said = (f"the steps spent {_pct(loading)} of their time inside {inside}" if rank.steps
                else loader) + f" {threshold}" + (": no GPU figures in this trace" if rank.cpu_only else "")
    if figure < INPUT_BOUND_WAIT:
        return None
    head = f"Input-bound: {said}."
    # pinned pages only speed copies to a GPU, and batches copied from pinned memory alone are pinned already
    pinned = ", pin_memory=True" if not rank.cpu_only and not _copies_all_pinned(rank) else ""
    if rank.traits.lightning_fetch_only:  # no DataLoader: its num_workers is not there to raise
        change = (f"the batches come from an iterable of your own, not a torch DataLoader: prepare the next batches "
                  f"while the step runs, by DataLoader(dataset, ..., num_workers=4{pinned}, persistent_workers=True) "
                  f"over the samples, or the iterator's own workers and prefetch (DALI: num_threads, "
                  f"prefetch_queue_depth)")
    elif rank.traits.loader_workers:  # workers already, and they do not keep up: more of them, not "num_workers=4"
        on_the_gpu = "" if rank.cpu_only else " (decode and augment on the GPU)"
        change = (f"DataLoader(..., num_workers=<more than now>{pinned}, persistent_workers=True): the DataLoader "
                  f"already runs worker processes (its spans name _MultiProcessingDataLoaderIter) and they do not "
                  f"keep up; raise num_workers toward your CPU cores while the DataLoader's share falls, and move "
                  f"per-sample work that stays costly out of __getitem__{on_the_gpu}")
    else:
        change = (f"DataLoader(..., num_workers=4{pinned}, persistent_workers=True): loader processes prepare the "
                  f"next batches while the step runs; raise num_workers toward your CPU cores while the "
                  f"DataLoader's share falls, and move per-sample work that stays costly out of __getitem__")
    return figure, [Finding(kind="input-bound", text=head, figure=figure, threshold=INPUT_BOUND_WAIT, change=change)]


def _copies_all_pinned(rank: RankReport) -> bool:
    """The copies to the GPU in the trace's top copies all come from pinned memory (the batches are pinned
    already); False where none is read, or some come from pageable memory or do not say."""
    directions = {copy_direction(copy.name) for copy in rank.top_copies}
    return TO_GPU_PINNED in directions and not directions & {TO_GPU_PAGEABLE, TO_GPU}


def _launch_bound(rank: RankReport) -> Optional[tuple[float, list[Finding]]]:
    """The GPU waited for the host to launch its next kernel: a sync in the loop first (the gap after it is
    host wait), else fewer, larger launches."""
    figure = _idle_part(rank, rank.idle_for_host_share)
    if figure is None or figure < LAUNCH_BOUND_HOST_WAIT:
        return None
    graphs = _graph_launch_seconds(rank)
    already = (f"; CUDA graphs already launch part of each step ({format_step_seconds(graphs / rank.steps)} of cudaGraphLaunch "
               f"per step): the host work left outside them sets the pace" if graphs and rank.steps else "")
    how_long = f"{_pct(figure)} of {_window(rank)}"
    idle = f"the GPU sat idle waiting for the host to launch work {how_long}"
    loading = (" (no DataLoader spans in the trace: any time the host spent loading data is in this figure)"
               if rank.idle_for_data_share is None and rank.dataloader_share is None else "")
    head = (f"Launch-bound: {idle}{loading}{_launch_detail(rank)}{already} "
            f"(threshold {_pct(LAUNCH_BOUND_HOST_WAIT)}).")
    findings = []
    sync = _sync_every_step(rank)
    steps_seconds = sum(rank.step_seconds)
    sync_share = sync.seconds / steps_seconds if sync is not None and steps_seconds > 0 else 0.0
    if sync is not None and sync_share >= SYNC_WAIT_SHARE:
        caller, _, call = sync.name.rpartition(" → ")
        where = (f"{call} called from {caller}" if caller and not caller.startswith("(")
                 else f"{call or sync.name}, called outside any profiled op (torch.cuda.synchronize() or an event's "
                      f".synchronize() in the loop)")
        if caller in COPY_OPS:
            change = (f"take the wait out of the copy ({where}): a batch copied from pageable memory waits for the "
                      f"GPU; pin it (DataLoader(..., pin_memory=True), or tensor.pin_memory()) and copy it with "
                      f".to(device, non_blocking=True); a result copied back with .cpu() or .item() every step "
                      f"waits too: keep it on the device and read it every N steps")
        else:
            change = (f"remove the per-step sync ({where}): a .item(), .cpu() or print of a GPU tensor, or "
                      f"torch.cuda.synchronize(), every step makes the host wait for the GPU and the GPU then wait "
                      f"for the next launch; keep the value on the device and read it every N steps")
        # The GPU's wait for the host follows from the sync: that idle is the sync's, not the launches', so the
        # launch remedies are not offered beside it (on an H100, taking the .item() out alone took the idle from
        # 24 % to 2 %). Take it out and trace again: what idle is left is what a launch finding would read.
        return figure, [Finding(
            kind="sync-in-loop", text=f"A sync in the loop: every step waits in {where}: {format_step_seconds(sync.seconds)} in "
            f"{sync.count or 'its'} calls, {_pct(sync_share)} of the steps (threshold {_pct(SYNC_WAIT_SHARE)}): the "
            f"host was that far ahead of the GPU, and after each sync the GPU waits for the launches that follow: "
            f"{idle}. Take it out first and trace again: the idle it leaves is what to judge the launches by.",
            figure=sync_share, threshold=SYNC_WAIT_SHARE, change=change)]
    allocating = _allocator_share(rank)
    if allocating is not None and allocating >= ALLOCATOR_WAIT_SHARE:
        # The host spent the GPU's wait taking memory from the driver and giving it back, not launching: larger
        # batches or CUDA graphs would not shorten it (a real A100 trace: 51 % of the wait in cudaFree, 15 % in
        # cudaMalloc, where the launches took 24 %).
        wait = rank.host_wait_seconds or 1.0  # known: the share above is of it
        calls = ", ".join(f"{call.name} {_pct(call.seconds / wait)}" for call in rank.host_wait_calls
                          if call.name.startswith(ALLOCATOR_CALLS) and call.seconds >= 0.01 * wait)
        waiting = f"the GPU sat idle waiting for the host {how_long}"  # not launching: that is the finding
        return figure, [Finding(
            kind="allocator-bound", text=f"Allocator-bound: {waiting}{loading}, and the host spent {_pct(allocating)} "
            f"of that wait taking memory from the driver or giving it back ({calls}; threshold "
            f"{_pct(ALLOCATOR_WAIT_SHARE)} of the wait): PyTorch's caching allocator keeps freed memory for the next "
            f"step, so calls that recur mean something empties it or asks for new sizes.",
            figure=allocating, threshold=ALLOCATOR_WAIT_SHARE,
            change="take torch.cuda.empty_cache() out of the loop, keep batch shapes fixed (DataLoader(..., "
                   "drop_last=True)), and trace past the first steps (schedule(wait=1, warmup=1, active=3)): "
                   "cuDNN's benchmark trials and the allocator's first requests call cudaMalloc and cudaFree there; "
                   "where they go on, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True grows memory in place")]
    findings.append(Finding(kind="launch-bound", text=head, figure=figure, threshold=LAUNCH_BOUND_HOST_WAIT,
                            change="a larger batch (twice the size, scaling the learning rate with it): each kernel "
                                   "does more work per launch"))
    if not graphs and rank.traits.compiled:  # compiled already, without graphs: the mode is what is left to name
        findings.append(Finding(kind="launch-bound", text=head, figure=figure, threshold=LAUNCH_BOUND_HOST_WAIT,
                                change='mode="reduce-overhead" on the torch.compile the script already calls (its '
                                       "compiled code is in the trace, with no graph launches): CUDA graphs replay "
                                       "the step's kernels with one launch from the host"))
    elif not graphs:  # where graphs already run, naming them again would contradict the trace
        findings.append(Finding(kind="launch-bound", text=head, figure=figure, threshold=LAUNCH_BOUND_HOST_WAIT,
                                change='model = torch.compile(model, mode="reduce-overhead"): CUDA graphs replay the '
                                       "step's kernels with one launch from the host"))
    elif rank.traits.optimizer in FUSABLE_OPTIMIZERS and not rank.traits.fused_optimizer:
        findings.append(Finding(kind="launch-bound", text=head, figure=figure, threshold=LAUNCH_BOUND_HOST_WAIT,
                                change=f"torch.optim.{rank.traits.optimizer}(..., fused=True): the optimizer step, "
                                       f"which runs outside the graphs, as a few kernels instead of a loop over the "
                                       f"parameters"))
    return figure, findings


def _communication_bound(rank: RankReport) -> Optional[tuple[float, list[Finding]]]:
    figure = _gpu_share(rank, rank.communication_share)
    if figure is None or figure < COMMUNICATION_BOUND_SHARE:
        return None
    head = (f"Communication-bound: communication kernels (NCCL/RCCL) not hidden behind compute took {_pct(figure)} "
            f"of {_window(rank)} (threshold {_pct(COMMUNICATION_BOUND_SHARE)}).")
    change = ("DDP(model, bucket_cap_mb=50, gradient_as_bucket_view=True) so the all-reduce starts during backward "
              "in fewer, larger buckets, nothing that waits for the GPU between loss.backward() and "
              "optimizer.step(), and model.no_sync() on the micro-steps of gradient accumulation; if one rank is "
              "slower than the others (workbench trace FOLDER), the others wait for it here")
    return figure, [Finding(kind="communication-bound", text=head, figure=figure,
                            threshold=COMMUNICATION_BOUND_SHARE, change=change)]


def _exposed_memory(rank: RankReport) -> Optional[tuple[float, list[Finding]]]:
    figure = _gpu_share(rank, rank.memory_share)
    if figure is None or figure < EXPOSED_MEMORY_SHARE:
        return None
    head = (f"Copy-bound: copies and fills not hidden behind compute took {_pct(figure)} of {_window(rank)} "
            f"(threshold {_pct(EXPOSED_MEMORY_SHARE)}).")
    # by where the copy time that no kernel hides goes (copies to the GPU together, whatever their source)
    exposed = {copy.name: copy.seconds for copy in rank.exposed_copies}
    by_direction = {TO_GPU: sum(exposed.get(kind, 0.0) for kind in TO_GPU_KINDS), TO_HOST: exposed.get(TO_HOST, 0.0),
                    ON_GPU: exposed.get(ON_GPU, 0.0), EITHER_WAY: exposed.get(EITHER_WAY, 0.0)}
    direction = max(by_direction, key=lambda where: by_direction[where])
    if direction == TO_HOST:
        change = ("copies back to the host (Memcpy DtoH) are most of the copy time not hidden behind compute: keep "
                  "per-step values on the GPU (sum the loss and the metrics into tensors there) and copy them out "
                  "every N steps or at the end")
    elif direction == ON_GPU:
        change = ("copies and fills on the GPU itself (device to device, memset) are most of the copy time not hidden "
                  "behind compute: make buffers once and reuse them rather than each step (torch.zeros, torch.cat, "
                  ".clone(), .contiguous() in the loop), and clear gradients with "
                  "optimizer.zero_grad(set_to_none=True)")
    elif direction == TO_GPU and exposed.get(TO_GPU_PINNED, 0.0) > (exposed.get(TO_GPU_PAGEABLE, 0.0)
                                                                    + exposed.get(TO_GPU, 0.0)):
        change = ("send fewer bytes: the batches already come from pinned memory, so what is left is their size; "
                  "uint8 images are a quarter of float32's: copy them as they are and convert and normalise on "
                  "the GPU (images.to(device, non_blocking=True).float().div_(255))")
    else:
        change = ("batch.to(device, non_blocking=True) on batches from DataLoader(..., pin_memory=True): the copy "
                  "of the next batch overlaps the step's kernels instead of stalling them")
    return figure, [Finding(kind="copy-bound", text=head, figure=figure, threshold=EXPOSED_MEMORY_SHARE,
                            change=change)]


def _allocator_share(rank: RankReport) -> Optional[float]:
    """The share of the GPU's wait for the host that the host spent in allocator calls; None where not read."""
    if not rank.host_wait_seconds:
        return None
    seconds = sum(call.seconds for call in rank.host_wait_calls if call.name.startswith(ALLOCATOR_CALLS))
    return min(seconds / rank.host_wait_seconds, 1.0)


def _compute_bound(rank: RankReport) -> list[Finding]:
    figure = _gpu_share(rank, rank.compute_share)
    if figure is None or figure < COMPUTE_BOUND_BUSY:
        return []
    head = (f"Compute-bound: kernels computed {_pct(figure)} of {_window(rank)} "
            f"(threshold {_pct(COMPUTE_BOUND_BUSY)}).")
    if _runs_half_precision(rank) and rank.traits.compiled:
        change = ("the math already runs in 16-bit and compiled (torch.compile's code is in the trace): the step is "
                  "the GPU's arithmetic; fewer FLOPs per sample (a smaller model or input) or a faster GPU is what "
                  "is left")
    elif _runs_half_precision(rank):
        change = ("model = torch.compile(model): the math already runs in 16-bit; fusing the elementwise work "
                  "between the big kernels is what is left, then a smaller model or a faster GPU")
    elif rank.compute_capability is not None and rank.compute_capability < TENSOR_CORES:
        major, minor = rank.compute_capability
        change = (f"this GPU (compute capability {major}.{minor}) has no tensor cores, so 16-bit math gains it "
                  "little (a P100, 6.0, runs float16 at twice its float32 rate: torch.autocast(device_type=\"cuda\", "
                  "dtype=torch.float16) with torch.amp.GradScaler(\"cuda\") there); fewer FLOPs per sample (a smaller "
                  "model or input) or a GPU with tensor cores is what is left")
    elif rank.compute_capability is not None and rank.compute_capability < BFLOAT16_TENSOR_CORES:
        major, minor = rank.compute_capability
        change = (f"with torch.autocast(device_type=\"cuda\", dtype=torch.float16): around the forward pass and "
                  f"loss, the loss scaled by torch.amp.GradScaler(\"cuda\"): this GPU (compute capability "
                  f"{major}.{minor}) has float16 tensor cores and no bfloat16 ones; tensor-core math at half the bytes")
    else:
        known = rank.compute_capability is not None
        change = ("with torch.autocast(device_type=\"cuda\", dtype=torch.bfloat16): around the forward pass and "
                  "loss" + ("" if known else " (bf16 on Ampere and newer; float16 with torch.amp.GradScaler before "
                                             "that)") + ": tensor-core math at half the bytes")
    return [Finding(kind="compute-bound", text=head, figure=figure, threshold=COMPUTE_BOUND_BUSY, change=change)]


def _runs_half_precision(rank: RankReport) -> bool:
    return any(mark in kernel.name.lower() for kernel in rank.top_kernels for mark in HALF_PRECISION_MARKS)


def _graph_launch_seconds(rank: RankReport) -> float:
    """Host time in CUDA (or HIP) graph launches: nonzero where the script already replays graphs."""
    return sum(seconds for name, seconds in rank.runtime_calls.items() if GRAPH_LAUNCH_MARK in name)


def _launch_detail(rank: RankReport) -> str:
    launches = sum(seconds for name, seconds in rank.runtime_calls.items() if "launch" in name.lower())
    if rank.steps < 1 or launches <= 0:
        return ""
    kernels = f"{rank.kernels / rank.steps:,.0f}"
    return (f" ({kernels} kernel{'' if kernels == '1' else 's'} and {format_step_seconds(launches / rank.steps)} of "
            "launch calls per step)")


def _sync_every_step(rank: RankReport) -> Optional[NamedSeconds]:
    """The costliest device sync called at least once a step (a count of 0: not counted, taken as every step)."""
    if rank.steps < 1:
        return None  # without steps there is no loop to take a sync out of
    every_step = [call for call in rank.sync_calls if call.seconds > 0 and (call.count == 0 or call.count >= rank.steps)]
    return max(every_step, key=lambda call: call.seconds, default=None)


def _gpu_share(rank: RankReport, share: Optional[float]) -> Optional[float]:
    """A GPU figure, or None where the trace has none (a CPU-only trace: no rule reads it)."""
    if rank.cpu_only or share is None:  # copies alone are GPU work too (a loop that only moves batches)
        return None
    return share


def _idle_part(rank: RankReport, share_of_idle: Optional[float]) -> Optional[float]:
    """A cause's share of idle time as a share of the whole window."""
    idle = _gpu_share(rank, rank.idle_share)
    return None if idle is None or share_of_idle is None else idle * share_of_idle


def _window(rank: RankReport) -> str:
    return "the steps' GPU time" if rank.steps > 0 else "the traced GPU time (first to last GPU event: no steps)"


def _pct(value: float) -> str:
    return f"{value:.0%}"




def with_findings(report: TraceReport) -> TraceReport:
    """The report with each rank's findings filled in (what the CLI and the window show)."""
    return dataclasses.replace(report, ranks=tuple(dataclasses.replace(rank, findings=findings_for(rank))
                                                   for rank in report.ranks))

"""What bounds a run and which setting to change: ranked findings from its measured figures.

Each finding carries the figure that triggered it, the threshold it was held against, and the
RunConfig ``field``/``value`` to try (None where no setting helps), so the GUI can offer "Apply".
A problem with several remedies gives one finding per remedy, best first; the first finding's
headline is the run's one-sentence verdict. Pure Python (no torch): the history reads it too.

Which GPU figures are trusted: the profiler-sampled kernel timeline when there is one (kernel-busy,
and what the idle time waited for); without one, a CUDA-event span cannot tell busy from idle, so
the findings say so instead of guessing; near the compute ceiling they say the data path costs little
("model-bound") and ask for a timeline, since the ceiling cannot tell kernels from launches either.
"""

from __future__ import annotations

from typing import Any, Optional

from workbench.config import RANGES, cuda_graphs_problem
from workbench.engine.run_facts import RunFacts, dataset_fits, larger_batch, max_batch_estimate, per_sample_bytes
from workbench.engine.run_summary import Finding

# Waiting for data a sixth of the time is worth fixing first: the remedies (GPU augmentation, a
# resident dataset, more workers) are cheap and usually remove the wait entirely.
INPUT_BOUND_WAIT = 0.15
# The GPU idle a fifth of the time because the host had not launched the next kernel yet: steps made
# of many short kernels (CIFAR-size batches); fewer, larger kernels recover most of it.
LAUNCH_BOUND_HOST_WAIT = 0.20
# Communication the GPU does nothing else during, above this share of the step: DDP is not hiding its all-reduce.
COMMUNICATION_BOUND = 0.15
ACCUMULATION_MAX = RANGES["accumulation_steps"][1]
# Kernels running this much of the sampled time leave the pipeline little to win: only faster math helps.
COMPUTE_BOUND_BUSY = 0.80
# Without a timeline, a run at this share of the model-alone ceiling loses little to its data path. It is
# *not* called compute-bound: the ceiling probe launches the same kernels from the same host, so a
# launch-bound model reaches ~100 % of it too (mobilenet_v3_small on an H100: 97 % of the ceiling at 13 %
# kernel-busy, benchmarks/results/gpu_time_truth-h100.json).
MODEL_BOUND_EFFICIENCY = 0.85
# GPM's tensor activity (Hopper and newer) below this in a compute-bound run: the math runs mostly outside the
# tensor cores, which bf16 / fp16 and channels_last put it on. A first threshold, to be checked against GPM
# readings of the same settings in fp32 and bf16 on a GPU (issue 20, part 2).
LOW_TENSOR_ACTIVITY = 0.25
# A batch that could at least double is worth saying; less is within what tuning the lr would eat.
MEMORY_HEADROOM_FACTOR = 2
# A launch-bound step has four remedies worth trying in order (batch, CUDA graphs, fused optimizer, channels_last;
# plain compile after them).
REMEDIES_PER_PROBLEM = 4
# A diverged run's next lr: a tenth, the step a learning-rate range search takes (divergence.py says when).
DIVERGED_LR_FACTOR = 0.1


def find(facts: RunFacts) -> tuple[Finding, ...]:
    """The ranked findings (empty when nothing was measured); a diverged run's first: its speed is moot until it
    learns."""
    diverged = _diverged(facts)
    if facts.summary.images_per_sec is None and facts.summary.data_wait_fraction is None:
        return tuple(diverged)
    problems: list[tuple[float, list[Finding]]] = []  # (how much of the time it costs, its findings)
    for rule in (_input_bound, _launch_bound, _communication_bound):
        result = rule(facts)
        if result:
            problems.append(result)
    problems.sort(key=lambda item: -item[0])
    findings = [finding for _, group in problems for finding in group]
    compute = _compute_bound(facts)
    if compute and not problems:
        findings += compute
    elif not problems and not compute:
        findings += _unmeasured_or_balanced(facts)
    findings += _memory_headroom(facts)
    return tuple(diverged + findings)


def _diverged(facts: RunFacts) -> list[Finding]:
    """The run ended diverged (engine/divergence.py): lower the lr."""
    if facts.summary.failure_kind != "diverged":
        return []
    lr = facts.config.lr
    lower = float(f"{lr * DIVERGED_LR_FACTOR:.3g}")
    head = "Diverged: the loss blew up instead of falling, so no speed figure of this run is worth acting on yet."
    return [Finding(kind="diverged", headline=head, text=f"{head} Try lr={lower:g}, a tenth of {lr:g}.",
                    figure=facts.summary.final_loss, figure_name="final_loss", threshold=None, field="lr", value=lower)]


# -- the rules --------------------------------------------------------------------------------------


def _input_bound(facts: RunFacts) -> Optional[tuple[float, list[Finding]]]:
    config = facts.config
    if facts.has_timeline:
        wait, name = facts.summary.idle_waiting_for_data_fraction, "idle_waiting_for_data_fraction"
        said = f"the GPU sat idle waiting for data {_pct(wait)} of the sampled time"
    else:
        wait, name = facts.summary.data_wait_fraction, "data_wait_fraction"
        said = f"training waited for the next batch {_pct(wait)} of the time"
    if wait is None or wait < INPUT_BOUND_WAIT:
        return None
    head = f"Input-bound: {said} (threshold {_pct(INPUT_BOUND_WAIT)})."
    remedies: list[tuple[str, Any, str]] = []
    if config.augment == "cpu" and facts.device_type == "cuda":  # without a GPU there is none to move it to
        remedies.append(("augment", "gpu", "augmentation runs on whole batches on the GPU, not per image in the workers"))
    # A resident dataset augments on the device: with augment=cpu the change alone would not run (augment=gpu
    # above comes first; the next run offers this).
    if config.pipeline == "dataloader" and config.augment != "cpu" and dataset_fits(facts):
        remedies.append(("pipeline", "gpu-resident", "the whole dataset sits on the device: no loader, no copies"))
    if config.pipeline == "dataloader" and config.num_workers < facts.cpu_count:
        workers = min(facts.cpu_count, max(2, config.num_workers * 2))
        why = f"{workers} loader processes prepare batches in parallel"
        if workers >= facts.cpu_count:  # the training thread then shares its core with a loader process
            why += (f", though on {facts.cpu_count} core{'s' if facts.cpu_count != 1 else ''} they leave none to "
                    "the training thread, which they then slow: verify it here before you keep it")
        remedies.append(("num_workers", workers, why))
    if config.pipeline == "dataloader" and not config.pin_memory and facts.device_type == "cuda":
        remedies.append(("pin_memory", True, "page-locked batches copy to the GPU faster and asynchronously"))
    return wait, _with_remedies("input-bound", head, wait, name, INPUT_BOUND_WAIT, remedies,
                                "no loader setting is left to change: the data path itself must get cheaper")


def _launch_bound(facts: RunFacts) -> Optional[tuple[float, list[Finding]]]:
    wait = facts.summary.idle_waiting_for_host_fraction
    if facts.device_type != "cuda" or wait is None or wait < LAUNCH_BOUND_HOST_WAIT:
        return None
    if facts.summary.timeline_flag is not None:  # the host wait is a remainder of a base that cannot be right
        return None
    config = facts.config
    detail = []
    if facts.summary.kernels_per_step is not None:
        detail.append(f"{facts.summary.kernels_per_step:,.0f} kernels per step")
    if facts.summary.median_kernel_seconds is not None:
        detail.append(f"median {_microseconds(facts.summary.median_kernel_seconds)}")
    head = (f"Launch-bound: the GPU sat idle waiting for the host to launch work {_pct(wait)} of the sampled "
            f"time" + (f" ({', '.join(detail)})" if detail else "") + f" (threshold {_pct(LAUNCH_BOUND_HOST_WAIT)}).")
    remedies: list[tuple[str, Any, str]] = []
    larger = larger_batch(facts, config.batch_size * 2)
    if larger is not None:
        remedies.append(("batch_size", larger, "each kernel does more work per launch (scale lr with it)"))
    # In the order measurements support (benchmarks/results/tune-h100.log: plain compile measured 0.85× on a
    # launch-bound small-cnn): CUDA graphs replay a step's launches at once; a fused optimizer replaces the
    # update's per-tensor kernels with one; channels_last removes cuDNN's layout conversions around each conv (an
    # H100 trace of small-cnn at batch 32 ran nchwToNhwc and nhwcToNchw kernels around every conv); plain compile
    # fuses elementwise work but keeps one launch per kernel, last.
    graphs_refused = cuda_graphs_problem(config.replace(compile="reduce-overhead"))
    if config.compile != "reduce-overhead" and graphs_refused is None:
        remedies.append(("compile", "reduce-overhead",
                         "CUDA graphs replay the whole step's kernels with one launch from the host"))
    elif graphs_refused is not None:  # the usual first remedy, left out: say why rather than stay silent
        head += f" CUDA graphs are not proposed: {graphs_refused}."
    if not config.fused_optimizer:
        remedies.append(("fused_optimizer", True, "the optimizer's update runs as one kernel instead of a few per "
                                                  "weight tensor"))
    if not config.channels_last:
        remedies.append(("channels_last", True, "cuDNN no longer adds layout-conversion kernels around each conv"))
    if config.compile == "off":
        remedies.append(("compile", "default", "torch.compile fuses small elementwise kernels: fewer launches per step"))
    return wait, _with_remedies("launch-bound", head, wait, "idle_waiting_for_host_fraction",
                                LAUNCH_BOUND_HOST_WAIT, remedies, "fewer, larger operations in the model would help")


def _communication_bound(facts: RunFacts) -> Optional[tuple[float, list[Finding]]]:
    """NCCL / RCCL time the GPU spent on nothing else (gradient all-reduce not overlapped with the backward pass)."""
    share = facts.summary.communication_fraction
    if share is None or share < COMMUNICATION_BOUND:
        return None
    config = facts.config
    head = (f"Communication-bound: the GPUs spent {_pct(share)} of each step in gradient all-reduce (NCCL) with no "
            f"compute beside it (threshold {_pct(COMMUNICATION_BOUND)}). DDP overlaps the all-reduce with the "
            "backward pass bucket by bucket: a larger bucket_cap_mb costs fewer calls, a smaller one starts sooner.")
    remedies: list[tuple[str, Any, str]] = []
    if config.accumulation_steps * 2 <= ACCUMULATION_MAX:
        remedies.append(("accumulation_steps", config.accumulation_steps * 2,
                         "gradients are all-reduced once per optimizer step, so twice the micro-batches per step "
                         "halves the communication per image"))
    larger = larger_batch(facts, config.batch_size * 2)
    if larger is not None:
        remedies.append(("batch_size", larger, "the same all-reduce serves twice the images (scale lr with it)"))
    return share, _with_remedies("communication-bound", head, share, "communication_fraction", COMMUNICATION_BOUND,
                                 remedies, "the model's gradients are large for its compute: fewer GPUs may be as fast")


def _compute_bound(facts: RunFacts) -> list[Finding]:
    config = facts.config
    efficiency = facts.efficiency
    at_ceiling = f", at {_pct(efficiency)} of its compute ceiling" if efficiency is not None else ""
    if facts.device_type == "cpu":
        wait = facts.summary.data_wait_fraction
        if wait is None:
            return []
        head = (f"CPU-bound: the training thread spent {_pct(1 - wait)} of the time in its steps and "
                f"{_pct(wait)} waiting for data{at_ceiling}.")
        remedies: list[tuple[str, Any, str]] = []
        if facts.cuda_available and config.device == "cpu":
            remedies.append(("device", "auto", "train on the CUDA GPU this machine has"))
        return _with_remedies("compute-bound", head, 1 - wait, "host_compute_fraction", 1 - INPUT_BOUND_WAIT,
                              remedies, "a CUDA GPU, or a smaller model, is what would help")
    busy = facts.summary.kernel_busy_fraction
    if busy is None:  # no timeline (RunFacts.has_timeline)
        return _model_bound(facts)
    if busy < COMPUTE_BOUND_BUSY:
        return []
    head = f"Compute-bound: kernels ran {_pct(busy)} of the sampled time{_sm_activity(facts)}{at_ceiling}."
    tensor = facts.summary.tensor_activity_fraction
    # Where GPM measured it, say how little the tensor cores did: the reason the next two remedies help.
    low_tensor = (f"; the tensor cores were active only {_pct(tensor)} of the time (GPM)"
                  if tensor is not None and tensor < LOW_TENSOR_ACTIVITY else "")
    remedies = []
    if config.precision == "fp32":
        if facts.bf16_supported:
            remedies.append(("precision", "bf16", "tensor-core math at half the bytes, no loss scaling" + low_tensor))
        else:
            remedies.append(("precision", "fp16", "tensor-core math at half the bytes" + low_tensor))
    if not config.channels_last:
        remedies.append(("channels_last", True, "convolutions run in the layout tensor cores want" + low_tensor))
    if config.compile == "off":
        remedies.append(("compile", "default", "torch.compile fuses the elementwise work between the big kernels"))
    return _with_remedies("compute-bound", head, busy, "kernel_busy_fraction", COMPUTE_BOUND_BUSY, remedies,
                          "only a smaller model or a faster GPU is left")


def _model_bound(facts: RunFacts) -> list[Finding]:
    """Near the ceiling without a timeline: the data path is not the limit; what bounds the model is unknown."""
    efficiency = facts.efficiency
    if efficiency is None or efficiency < MODEL_BOUND_EFFICIENCY:
        return []
    head = (f"Model-bound: the run reaches {_pct(efficiency)} of its compute ceiling, so its data path "
            f"costs little; whether kernels or kernel launches bound the model needs the GPU's timeline.")
    remedies: list[tuple[str, Any, str]] = []
    if not facts.config.profile:
        remedies.append(("profile", True,
                         "it samples the kernel timeline: busy kernels, or a GPU waiting for the host"))
    if facts.config.compile == "off":
        remedies.append(("compile", "default", "it helps either way: fused kernels, fewer launches per step"))
    return _with_remedies("model-bound", head, efficiency, "pipeline_efficiency", MODEL_BOUND_EFFICIENCY, remedies,
                          facts.timeline_missing_though_profiled or "a timeline sample tells what bounds it")


def _unmeasured_or_balanced(facts: RunFacts) -> list[Finding]:
    if facts.device_type != "cuda":
        return []
    if not facts.has_timeline:
        span = facts.summary.device_span_fraction
        at_ceiling = (f"; the run reaches {_pct(facts.efficiency)} of its compute ceiling"
                      if facts.efficiency is not None else "")
        head = ("GPU time unmeasured: the steps' CUDA-event span"
                + (f" ({_pct(span)})" if span is not None else "")
                + f" includes idle gaps between kernels, so it cannot tell busy from waiting{at_ceiling}.")
        profiled = facts.timeline_missing_though_profiled
        if profiled:
            return [Finding(kind="unmeasured", headline=head, text=f"{head} {profiled[0].upper()}{profiled[1:]}.", figure=span,
                            figure_name="device_span_fraction", threshold=None)]
        return [Finding(kind="unmeasured", headline=head, text=head + " Try profile=true: it samples the kernel timeline.",
                        figure=span, figure_name="device_span_fraction", threshold=None, field="profile", value=True)]
    head = (f"No single bottleneck: kernels ran {_pct(facts.summary.kernel_busy_fraction)} of the sampled time"
            f"{_sm_activity(facts)}; the GPU "
            f"waited for the host {_pct(facts.summary.idle_waiting_for_host_fraction)} and for data "
            f"{_pct(facts.summary.idle_waiting_for_data_fraction)}.")
    return [Finding(kind="balanced", headline=head, text=head, figure=facts.summary.kernel_busy_fraction, figure_name="kernel_busy_fraction", threshold=COMPUTE_BOUND_BUSY)]


def _memory_headroom(facts: RunFacts) -> list[Finding]:
    estimate = max_batch_estimate(facts)
    batch = facts.config.batch_size
    if estimate is None or estimate < MEMORY_HEADROOM_FACTOR * batch:
        return []
    value = larger_batch(facts, MEMORY_HEADROOM_FACTOR * batch, as_large_as_fits=True)
    if value is None:
        return []
    per_sample = per_sample_bytes(facts)
    head = (f"Memory headroom: {_bytes(facts.training_peak_allocated_bytes)} of {_bytes(facts.total_memory_bytes)} "
            f"at batch {batch:,} (about {_bytes(per_sample)} per sample): the batch could grow to about {estimate:,}.")
    text = head + f" Try batch_size={value:,} (scale lr with it)."
    return [Finding(kind="memory-headroom", headline=head, text=text, figure=float(estimate), figure_name="max_batch_estimate",
                    threshold=float(MEMORY_HEADROOM_FACTOR * batch), field="batch_size", value=value)]


# -- helpers -------------------------------------------------------------------------------------------


def _with_remedies(kind: str, head: str, figure: float, figure_name: str, threshold: Optional[float],
                   remedies: list[tuple[str, Any, str]], otherwise: str) -> list[Finding]:
    if not remedies:
        return [Finding(kind=kind, headline=head, text=f"{head} {otherwise[0].upper()}{otherwise[1:]}.", figure=figure, figure_name=figure_name, threshold=threshold)]
    findings = []
    for field, value, why in remedies[:REMEDIES_PER_PROBLEM]:
        text = f"{head} Try {field}={_setting(value)}: {why}."
        findings.append(Finding(kind=kind, headline=head, text=text, figure=figure, figure_name=figure_name, threshold=threshold, field=field, value=value))
    return findings


def _sm_activity(facts: RunFacts) -> str:
    """GPM's SM activity beside kernel-busy, where it was read: a kernel running is not the GPU busy."""
    sm = facts.summary.sm_activity_fraction
    return f" (SM activity {_pct(sm)} by GPM)" if sm is not None else ""


def _microseconds(seconds: float) -> str:
    micro = seconds * 1e6
    return f"{micro:.1f} µs" if micro < 10 else f"{micro:,.0f} µs"


def _pct(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _setting(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _bytes(value: Optional[float]) -> str:
    from workbench.formatting import format_bytes

    return format_bytes(value)

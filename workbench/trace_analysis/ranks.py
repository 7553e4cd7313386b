"""One rank's figures from its trace's events: steps, GPU time by kind, idle by cause, top work, syncs.

The events come from ``parsed_trace`` already sorted into timeline activities (``RankEvents``). The shares over
the steps follow ``engine.timeline`` (HTA's definitions over the merged streams); ``gpu_span`` replays HTA's
temporal breakdown over HTA's window (first to last GPU event) so it can be held against HTA's figures; see
docs/gpu-time.md for where the two rules differ and why.
"""

from __future__ import annotations

import bisect
import operator
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from workbench.engine import intervals, kineto, timeline
from workbench.engine.timeline import MEMCPY, MEMSET, Activity
from workbench.trace_analysis import communication_wait, hta_rules
from workbench.trace_analysis.steps import step_spans
from workbench.trace_analysis.model import (UNKNOWN_DEVICE, NamedSeconds, QueuedWait, RankReport, ScriptTraits,
                                            TraceCancelled)
from workbench.trace_analysis.wording import ZERO_WINDOW, counted

TOP_COUNT = 10
UNREADABLE_DEVICE_EVENTS = 0.01  # a share of a GPU's kernel, copy and fill events in the file
# CUPTI's range profiler (torch.profiler with profiler_metrics) writes its counter ranges in place of the kernels.
RANGE_PROFILER_CATEGORY = "cuda_profiler_range"
SYNC_MARK = "Synchronize"  # cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, hip…, cuCtxSynchronize


@dataclass
class RankEvents:
    """What a rank's trace holds, sorted into activities (times in ns on the trace's clock)."""

    rank: int
    device_index: Optional[int]
    device: str
    compute_capability: Optional[tuple[int, int]] = None  # from deviceProperties, where the file writes it
    device_work: list[Activity] = field(default_factory=list)  # kernels, communication, copies, fills of this GPU
    gpu_markers: list[Activity] = field(default_factory=list)  # other stream events (CUPTI's sync records)
    # The host's activities, apart by kind as the analysis reads them, each list in the file's order:
    runtime: list[Activity] = field(default_factory=list)  # runtime calls (they launch the device work)
    steps: list[Activity] = field(default_factory=list)  # ProfilerStep#N (an op and an annotation may both name one)
    gpu_steps: list[Activity] = field(default_factory=list)  # ProfilerStep#N's span on the GPU (HTA's filter reads it)
    data_waits: list[Activity] = field(default_factory=list)  # the host blocked in the DataLoader's __next__
    host_ops_on_a_stream: list[Activity] = field(default_factory=list)  # GPU work to HTA's rules only (hta_rules)
    # and all of them (runtime calls, ops, annotations, steps) by thread, sorted by (start, -end):
    host_by_thread: dict[int, list[Activity]] = field(default_factory=dict)
    host_ops_by_thread: dict[int, list[Activity]] = field(default_factory=dict)  # cpu ops, for naming callers
    notes: list[str] = field(default_factory=list)
    fractional_timestamps: bool = False  # some ts in the file has a fraction of a µs (HTA then rounds)
    traits: ScriptTraits = field(default_factory=ScriptTraits)  # what the script already does (its op names)
    events_skipped: int = 0  # events the reader could not read (mistyped fields, not objects, …), named in notes
    # This GPU's kernel, copy and fill events in the file skipped (unreadable, or timed impossibly) or read without
    # their args, and all of them: past UNREADABLE_DEVICE_EVENTS of them the GPU figures are not given.
    device_events_unreadable: int = 0
    device_events_in_file: int = 0
    gpus_in_file: int = 1
    # spans of categories the reader does not read, other than the host's own (python_function, …): category → count
    unread_categories: dict[str, int] = field(default_factory=dict)
    profiler_options: tuple[str, ...] = ()  # the options that lengthen the host's time the file says were on

    @property
    def launches_and_steps(self) -> list[Activity]:
        """What HTA's rules read of the host (runtime calls and steps, the GPU's copies of the steps too)."""
        return [*self.runtime, *self.steps, *self.gpu_steps]


def _device_work_outside_the_steps_note(device: list[Activity], window: tuple[int, int]) -> str:
    """The figures over the steps read "idle 100 %" with no word why, while HTA's window held the work."""
    before = sum(1 for a in device if a.end_ns <= window[0])
    where = ("all before the first step" if before == len(device) else "all after the last step" if not before
             else f"{before:,} before the first step, the rest after the last")
    return (f"none of the {len(device):,} kernel, copy and fill events falls within the ProfilerStep spans ({where}):"
            " over the steps the GPU was idle throughout, so the shares over the steps say nothing of the work; the "
            "figures over HTA's window (first to last GPU event) hold it. A GPU clock apart from the host's, or "
            "steps annotated around other work, read so")


def analyse(events: RankEvents, cancelled: Optional[Callable[[], bool]] = None) -> RankReport:
    """The rank's report; TraceCancelled between its stages once ``cancelled()`` says so (a large trace's analysis
    takes seconds, and Cancel or a closed window must not wait for all of it)."""
    def stop_if_cancelled() -> None:
        if cancelled is not None and cancelled():
            raise TraceCancelled("reading cancelled")

    notes = list(events.notes)
    steps, step_notes = step_spans(events.steps, events.gpu_steps, lambda start, end: _holds_work(events, start, end))
    notes += step_notes
    step_seconds = tuple((end - start) / 1e9 for start, end in steps)
    device = events.device_work
    unreadable, in_file = events.device_events_unreadable, max(events.device_events_in_file, 1)
    if device and unreadable >= UNREADABLE_DEVICE_EVENTS * in_file:
        # The figures of the events read would be told as the GPU's, and wrong: compute 0 % where every kernel
        # had a mistyped field, idle "other" where their args (streams, correlations) could not be read.
        whose = "the file's" if events.gpus_in_file <= 1 else f"cuda:{events.device_index}'s"
        notes.append(f"{unreadable:,} of {whose} {in_file:,} kernel, copy and fill events "
                     f"({unreadable / in_file:.0%}) were skipped or read in part (named "
                     f"above): past {UNREADABLE_DEVICE_EVENTS:.0%} of them the GPU figures would be wrong, so none "
                     "are given")
        device = []
    elif not device:
        notes.append(_no_gpu_work_note(events))
    cpu_only = not device
    if steps:
        window = (steps[0][0], max(end for _, end in steps))  # a step nested in another ends before it
        if device and not any(a.end_ns > window[0] and a.start_ns < window[1] for a in device):
            notes.append(_device_work_outside_the_steps_note(device, window))
    elif device:
        window = (min(a.start_ns for a in device), max(a.end_ns for a in device))
        notes.append("no ProfilerStep#N annotations: the figures are over the first to last GPU event")
    else:
        host = [a for thread in events.host_by_thread.values() for a in thread]
        window = (min((a.start_ns for a in host), default=0), max((a.end_ns for a in host), default=0))
    launches_and_steps = events.launches_and_steps
    data_wait_spans = [(a.start_ns, a.end_ns) for a in events.data_waits]
    sorted_activities = timeline.SortedActivities(device=device, runtime=events.runtime, data_waits=data_wait_spans,
                                                  host_by_thread=events.host_by_thread)
    stop_if_cancelled()
    breakdown = timeline.analyse_sorted(
        sorted_activities, window, len(steps), gpu=not cpu_only, top=TOP_COUNT, kernel_wait_ns=hta_rules.KERNEL_WAIT_NS)
    span = window[1] - window[0]
    shares = _shares(breakdown, span) if not cpu_only and span > 0 else None
    if span <= 0:
        notes.append(f"{ZERO_WINDOW} (it begins and ends at the same moment): no share of it can be given")
    data_wait_ns = intervals.total(intervals.clip(intervals.union(data_wait_spans), *window))
    has_data_marks = bool(data_wait_spans)
    runtime = _runtime_calls(events.runtime, window)
    median = statistics.median(step_seconds) if step_seconds else None
    queued_waits, queued_seconds, blocked_launches, blocked_seconds = _queued_waits(
        events.runtime, breakdown.other_idle_gaps)
    stop_if_cancelled()
    hta_span, hta_idle_split = (None, None) if cpu_only else hta_rules.hta_figures(
        device, events.gpu_markers, launches_and_steps, events.fractional_timestamps, sorted_activities.launch_starts,
        events.host_ops_on_a_stream)
    stop_if_cancelled()
    return RankReport(
        rank=events.rank,
        device=events.device,
        compute_capability=events.compute_capability,
        steps=len(steps),
        step_seconds=step_seconds,
        step_seconds_median=median,
        step_seconds_low=min(step_seconds) if step_seconds else None,
        step_seconds_high=max(step_seconds) if step_seconds else None,
        compute_share=shares["compute"] if shares else None,
        communication_share=shares["communication"] if shares else None,
        memory_share=shares["memory"] if shares else None,
        idle_share=shares["idle"] if shares else None,
        # Without DataLoader spans (or the workbench's annotation) no idle can be told to be a wait for data: unknown,
        # not 0 (the host's time loading data is then in the host wait).
        idle_for_data_share=shares["data"] if shares and has_data_marks else None,
        idle_for_host_share=shares["host"] if shares else None,
        idle_kernel_wait_share=shares["kernel_wait"] if shares else None,
        idle_other_share=shares["other"] if shares else None,
        # over the steps as TensorBoard's plugin read it; without steps, over the window the other figures are over
        dataloader_share=data_wait_ns / span if has_data_marks and span > 0 else None,
        gpu_span=hta_rules.gpu_span(device, events.gpu_markers) if not cpu_only else None,
        top_kernels=tuple(NamedSeconds(t.name, t.seconds, t.count) for t in breakdown.top_kernels),
        top_host_ops=tuple(NamedSeconds(t.name, t.seconds, t.count) for t in breakdown.top_ops),
        sync_calls=_sync_calls(events, window),
        runtime_calls=runtime,
        kernels=breakdown.kernels or 0,
        notes=tuple(notes),
        window_seconds=span / 1e9,
        device_index=events.device_index,
        gpu_span_window_ns=hta_rules.span_window(device, events.gpu_markers),
        data_wait_seconds=data_wait_ns / 1e9,
        data_spans=len(data_wait_spans),
        launches=breakdown.launches or 0,
        cpu_only=cpu_only,
        per_stream_idle_split=hta_idle_split,
        gpu_span_as_hta=hta_span,
        traits=events.traits,
        profiler_options=events.profiler_options,
        top_copies=_top_copies(device, window),
        exposed_copies=_exposed_copies(device, window),
        host_wait_calls=_host_wait_calls(events.runtime, breakdown.host_wait_spans),
        host_wait_seconds=breakdown.idle_waiting_for_host_seconds,
        queued_waits=queued_waits, queued_wait_seconds=queued_seconds,
        blocked_launches=blocked_launches, blocked_launch_seconds=blocked_seconds,
        communication_by_step=communication_wait.by_step(None if cpu_only else breakdown.communication_spans,
                                                    events.host_by_thread, steps),
    )


def _no_gpu_work_note(events: RankEvents) -> str:
    """Why a rank has no GPU figures, in one note: the most specific cause the trace shows."""
    if RANGE_PROFILER_CATEGORY in events.unread_categories:
        return (f"no kernel timeline: CUPTI's range profiler (torch.profiler's experimental_config with "
                f"profiler_metrics) wrote counter ranges ({RANGE_PROFILER_CATEGORY}) in its place, so the GPU figures "
                "cannot be read; profile without profiler_metrics to get them")
    if events.events_skipped:  # the file's device events may be among those that could not be read
        skipped = counted(events.events_skipped, "events")
        return (f"no kernel, copy or fill event could be read ({skipped} skipped, named above), so the GPU figures "
                "cannot be read")
    if events.unread_categories:
        named = ", ".join(f"{category} ({count:,})" for category, count in
                          sorted(events.unread_categories.items(), key=lambda item: -item[1])[:4])
        return (f"no kernel, copy or fill event of a CUDA or ROCm GPU: the trace's other spans are of categories "
                f"this reader does not read ({named}), so the GPU figures cannot be read")
    if events.device != UNKNOWN_DEVICE:
        return (f"no GPU activity recorded: the file lists its GPUs ({events.device}) but holds no kernel, copy or "
                "fill event (profiled without ProfilerActivity.CUDA?), so the GPU figures cannot be read")
    return "a CPU-only trace: it holds no kernel, copy or fill events, so the GPU figures cannot be read"


_START = operator.itemgetter(0)  # Activity.start_ns


def _holds_work(events: RankEvents, start: int, end: int) -> bool:
    """Whether any host op, runtime call or device work of the rank starts within [start, end). A DataLoader's
    __next__ is no work: the profiler's closing step holds the loop's last one, which found no batch and ended it."""
    for thread in events.host_by_thread.values():  # each sorted by start
        index = bisect.bisect_left(thread, start, key=_START)
        for a in thread[index:]:
            if a.start_ns >= end:
                break
            if a.kind != timeline.STEP and a.kind != timeline.DATA_WAIT:
                return True
    return any(start <= a.start_ns < end for a in events.device_work)


def _shares(breakdown: timeline.TimelineBreakdown, span_ns: int) -> dict[str, Optional[float]]:
    """The GPU time's parts as shares of the window, and the idle time's causes as shares of it (None where the GPU
    was never idle: a split of no time is no figure)."""
    span = span_ns / 1e9
    compute = (breakdown.kernel_busy_seconds or 0.0) / span
    communication = (breakdown.communication_seconds or 0.0) / span
    memory = ((breakdown.memcpy_seconds or 0.0) + (breakdown.memset_seconds or 0.0)) / span
    parts = {
        "data": breakdown.idle_waiting_for_data_seconds or 0.0,
        "host": breakdown.idle_waiting_for_host_seconds or 0.0,
        "kernel_wait": breakdown.idle_kernel_wait_seconds or 0.0,
        "other": breakdown.idle_other_seconds or 0.0,
    }
    idle_seconds = sum(parts.values())
    result: dict[str, Optional[float]] = {"compute": compute, "communication": communication, "memory": memory,
                                          "idle": idle_seconds / span}
    result.update({key: (value / idle_seconds if idle_seconds > 0 else None) for key, value in parts.items()})
    return result


def _top_copies(device: Sequence[Activity], window: tuple[int, int]) -> tuple[NamedSeconds, ...]:
    """Copies and fills within the window by name, their time and count, the longest first."""
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    begin, end = window
    for a in device:
        if a.kind in (MEMCPY, MEMSET) and a.end_ns > begin and a.start_ns < end:
            entry = sums[a.name]
            entry[0] += (a.end_ns if a.end_ns < end else end) - (a.start_ns if a.start_ns > begin else begin)
            entry[1] += 1
    ranked = sorted(sums.items(), key=lambda item: -item[1][0])[:TOP_COUNT]
    return tuple(NamedSeconds(name, ns / 1e9, count) for name, (ns, count) in ranked)


def _exposed_copies(device: Sequence[Activity], window: tuple[int, int]) -> tuple[NamedSeconds, ...]:
    """Copy and fill time within the window that no kernel hides, by where the bytes go (kineto.copy_direction), the
    most first: what the copy-bound finding's change is chosen by. As ``memory_share`` counts it: copies less the
    time of kernels and communication, fills less that and the copies' (copies going different ways at once are
    each counted)."""
    begin, end = window
    kernels, copies, fills = [], defaultdict(list), defaultdict(list)
    for a in device:
        if a.end_ns > begin and a.start_ns < end:
            if a.kind == MEMCPY:
                copies[kineto.copy_direction(a.name)].append((a.start_ns, a.end_ns))
            elif a.kind == MEMSET:
                fills[kineto.copy_direction(a.name)].append((a.start_ns, a.end_ns))
            else:
                kernels.append((a.start_ns, a.end_ns))
    hidden = intervals.clip(intervals.union(kernels), begin, end)
    all_copies = intervals.union(span for spans in copies.values() for span in spans)
    seconds: dict[str, int] = defaultdict(int)
    for direction, spans in copies.items():
        seconds[direction] += intervals.total(intervals.subtract(intervals.clip(intervals.union(spans), begin, end),
                                                                 hidden))
    for direction, spans in fills.items():
        visible = intervals.subtract(intervals.clip(intervals.union(spans), begin, end), hidden)
        seconds[direction] += intervals.total(intervals.subtract(visible, all_copies))
    ranked = sorted(((ns, direction) for direction, ns in seconds.items() if ns > 0), key=lambda item: -item[0])
    return tuple(NamedSeconds(direction, ns / 1e9) for ns, direction in ranked)


def _host_wait_calls(runtime: Sequence[Activity], spans: Sequence[tuple[int, int]]) -> tuple[NamedSeconds, ...]:
    """Runtime call time within the spans the GPU waited for the host (``spans`` in order, disjoint), by name, the
    longest first (a call on two threads at once counted once)."""
    if not spans:
        return ()
    starts = [start for start, _ in spans]
    ends = [end for _, end in spans]
    last = len(spans) - 1
    inside: dict[str, list[tuple[int, int]]] = defaultdict(list)
    find = bisect.bisect_right
    for a in runtime:  # most calls fall in no span (the GPU busy meanwhile): two comparisons after the search
        start, end = a.start_ns, a.end_ns
        index = find(starts, start) - 1
        if index < 0 or ends[index] <= start:  # not in the span before it: maybe in the ones after
            index += 1
            if index > last or starts[index] >= end:
                continue
        while index <= last and starts[index] < end:
            low = starts[index] if starts[index] > start else start
            high = ends[index] if ends[index] < end else end
            if high > low:
                inside[a.name].append((low, high))
            index += 1
    seconds = {name: intervals.total(intervals.union(parts)) / 1e9 for name, parts in inside.items()}
    ranked = sorted(seconds.items(), key=lambda item: -item[1])[:TOP_COUNT]
    return tuple(NamedSeconds(name, value) for name, value in ranked)


def _queued_waits(runtime: Sequence[Activity], gaps: Sequence[tuple[int, int, Activity]]
                  ) -> tuple[tuple[QueuedWait, ...], float, tuple[NamedSeconds, ...], float]:
    """The "other" idle gaps (start, ns, the work the idle split judged each by), told apart: work whose launch call
    had returned before the gap began, by that work and the call ("Memset (Device)", cudaGraphLaunch), and the
    total; and gaps whose launch call began before the gap and was still running in it (the host inside a launch
    that blocked), by the call, and their total. The longest first."""
    if not gaps:
        return (), 0.0, (), 0.0
    wanted = {work.correlation for _, _, work in gaps}
    launch_of = {a.correlation: a for a in runtime if a.correlation in wanted}
    queued: dict[tuple[str, Optional[str]], list[int]] = defaultdict(lambda: [0, 0])  # → [ns, gaps]
    blocked: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for gap_start, ns, work in gaps:
        call = launch_of.get(work.correlation)
        totals = blocked[call.name] if call is not None and call.start_ns < gap_start < call.end_ns else queued[
            (work.name, call.name if call is not None else None)]
        totals[0] += ns
        totals[1] += 1
    top_queued = sorted(queued.items(), key=lambda item: -item[1][0])[:TOP_COUNT]
    top_blocked = sorted(blocked.items(), key=lambda item: -item[1][0])[:TOP_COUNT]
    return (tuple(QueuedWait(name, call, ns / 1e9, count) for (name, call), (ns, count) in top_queued),
            sum(ns for ns, _ in queued.values()) / 1e9,
            tuple(NamedSeconds(call, ns / 1e9, count) for call, (ns, count) in top_blocked),
            sum(ns for ns, _ in blocked.values()) / 1e9)


def _runtime_calls(runtime: Sequence[Activity], window: tuple[int, int]) -> dict[str, float]:
    sums: dict[str, int] = defaultdict(int)
    begin, end = window
    for a in runtime:
        if a.end_ns > begin and a.start_ns < end:
            sums[a.name] += (a.end_ns if a.end_ns < end else end) - (a.start_ns if a.start_ns > begin else begin)
    return {name: ns / 1e9 for name, ns in sorted(sums.items(), key=lambda item: -item[1])}


def _sync_calls(events: RankEvents, window: tuple[int, int]) -> tuple[NamedSeconds, ...]:
    """Sync runtime time, named "<outermost host op around it> → <call>" (the op a script wrote: aten::item,
    aten::to, …); "(no host op) → call" where the call is outside every op."""
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    outer: dict[int, tuple[list[Activity], list[int]]] = {}
    for a in events.runtime:
        if SYNC_MARK not in a.name or a.end_ns <= window[0] or a.start_ns >= window[1]:
            continue
        if a.stream not in outer:
            ops = _outermost_ops(events.host_ops_by_thread.get(a.stream, ()))
            outer[a.stream] = (ops, [op.start_ns for op in ops])
        caller = _enclosing(*outer[a.stream], a)
        entry = sums[f"{caller or '(no host op)'} → {a.name}"]
        entry[0] += a.end_ns - a.start_ns
        entry[1] += 1
    ranked = sorted(sums.items(), key=lambda item: -item[1][0])
    return tuple(NamedSeconds(name, ns / 1e9, count) for name, (ns, count) in ranked)


def _outermost_ops(ops: Sequence[Activity]) -> list[Activity]:
    """The ops nested in no other (``ops`` sorted by start, longest first): disjoint, in order. torch.compile's
    regions are passed over: they wrap the op the script wrote (aten::item after a graph break, aten::to), which
    is the one to name, and which decides the advice."""
    outer: list[Activity] = []
    for op in ops:
        if op.name.startswith(kineto.COMPILED_CODE_OPS):
            continue
        if not outer or op.start_ns >= outer[-1].end_ns:
            outer.append(op)
    return outer


def _enclosing(outer: Sequence[Activity], starts: Sequence[int], call: Activity) -> Optional[str]:
    index = bisect.bisect_right(starts, call.start_ns) - 1
    if index >= 0 and outer[index].end_ns >= call.end_ns:
        return outer[index].name
    return None



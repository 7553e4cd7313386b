"""Where a sampled window's time went, from its activity records: pure Python (no torch, no pandas).

The definitions follow Holistic Trace Analysis (``hta/analyzers/breakdown_analysis.py``), over the
window's wall time and with every CUDA stream merged:

- kernel-busy: the union of compute kernel intervals (two kernels overlapping on two streams count once);
- communication: NCCL / RCCL kernels (HTA keeps them apart from compute), the part not hidden behind compute;
- memcpy / memset: copy and fill time *not* hidden behind a kernel (a copy overlapped by compute or
  communication costs nothing);
- idle: the rest, each gap attributed by what the host was doing:
  - waiting for data: the part of the gap the host spent blocked fetching the next batch (inside a
    ``workbench.data_wait`` annotation);
  - waiting for the host: the GPU had finished everything it was given and the next activity's
    launch call began after that (HTA's "host wait": launch and Python overhead);
  - other: the next activity had been launched before the gap began yet started late (a sync, a
    dependency between streams, a kernel-to-kernel delay), the tail after the last activity, or
    activities whose launch the window does not hold.

Those seconds are over the sampled window. The shares people are shown (``engine.step_shares``) are per step of
the run as it runs unprofiled, because the profiler's own cost lengthens a sampled step and would read as
the GPU waiting for the host (see ``StepShares`` there).

Host op time is "self" time (an op's time minus the ops nested in it on the same thread), as the
profiler's own tables count it, so nested ops are not counted twice.
"""

from __future__ import annotations

import bisect
import operator
import statistics
from collections import defaultdict
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Iterable, NamedTuple, Optional, Sequence

from workbench.engine.events import ProfileSample
from workbench.engine.intervals import Interval, clip, gaps, overlap, subtract, total, union
from workbench.engine.run_summary import NamedTime

# Activity kinds. Device side:
KERNEL, COMMUNICATION, MEMCPY, MEMSET = "kernel", "communication", "memcpy", "memset"
# Host side: a CUDA runtime/driver call (cudaLaunchKernel, cudaMemcpyAsync, ...), any other host op,
# the loop's annotation around next(batch), and a profiler step (one training step).
RUNTIME, CPU_OP, DATA_WAIT, STEP = "runtime", "cpu_op", "data_wait", "step"
DEVICE_KINDS = frozenset({KERNEL, COMMUNICATION, MEMCPY, MEMSET})
HOST_KINDS = frozenset({RUNTIME, CPU_OP, DATA_WAIT, STEP})
# Our own annotations are markers, not ops: they never appear among the top ops.
ANNOTATION_PREFIX = "workbench."

TOP_COUNT = 10


class Activity(NamedTuple):
    """One record from a profiler timeline; times in nanoseconds on the profiler's clock. A named tuple: a
    trace of millions of events makes millions of these, and a tuple is built 3× faster and is half the size
    of a frozen dataclass."""

    start_ns: int
    end_ns: int
    kind: str  # one of the kinds above
    stream: int  # the CUDA stream of a device activity; the host thread of a host one
    name: str
    correlation: int = 0  # a device activity and the runtime call that launched it share this id


@dataclass(frozen=True)
class TimelineBreakdown:
    """A window's time, in seconds. The device figures are None when the window has no GPU timeline."""

    window_seconds: float
    steps: int
    host_data_wait_seconds: float  # the host blocked in next(batch), whether or not the GPU was idle then
    top_ops: tuple[NamedTime, ...]  # by host self time
    kernel_busy_seconds: Optional[float] = None
    memcpy_seconds: Optional[float] = None  # not hidden behind a kernel
    memset_seconds: Optional[float] = None  # not hidden behind a kernel or a copy
    idle_waiting_for_data_seconds: Optional[float] = None
    idle_waiting_for_host_seconds: Optional[float] = None
    idle_other_seconds: Optional[float] = None
    kernels: Optional[int] = None
    launches: Optional[int] = None  # runtime calls that put a kernel, copy or fill on the device
    median_kernel_seconds: Optional[float] = None
    top_kernels: tuple[NamedTime, ...] = ()
    communication_seconds: Optional[float] = None  # NCCL / RCCL kernels not hidden behind compute
    idle_kernel_wait_seconds: Optional[float] = None  # gaps under ``kernel_wait_ns`` (HTA's kernel wait); 0 unless asked
    # The idle spans counted as waiting for the host (what the host was doing then is read from them), in order
    host_wait_spans: tuple[Interval, ...] = ()
    # The communication not hidden behind compute (communication_seconds' spans), in order: its time step by step
    communication_spans: tuple[Interval, ...] = ()
    # The idle gaps ended by work launched before they began ("other": queued work that started late), in order:
    # (gap start, the gap's ns counted as other: its wait for data apart, the work the gap was judged by)
    other_idle_gaps: tuple[tuple[int, int, Activity], ...] = ()


@dataclass
class SortedActivities:
    """A window's activities as the analysis reads them, apart by kind: ``analyse`` builds it from a flat list, and
    the trace reader builds it as it reads (a trace holds millions of events: no pass over all of them again)."""

    device: list[Activity]  # kernels, communication, copies, fills
    runtime: list[Activity]  # runtime calls: they launch the device work
    data_waits: list[Interval]
    host_by_thread: dict[int, list[Activity]]  # every host activity, by thread, sorted by (start, -end)

    @cached_property
    def launch_starts(self) -> dict[int, int]:
        """``launch_starts`` of these activities, mapped once for the idle attribution and HTA's per-stream split."""
        return launch_starts(self.device, self.runtime)


def launch_starts(device: Iterable[Activity], runtime: Iterable[Activity]) -> dict[int, int]:
    """Correlation id of device work → start of the earliest runtime call that has it (0, no id recorded, matches
    nothing). Only device work's ids: a trace holds millions of runtime calls."""
    wanted = {a.correlation for a in device}
    wanted.discard(0)
    starts: dict[int, int] = {}
    known_start = starts.get
    for a in runtime:
        correlation = a.correlation
        if correlation in wanted:
            known = known_start(correlation)
            if known is None or a.start_ns < known:
                starts[correlation] = a.start_ns
    return starts


def analyse(
    activities: Iterable[Activity],
    window: Optional[Interval] = None,
    steps: Optional[int] = None,
    gpu: bool = True,
    top: int = TOP_COUNT,
    kernel_wait_ns: int = 0,
) -> TimelineBreakdown:
    """Break a window down. ``window`` defaults to the span of the STEP activities (or of everything);
    ``steps`` to their count. ``gpu=False`` leaves the device figures None (a CPU run). Idle gaps shorter
    than ``kernel_wait_ns`` that end in work launched before they began are kernel wait (HTA's rule, 30 ns
    there), not "other"."""
    activities = [a for a in activities if a.end_ns >= a.start_ns]
    step_spans = [(a.start_ns, a.end_ns) for a in activities if a.kind == STEP]
    if window is None:
        spans = step_spans or [(a.start_ns, a.end_ns) for a in activities]
        window = (min(s for s, _ in spans), max(e for _, e in spans)) if spans else (0, 0)
    if steps is None:
        steps = len(step_spans)
    by_thread: dict[int, list[Activity]] = defaultdict(list)
    for a in activities:
        if a.kind in HOST_KINDS:
            by_thread[a.stream].append(a)
    sorted_activities = SortedActivities(
        device=[a for a in activities if a.kind in DEVICE_KINDS],
        runtime=[a for a in activities if a.kind == RUNTIME],
        data_waits=[(a.start_ns, a.end_ns) for a in activities if a.kind == DATA_WAIT],
        host_by_thread={thread: sort_by_start_longest_first(events) for thread, events in by_thread.items()},
    )
    return analyse_sorted(sorted_activities, window, steps, gpu, top, kernel_wait_ns)


def analyse_sorted(activities: SortedActivities, window: Interval, steps: int, gpu: bool = True,
                   top: int = TOP_COUNT, kernel_wait_ns: int = 0) -> TimelineBreakdown:
    """``analyse`` of activities already apart by kind (no activity may end before it starts)."""
    begin, end = window
    host_data_wait = clip(union(activities.data_waits), begin, end)
    top_ops = _top_ops(activities.host_by_thread, begin, end, top)
    host_only = TimelineBreakdown(
        window_seconds=_seconds(end - begin),
        steps=max(0, steps),
        host_data_wait_seconds=_seconds(total(host_data_wait)),
        top_ops=top_ops,
    )
    if not gpu:
        return host_only
    device = [a for a in activities.device if a.end_ns > begin and a.start_ns < end]
    spans: dict[str, list[Interval]] = {kind: [] for kind in DEVICE_KINDS}
    for a in device:
        spans[a.kind].append((a.start_ns, a.end_ns))
    kernels, communication, copies, fills = (union(spans[kind]) for kind in (KERNEL, COMMUNICATION, MEMCPY, MEMSET))
    kernels, communication, copies, fills = (clip(x, begin, end) for x in (kernels, communication, copies, fills))
    visible_communication = subtract(communication, kernels)
    all_kernels = union([*kernels, *communication])
    visible_copies = subtract(copies, all_kernels)
    visible_fills = subtract(subtract(fills, all_kernels), copies)
    busy = union([*all_kernels, *copies, *fills])
    launched_at = _launches(device, activities.launch_starts)
    host_wait_spans: list[Interval] = []
    other_idle_gaps: list[tuple[int, int, Activity]] = []
    data, host, kernel_wait, other = _attribute_idle(
        device, launched_at, gaps(busy, begin, end), host_data_wait, kernel_wait_ns, host_wait_spans,
        other_idle_gaps)
    kernel_records = [a for a in device if a.kind in (KERNEL, COMMUNICATION)]
    durations = [a.end_ns - a.start_ns for a in kernel_records]
    return replace(
        host_only,
        kernel_busy_seconds=_seconds(total(kernels)),
        memcpy_seconds=_seconds(total(visible_copies)),
        memset_seconds=_seconds(total(visible_fills)),
        idle_waiting_for_data_seconds=_seconds(data),
        idle_waiting_for_host_seconds=_seconds(host),
        idle_other_seconds=_seconds(other),
        idle_kernel_wait_seconds=_seconds(kernel_wait),
        communication_seconds=_seconds(total(visible_communication)),
        kernels=len(kernel_records),
        launches=len(launched_at),
        median_kernel_seconds=_seconds(statistics.median(durations)) if durations else None,
        top_kernels=_top_by_name(((a.name, a.end_ns - a.start_ns) for a in kernel_records), top),
        host_wait_spans=tuple(subtract(host_wait_spans, host_data_wait) if host_data_wait else host_wait_spans),
        other_idle_gaps=tuple(other_idle_gaps),
        communication_spans=tuple(visible_communication),
    )


def with_timed_data_wait(breakdown: TimelineBreakdown, data_wait_seconds: float) -> TimelineBreakdown:
    """A GPU window recorded without host annotations (the profiler's cheapest mode) has no marks of the
    loop's waits for data, so its idle gaps that end in a late launch all read as waiting for the host.
    The loop timed those waits itself: they are the host's data wait, and the GPU's wait for data is
    taken as that time, capped by the idle the timeline gave to the host (while the host fetched a
    batch the next launch could not come; the GPU was idle unless earlier work was still queued)."""
    host = breakdown.idle_waiting_for_host_seconds
    if host is None:
        return replace(breakdown, host_data_wait_seconds=data_wait_seconds)
    data = min(data_wait_seconds, host)
    return replace(
        breakdown,
        host_data_wait_seconds=data_wait_seconds,
        idle_waiting_for_data_seconds=(breakdown.idle_waiting_for_data_seconds or 0.0) + data,
        idle_waiting_for_host_seconds=host - data,
    )


def to_sample(
    breakdown: TimelineBreakdown, first_step: int, last_step: int, device_type: str, batch_size: int, **extra: Any
) -> ProfileSample:
    """The ProfileSample event of a timeline window; ``extra`` sets the rest (top_ops, trace paths, ...)."""
    window = breakdown.window_seconds
    fields: dict[str, Any] = dict(
        first_step=first_step,
        last_step=last_step,
        device_type=device_type,
        steps=breakdown.steps,
        window_seconds=window,
        host_data_wait_seconds=breakdown.host_data_wait_seconds,
        top_ops=breakdown.top_ops,
        kernel_busy_seconds=breakdown.kernel_busy_seconds,
        memcpy_seconds=breakdown.memcpy_seconds,
        memset_seconds=breakdown.memset_seconds,
        communication_seconds=breakdown.communication_seconds,
        idle_waiting_for_data_seconds=breakdown.idle_waiting_for_data_seconds,
        idle_waiting_for_host_seconds=breakdown.idle_waiting_for_host_seconds,
        idle_other_seconds=breakdown.idle_other_seconds,
        kernels=breakdown.kernels,
        launches=breakdown.launches,
        median_kernel_seconds=breakdown.median_kernel_seconds,
        top_kernels=breakdown.top_kernels,
    )
    fields.update(extra)
    fields.setdefault("images_per_sec", fields["steps"] * batch_size / window if window > 0 else 0.0)
    return ProfileSample(**fields)


# -- idle attribution ----------------------------------------------------------------------------


def _launches(device: Sequence[Activity], starts: dict[int, int]) -> dict[int, int]:
    """Correlation id → start of the runtime call that launched a device activity of the window (``starts``:
    ``launch_starts``'s map)."""
    return {correlation: starts[correlation] for correlation in {a.correlation for a in device}
            if correlation in starts}


def _attribute_idle(
    device: Sequence[Activity], launched_at: dict[int, int], idle: Sequence[Interval], data_wait: Sequence[Interval],
    kernel_wait_ns: int = 0, host_wait_spans: Optional[list[Interval]] = None,
    other_gaps: Optional[list[tuple[int, int, Activity]]] = None,
) -> tuple[int, int, int, int]:
    """(waiting for data, waiting for the host, kernel wait, other) in ns over the idle gaps; ``launched_at`` is
    ``_launches``'s map; the gaps counted as waiting for the host are added to ``host_wait_spans``, and those ended
    by work launched before them to ``other_gaps`` (start, ns counted as other, that work), where given."""
    # For each start time, the earliest launch of an activity starting then (None: launch unknown), and that activity.
    first_launch: dict[int, tuple[Optional[int], Activity]] = {}
    for a in device:
        launch = launched_at.get(a.correlation)
        start = a.start_ns
        if launch is None or start not in first_launch:
            first_launch[start] = (launch, a)
        else:
            known = first_launch[start][0]
            if known is not None and launch < known:
                first_launch[start] = (launch, a)
    data = host = kernel_wait = other = 0
    for gap_start, gap_end in idle:
        waiting_for_data = overlap(gap_start, gap_end, data_wait) if data_wait else 0
        rest = gap_end - gap_start - waiting_for_data
        data += waiting_for_data
        launch, work = first_launch.get(gap_end, (None, None))  # what ends the gap (none: the window's tail)
        if launch is not None and launch >= gap_start:
            host += rest
            if host_wait_spans is not None:
                host_wait_spans.append((gap_start, gap_end))
        elif launch is not None and gap_end - gap_start < kernel_wait_ns:
            kernel_wait += rest
        else:
            other += rest
            if work is not None and launch is not None and other_gaps is not None and rest > 0:
                other_gaps.append((gap_start, rest, work))
    return data, host, kernel_wait, other


# -- host ops ------------------------------------------------------------------------------------


def _top_ops(host_by_thread: dict[int, list[Activity]], begin: int, end: int, top: int) -> tuple[NamedTime, ...]:
    """Host ops by self time within the window (children on the same thread subtracted); each thread's activities
    sorted by (start, -end). Written for speed: a trace from another program holds hundreds of thousands of host
    ops."""
    sums: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    not_ops = (DATA_WAIT,)
    credited: dict[str, Optional[str]] = {}  # name → the name credited (None: an annotation, not an op)
    for events in host_by_thread.values():
        # [name credited, clipped duration, children's time, end]; at the bottom, one that never ends (no test of
        # an empty stack per op)
        stack: list[list] = [[None, 0, 0, float("inf")]]
        push, pop = stack.append, stack.pop
        parent = stack[-1]
        for a_start, a_end, a_kind, _, a_name, _ in events[:bisect.bisect_left(events, end, key=_START)]:
            if a_end <= begin or a_kind == STEP:
                # outside the window: not an op of it, nor anyone's child. A step is no span of the program's:
                # profiler.step() may run inside its record_functions (Lightning calls it at training_step's end,
                # within its optimizer_step), so a step crosses them; nested among them, it hid its successors from
                # the span around them all, whose self time then held theirs ([pl][profile]run_training_epoch).
                continue
            while parent[3] <= a_start:
                name, duration, children, _ = pop()
                if name is not None:
                    sums[name] += duration - children if duration > children else 0
                    counts[name] += 1
                parent = stack[-1]
            clipped_start = a_start if a_start > begin else begin
            clipped_end = a_end if a_end < end else end
            # a child's time is not its parent's own (capped where nesting is not clean)
            parent_end = parent[3]
            child_end = clipped_end if clipped_end < parent_end else parent_end
            if child_end > clipped_start:
                parent[2] += child_end - clipped_start
            if a_kind in not_ops:
                name = None
            else:
                name = a_name
                if name in credited:
                    name = credited[name]
                else:
                    name = credited[name] = None if name.startswith(ANNOTATION_PREFIX) else name
            parent = [name, clipped_end - clipped_start, 0, a_end]
            push(parent)
        while len(stack) > 1:
            name, duration, children, _ = pop()
            if name is not None:
                sums[name] += duration - children if duration > children else 0
                counts[name] += 1
    return _ranked(sums, counts, top)


_START, _END = operator.itemgetter(0), operator.itemgetter(1)  # Activity.start_ns, Activity.end_ns


def sort_by_start_longest_first(activities: list[Activity]) -> list[Activity]:
    """The list sorted in place by (start, -end), so parents come before their children (two stable sorts on C
    keys: no tuple made per activity; in place: a large trace's host lists are not copied), and returned."""
    activities.sort(key=_END, reverse=True)
    activities.sort(key=_START)
    return activities


def _top_by_name(items: Iterable[tuple[str, int]], top: int) -> tuple[NamedTime, ...]:
    sums: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    for name, ns in items:
        sums[name] += ns
        counts[name] += 1
    return _ranked(sums, counts, top)


def _ranked(sums: dict[str, int], counts: dict[str, int], top: int) -> tuple[NamedTime, ...]:
    ranked = sorted(sums, key=lambda name: (-sums[name], name))[:top]
    return tuple(NamedTime(name=name, seconds=_seconds(sums[name]), count=counts[name]) for name in ranked)


def _seconds(ns: float) -> float:
    return ns / 1e9

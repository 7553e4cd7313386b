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

Those seconds are over the sampled window. The shares people are shown (``step_shares``) are per step of
the run as it runs unprofiled, because the profiler's own cost lengthens a sampled step and would read as
the GPU waiting for the host (see StepShares).

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

Interval = tuple[int, int]


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
        """Correlation id of device work → start of the earliest runtime call that has it (0, no id recorded,
        matches nothing). Only device work's ids: a trace holds millions of runtime calls."""
        wanted = {a.correlation for a in self.device}
        wanted.discard(0)
        starts: dict[int, int] = {}
        known_start = starts.get
        for a in self.runtime:
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
    data, host, kernel_wait, other = _attribute_idle(
        device, launched_at, gaps(busy, begin, end), host_data_wait, kernel_wait_ns)
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


def _launches(device: Sequence[Activity], launch_starts: dict[int, int]) -> dict[int, int]:
    """Correlation id → start of the runtime call that launched a device activity of the window."""
    return {correlation: launch_starts[correlation] for correlation in {a.correlation for a in device}
            if correlation in launch_starts}


def _attribute_idle(
    device: Sequence[Activity], launched_at: dict[int, int], idle: Sequence[Interval], data_wait: Sequence[Interval],
    kernel_wait_ns: int = 0,
) -> tuple[int, int, int, int]:
    """(waiting for data, waiting for the host, kernel wait, other) in ns over the idle gaps; ``launched_at`` is
    ``_launches``'s map."""
    # For each start time, the earliest launch of an activity starting then (None: launch unknown).
    first_launch: dict[int, Optional[int]] = {}
    for a in device:
        launch = launched_at.get(a.correlation)
        start = a.start_ns
        if launch is None or start not in first_launch:
            first_launch[start] = launch
        else:
            known = first_launch[start]
            if known is not None and launch < known:
                first_launch[start] = launch
    data = host = kernel_wait = other = 0
    for gap_start, gap_end in idle:
        waiting_for_data = overlap(gap_start, gap_end, data_wait) if data_wait else 0
        rest = gap_end - gap_start - waiting_for_data
        data += waiting_for_data
        launch = first_launch.get(gap_end)  # the activity that ends the gap (none: the window's tail)
        if launch is not None and launch >= gap_start:
            host += rest
        elif launch is not None and gap_end - gap_start < kernel_wait_ns:
            kernel_wait += rest
        else:
            other += rest
    return data, host, kernel_wait, other


# -- host ops ------------------------------------------------------------------------------------


def _top_ops(host_by_thread: dict[int, list[Activity]], begin: int, end: int, top: int) -> tuple[NamedTime, ...]:
    """Host ops by self time within the window (children on the same thread subtracted); each thread's activities
    sorted by (start, -end). Written for speed: a trace from another program holds hundreds of thousands of host
    ops."""
    sums: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    not_ops = (DATA_WAIT, STEP)
    credited: dict[str, Optional[str]] = {}  # name → the name credited (None: an annotation, not an op)
    for events in host_by_thread.values():
        # [name credited, clipped duration, children's time, end]; at the bottom, one that never ends (no test of
        # an empty stack per op)
        stack: list[list] = [[None, 0, 0, float("inf")]]
        push, pop = stack.append, stack.pop
        parent = stack[-1]
        for a_start, a_end, a_kind, _, a_name, _ in events[:bisect.bisect_left(events, end, key=_START)]:
            if a_end <= begin:
                continue  # outside the window: not an op of it, nor anyone's child
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


# -- interval arithmetic on sorted, disjoint [start, end) lists -----------------------------------


def union(intervals: Iterable[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    append = merged.append
    ordered = sorted(intervals, key=_START)  # by start alone (a C key): the merge needs no order among equal starts
    if not ordered:
        return merged
    current_start, current_end = ordered[0]
    for start, end in ordered:
        if start <= current_end:
            if end > current_end:
                current_end = end
        else:
            append((current_start, current_end))
            current_start, current_end = start, end
    append((current_start, current_end))
    return merged


def clip(intervals: Sequence[Interval], begin: int, end: int) -> list[Interval]:
    return [(s if s > begin else begin, e if e < end else end) for s, e in intervals if e > begin and s < end]


def subtract(intervals: Sequence[Interval], cover: Sequence[Interval]) -> list[Interval]:
    """The parts of ``intervals`` that ``cover`` does not cover (both sorted and disjoint)."""
    result: list[Interval] = []
    append = result.append
    count = len(cover)
    index = 0
    for start, end in intervals:
        while index < count and cover[index][1] <= start:
            index += 1
        cursor, probe = start, index
        while probe < count:
            cover_start, cover_end = cover[probe]
            if cover_start >= end:
                break
            if cover_start > cursor:
                append((cursor, cover_start))
            if cover_end > cursor:
                cursor = cover_end
            probe += 1
        if cursor < end:
            append((cursor, end))
    return result


def gaps(busy: Sequence[Interval], begin: int, end: int) -> list[Interval]:
    """The idle stretches of [begin, end) between the busy intervals."""
    return subtract([(begin, end)], busy) if end > begin else []


def overlap(start: int, end: int, intervals: Sequence[Interval]) -> int:
    """How much of [start, end) the sorted, disjoint ``intervals`` cover."""
    index = max(0, bisect.bisect_right(intervals, (start, start)) - 1)
    covered = 0
    for s, e in intervals[index:]:
        if s >= end:
            break
        covered += max(0, min(e, end) - max(s, start))
    return covered


def total(intervals: Iterable[Interval]) -> int:
    return sum(end - start for start, end in intervals)


def _seconds(ns: float) -> float:
    return ns / 1e9


# -- per step of the run as it runs unprofiled -------------------------------------------------------------


@dataclass(frozen=True)
class StepShares:
    """Where one step's time goes, as fractions of it that add up to 1.

    The sampled window is slower than the run's own steps: CUPTI adds microseconds to every launch (on an
    H100, resnet18 bf16 batch 512 ran 9.9 ms a step unprofiled and 13.7 ms with only the GPU activities
    recorded), and the host's extra time shows as the GPU waiting for the host. So the time base is the
    run's own step outside samples: kernel, copy and fill time come from the GPU's timeline (the device's
    durations barely change under CUPTI), the step's length and its wait for data from the loop's own
    timers outside the sample, "other" idle from the timeline, and what is left of the step is the GPU
    waiting for the host. ``rebased`` is False where no unprofiled step was known: then the shares are
    over the sampled window itself.

    That remainder is kept signed: an error in the base step time lands in it whole, where it can be
    seen (on the resnet18 H100 fixture, ±10 % on the base moves it by ±10 % of the step). A base shorter
    than the GPU's own work per step (kernels, and copies and fills not hidden behind them) cannot be
    the step the sample saw: ``base_shorter_than_gpu_work`` flags it, the remainder is negative, and no
    finding reads a host wait from it.
    """

    compute: float
    memcpy: float
    memset: float
    waiting_for_data: float
    waiting_for_host: float  # the remainder: negative where the base is shorter than the rest
    other: float
    step_seconds: float  # the time base: the run's own step (or the sampled step where that is unknown)
    sampled_step_seconds: float  # a step inside the sampled window
    rebased: bool
    base_shorter_than_gpu_work: bool = False
    gpu_work_seconds: float = 0.0  # kernels, communication, copies and fills per step, from the timeline
    communication: float = 0.0  # NCCL / RCCL kernels not hidden behind compute (part of the GPU's work)

    @property
    def idle(self) -> float:
        return self.waiting_for_data + self.waiting_for_host + self.other

    @property
    def host_remainder_seconds(self) -> float:
        """The step's remainder after its other parts, in seconds (signed)."""
        return self.waiting_for_host * self.step_seconds

    @property
    def profiler_slowdown(self) -> Optional[float]:
        """How much longer a sampled step took than the run's own (0.38 = 38 % longer); None if unknown."""
        if not self.rebased or self.step_seconds <= 0:
            return None
        return self.sampled_step_seconds / self.step_seconds - 1.0

    def flag_text(self) -> Optional[str]:
        """Why the sample's shares are not the run's, in words (None when they are)."""
        if not self.base_shorter_than_gpu_work:
            return None
        return (f"the run's step ({self.step_seconds * 1e3:,.2f} ms) is shorter than the GPU's work per step in the "
                f"sample ({self.gpu_work_seconds * 1e3:,.2f} ms): the sample's host wait is a remainder of "
                f"{self.host_remainder_seconds * 1e3:,.2f} ms, not a measurement")


def step_shares(
    sample: ProfileSample,
    step_seconds: Optional[float] = None,
    data_wait_seconds: Optional[float] = None,
) -> Optional[StepShares]:
    """The sample's GPU time per step of the run (see StepShares); None without a GPU timeline.

    ``step_seconds`` / ``data_wait_seconds`` (per step) override the sample's own unprofiled figures, e.g.
    with the run's whole steady state when the run has ended.
    """
    steps = sample.steps
    if sample.kernel_busy_seconds is None or steps <= 0 or sample.window_seconds <= 0:
        return None
    compute = sample.kernel_busy_seconds / steps
    memcpy = (sample.memcpy_seconds or 0.0) / steps
    memset = (sample.memset_seconds or 0.0) / steps
    communication = (sample.communication_seconds or 0.0) / steps
    busy = compute + communication + memcpy + memset
    sampled = sample.window_seconds / steps
    base = step_seconds if step_seconds is not None else sample.unprofiled_step_seconds
    wait = data_wait_seconds if data_wait_seconds is not None else sample.unprofiled_data_wait_seconds
    other = (sample.idle_other_seconds or 0.0) / steps
    flagged = False
    if base is None or base <= 0:
        data = (sample.idle_waiting_for_data_seconds or 0.0) / steps
        host = (sample.idle_waiting_for_host_seconds or 0.0) / steps
        total = max(sampled, busy + data + host + other)
        rebased = False
    else:
        total = base
        flagged = base < busy
        # The GPU waits for data only while it is idle: the host's wait beyond the step's idle time overlapped
        # kernels still queued. No other bound: what the base gets wrong stays in the remainder.
        data = wait if wait is not None else (sample.idle_waiting_for_data_seconds or 0.0) / steps
        data = min(data, max(0.0, base - busy))
        host = base - busy - data - other
        rebased = True
    return StepShares(
        compute=compute / total, memcpy=memcpy / total, memset=memset / total, waiting_for_data=data / total,
        waiting_for_host=host / total, other=other / total, step_seconds=total, sampled_step_seconds=sampled,
        rebased=rebased, base_shorter_than_gpu_work=flagged, gpu_work_seconds=busy,
        communication=communication / total,
    )

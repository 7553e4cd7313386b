"""HTA's own rules, replayed on our events: where our gpu_span differs from HTA's and by exactly what.

HTA 0.5.0's temporal breakdown differs from ours on purpose in two places (docs/gpu-time.md):

- it leaves out device work whose launching runtime call is not in the trace before the last ProfilerStep
  began (``Trace._filter_irrelevant_gpu_kernels``, when the trace has two steps or more): work launched before
  the profiler started, or in the last step. The GPU was busy then, so ours counts it;
- it rounds fractional-µs timestamps inward (start up to the next µs, end down) when any ``ts`` in the file is
  fractional (``round_down_time_stamps``), which shrinks each event by up to 2 µs; ours keeps the ns.

Two details make the replay exact, and matter on traces where every timestamp is fractional (torch 2.11's, with
many sub-µs copies and fills): the last step's start is the latest ``ProfilerStep#N``, the GPU's copy of the
annotation included (it starts after the host's, so work the last step launched before its GPU copy began is
kept); and an event that rounding leaves with a negative length (a 0.8 µs fill: start up, end down) is kept, and
``merge_kernel_intervals`` counts it as a busy interval of −1 µs, so HTA's non-compute time can come out
negative (its own assertion then stops the breakdown: three of the H100 traces in tests/trace_analysis/data).

Three details of HTA's breakdown that ours follows as well (docs/gpu-time.md): only events on a stream count
(CUPTI's Event Sync and Context Sync carry stream -1: the reader leaves them out); compute is HTA's
``get_kernel_type`` by name, GPU-side records included ("Stream Wait Event" is compute to it); and rounding
sums ts + dur in floating point, as HTA does.

``hta_gpu_span`` applies either rule or both to the same events, so a test (and the benchmark) can show that
our figure turns into HTA's by exactly those rules and nothing else.
"""

from __future__ import annotations

import math
import operator
import re
from collections import defaultdict
from typing import Callable, Optional, Sequence

from workbench.engine import intervals, timeline
from workbench.engine.timeline import RUNTIME, STEP, Activity

# An Activity's start_ns, end_ns and (start_ns, end_ns), read in C
_START, _END, _SPAN = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(0, 1)
# HTA's kernel-wait threshold: get_idle_time_breakdown's consecutive_kernel_delay=30, documented as ns but compared
# with its timestamps, which are µs: 30 µs (the committed figures match to the last digit with 30 µs, not 30 ns).
KERNEL_WAIT_NS = 30_000
# HTA 0.5.0's "compute" kernels in its temporal breakdown: those utils.get_kernel_type calls COMPUTATION, i.e. not
# communication (^nccl.*Kernel), not memory (^Memcpy, ^Memset, ^dma), and not matching its NCCL_COMPUTE_KERNEL_RE
# (.*Memcpy, ^Memset, .*Sync). Anything else is compute to it: "Stream Wait Event", a ROCm blit copy.
_HTA_NOT_COMPUTE = re.compile(r"(nccl.*Kernel)|(.*Memcpy)|(Memset)|(dma)|(.*Sync)")  # re.match: anchored at the start


def span_window(device: Sequence[Activity], markers: Sequence[Activity]) -> Optional[tuple[int, int]]:
    events = [*device, *markers]
    if not events:
        return None
    return min(map(_START, events)), max(map(_END, events))


def gpu_span(device: Sequence[Activity], markers: Sequence[Activity] = ()) -> Optional[dict[str, float]]:
    """HTA's temporal breakdown: over first to last GPU event (every event on a stream, CUPTI's sync records
    included), idle = the window less the union of them all; compute = the union of HTA's compute kernels;
    non-compute = the rest of the busy time."""
    window = span_window(device, markers)
    if window is None or window[1] <= window[0]:
        return None
    every = intervals.union(map(_SPAN, [*device, *markers]))
    compute = intervals.union(map(_SPAN, _compute_work([*device, *markers])))
    span = window[1] - window[0]
    busy, compute_ns = intervals.total(every), intervals.total(compute)
    return {"idle_share": (span - busy) / span, "compute_share": compute_ns / span,
            "non_compute_share": (busy - compute_ns) / span}


def _compute_work(device: Sequence[Activity]) -> list[Activity]:
    """The GPU events HTA calls compute: by their name alone (not NCCL, copies, fills or syncs), whatever kind ours
    gives them. ROCm's blit copies (__amd_rocclr_copyBuffer…), a collective whose name does not start with
    "nccl…Kernel" ("void ncclKernel…"), and CUPTI's "Stream Wait Event" record are compute to HTA."""
    compute_names: dict[str, bool] = {}  # a name's class, matched once (a trace has few names, many kernels)
    work = []
    for a in device:
        is_compute = compute_names.get(a.name)
        if is_compute is None:
            is_compute = compute_names[a.name] = not _HTA_NOT_COMPUTE.match(a.name)
        if is_compute:
            work.append(a)
    return work


def per_stream_idle_split(device: Sequence[Activity], host: Sequence[Activity], threshold_ns: int = KERNEL_WAIT_NS,
                          launch_starts: Optional[dict[int, int]] = None) -> Optional[dict[str, float]]:
    """HTA's idle split (get_idle_time_breakdown): each stream's gaps between its own consecutive kernels,
    copies and fills, summed over streams, as shares: host_wait (the next one's launch began after the
    previous ended), kernel_wait (shorter than ``threshold_ns``), other. ``launch_starts``: the host's runtime
    calls as ``timeline.launch_starts`` maps them, where the caller has them (else read from ``host``)."""
    launch = launch_starts if launch_starts is not None else timeline.launch_starts(
        device, [a for a in host if a.kind == RUNTIME])
    by_stream: dict[int, list[Activity]] = defaultdict(list)
    for a in device:
        by_stream[a.stream].append(a)
    sums = {"host_wait": 0, "kernel_wait": 0, "other": 0}
    for items in by_stream.values():
        items.sort(key=_START)
        for previous, current in zip(items, items[1:]):
            gap = current.start_ns - previous.end_ns
            launched = launch.get(current.correlation)
            if launched is not None and launched > previous.end_ns:
                sums["host_wait"] += gap
            elif gap < threshold_ns:
                sums["kernel_wait"] += gap
            else:
                sums["other"] += gap
    idle = sum(sums.values())
    return {key: value / idle for key, value in sums.items()} if idle > 0 else None




def launched_before_last_step(device: Sequence[Activity], host: Sequence[Activity],
                              fractional_timestamps: bool = False) -> Optional[list[Activity]]:
    """The device events HTA keeps: those whose runtime call (same correlation id) began before the last
    ProfilerStep did; None where HTA filters nothing (fewer than two steps)."""
    launched = _launched_before_last_step(host, fractional_timestamps)
    return None if launched is None else [a for a in device if a.correlation in launched]


def _launched_before_last_step(host: Sequence[Activity], fractional_timestamps: bool) -> Optional[set[int]]:
    """The correlation ids of the runtime calls that began before the last ProfilerStep did, on HTA's clock (whole
    µs, rounded up, where the file's timestamps are fractional), the GPU's copies of the steps included (None:
    fewer than two steps)."""
    begun = _begun_before_last_step(host, fractional_timestamps)
    return None if begun is None else _launched_by(host, begun)


def _launched_by(host: Sequence[Activity], begun: Callable[[Activity], bool]) -> set[int]:
    return {a.correlation for a in host if a.kind == RUNTIME and begun(a)}


def _begun_before_last_step(host: Sequence[Activity], fractional_timestamps: bool
                            ) -> Optional[Callable[[Activity], bool]]:
    """Whether a host event began before the last ProfilerStep did, as HTA's filter keeps its CPU events (the
    rows of ``CPUOperatorFilter``, with ``ts`` before the latest step's): on its clock, the GPU's copies of the
    steps included. None where the filter keeps everything (fewer than two steps)."""
    steps = [a for a in host if a.kind == STEP]
    if len({a.name for a in steps}) < 2:
        return None
    last_start = max(a.start_ns for a in steps)
    if fractional_timestamps:
        last_start = _up_to_us(last_start)
        return lambda a: _up_to_us(a.start_ns) < last_start
    return lambda a: a.start_ns < last_start


def _up_to_us(ns: int) -> int:
    return -(-ns // 1000) * 1000


def rounded_inward(events: Sequence[Activity]) -> list[Activity]:
    """Each event's start up to the next whole µs and its end down to one (HTA's ns rounding). An event shorter
    than that is left with a negative length, and kept, as HTA keeps it (``hta_span`` counts it as HTA does).
    The end is ts + dur summed in floating point, as HTA sums them: at an epoch timestamp (1.7e15 µs) a double
    holds a quarter µs, so a sum 10 ns short of a whole µs rounds up to it, and is not floored below it (on a
    V100 trace of 6,000 short events, 0.15 points of idle)."""
    make = tuple.__new__  # Activity(...) without its Python-level constructor (a trace holds millions)
    floor = math.floor
    return [make(Activity, (-(-a.start_ns // 1000) * 1000, floor(a.start_ns / 1000 + (a.end_ns - a.start_ns) / 1000)
                            * 1000, *a[2:])) for a in events]


def hta_span(device: Sequence[Activity], markers: Sequence[Activity] = ()) -> Optional[dict[str, float]]:
    """``gpu_span`` as HTA computes it (``get_temporal_breakdown``): the window from the first merged interval's
    start to the last's end, busy and compute time from ``merge_kernel_intervals``, which takes an event of
    negative length as it is. Equal to ``gpu_span`` where no event has a negative length."""
    every = _hta_merged([*device, *markers])
    if not every:
        return None
    span = every[-1][1] - every[0][0]
    if span <= 0:
        return None
    busy = sum(end - start for start, end in every)
    compute_ns = sum(end - start for start, end in _hta_merged(_compute_work([*device, *markers])))
    return {"idle_share": (span - busy) / span, "compute_share": compute_ns / span,
            "non_compute_share": (busy - compute_ns) / span}


def _hta_merged(events: Sequence[Activity]) -> list[list[int]]:
    """HTA's merge_kernel_intervals: by start, a new interval wherever an event starts after every earlier one
    ended; each interval from its first start to its latest end (an event of negative length alone stays so)."""
    merged: list[list[int]] = []
    reach = None  # the latest end so far
    for a in sorted(events, key=_START):
        start, end = a.start_ns, a.end_ns
        if reach is not None and start <= reach:
            if end > merged[-1][1]:
                merged[-1][1] = end
        else:
            merged.append([start, end])
        if reach is None or end > reach:
            reach = end
    return merged


def hta_gpu_span(device: Sequence[Activity], markers: Sequence[Activity], host: Sequence[Activity],
                 fractional_timestamps: bool, *, drop_unlaunched: bool = True,
                 round_us: bool = True) -> Optional[dict[str, float]]:
    """``gpu_span`` with HTA's filter (``drop_unlaunched``) and rounding (``round_us``, applied only where the
    trace's timestamps are not all whole µs, as HTA does)."""
    device, markers = list(device), list(markers)
    if drop_unlaunched:
        launched = _launched_before_last_step(host, fractional_timestamps and round_us)
        if launched is not None:
            device = [a for a in device if a.correlation in launched]
            markers = [a for a in markers if a.correlation in launched]
    if round_us and fractional_timestamps:
        device, markers = rounded_inward(device), rounded_inward(markers)
    return hta_span(device, markers)


def hta_idle_split(device: Sequence[Activity], host: Sequence[Activity], fractional_timestamps: bool
                   ) -> Optional[dict[str, float]]:
    """HTA's get_idle_time_breakdown summed over streams, replayed in full (its filter and rounding included):
    {host_wait, kernel_wait, other} as shares of the summed per-stream idle time."""
    kept = launched_before_last_step(device, host, fractional_timestamps)
    device = list(device) if kept is None else kept
    if fractional_timestamps:
        device = rounded_inward(device)
    return per_stream_idle_split(device, host)


def hta_figures(device: Sequence[Activity], markers: Sequence[Activity], host: Sequence[Activity],
                fractional_timestamps: bool, launch_starts: Optional[dict[int, int]] = None,
                host_ops_on_a_stream: Sequence[Activity] = ()
                ) -> tuple[Optional[dict[str, float]], Optional[dict[str, float]]]:
    """(``hta_gpu_span``, ``hta_idle_split``) with both of HTA's rules, the filter and the rounding done once for
    the two (they apply them to the same events); ``launch_starts`` as ``per_stream_idle_split`` takes it.
    ``host_ops_on_a_stream``: host ops carrying a stream, which HTA takes for GPU work (any event with a stream is
    one to it) in its span. Its filter reads them as the CPU ops they are (their correlation is none): kept where
    they began before the last step did, as its CPU ops are."""
    device, markers, on_a_stream = list(device), list(markers), list(host_ops_on_a_stream)
    begun = _begun_before_last_step(host, fractional_timestamps)
    if begun is not None:
        launched = _launched_by(host, begun)
        device = [a for a in device if a.correlation in launched]
        markers = [a for a in markers if a.correlation in launched]
        on_a_stream = [a for a in on_a_stream if begun(a)]
    if fractional_timestamps:
        device, markers, on_a_stream = rounded_inward(device), rounded_inward(markers), rounded_inward(on_a_stream)
    return hta_span(device, [*markers, *on_a_stream]), per_stream_idle_split(device, host, launch_starts=launch_starts)

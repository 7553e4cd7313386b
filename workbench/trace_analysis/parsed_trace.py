"""One profiler trace file read in one pass into activities (``read_trace`` → ``ParsedTrace``); file_ranks sorts
them by rank and GPU.

Formats: Kineto's categories today ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver",
"cpu_op", "user_annotation") and 2021's ("Kernel", "Memcpy", "Memset", "Runtime", "Operator"); NVIDIA's
and ROCm's runtime calls (by category, so "hipLaunchKernel" launches as "cudaLaunchKernel" does). The GPU
of a rank is read from the trace (its device events' ``device``), never assumed to be 0.

One pass, streaming (``json_stream``): events arrive a batch at a time, decoded by msgspec into the Structs of
``trace_events`` (only the fields read here), and each is reduced at once to an ``Activity`` (or dropped: flow
arrows, Python frames, instant events); the whole JSON document is never held. Hostile input gives a
``TraceError`` with one line (or a note in the report naming what was skipped), never a hang: the stream's own
defences are in json_stream; mistyped or missing fields and negative durations are counted here and named in the
report's notes.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from workbench.engine import kineto
from workbench.engine.timeline import CPU_OP, KERNEL, RUNTIME, STEP, Activity
from workbench.trace_analysis import json_stream
from workbench.trace_analysis.model import TraceCancelled, TraceError
from workbench.trace_analysis.trace_events import (
    ARGS_NOT_READ, BEGIN_END_EVENTS, BEGIN_END_TYPES, DEVICE_SIDES, GPU_ANNOTATION, HOST_OP, MARKER, MAX_SPAN_US,
    NO_STREAM, OP, PASSED_OVER, PHASE_TYPES, RUNTIME_CALL, SIDES, Event, Span, as_event, host_op_kind)

Cancelled = json_stream.Cancelled

MAX_UNREAD_CATEGORIES = 64
MORE_CATEGORIES = "(more categories)"
_DIGITS = re.compile(r"-?\d+")


@dataclass
class ParsedTrace:
    """One file's events, sorted into activities; ``meta`` holds the top-level keys other than traceEvents."""

    path: Path
    meta: dict[str, Any] = field(default_factory=dict)
    device_work: dict[Optional[int], list[Activity]] = field(default_factory=lambda: defaultdict(list))
    gpu_markers: dict[Optional[int], list[Activity]] = field(default_factory=lambda: defaultdict(list))
    runtime: list[Activity] = field(default_factory=list)
    steps: list[Activity] = field(default_factory=list)
    gpu_steps: list[Activity] = field(default_factory=list)  # ProfilerStep#N's span on the GPU's timeline
    data_waits: list[Activity] = field(default_factory=list)
    host_by_thread: dict[int, list[Activity]] = field(default_factory=lambda: defaultdict(list))  # all host activities
    host_ops: dict[int, list[Activity]] = field(default_factory=lambda: defaultdict(list))  # cpu ops
    # host ops that carry a stream (torch.compile's Triton launch, in some torch versions): HTA counts any event on a
    # stream as GPU work, so its rules' replay does (hta_rules); ours does not: they are the host's time
    host_ops_on_a_stream: list[Activity] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)  # reason → events skipped
    # category this reader does not know → its spans (up to MAX_UNREAD_CATEGORIES; the rest under MORE_CATEGORIES)
    unread_categories: dict[str, int] = field(default_factory=dict)
    events: int = 0
    # kernel, copy and fill events not read (a mistyped field), or read without their args (not an object), by the
    # GPU they name (their device, or pid; None where neither reads); events whose category cannot be read are
    # counted too, as they may be a GPU's
    device_events_skipped: Counter = field(default_factory=Counter)
    device_events_partly_read: Counter = field(default_factory=Counter)
    partly_read: Counter = field(default_factory=Counter)  # reason → events read without some of their fields
    fractional_timestamps: bool = False
    unreadable_logs: list[str] = field(default_factory=list)  # Kineto's log levels whose line is not JSON
    # name → (one copy of it, its kind), host ops and device events apart (a name may be both)
    host_names: dict[str, tuple[str, Optional[str]]] = field(default_factory=dict)
    _device_names: dict[str, tuple[str, str]] = field(default_factory=dict)
    _runtime_names: dict[str, str] = field(default_factory=dict)

    def holds_spans(self) -> bool:
        """Whether any event was read into an activity (a host op or call, or a GPU's work or marks)."""
        return bool(self.host_by_thread) or any(self.device_work.values()) or any(self.gpu_markers.values()) or bool(
            self.gpu_steps)

    def held(self) -> str:
        """What the file held instead of spans, in words: what was skipped, else the categories not read."""
        if self.skipped:
            return "; ".join(f"{count:,} {reason}" for reason, count in sorted(self.skipped.items()))
        if self.unread_categories:
            named = sorted(((category, count) for category, count in self.unread_categories.items()
                            if category != MORE_CATEGORIES), key=lambda item: -item[1])
            more = sum(count for _, count in named[4:]) + self.unread_categories.get(MORE_CATEGORIES, 0)
            return ("spans of categories it does not read: " + ", ".join(f"{category} ({count:,})" for category, count
                                                                          in named[:4])
                    + (f" and {more:,} spans of others" if more else ""))
        return ('none is a complete span ("ph": "X") of a host op, a runtime call or a GPU\'s work: metadata, '
                "counters, instants or flow arrows alone")

    def names_its_rank(self) -> bool:
        """The file says its rank (Kineto's distributedInfo, written under torch.distributed)."""
        return process_rank(self.meta) is not None

    def add_batch(self, batch: list[Any]) -> None:
        """Sort a batch of trace events into the activities (or count why each was skipped). The hot loop of a
        read: millions of events, so it is one loop with the names it uses bound locally, types tested with
        ``type(...) is``, each name classified once, and activities made without a Python-level constructor (a
        version that read the batch a field at a time, by ``map`` and numpy, took 20 % longer: a field per pass
        costs more than one pass of all of them)."""
        if batch and type(batch[0]) not in _TYPED:  # decoded by the stdlib (the typed decoder refused the batch)
            args_not_objects = sum(1 for item in batch if type(item) is dict and item.get("args") is not None
                                   and type(item["args"]) is not dict)
            if args_not_objects:
                self.partly_read[ARGS_NOT_AN_OBJECT] += args_not_objects
            batch = [as_event(item) for item in batch]
            objects = [event for event in batch if event is not None]
            if len(objects) < len(batch):
                self.skipped[NOT_OBJECTS] += len(batch) - len(objects)
                self.events += len(batch) - len(objects)
            batch = objects
        self.events += len(batch)
        side_of = SIDES.get
        fractional = self.fractional_timestamps
        host_names, device_names, runtime_names = self.host_names, self._device_names, self._runtime_names
        runtime_append, step_append, data_wait_append = self.runtime.append, self.steps.append, self.data_waits.append
        gpu_step_append, on_a_stream_append = self.gpu_steps.append, self.host_ops_on_a_stream.append
        host_by_thread, host_ops, device_work, gpu_markers = (self.host_by_thread, self.host_ops, self.device_work,
                                                               self.gpu_markers)
        make = tuple.__new__
        skipped = self.skipped
        unread = self.unread_categories
        unread_count = unread.get
        device_skipped = self.device_events_skipped
        device_partly_read = self.device_events_partly_read
        for event in batch:
            ts = event.ts
            whole_ts = type(ts) is int
            if not whole_ts:  # HTA rounds when its ts column is float: a fraction, or a missing ts
                fractional = True
            if type(event) is not Span:
                if type(event) in BEGIN_END_TYPES:  # spans this reader does not pair up: said, not dropped unsaid
                    skipped[BEGIN_END_EVENTS] += 1
                continue
            cat = event.cat
            side = side_of(cat) if type(cat) is str else None  # a list or an object is no category (nor hashable)
            if side is None or side is PASSED_OVER:  # Python frames, the profiler's own spans: passed over
                if side is None and type(cat) is str:  # a category the reader does not know: counted, not read
                    if cat in unread or len(unread) < MAX_UNREAD_CATEGORIES:
                        unread[cat] = unread_count(cat, 0) + 1
                    else:
                        unread[MORE_CATEGORIES] = unread_count(MORE_CATEGORIES, 0) + 1
                elif side is None:  # no category to be read (missing, a number, a list): it may be the GPU's
                    skipped["events with a missing or mistyped cat"] += 1
                    device_skipped[_named_gpu(event)] += 1
                continue
            name = event.name
            dur = event.dur
            whole_dur = type(dur) is int
            # numbers (not NaN, not ±Infinity, which the stdlib reads; not past any clock a profiler writes)
            if type(name) is not str or not ((whole_ts or type(ts) is float) and -1e18 < ts < 1e18) or not (
                    (whole_dur or type(dur) is float) and -1e18 < dur < 1e18):
                skipped["events with a missing or mistyped name, ts or dur"] += 1
                if side in DEVICE_SIDES:
                    device_skipped[_named_gpu(event)] += 1
                continue
            if dur < 0 or dur > MAX_SPAN_US:
                skipped["events with a negative duration" if dur < 0 else SPANS_TOO_LONG] += 1
                if side in DEVICE_SIDES:
                    device_skipped[_named_gpu(event)] += 1
                continue
            # µs as integer ns; a fraction (Kineto writes three decimals) apart from the whole µs, so that large
            # absolute timestamps keep their ns (inline: every event of some traces has one)
            if whole_ts:
                start = ts * 1000
            else:
                whole = int(ts)
                start = whole * 1000 + round((ts - whole) * 1000)
            if whole_dur:
                end = start + dur * 1000
            else:
                whole = int(dur)
                end = start + whole * 1000 + round((dur - whole) * 1000)
            if side is GPU_ANNOTATION:
                if name.startswith(kineto.STEP_PREFIX):
                    gpu_step_append(make(Activity, (start, end, STEP, 0, name, 0)))
                continue
            if side is HOST_OP or side is OP:
                thread = event.tid
                if type(thread) is not int:
                    thread = int_field(thread) or 0
                known_op = host_names.get(name)
                if known_op is None:
                    known_op = host_names[name] = (name, host_op_kind(name))
                name, op_kind = known_op
                args = event.args
                if args is not None and type(args.stream) is int and args.stream != NO_STREAM:
                    on_a_stream_append(make(Activity, (start, end, KERNEL, args.stream, name, 0)))
                if op_kind is None:
                    continue
                activity = make(Activity, (start, end, op_kind, thread, name, 0))
                host_by_thread[thread].append(activity)
                if op_kind == CPU_OP:
                    if side is OP:
                        host_ops[thread].append(activity)
                elif op_kind == STEP:
                    step_append(activity)
                else:
                    data_wait_append(activity)
                continue
            args = event.args
            correlation = args.correlation if args is not None else None
            if type(correlation) is not int:
                correlation = int_field(correlation) or 0
            if side is RUNTIME_CALL:
                thread = event.tid
                if type(thread) is not int:
                    thread = int_field(thread) or 0
                name = runtime_names.setdefault(name, name)
                activity = make(Activity, (start, end, RUNTIME, thread, name, correlation))
                runtime_append(activity)
                host_by_thread[thread].append(activity)
                continue
            device = args.device if args is not None else None
            if type(device) is not int:  # not read as a number: its pid names the GPU, or nothing does
                device = _named_gpu(event)
            stream = args.stream if args is not None else None
            if side is MARKER and (stream is None or stream == NO_STREAM):
                # CUPTI's Event Sync and Context Sync: a host's wait, on no stream (HTA keeps only stream >= 0)
                continue
            if type(stream) is not int:
                stream = int_field(event.tid if stream is None else stream) or 0
            if args is ARGS_NOT_READ and side is not MARKER:
                device_partly_read[device] += 1
            known = device_names.get(name)
            if known is None:
                kind = kineto.device_kind(name) if side == "kernel" else side if side != MARKER else "marker"
                known = device_names[name] = (name, kind)
            name, kind = known
            target = gpu_markers if side is MARKER else device_work
            target[device].append(make(Activity, (start, end, kind, stream, name, correlation)))
        self.fractional_timestamps = fractional


def _named_gpu(event: Any) -> Optional[int]:
    """The GPU a device event names (its args' device, else its pid), or None: for the events read and those
    skipped alike."""
    args = event.args
    device = getattr(args, "device", None)
    return device if type(device) is int else int_field(event.pid if device is None else device)


NOT_OBJECTS = "events that are not JSON objects"

ARGS_NOT_AN_OBJECT = "events whose args is not an object: read without their correlation, device and stream"
SPANS_TOO_LONG = "events longer than a day (a corrupt duration: no profiler records a span that long)"
_TYPED = frozenset({Span, *PHASE_TYPES.values()})  # what the typed decoder gives


def read_trace(path: Path, *, progress: Optional[Callable[[int], None]] = None,
               cancelled: Optional[Cancelled] = None, digest: Optional[json_stream.FileDigest] = None) -> ParsedTrace:
    """One trace file read in one pass into a ParsedTrace; TraceError (one line, naming the file) if it cannot be.
    ``digest``: given every byte of the file as it is read."""
    parsed = ParsedTrace(path=path)
    try:
        add_batch = parsed.add_batch
        for key, value in json_stream.trace_parts(path, progress, cancelled, events_as=Event, digest=digest):
            if key is None:
                add_batch(value)
            elif key in META_KEYS:  # the rest are dropped at once: a hostile file's are never all held
                parsed.meta[key] = value
            elif value is json_stream.UNREADABLE_LOG:
                parsed.unreadable_logs.append(key)
    except TraceError as error:
        if isinstance(error, TraceCancelled) or str(error).startswith(str(path)):
            raise
        raise type(error)(f"{path}: {error}") from None
    if parsed.events == parsed.skipped[NOT_OBJECTS]:  # a list of numbers, say a metrics.json beside the traces
        raise TraceError(f"{path}: no trace events (an empty \"traceEvents\" list, none at all, or none that is a "
                         "JSON object)")
    if not parsed.holds_spans():  # metadata, counters, begin/end marks alone: a report of it would be all n/a
        raise TraceError(f"{path}: {parsed.events:,} events, and no span this reader reads ({parsed.held()})")
    return parsed


def read_head(path: Path, cancelled: Optional[Cancelled] = None) -> tuple[dict[str, Any], bool]:
    """The top-level values of META_KEYS that a trace file holds before its events, read without its events:
    Kineto writes distributedInfo and deviceProperties first, so a folder's files can be told apart by rank
    without reading them (a value written after the events is not seen); and whether it holds trace events at all
    (a JSON object among them: else it is read to its end). TraceError where the head cannot be read."""
    head: dict[str, Any] = {}
    with contextlib.closing(json_stream.trace_parts(path, cancelled=cancelled, events_as=Event)) as parts:
        for key, value in parts:
            if key is None:
                if any(type(item) in _TYPED or type(item) is dict for item in value):
                    return head, True  # the first events: the head is over
                continue
            if key in META_KEYS:
                head[key] = value
    return head, False


def process_rank(meta: dict[str, Any]) -> Optional[int]:
    """The rank a file's process names in its distributedInfo (written under torch.distributed); None without."""
    info = meta.get("distributedInfo")
    return int_field(info.get("rank")) if isinstance(info, dict) else None


# The torch.profiler options that record more per host op, as Kineto writes them beside the events ("with_stack": 1)
COSTLY_PROFILER_OPTIONS = ("with_stack", "record_shapes", "profile_memory", "with_flops")
# The top-level keys beside the events that the reader uses.
META_KEYS = frozenset({"distributedInfo", "deviceProperties", *COSTLY_PROFILER_OPTIONS})


def int_field(value: Any) -> Optional[int]:
    """An integer from a trace field (2021 traces write tids as "stream 7" or "18384"); None if there is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value and abs(value) < 1 << 62:
        return int(value)
    if isinstance(value, str):
        match = _DIGITS.search(value)
        return int(match.group()) if match and len(match.group()) <= 19 else None  # past int64: no id, no index
    return None

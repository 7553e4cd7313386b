"""One profiler trace file read in one pass into activities (``read_trace`` → ``ParsedTrace``); file_ranks sorts
them by rank and GPU.

Formats: Kineto's categories today ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver",
"cpu_op", "user_annotation") and 2021's ("Kernel", "Memcpy", "Memset", "Runtime", "Operator"); NVIDIA's
and ROCm's runtime calls (by category, so "hipLaunchKernel" launches as "cudaLaunchKernel" does). The GPU
of a rank is read from the trace (its device events' ``device``), never assumed to be 0.

One pass, streaming (``json_stream``): events arrive a batch at a time, decoded by msgspec into ``_Event``
Structs that hold only the fields read here, and each is reduced at once to an ``Activity`` (or dropped:
flow arrows, Python frames, instant events); the whole JSON document is never held. Hostile input gives a
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

import msgspec

from workbench.engine import kineto
from workbench.engine.timeline import CPU_OP, DATA_WAIT, KERNEL, RUNTIME, STEP, Activity
from workbench.trace_analysis import json_stream
from workbench.trace_analysis.model import TraceCancelled, TraceError

Cancelled = json_stream.Cancelled

DEVICE_CATEGORIES = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
                     "gpu_memset": "memset", "Memset": "memset"}
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "Driver", "hip_runtime"})
OP_CATEGORIES = frozenset({"cpu_op", "Operator"})
ANNOTATION_CATEGORIES = frozenset({"user_annotation"})
GPU_MARKER_CATEGORIES = frozenset({"cuda_sync"})  # CUPTI's sync records on a stream: HTA counts them as GPU events
# An annotation's span on the GPU: not GPU work, but HTA's filter reads the GPU's ProfilerStep#N (hta_rules).
GPU_ANNOTATION_CATEGORIES = frozenset({"gpu_user_annotation"})
# Categories of spans the reader passes over that are the host's own (Python frames, the profiler's span of the
# trace); any other it does not know may be a device's it does not read (an MTIA's, CUPTI's range profiler's), and
# is counted, up to this many categories (a hostile file may name millions).
HOST_ONLY_CATEGORIES = frozenset({"python_function", "Python", "Trace", "overhead"})
MAX_UNREAD_CATEGORIES = 64
MORE_CATEGORIES = "(more categories)"
# The TensorBoard plugin's data-loading span: enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ (or
# _MultiProcessingDataLoaderIter): the host blocked on the next batch.
DATALOADER_NEXT = re.compile(r"enumerate\(DataLoader\)#.*__next__")
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
    # name → (one copy of it, its kind), host ops and device events apart (a name may be both)
    host_names: dict[str, tuple[str, Optional[str]]] = field(default_factory=dict)
    _device_names: dict[str, tuple[str, str]] = field(default_factory=dict)
    _runtime_names: dict[str, str] = field(default_factory=dict)

    def names_its_rank(self) -> bool:
        """The file says its rank (Kineto's distributedInfo, written under torch.distributed)."""
        return process_rank(self.meta) is not None

    def add_batch(self, batch: list[Any]) -> None:
        """Sort a batch of trace events into the activities (or count why each was skipped). The hot loop of a
        read: millions of events, so it is one loop with the names it uses bound locally, types tested with
        ``type(...) is``, each name classified once, and activities made without a Python-level constructor."""
        if batch and type(batch[0]) is not _Event:  # decoded by the stdlib (the typed decoder refused the batch)
            args_not_objects = sum(1 for item in batch if type(item) is dict and item.get("args") is not None
                                   and type(item["args"]) is not dict)
            if args_not_objects:
                self.partly_read[ARGS_NOT_AN_OBJECT] += args_not_objects
            batch = [_as_event(item) for item in batch]
            objects = [event for event in batch if event is not None]
            if len(objects) < len(batch):
                self.skipped[NOT_OBJECTS] += len(batch) - len(objects)
                self.events += len(batch) - len(objects)
            batch = objects
        self.events += len(batch)
        side_of = _SIDE.get
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
            if event.ph != "X":
                if event.ph in _BEGIN_END:  # spans this reader does not pair up: said, not dropped unsaid
                    skipped[BEGIN_END_EVENTS] += 1
                continue
            cat = event.cat
            side = side_of(cat) if type(cat) is str else None  # a list or an object is no category (nor hashable)
            if side is None or side is _PASSED_OVER:  # Python frames, the profiler's own spans: passed over
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
                if side in _DEVICE_SIDES:
                    device_skipped[_named_gpu(event)] += 1
                continue
            if dur < 0 or dur > MAX_SPAN_US:
                skipped["events with a negative duration" if dur < 0 else SPANS_TOO_LONG] += 1
                if side in _DEVICE_SIDES:
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
            if side is _GPU_ANNOTATION:
                if name.startswith(kineto.STEP_PREFIX):
                    gpu_step_append(make(Activity, (start, end, STEP, 0, name, 0)))
                continue
            if side is _HOST_OP or side is _OP:
                thread = event.tid
                if type(thread) is not int:
                    thread = int_field(thread) or 0
                known_op = host_names.get(name)
                if known_op is None:
                    known_op = host_names[name] = (name, _host_op_kind(name))
                name, op_kind = known_op
                args = event.args
                if args is not None and type(args.stream) is int and args.stream != NO_STREAM:
                    on_a_stream_append(make(Activity, (start, end, KERNEL, args.stream, name, 0)))
                if op_kind is None:
                    continue
                activity = make(Activity, (start, end, op_kind, thread, name, 0))
                host_by_thread[thread].append(activity)
                if op_kind == CPU_OP:
                    if side is _OP:
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
            if side is _RUNTIME:
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
            if side is _MARKER and (stream is None or stream == NO_STREAM):
                # CUPTI's Event Sync and Context Sync: a host's wait, on no stream (HTA keeps only stream >= 0)
                continue
            if type(stream) is not int:
                stream = int_field(event.tid if stream is None else stream) or 0
            if args is _ARGS_NOT_AN_OBJECT and side is not _MARKER:
                device_partly_read[device] += 1
            known = device_names.get(name)
            if known is None:
                kind = kineto.device_kind(name) if side == "kernel" else side if side != _MARKER else "marker"
                known = device_names[name] = (name, kind)
            name, kind = known
            target = gpu_markers if side is _MARKER else device_work
            target[device].append(make(Activity, (start, end, kind, stream, name, correlation)))
        self.fractional_timestamps = fractional


def _named_gpu(event: Any) -> Optional[int]:
    """The GPU a device event names (its args' device, else its pid), or None: for the events read and those
    skipped alike."""
    args = event.args
    device = getattr(args, "device", None)
    return device if type(device) is int else int_field(event.pid if device is None else device)


def _host_op_kind(name: str) -> Optional[str]:
    """A host op's or annotation's kind by its name (None: the profiler's own record, left out)."""
    if name.startswith(kineto.STEP_PREFIX):
        return STEP
    if name == kineto.DATA_WAIT_ANNOTATION or DATALOADER_NEXT.match(name):
        return DATA_WAIT
    if name in kineto.PROFILER_RECORDS:
        return None
    return CPU_OP


NO_STREAM = -1  # the stream CUPTI gives a sync record that waits on no stream (an event's, the context's)
_OP, _HOST_OP, _RUNTIME, _MARKER = "op", "host op", "runtime", "gpu marker"  # _OP: a host op of OP_CATEGORIES
_GPU_ANNOTATION = "gpu annotation"
_PASSED_OVER = "passed over"  # the host's own spans that no figure reads (HOST_ONLY_CATEGORIES)
# Category → how an event of it is read: a device kind ("kernel" is split further by name), or one of the above.
_SIDE: dict[str, str] = {
    **DEVICE_CATEGORIES,
    **{category: _RUNTIME for category in RUNTIME_CATEGORIES},
    **{category: _HOST_OP for category in ANNOTATION_CATEGORIES},
    **{category: _OP for category in OP_CATEGORIES},
    **{category: _MARKER for category in GPU_MARKER_CATEGORIES},
    **{category: _GPU_ANNOTATION for category in GPU_ANNOTATION_CATEGORIES},
    **{category: _PASSED_OVER for category in HOST_ONLY_CATEGORIES},
}


class _Args(msgspec.Struct, gc=False):
    """The fields of an event's ``args`` the reader uses (msgspec skips the rest without building them)."""

    correlation: Any = None
    device: Any = None
    stream: Any = None


NOT_OBJECTS = "events that are not JSON objects"
_BEGIN_END = frozenset({"B", "E"})
# Kineto writes each span as one complete ("X") event; a trace whose spans are begin/end pairs was written otherwise
BEGIN_END_EVENTS = 'events that are begin or end marks ("ph": "B"/"E"; torch.profiler writes spans as "X")'

_ARGS_NOT_AN_OBJECT = _Args()  # an event's args that is not an object (decoded by the stdlib): none of it read
ARGS_NOT_AN_OBJECT = "events whose args is not an object: read without their correlation, device and stream"
_DEVICE_SIDES = frozenset(DEVICE_CATEGORIES.values())
# A span longer than a day is a corrupt duration, not a profiler's record (its buffers hold minutes of events): one
# kernel of 1e15 µs made an input-bound trace read 100 % compute. A bound on the duration alone, not on the trace's
# other spans: a 75 s kernel or a 70 s step with nothing else in it is real, and one event with a corrupt start would
# move any bound taken from the trace's own span.
MAX_SPAN_US = 24 * 3600 * 10**6
SPANS_TOO_LONG = "events longer than a day (a corrupt duration: no profiler records a span that long)"


class _Event(msgspec.Struct, gc=False):
    """The fields of a trace event the reader uses. ``Any``: a mistyped field is read (and counted) as the stdlib
    would read it; an ``args`` that is not an object, or an event that is not one, makes the typed decoder refuse
    the batch, which the stdlib then decodes (``_as_event``)."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    ts: Any = None
    dur: Any = None
    pid: Any = None
    tid: Any = None
    args: Optional[_Args] = None


def _as_event(item: Any) -> Optional[_Event]:
    """An event as the stdlib decoded it (a dict), as an _Event; None where it is not a JSON object."""
    if type(item) is not dict:
        return None
    args = item.get("args")
    return _Event(item.get("ph"), item.get("cat"), item.get("name"), item.get("ts"), item.get("dur"), item.get("pid"),
                  item.get("tid"), _Args(args.get("correlation"), args.get("device"), args.get("stream"))
                  if type(args) is dict else None if args is None else _ARGS_NOT_AN_OBJECT)


def read_trace(path: Path, *, progress: Optional[Callable[[int], None]] = None,
               cancelled: Optional[Cancelled] = None, digest: Optional[json_stream.FileDigest] = None) -> ParsedTrace:
    """One trace file read in one pass into a ParsedTrace; TraceError (one line, naming the file) if it cannot be.
    ``digest``: given every byte of the file as it is read."""
    parsed = ParsedTrace(path=path)
    try:
        add_batch = parsed.add_batch
        for key, value in json_stream.trace_parts(path, progress, cancelled, events_as=_Event, digest=digest):
            if key is None:
                add_batch(value)
            elif key in META_KEYS:  # the rest are dropped at once: a hostile file's are never all held
                parsed.meta[key] = value
    except TraceError as error:
        if isinstance(error, TraceCancelled) or str(error).startswith(str(path)):
            raise
        raise type(error)(f"{path}: {error}") from None
    if parsed.events == parsed.skipped[NOT_OBJECTS]:  # a list of numbers, say a metrics.json beside the traces
        raise TraceError(f"{path}: no trace events (an empty \"traceEvents\" list, none at all, or none that is a "
                         "JSON object)")
    return parsed


def read_head(path: Path, cancelled: Optional[Cancelled] = None) -> tuple[dict[str, Any], bool]:
    """The top-level values of META_KEYS that a trace file holds before its events, read without its events:
    Kineto writes distributedInfo and deviceProperties first, so a folder's files can be told apart by rank
    without reading them (a value written after the events is not seen); and whether it holds trace events at all
    (a JSON object among them: else it is read to its end). TraceError where the head cannot be read."""
    head: dict[str, Any] = {}
    with contextlib.closing(json_stream.trace_parts(path, cancelled=cancelled, events_as=_Event)) as parts:
        for key, value in parts:
            if key is None:
                if any(type(item) is _Event or type(item) is dict for item in value):
                    return head, True  # the first events: the head is over
                continue
            if key in META_KEYS:
                head[key] = value
    return head, False


def process_rank(meta: dict[str, Any]) -> Optional[int]:
    """The rank a file's process names in its distributedInfo (written under torch.distributed); None without."""
    info = meta.get("distributedInfo")
    return int_field(info.get("rank")) if isinstance(info, dict) else None


# The top-level keys beside the events that the reader uses.
META_KEYS = frozenset({"distributedInfo", "deviceProperties"})


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

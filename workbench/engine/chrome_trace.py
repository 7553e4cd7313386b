"""Chrome traces (what the profiler saves, ``*.trace.json.gz``) read back into timeline records, and trimmed.

``records(trace)`` turns a trace's complete events into the record dicts ``kineto.activities`` classifies
(the form the test fixtures hold), so a saved trace can be analysed again without torch:
``breakdown(path)``. ``trim(trace)`` keeps what the breakdown reads (kernels, copies and fills, the
runtime and driver calls that launched them, and the step and data-wait annotations) and drops host ops,
Python frames and flow arrows: a resnet18 window shrinks to a file small enough to commit.
``from_records`` writes records as a Chrome trace (fixtures in Chrome form, and tests of the reader).

Times: Kineto writes ``ts``/``dur`` in microseconds with three decimals, ``ts`` relative to the trace's
``baseTimeNanoseconds``; records hold integer nanoseconds.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Union

from workbench.engine import intervals, kineto, timeline
from workbench.engine.timeline import TimelineBreakdown

# Kineto's categories today, and 2021's capitalised ones (the TensorBoard plugin's sample traces).
DEVICE_CATEGORIES = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
                     "Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset"}
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver", "Runtime")
HOST_CATEGORIES = ("cpu_op", "user_annotation", "python_function", "Operator", *LAUNCH_CATEGORIES)
GPU_LABELS = "gpu_user_annotation"  # Kineto's copy of a host annotation on the GPU row: a label, not work


def load(path: Union[str, Path]) -> dict[str, Any]:
    """A trace file, gzipped or not (read as data: nothing in it runs)."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as file:
        return json.load(file)


def save(trace: Mapping[str, Any], path: Union[str, Path]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as file:
        json.dump(trace, file, separators=(",", ":"))
    return path


def records(trace: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The trace's complete ("X") events of the kinds the timeline reads, as kineto record dicts."""
    base = int(trace.get("baseTimeNanoseconds") or 0)
    result = []
    for event in trace.get("traceEvents", ()):
        category = event.get("cat")
        if event.get("ph") != "X" or category == GPU_LABELS:
            continue
        args = event.get("args") or {}
        device = category in DEVICE_CATEGORIES
        if not device and category not in HOST_CATEGORIES:
            continue  # the profiler's own spans ("Trace"), markers of other kinds
        start = base + round(float(event["ts"]) * 1000)
        correlation = args.get("correlation") if device or category in LAUNCH_CATEGORIES else args.get("External id")
        result.append({
            "name": event.get("name", ""),
            "device_type": "DeviceType.CUDA" if device else "DeviceType.CPU",
            "start_ns": start,
            "end_ns": start + round(float(event.get("dur", 0)) * 1000),
            "device_index": _int(args.get("device", event.get("pid"))) if device else -1,
            "device_resource_id": _int(args.get("stream", event.get("tid"))) if device else _int(event.get("tid")),
            "correlation_id": _int(correlation),
        })
    return result


def from_records(items: Iterable[Mapping[str, Any]], **top: Any) -> dict[str, Any]:
    """Records as a Chrome trace, in Kineto's categories (``top``: more top-level keys, e.g. steps)."""
    items = list(items)
    base = min((int(r["start_ns"]) for r in items), default=0)
    host_labels = {(r["name"], r.get("correlation_id")) for r in items if not _is_device(r)}
    events = []
    for r in items:
        start, end = int(r["start_ns"]), int(r["end_ns"])
        name = str(r["name"])
        event: dict[str, Any] = {"ph": "X", "name": name, "ts": (start - base) / 1000, "dur": (end - start) / 1000}
        correlation = r.get("correlation_id") or 0
        if _is_device(r):
            kind = "memcpy" if name.startswith("Memcpy") else "memset" if name.startswith("Memset") else "kernel"
            labelled = (name, r.get("correlation_id")) in host_labels
            category = GPU_LABELS if labelled else next(c for c, k in DEVICE_CATEGORIES.items() if k == kind)
            event.update(cat=category, pid=r.get("device_index", 0), tid=r.get("device_resource_id", 0),
                         args={"device": r.get("device_index", 0), "stream": r.get("device_resource_id", 0),
                               "correlation": correlation})
        else:
            kind = kineto.host_kind(name)
            if kind == timeline.RUNTIME:
                category = "cuda_runtime" if name.startswith("cuda") else "cuda_driver"
            elif kind in (timeline.STEP, timeline.DATA_WAIT) or name.startswith(timeline.ANNOTATION_PREFIX):
                category = "user_annotation"
            else:
                category = "cpu_op"
            key = "correlation" if category in LAUNCH_CATEGORIES else "External id"
            event.update(cat=category, pid=0, tid=r.get("device_resource_id", 0), args={key: correlation})
        events.append(event)
    return {"schemaVersion": 1, "baseTimeNanoseconds": base, "displayTimeUnit": "ms", "traceEvents": events, **top}


def trim(trace: Mapping[str, Any]) -> dict[str, Any]:
    """The trace with only what the timeline breakdown reads: device work, its launches, and the step and
    data-wait annotations (metadata rows kept, so Perfetto still names the processes and streams)."""
    def kept(event: Mapping[str, Any]) -> bool:
        if event.get("ph") == "M":
            return True
        if event.get("ph") != "X":
            return False
        category = event.get("cat")
        if category in DEVICE_CATEGORIES or category in LAUNCH_CATEGORIES:
            return True
        name = str(event.get("name", ""))
        return category == "user_annotation" and (name.startswith(kineto.STEP_PREFIX)
                                                  or name.startswith(timeline.ANNOTATION_PREFIX))

    trimmed = {key: value for key, value in trace.items() if key != "traceEvents"}
    trimmed["traceEvents"] = [event for event in trace.get("traceEvents", ()) if kept(event)]
    return trimmed


def breakdown(
    source: Union[str, Path, Mapping[str, Any]],
    device_index: Optional[int] = None,
    steps: Optional[int] = None,
    timed_data_wait_seconds: Optional[float] = None,
    window: Optional[intervals.Interval] = None,
) -> TimelineBreakdown:
    """A trace's timeline breakdown, as the sampler made it: over its steps (or ``window``), with the loop's
    own timing of its waits for data where the trace holds no data-wait annotations (a GPU timeline window).
    ``device_index`` None: the trace's own GPU where it has one (a rank on device 1 keeps its work), else all."""
    trace = source if isinstance(source, Mapping) else load(source)
    items = records(trace)
    if device_index is None:
        devices = {r["device_index"] for r in items if _is_device(r)}
        device_index = devices.pop() if len(devices) == 1 else None
    activities = kineto.activities(items, device_index)
    result = timeline.analyse(activities, window=window, steps=steps)
    if timed_data_wait_seconds is not None and not any(a.kind == timeline.DATA_WAIT for a in activities):
        result = timeline.with_timed_data_wait(result, timed_data_wait_seconds)
    return result


def _is_device(record: Mapping[str, Any]) -> bool:
    return str(record.get("device_type")).rsplit(".", 1)[-1].upper() == "CUDA"


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0

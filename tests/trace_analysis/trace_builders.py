"""Small hand-made profiler traces, in Kineto's Chrome form (times in µs), for the reader's tests."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any


def kernel(name: str, ts: float, dur: float, correlation: int, *, stream: int = 7, device: int = 0,
           cat: str = "kernel") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur,
            "args": {"device": device, "stream": stream, "correlation": correlation}}


def runtime(name: str, ts: float, dur: float, correlation: int = 0, *, tid: int = 1,
            cat: str = "cuda_runtime") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": correlation}}


def op(name: str, ts: float, dur: float, *, tid: int = 1, cat: str = "cpu_op") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def step(number: int, ts: float, dur: float, *, cat: str = "user_annotation") -> dict[str, Any]:
    return op(f"ProfilerStep#{number}", ts, dur, cat=cat)


def launched(name: str, launch_at: float, start: float, dur: float, correlation: int, **kernel_args: Any
             ) -> list[dict[str, Any]]:
    """A kernel and the cudaLaunchKernel (5 µs) that put it on the GPU."""
    return [runtime("cudaLaunchKernel", launch_at, 5, correlation), kernel(name, start, dur, correlation, **kernel_args)]


def trace(events: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    return {"schemaVersion": 1, **top, "traceEvents": events}


def write(path: Path, content: Any) -> Path:
    """``content`` as JSON (gzipped where the name ends in .gz); a str is written as it is."""
    text = content if isinstance(content, str) else json.dumps(content)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as file:
            file.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def input_bound_steps(steps: int = 3, data_us: float = 6000, step_us: float = 10000,
                      loader: str = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
                      ) -> list[dict[str, Any]]:
    """Steps that each wait ``data_us`` in the DataLoader, then launch one kernel that runs to the step's end."""
    events: list[dict[str, Any]] = []
    for index in range(steps):
        begin = index * step_us
        events.append(step(index + 1, begin, step_us))
        events.append(op(loader, begin, data_us))
        events += launched("void gemm_kernel<float>()", begin + data_us, begin + data_us + 10,
                           step_us - data_us - 20, correlation=index + 1)
    return events

"""Profiler traces from any PyTorch program, read into per-rank events: files, gzip, folders of ranks, formats.

``read_report(path)`` takes a ``torch.profiler`` trace (``.json``, ``.json.gz``, ``*.pt.trace.json.gz``) or a
folder of them (one file per rank, as HTA takes it) and returns a ``TraceReport`` with one ``RankReport`` per
rank (per GPU where one file holds several).

Formats: Kineto's categories today ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver",
"cpu_op", "user_annotation") and 2021's ("Kernel", "Memcpy", "Memset", "Runtime", "Operator"); NVIDIA's
and ROCm's runtime calls (by category, so "hipLaunchKernel" launches as "cudaLaunchKernel" does). The GPU
of a rank is read from the trace (its device events' ``device``), never assumed to be 0.

One pass, streaming: the text is read in chunks and the ``traceEvents`` array is decoded a batch of events
at a time, each event reduced at once to an ``Activity``; the whole JSON document is never held. Hostile
input gives a ``TraceError`` with one line (or a note in the report naming what was skipped), never a hang:
not a regular file (FIFO, device) is refused before opening; gzip is checked for truncation and for
decompressing past a limit (a bomb); nesting too deep for the decoder, an event too large, mistyped or
missing fields, negative durations each have their line.
"""

from __future__ import annotations

import gc
import gzip
import io
import json
import os
import re
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Optional, TypeGuard, Union

from workbench.engine import kineto
from workbench.engine.timeline import CPU_OP, DATA_WAIT, RUNTIME, STEP, Activity
from workbench.regular_file import folder_problem, kind_problem, regular_file_problem
from workbench.trace_analysis import ranks
from workbench.trace_analysis.model import RankReport, TraceCancelled, TraceError, TraceReport

Progress = Callable[[int, int], None]
Cancelled = Callable[[], bool]

# Limits (module-level so tests can lower them): a trace past these is refused with its size, not read for minutes.
MAX_TRACE_BYTES = 4 * 1024**3  # uncompressed text, whether the file is gzipped or not
BOMB_RATIO = 200  # Kineto JSON gzips 10–25×; past this (beyond BOMB_CHECK_BYTES) it is a bomb, not a trace
BOMB_CHECK_BYTES = 64 * 1024**2
MAX_EVENT_CHARS = 64 * 1024**2  # one event (or top-level value) larger than this is not a profiler's
CHUNK_CHARS = 4 * 1024**2

TRACE_SUFFIXES = (".json", ".json.gz")
DEVICE_CATEGORIES = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
                     "gpu_memset": "memset", "Memset": "memset"}
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "Driver", "hip_runtime"})
OP_CATEGORIES = frozenset({"cpu_op", "Operator"})
ANNOTATION_CATEGORIES = frozenset({"user_annotation"})
GPU_MARKER_CATEGORIES = frozenset({"cuda_sync"})  # CUPTI's sync records on a stream: HTA counts them as GPU events
# The TensorBoard plugin's data-loading span: enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ (or
# _MultiProcessingDataLoaderIter): the host blocked on the next batch.
DATALOADER_NEXT = re.compile(r"enumerate\(DataLoader\)#.*__next__")
_EVENT_BOUNDARY = re.compile(r"\}\s*,\s*(?=\{)")
_DIGITS = re.compile(r"-?\d+")
_SPACE = re.compile(r"[ \t\r\n]*")


def read_report(
    path: Union[str, Path],
    *,
    rank: Optional[int] = None,
    progress: Optional[Progress] = None,
    cancelled: Optional[Cancelled] = None,
) -> TraceReport:
    """The report of a trace file or a folder of rank files. TraceError (one line) where it cannot be read;
    TraceCancelled once ``cancelled()`` says so; ``progress(bytes_read, bytes_total)`` as it reads."""
    # The cyclic collector is paused while millions of events are decoded and kept (none of them forms a
    # cycle): its full passes over the growing heap cost 20–25 % of the CPU on a 300 MB trace (measured:
    # 20.3–22.2 s with it, 16.5 s without). Reference counting still frees everything as usual.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _read_report(Path(path).expanduser(), rank, progress, cancelled)
    finally:
        if collecting:
            gc.enable()


def _read_report(path: Path, rank: Optional[int], progress: Optional[Progress],
                 cancelled: Optional[Cancelled]) -> TraceReport:
    files, notes = trace_files(path)
    sizes = [os.stat(file).st_size for file in files]
    total = sum(sizes)
    done = 0
    reports: list[RankReport] = []
    unreadable: list[str] = []
    for position, (file, size) in enumerate(zip(files, sizes)):
        def file_progress(read: int, _offset: int = done) -> None:
            if progress is not None:
                progress(_offset + read, total)

        try:
            parsed = read_trace(file, progress=file_progress, cancelled=cancelled)
        except TraceCancelled:
            raise
        except TraceError as error:
            if len(files) == 1:
                raise
            unreadable.append(str(error))  # one bad rank file: the others are still worth reading
            done += size
            continue
        fallback = _rank_from_name(file.name, position) if len(files) > 1 else 0
        for events in parsed.ranks(fallback):
            if cancelled is not None and cancelled():
                raise TraceCancelled("reading cancelled")
            reports.append(ranks.analyse(events))
        del parsed
        done += size
    if not reports:
        raise TraceError(f"{path}: no rank file could be read (first: {unreadable[0]})")
    notes.extend(f"left out: {line}" for line in unreadable)
    if progress is not None:
        progress(total, total)
    if len(files) > 1:
        seen = Counter(r.rank for r in reports)
        twice = sorted(r for r, count in seen.items() if count > 1)
        if twice:
            notes.append(f"ranks {', '.join(map(str, twice))} appear in more than one file")
    if rank is not None:
        chosen = tuple(r for r in reports if r.rank == rank)
        if not chosen:
            raise TraceError(f"{path}: no rank {rank} (ranks: {', '.join(str(r.rank) for r in reports) or 'none'})")
        reports = list(chosen)
    return TraceReport(path=str(path), ranks=tuple(sorted(reports, key=lambda r: r.rank)), notes=tuple(notes),
                       files=tuple(str(file) for file in files))


def trace_files(path: Path) -> tuple[list[Path], list[str]]:
    """The trace files a path names: itself, or a folder's ``*.json`` / ``*.json.gz`` files sorted by rank; and
    notes on a folder's entries left out (a FIFO or a loop among them is never opened)."""
    if folder_problem(path) is None:
        named = sorted((p for p in path.iterdir() if p.name.endswith(TRACE_SUFFIXES) and not p.name.startswith(".")),
                       key=lambda p: (_rank_from_name(p.name, 1 << 30), p.name))
        files, notes = [], []
        for candidate in named:
            problem = regular_file_problem(candidate)
            if problem is None:
                files.append(candidate)
            else:
                notes.append(f"left out: {candidate.name} {problem}")
        if not files:
            raise TraceError(f"{path}: the folder holds no readable trace files (*.json, *.json.gz)")
        return files, notes
    problem = regular_file_problem(path)
    if problem is not None:
        raise TraceError(f"{path} {problem}")
    return [path], []


def _rank_from_name(name: str, default: int) -> int:
    match = re.search(r"rank[-_]?(\d+)", name, re.IGNORECASE)
    return int(match.group(1)) if match else default


# -- one file ------------------------------------------------------------------------------------------------


@dataclass
class ParsedTrace:
    """One file's events, sorted into activities; ``meta`` holds the top-level keys other than traceEvents."""

    path: Path
    meta: dict[str, Any] = field(default_factory=dict)
    device_work: dict[Optional[int], list[Activity]] = field(default_factory=lambda: defaultdict(list))
    gpu_markers: dict[Optional[int], list[Activity]] = field(default_factory=lambda: defaultdict(list))
    host: list[Activity] = field(default_factory=list)
    host_ops: dict[int, list[Activity]] = field(default_factory=lambda: defaultdict(list))
    skipped: Counter = field(default_factory=Counter)  # reason → events skipped
    events: int = 0
    fractional_timestamps: bool = False
    # name → (one copy of it, its kind), host ops and device events apart (a name may be both)
    _host_names: dict[str, tuple[str, Optional[str]]] = field(default_factory=dict)
    _device_names: dict[str, tuple[str, str]] = field(default_factory=dict)
    _runtime_names: dict[str, str] = field(default_factory=dict)

    def ranks(self, fallback_rank: int) -> list[ranks.RankEvents]:
        """One RankEvents per GPU found in the file (one, usually); a CPU-only trace gives one without device work."""
        info = self.meta.get("distributedInfo")
        rank = _int(info.get("rank")) if isinstance(info, dict) else None
        base_rank = rank if rank is not None else fallback_rank
        notes = [f"{count:,} {reason}: skipped" for reason, count in sorted(self.skipped.items())]
        work = dict(self.device_work)
        markers = dict(self.gpu_markers)
        if None in work or None in markers:  # device events without a device index
            known = sorted(index for index in work if index is not None)
            if len(known) <= 1:  # one GPU (or none named): they are its events
                target = known[0] if known else 0
                work.setdefault(target, []).extend(work.pop(None, []))
                markers.setdefault(target, []).extend(markers.pop(None, []))
            else:
                count = len(work.pop(None, [])) + len(markers.pop(None, []))
                notes.append(f"{count:,} device events name no GPU while the file holds several: left out")
        indices = sorted(index for index in work if index is not None and work[index])
        if len(indices) > 1:
            notes.append(f"this file holds {len(indices)} GPUs ({', '.join(f'cuda:{i}' for i in indices)}): "
                         "one report per GPU, ranked by device index")
        host_ops = {thread: sorted(ops, key=lambda a: (a.start_ns, -a.end_ns)) for thread, ops in self.host_ops.items()}
        if not indices:
            return [ranks.RankEvents(rank=base_rank, device_index=None, device=self._device_name(None),
                                     host=self.host, host_ops_by_thread=host_ops, notes=notes)]
        result = []
        for position, index in enumerate(indices):
            result.append(ranks.RankEvents(
                rank=base_rank if len(indices) == 1 else base_rank + position,
                device_index=index,
                device=self._device_name(index),
                device_work=sorted(work[index], key=lambda a: a.start_ns),
                gpu_markers=markers.get(index, []),
                host=self.host,
                host_ops_by_thread=host_ops,
                notes=list(notes),
                fractional_timestamps=self.fractional_timestamps,
            ))
        return result

    def _device_name(self, index: Optional[int]) -> str:
        properties = self.meta.get("deviceProperties")
        if isinstance(properties, list):
            named = [p for p in properties if isinstance(p, dict) and isinstance(p.get("name"), str)]
            match = [p["name"] for p in named if _int(p.get("id")) == index]
            if match:
                return str(match[0])
            if len(named) == 1:  # one GPU visible to the process (its index remapped by CUDA_VISIBLE_DEVICES)
                return str(named[0]["name"])
        return f"cuda:{index}" if index is not None else "unknown"

    def add(self, event: Any) -> None:
        """Sort one trace event into the activities (or count why it was skipped). The hot loop of a read:
        millions of calls, so types are tested with ``type(...) is`` and each name is classified once."""
        self.events += 1
        try:
            ts = event.get("ts")
            phase = event.get("ph")
        except AttributeError:
            self.skipped["events that are not JSON objects"] += 1
            return
        if type(ts) is not int:  # HTA rounds when its ts column is float: a fraction, or a missing ts
            self.fractional_timestamps = True
        if phase != "X":
            return
        side = _SIDE.get(event.get("cat"))
        if side is None:
            return  # Python frames, the profiler's own spans, GPU copies of annotations, flow arrows
        name = event.get("name")
        dur = event.get("dur")
        if type(name) is not str or not _is_number(ts) or not _is_number(dur):
            self.skipped["events with a missing or mistyped name, ts or dur"] += 1
            return
        if dur < 0:
            self.skipped["events with a negative duration"] += 1
            return
        start = ts * 1000 if type(ts) is int else _ns(ts)
        end = start + (dur * 1000 if type(dur) is int else _ns(dur))
        args = event.get("args")
        if type(args) is not dict:
            args = {}
        if side is _HOST_OP:
            thread = _int(event.get("tid")) or 0
            known_op = self._host_names.get(name)
            if known_op is None:
                known_op = self._host_names[name] = (name, _host_op_kind(name))
            name, op_kind = known_op
            if op_kind is None:
                return
            activity = Activity(start, end, op_kind, thread, name, 0)
            self.host.append(activity)
            if op_kind == CPU_OP and event.get("cat") in OP_CATEGORIES:
                self.host_ops[thread].append(activity)
            return
        correlation = args.get("correlation")
        if type(correlation) is not int:
            correlation = _int(correlation) or 0
        if side is _RUNTIME:
            name = self._runtime_names.setdefault(name, name)
            self.host.append(Activity(start, end, RUNTIME, _int(event.get("tid")) or 0, name, correlation))
            return
        device = args.get("device", event.get("pid"))
        if type(device) is not int:
            device = _int(device)
        stream = args.get("stream", event.get("tid"))
        if type(stream) is not int:
            stream = _int(stream) or 0
        known = self._device_names.get(name)
        if known is None:
            kind = kineto.device_kind(name) if side == "kernel" else side if side != _MARKER else "marker"
            known = self._device_names[name] = (name, kind)
        name, kind = known
        target = self.gpu_markers if side is _MARKER else self.device_work
        target[device].append(Activity(start, end, kind, stream, name, correlation))


def _host_op_kind(name: str) -> Optional[str]:
    """A host op's or annotation's kind by its name (None: the profiler's own record, left out)."""
    if name.startswith(kineto.STEP_PREFIX):
        return STEP
    if name == kineto.DATA_WAIT_ANNOTATION or DATALOADER_NEXT.match(name):
        return DATA_WAIT
    if name in kineto.PROFILER_RECORDS:
        return None
    return CPU_OP


_HOST_OP, _RUNTIME, _MARKER = "host op", "runtime", "gpu marker"
# Category → how an event of it is read: a device kind ("kernel" is split further by name), or one of the above.
_SIDE: dict[str, str] = {
    **DEVICE_CATEGORIES,
    **{category: _RUNTIME for category in RUNTIME_CATEGORIES},
    **{category: _HOST_OP for category in OP_CATEGORIES | ANNOTATION_CATEGORIES},
    **{category: _MARKER for category in GPU_MARKER_CATEGORIES},
}


def read_trace(path: Path, *, progress: Optional[Callable[[int], None]] = None,
               cancelled: Optional[Cancelled] = None) -> ParsedTrace:
    """One trace file read in one pass into a ParsedTrace; TraceError (one line, naming the file) if it cannot be."""
    parsed = ParsedTrace(path=path)
    try:
        with _open_text(path) as (text, raw):
            for key, value in _top_level(text, raw, progress, cancelled):
                if key is None:
                    parsed.add(value)
                else:
                    parsed.meta[key] = value
    except TraceError as error:
        if isinstance(error, TraceCancelled) or str(error).startswith(str(path)):
            raise
        raise type(error)(f"{path}: {error}") from None
    if parsed.events == 0:
        raise TraceError(f"{path}: no trace events (an empty \"traceEvents\" list, or none at all)")
    return parsed


class _CountingReader(io.RawIOBase):
    """The file's bytes, counted as they are read (progress and the gzip ratio are over the file's bytes)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self.raw.readinto(buffer)  # type: ignore[attr-defined]
        self.count += n or 0
        return n or 0


class _open_text:
    """The file as UTF-8 text, gunzipped when it is gzip (by its magic bytes, whatever its name)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> tuple[io.TextIOWrapper, _CountingReader]:
        try:
            descriptor = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError as error:
            raise TraceError(f"cannot be opened ({(error.strerror or str(error)).lower()})") from None
        self.file = os.fdopen(descriptor, "rb", buffering=0)
        problem = kind_problem(os.fstat(descriptor).st_mode)
        if problem is not None:
            self.file.close()
            raise TraceError(problem)
        size = os.fstat(descriptor).st_size
        magic = self.file.read(2)
        self.file.seek(0)
        counting = _CountingReader(self.file)
        buffered = io.BufferedReader(counting, buffer_size=1 << 20)
        if magic == b"\x1f\x8b":
            stream: BinaryIO = gzip.GzipFile(fileobj=buffered, mode="rb")  # type: ignore[assignment]
        else:
            if size > MAX_TRACE_BYTES:
                self.file.close()
                raise TraceError(f"is {size / 1024**3:.1f} GB, past the reader's limit of "
                                 f"{MAX_TRACE_BYTES / 1024**3:.1f} GB")
            stream = buffered
        self.text = io.TextIOWrapper(stream, encoding="utf-8", errors="strict")
        self.counting = counting
        return self.text, counting

    def __exit__(self, *exc: Any) -> None:
        try:
            self.text.close()
        except Exception:  # closing a stream that failed to decode can raise again: the first error is the one
            pass
        self.file.close()


def _top_level(text: io.TextIOWrapper, raw: _CountingReader, progress: Optional[Callable[[int], None]],
               cancelled: Optional[Cancelled]) -> Iterator[tuple[Optional[str], Any]]:
    """(key, value) for each top-level key but traceEvents, and (None, event) for each event, in file order."""
    reader = _Buffer(text, raw, progress, cancelled)
    first = reader.peek_nonspace()
    if first == "[":  # Chrome's JSON Array Format: the events alone
        reader.pos += 1
        yield from ((None, event) for event in reader.array_items())
        return
    if first != "{":
        raise TraceError(f"is not a JSON trace (it starts with {reader.sample()!r})")
    reader.pos += 1
    while True:
        c = reader.peek_nonspace()
        if c == "}":
            reader.pos += 1
            break
        if c == ",":
            reader.pos += 1
            continue
        key = reader.value()
        if not isinstance(key, str):
            raise TraceError("is not a JSON trace (a top-level key is not a string)")
        if reader.peek_nonspace() != ":":
            raise TraceError("is not valid JSON (a top-level key without ':')")
        reader.pos += 1
        if key == "traceEvents":
            if reader.peek_nonspace() != "[":
                raise TraceError("\"traceEvents\" is not a list")
            reader.pos += 1
            yield from ((None, event) for event in reader.array_items())
        else:
            yield key, reader.value()
    if reader.peek_nonspace() != "":
        raise TraceError("is not valid JSON (text after the trace's closing brace)")


class _Buffer:
    """A window on the text being read: decodes values at ``pos``, refilling from the stream as needed."""

    def __init__(self, text: io.TextIOWrapper, raw: _CountingReader, progress: Optional[Callable[[int], None]],
                 cancelled: Optional[Cancelled]) -> None:
        self.text, self.raw, self.progress, self.cancelled = text, raw, progress, cancelled
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.chars = 0  # characters read from the stream
        self.chars_before = 0  # characters dropped from the buffer's front (positions in messages are in the file)
        self.decoder = json.JSONDecoder()

    def fill(self) -> bool:
        """Read another chunk (keeping what is not decoded yet); False at the end of the text."""
        if self.eof:
            return False
        if self.cancelled is not None and self.cancelled():
            raise TraceCancelled("reading cancelled")
        try:
            chunk = self.text.read(CHUNK_CHARS)
        except EOFError:
            raise TraceError("the gzip stream ends early (a truncated file)") from None
        except (gzip.BadGzipFile, zlib.error) as error:
            raise TraceError(f"is not readable gzip ({error})") from None
        except UnicodeDecodeError:
            raise TraceError("is not UTF-8 text (not a JSON trace)") from None
        except OSError as error:
            raise TraceError(f"cannot be read ({(error.strerror or str(error)).lower()})") from None
        self.chars += len(chunk)
        if self.chars > MAX_TRACE_BYTES:
            raise TraceError(f"decompresses to more than {MAX_TRACE_BYTES / 1024**3:.1f} GB, the reader's limit "
                             "(a gzip bomb, or a trace too large to read)")
        if self.chars > BOMB_CHECK_BYTES and self.raw.count and self.chars > BOMB_RATIO * self.raw.count:
            raise TraceError(f"decompresses {self.chars / self.raw.count:,.0f}× its size (a gzip bomb: "
                             f"profiler traces compress 10–25×)")
        if self.progress is not None:
            self.progress(self.raw.count)
        if not chunk:
            self.eof = True
            return False
        self.chars_before += self.pos
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return True

    def peek_nonspace(self) -> str:
        while True:
            self.pos = _SPACE.match(self.buf, self.pos).end()  # type: ignore[union-attr]  # (matches "" too)
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.fill():
                return ""

    def sample(self) -> str:
        return self.buf[self.pos:self.pos + 20]

    def value(self) -> Any:
        """One JSON value at ``pos`` (refilling until it is whole)."""
        self.peek_nonspace()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as error:
                # Only a value cut by the buffer's end is worth more text: an error inside it is final.
                incomplete = error.pos >= len(self.buf) - 1 or error.msg.startswith("Unterminated string")
                if not incomplete:
                    raise TraceError(f"is not valid JSON ({error.msg} at character {self.chars_before + error.pos:,})"
                                     ) from None
                if len(self.buf) - self.pos > MAX_EVENT_CHARS:
                    raise TraceError(f"holds a value larger than {MAX_EVENT_CHARS // 1024**2} MB, "
                                     "not a profiler event") from None
                if self.fill():
                    continue
                raise TraceError("ends early (a truncated trace)") from None
            except RecursionError:
                raise TraceError("is nested too deeply to be a profiler trace") from None
            self.pos = end
            return value

    def array_items(self) -> Iterator[Any]:
        """The items of the array whose '[' was just passed, a batch at a time where the text allows."""
        while True:
            c = self.peek_nonspace()
            if c == "]":
                self.pos += 1
                return
            if c == ",":
                self.pos += 1
                continue
            if c == "":
                raise TraceError("ends early (a truncated trace)")
            batch = self._batch()
            if batch is not None:
                yield from batch
                continue
            yield self.value()

    def _batch(self) -> Optional[list[Any]]:
        """The whole events between ``pos`` and the last event boundary in the buffer, decoded at once (C
        speed); None where no boundary is found or the cut is not one (then events are decoded one by one)."""
        tail_from = max(self.pos, len(self.buf) - 65536)
        last = None
        for last in _EVENT_BOUNDARY.finditer(self.buf, tail_from):
            pass
        if last is None or last.start() <= self.pos:
            return None
        try:
            items = json.loads("[" + self.buf[self.pos:last.start() + 1] + "]")
        except RecursionError:
            raise TraceError("is nested too deeply to be a profiler trace") from None
        except json.JSONDecodeError:
            return None  # the cut fell inside a string or a nested value: decode one by one instead
        self.pos = last.end()
        return items


def _is_number(value: Any) -> TypeGuard[Union[int, float]]:
    # not NaN, not ±Infinity (json reads both), not past any clock a profiler writes
    return (type(value) is int or type(value) is float) and -1e18 < value < 1e18


def _ns(microseconds: Union[int, float]) -> int:
    """Kineto's µs (three decimals) as integer ns, without float error on large absolute timestamps."""
    if isinstance(microseconds, int):
        return microseconds * 1000
    whole = int(microseconds)
    return whole * 1000 + round((microseconds - whole) * 1000)


def _int(value: Any) -> Optional[int]:
    """An integer from a trace field (2021 traces write tids as "stream 7" or "18384"); None if there is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value and abs(value) < 1 << 62:
        return int(value)
    if isinstance(value, str):
        match = _DIGITS.search(value)
        return int(match.group()) if match else None
    return None

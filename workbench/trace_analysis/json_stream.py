"""A profiler trace's JSON, streamed: its top-level keys, and its ``traceEvents`` a batch at a time.

The text is read in chunks (``CHUNK_CHARS``); the events between the start of the buffer and the last event
boundary in it (the last comma, where items are not objects) are decoded in one call of a C decoder: msgspec's,
straight into the caller's ``events_as`` type (a list of Structs holding only the fields it reads; the rest is
skipped in C, so no dict is built per event), where one is given. Where that decoder refuses a batch (a cut that
is not a boundary, or values only the stdlib reads: NaN, an event that is not an object, a mistyped ``args``) the
stdlib's decoder takes it, as dicts; where that fails too, the cut fell inside a string or a nested value (which
is how a false cut is told from a true one) and the events up to it are decoded one value at a time, once.
Defences, each a ``TraceError`` with one line: not UTF-8, not JSON (the first bad chunk ends the read; text after
the events), truncated or corrupt gzip, a gzip bomb (past ``BOMB_CHECK_BYTES`` at more than ``BOMB_RATIO``× the
compressed bytes), a file past ``MAX_TRACE_BYTES`` (by its size before reading, or as it inflates), one event past
``MAX_EVENT_CHARS`` or a value beside the events past ``MAX_META_CHARS``, ``traceEvents`` twice, a number past
Python's 4,300 digits, nesting too deep for the decoder; ``cancelled()`` is asked before each chunk. Where a
``FileDigest`` is given, every byte read is hashed into it (the record of an opened trace is of these bytes).
One exception: Kineto's own log lines (``KINETO_LOG_KEYS``), which it wrote beside the events unescaped, are passed
over line by line where they are not JSON (``UNREADABLE_LOG``), the rest of the file read as usual.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Callable, Generator, Iterator, Optional

import msgspec

from workbench.regular_file import kind_problem
from workbench.trace_analysis.model import TraceCancelled, TraceError

Cancelled = Callable[[], bool]

# Limits (module-level so tests can lower them): a trace past these is refused with its size, not read for minutes.
MAX_TRACE_BYTES = 4 * 1024**3  # uncompressed text, whether the file is gzipped or not
BOMB_RATIO = 200  # Kineto JSON gzips 10–25×; past this (beyond BOMB_CHECK_BYTES) it is a bomb, not a trace
BOMB_CHECK_BYTES = 64 * 1024**2
MAX_EVENT_CHARS = 64 * 1024**2  # one event larger than this is not a profiler's
# A top-level value beside the events (deviceProperties, distributedInfo, …) is a few KB: past this it is not a
# profiler's, and decoding it whole would hold many times its size.
MAX_META_CHARS = 4 * 1024**2
# 1 MB: a chunk and its batch stay in memory the allocator reuses (4 MB ones cost ~70,000 page faults per 280 MB
# read, 15 % of the decoding time), and cancellation is asked every ~4,500 events
CHUNK_CHARS = 1024**2

# PyTorch's execution trace (torch.profiler.ExecutionTraceObserver) holds its ops under this key, and no events.
EXECUTION_TRACE_KEY = "nodes"
# Kineto's log lines, by level: until mid-2026 (its non-glog builds, PyPI's torch among them) it wrote the ones
# logged while tracing after the events, one level a line, "ERROR": ["…", …], dropping only newlines: a quote or a
# tab in a message made the file invalid JSON after every event (kineto #1453). No figure reads them.
KINETO_LOG_KEYS = frozenset({"VERBOSE", "INFO", "WARNING", "STAGE", "ERROR"})

UNREADABLE_LOG = object()  # the value given for a KINETO_LOG_KEYS line that is not JSON (passed over)
_TAIL_CHARS = 65536  # the end of the buffer searched for the last event boundary
_EVENT_BOUNDARY = re.compile(r"\}\s*,\s*(?=\{)")
_SPACE = re.compile(r"[ \t\r\n]*")


class FileDigest:
    """The sha256 of a file's bytes as they are read, and how many there were."""

    def __init__(self) -> None:
        self.sha256 = hashlib.sha256()
        self.size_bytes = 0

    def update(self, data: memoryview) -> None:
        self.sha256.update(data)
        self.size_bytes += data.nbytes


class _CountingReader(io.RawIOBase):
    """The file's bytes, counted as they are read (progress and the gzip ratio are over the file's bytes), and
    hashed where a ``digest`` is given (the fingerprint of the very bytes read, not of a second read that a file
    rewritten meanwhile would answer differently)."""

    def __init__(self, raw: BinaryIO, digest: Optional[FileDigest] = None) -> None:
        self.raw = raw
        self.count = 0
        self.digest = digest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self.raw.readinto(buffer)  # type: ignore[attr-defined]
        if n and self.digest is not None:
            with memoryview(buffer) as view:
                self.digest.update(view[:n])
        self.count += n or 0
        return n or 0

    def drain(self) -> None:
        """Read the rest of the file (the digest then covers all of it; a trace's text ends at its last byte)."""
        while self.read(1 << 20):
            pass


class _open_text:
    """The file as UTF-8 text, gunzipped when it is gzip (by its magic bytes, whatever its name)."""

    def __init__(self, path: Path, digest: Optional[FileDigest] = None) -> None:
        self.path = path
        self.digest = digest

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
        counting = _CountingReader(self.file, self.digest)
        buffered = io.BufferedReader(counting, buffer_size=1 << 20)
        if magic == b"\x1f\x8b":
            stream: BinaryIO = gzip.GzipFile(fileobj=buffered, mode="rb")  # type: ignore[assignment]
        else:
            if size > MAX_TRACE_BYTES:
                self.file.close()
                raise TraceError(f"is {size / 1024**3:.1f} GB, past the reader's limit of "
                                 f"{MAX_TRACE_BYTES / 1024**3:.1f} GB")
            stream = buffered
        # utf-8-sig: a byte-order mark that an editor saved in front is passed over, as JSON readers allow
        self.text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="strict")
        self.counting = counting
        return self.text, counting

    def __exit__(self, *exc: Any) -> None:
        try:
            self.text.close()
        except Exception:  # closing a stream that failed to decode can raise again: the first error is the one
            pass
        self.file.close()


def _top_level(text: io.TextIOWrapper, raw: _CountingReader, progress: Optional[Callable[[int], None]],
               cancelled: Optional[Cancelled], events_as: Any) -> Iterator[tuple[Optional[str], Any]]:
    """(key, value) for each top-level key but traceEvents, and (None, [events]) for each batch of events, in file
    order (batches: one generator step per event would cost more than the event)."""
    reader = _Buffer(text, raw, progress, cancelled, events_as)
    first = reader.peek_nonspace()
    if first == "[":  # Chrome's JSON Array Format: the events alone
        reader.pos += 1
        yield from ((None, batch) for batch in reader.array_batches())
        if reader.peek_nonspace() != "":
            raise TraceError("is not valid JSON (text after the events' closing bracket)")
        return
    if first == "":
        raise TraceError("is empty (no JSON in it)" if reader.chars == 0 else "holds only white space (no JSON)")
    if first != "{":
        raise TraceError(f"is not a JSON trace (it starts with {reader.sample()!r})")
    reader.pos += 1
    events_read = False
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
            if events_read:  # a JSON decoder would keep one of the two; which one a profiler meant is not known
                raise TraceError("holds \"traceEvents\" twice")
            events_read = True
            if reader.peek_nonspace() != "[":
                raise TraceError("\"traceEvents\" is not a list")
            reader.pos += 1
            yield from ((None, batch) for batch in reader.array_batches())
        elif key == EXECUTION_TRACE_KEY and not events_read:
            raise TraceError("is a PyTorch execution trace (ExecutionTraceObserver's graph of ops), not a profiler "
                             "trace: it holds no timeline; open the torch.profiler trace taken beside it")
        elif key in KINETO_LOG_KEYS:
            yield key, reader.log_lines()
        else:
            yield key, reader.value(MAX_META_CHARS, f"a top-level {_quoted(key)}")
    if reader.peek_nonspace() != "":
        raise TraceError("is not valid JSON (text after the trace's closing brace)")


class _Buffer:
    """A window on the text being read: decodes values at ``pos``, refilling from the stream as needed."""

    def __init__(self, text: io.TextIOWrapper, raw: _CountingReader, progress: Optional[Callable[[int], None]],
                 cancelled: Optional[Cancelled], events_as: Any = None) -> None:
        self.text, self.raw, self.progress, self.cancelled = text, raw, progress, cancelled
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.chars = 0  # characters read from the stream
        self.chars_before = 0  # characters dropped from the buffer's front (positions in messages are in the file)
        self.decoder = json.JSONDecoder()
        self.typed = msgspec.json.Decoder(list[events_as]) if events_as is not None else None
        # Up to this character of the file the events are decoded one at a time: a batch failed there (a false
        # cut) or found no cut. Without it each item would search for (and decode up to) the same cut again.
        self.one_by_one_until = 0

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
            # The file began with gzip's magic (else it is read as text): a member missing it follows a whole one
            if str(error).startswith("Not a gzipped file"):
                raise TraceError("holds bytes after the end of its gzip stream that are not gzip (something "
                                 "appended to the file, or two files run together)") from None
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

    def value(self, limit: int = MAX_EVENT_CHARS, what: str = "an event") -> Any:
        """One JSON value at ``pos`` (refilling until it is whole; refused past ``limit`` characters)."""
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
                if len(self.buf) - self.pos > limit:
                    raise TraceError(f"holds {what} larger than {limit // 1024**2} MB, not a profiler's") from None
                if self.fill():
                    continue
                raise TraceError("ends early (a truncated trace)") from None
            except RecursionError:
                raise TraceError("is nested too deeply to be a profiler trace") from None
            except ValueError:  # an integer past Python's 4,300 digits (JSONDecodeError, a ValueError, is above)
                raise TraceError(_TOO_LONG_NUMBER) from None
            self.pos = end
            return value

    def log_lines(self) -> Any:
        """The value of one of Kineto's log keys at ``pos``; where it is not JSON (a quote or tab in a message, written
        unescaped), the rest of its line is passed over (Kineto writes one level on one line) and UNREADABLE_LOG
        given. The value's error stands where its line does not end within MAX_META_CHARS."""
        self.peek_nonspace()
        start = self.chars_before + self.pos
        try:
            return self.value(MAX_META_CHARS, "a top-level log list")
        except TraceError as error:
            # Only a value that is not JSON is passed over (not one cut short, too large, or a cancelled read)
            if type(error) is not TraceError or not str(error).startswith("is not valid JSON") or (
                    self.chars_before + self.pos != start):
                raise
            while True:
                end = self.buf.find("\n", self.pos)
                if end >= 0:
                    self.pos = end + 1
                    return UNREADABLE_LOG
                if len(self.buf) - self.pos > MAX_META_CHARS or not self.fill():
                    raise

    def array_batches(self) -> Iterator[list[Any]]:
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
            yield batch if batch is not None else self._one_by_one()

    def _one_by_one(self) -> list[Any]:
        """The items up to ``one_by_one_until`` (at least one), each decoded alone."""
        items = [self.value()]
        while self.chars_before + self.pos < self.one_by_one_until:
            c = self.peek_nonspace()
            if c == ",":
                self.pos += 1
            elif c in ("]", ""):
                break  # the array's end: array_batches says what it is
            else:
                items.append(self.value())
        return items

    def _batch(self) -> Optional[list[Any]]:
        """The whole items between ``pos`` and the last cut in the buffer, decoded at once (C speed). A cut is
        the last event boundary ("},{"), or where there is none (items that are not events) the last comma.
        None where the items up to ``one_by_one_until`` are to be decoded one by one: no cut is found, or the
        batch fails to decode (the cut fell inside a string or a nested value: a false cut)."""
        while True:
            if self.chars_before + self.pos < self.one_by_one_until:
                return None
            cut = self._last_cut(max(self.pos, len(self.buf) - _TAIL_CHARS))
            if cut is not None and cut[0] > self.pos:
                break
            # The rest of the buffer, short, is an item cut by the chunk's end: read on rather than decode it
            # alone, which would fail on its cut first. A long rest without a cut (a large event, or not JSON)
            # is decoded one value at a time, which refuses garbage at once.
            if len(self.buf) - self.pos > _TAIL_CHARS or not self.fill():
                self.one_by_one_until = self.chars_before + len(self.buf)
                return None
        batch_end, next_start = cut
        batch = "[" + self.buf[self.pos:batch_end] + "]"
        items = None
        if self.typed is not None:
            try:
                items = self.typed.decode(batch)
            except RecursionError:
                raise TraceError("is nested too deeply to be a profiler trace") from None
            except msgspec.DecodeError:
                pass  # a false cut, or values only the stdlib reads: the stdlib decides which
        try:
            if items is None:
                items = json.loads(batch)
        except RecursionError:
            raise TraceError("is nested too deeply to be a profiler trace") from None
        except json.JSONDecodeError:
            self.one_by_one_until = self.chars_before + next_start  # a false cut: one by one up to it, once
            return None
        except ValueError:  # an integer past Python's 4,300 digits
            raise TraceError(_TOO_LONG_NUMBER) from None
        self.pos = next_start
        return items

    def _last_cut(self, start: int) -> Optional[tuple[int, int]]:
        """(end of the batch, start of the next item) at the last cut in ``buf[start:]``; None without one."""
        last = None
        for last in _EVENT_BOUNDARY.finditer(self.buf, start):
            pass
        if last is not None:
            return last.start() + 1, last.end()
        if self.buf.startswith("{", self.pos):  # an event cut by the chunk's end: wait for the rest of it
            return None
        comma = self.buf.rfind(",", start)  # items that are not events (0,0,0,…): any comma may be a cut
        return (comma, comma + 1) if comma >= 0 else None


_TOO_LONG_NUMBER = "holds a number of more than 4,300 digits, not a profiler's"


def _quoted(key: str) -> str:
    return json.dumps(key[:40] + ("…" if len(key) > 40 else ""), ensure_ascii=True)


def trace_parts(path: Path, progress: Optional[Callable[[int], None]] = None, cancelled: Optional[Cancelled] = None,
                events_as: Any = None, digest: Optional[FileDigest] = None
                ) -> Generator[tuple[Optional[str], Any], None, None]:
    """(key, value) for each top-level key but traceEvents, and (None, [events]) for each batch of events;
    ``progress(file_bytes_read)`` after each chunk. ``events_as``: a msgspec type (a Struct) for the events; a
    batch is then a list of it, or, where the typed decoder refused the batch, of what the stdlib's decoder gives
    (dicts, or anything a hostile file holds): the caller tells the two apart by the first item's type.
    ``digest``: takes every byte of the file as it is read (all of them, once the parts are all read)."""
    with _open_text(path, digest) as (text, raw):
        yield from _top_level(text, raw, progress, cancelled, events_as)
        if digest is not None:
            raw.drain()

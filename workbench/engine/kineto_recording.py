"""One Kineto recording, driven through torch's own profiler entry points, and its trace saved.

``torch._C._autograd._enable_profiler`` and friends are what ``torch.profiler.profile`` calls; they are
used directly because only they take the record scopes that keep host ops out of a GPU timeline
window (profiling.py's sample phases). Where a torch refuses the scopes, every host op is recorded
and the recording says so (``all_host_ops``).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, TypeVar

T = TypeVar("T")

# torch registers its Kineto client on the thread that loads libtorch, and Kineto calls that client's
# init() the first time a profiler is prepared in the process; on any other thread it prints this line
# to stderr instead. The window imports torch on a background thread and trains on its run thread, so
# every first profiled run printed it. Nothing is lost: torch's client init() is empty ("TODO:
# implement", torch/csrc/profiler/kineto_client_interface.cpp). Preparing a profiler on the importing
# thread instead would set CUPTI up at every start, profiled or not; so this one known line is kept
# out of the user's terminal (everything else written meanwhile is passed on).
KINETO_THREAD_LINE = b"External init callback must run in same thread as registerClient"
_first_prepare_lock = threading.Lock()
_prepared_once = False


class KinetoRecording:
    """prepare, start, then stop (the profiler's result, for ``save_trace`` and the events) or abandon."""

    def __init__(self, timeline_mode: bool, cuda: bool):
        from torch._C._profiler import ProfilerActivity, ProfilerConfig, ProfilerState, RecordScope, _ExperimentalConfig

        # Timeline mode records the GPU activities alone: kernels, copies, fills and the CUDA runtime calls
        # that launched them (torch's Kineto shim puts the runtime in its CUDA set). Any host recording
        # costs every op a callback: on an H100, resnet18 bf16 batch 512 ran 9.9 ms a step unprofiled,
        # 13.7 ms with the GPU activities alone, 17.1 ms with every host op and 18.1 ms with only the
        # annotations kept through record scopes. The loop's waits for data are timed by the loop itself.
        if timeline_mode and cuda:
            self.activities = {ProfilerActivity.CUDA}
        else:
            self.activities = {ProfilerActivity.CPU} | ({ProfilerActivity.CUDA} if cuda else set())
        self.scopes = {RecordScope.USER_SCOPE} if timeline_mode else set()
        self.all_host_ops = not timeline_mode
        self.config = ProfilerConfig(ProfilerState.KINETO, False, False, False, False, False, _ExperimentalConfig())
        self.prepared = self.enabled = False

    def prepare(self) -> None:
        from torch._C._autograd import _prepare_profiler

        _first_in_process(lambda: _prepare_profiler(self.config, self.activities))
        self.prepared = True

    def start(self) -> None:
        from torch._C._autograd import _enable_profiler

        try:
            # torch's stub omits the scopes its binding takes ("scopes: Set[RecordScope] = set()").
            _enable_profiler(self.config, self.activities, self.scopes)  # type: ignore[call-arg]
        except TypeError:  # a torch whose entry point takes no scopes: record every host op
            _enable_profiler(self.config, self.activities)
            self.all_host_ops = True
        self.enabled = True

    def stop(self) -> Any:
        from torch._C._autograd import _disable_profiler

        self.enabled = False
        return _disable_profiler()

    def abandon(self) -> None:
        """Leave Kineto idle. A recording prepared but never started (a stop in a GPU sample's warm-up
        step) is started and stopped too, so no prepared trace lingers into the
        next run in this process (untested here: a CPU-only Kineto does not mind either way)."""
        if self.prepared and not self.enabled:
            self.start()
        if self.enabled:
            self.stop()


def save_trace(result: Any, path: Path) -> str:
    """The recording's Chrome trace, gzipped (Perfetto and chrome://tracing open .json.gz)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    plain = path.with_name(path.name.removesuffix(".gz") + ".part")
    try:
        result.save(str(plain))
        with open(plain, "rb") as source, gzip.open(path, "wb", compresslevel=6) as target:
            shutil.copyfileobj(source, target)
    finally:
        with contextlib.suppress(OSError):  # a read-only file system refuses this too: the first error says why
            plain.unlink(missing_ok=True)
    return str(path)


def _first_in_process(call: Callable[[], T]) -> T:
    """``call()``; the first time in this process (when Kineto initialises), without KINETO_THREAD_LINE."""
    global _prepared_once
    with _first_prepare_lock:
        if _prepared_once:
            return call()
        _prepared_once = True
        return without_stderr_line(call, KINETO_THREAD_LINE)


def without_stderr_line(call: Callable[[], T], unwanted: bytes) -> T:
    """``call()`` with file descriptor 2 caught meanwhile; what it caught is written back without the lines
    that hold ``unwanted`` (C++ libraries write there directly, past sys.stderr)."""
    try:
        saved = os.dup(2)
    except OSError:  # no stderr at all (a windowed launcher): nothing to keep clean
        return call()
    with tempfile.TemporaryFile() as caught:
        sys.stderr.flush()
        os.dup2(caught.fileno(), 2)
        try:
            return call()
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            kept = b"".join(line for line in caught.read().splitlines(keepends=True) if unwanted not in line)
            if kept:
                os.write(2, kept)

"""One Kineto recording, driven through torch's own profiler entry points, and its trace saved.

``torch._C._autograd._enable_profiler`` and friends are what ``torch.profiler.profile`` calls; they are
used directly because only they take the record scopes that keep host ops out of a GPU timeline
window (profiling.py's sample phases). Where a torch refuses the scopes, every host op is recorded
and the recording says so (``all_host_ops``).
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Any


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

        _prepare_profiler(self.config, self.activities)
        self.prepared = True

    def start(self) -> None:
        from torch._C._autograd import _enable_profiler

        try:
            _enable_profiler(self.config, self.activities, self.scopes)
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
        plain.unlink(missing_ok=True)
    return str(path)

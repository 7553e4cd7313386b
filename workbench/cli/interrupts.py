"""What a signal does to a headless run: Ctrl-C stops at the next step (twice: aborts), SIGUSR1 asks for a
profiler sample."""

from __future__ import annotations

import signal
import threading
from typing import Any

from workbench.cli.progress_line import ProgressLine


def stop_then_interrupt(stop: threading.Event, progress: ProgressLine):
    """First Ctrl-C: stop at the next step (the run is kept as stopped). Second: abort."""

    def handle(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        progress.message("stopping at the next step (Ctrl-C again to abort)…")

    return handle


def on_sample_request(requests: Any, progress: ProgressLine) -> Any:
    """SIGUSR1 (`kill -USR1 <pid>`) asks the run for a profiler sample; returns the previous handler."""
    if not hasattr(signal, "SIGUSR1"):
        return None

    def handle(signum: int, frame: Any) -> None:
        requests.request()
        progress.message("profile sample requested: taken at the next steps that fit")

    return signal.signal(signal.SIGUSR1, handle)

"""A headless run's progress on stderr: one bar on a terminal, one line per epoch in a log."""

from __future__ import annotations

import functools
from typing import Any, Optional

from workbench.cli import timeline_report
from workbench.engine.events import EpochStats, ProfileSample, RunEnded, RunStarted, StatusChanged, StepStats
from workbench.formatting import format_duration, printable, window_rate_text, window_share_text


class ProgressLine:
    """A one-line progress bar on a terminal; one line per epoch otherwise (logs stay readable)."""

    WIDTH = 24

    def __init__(self, stream: Any):
        self.stream = stream
        self.tty = stream.isatty()
        self._dirty = False
        self.lost = False  # the stream refused a write: a terminal that hung up (SIGHUP) fails them with EIO
        self._previous_window: Optional[StepStats] = None  # the run's window before the latest: the ETA's pace

    @functools.singledispatchmethod
    def show(self, event: object) -> None:
        """Each engine event of a run, by its type; another type is a TypeError (a new event needs its line here)."""
        raise TypeError(f"the progress line has no handler for {type(event).__name__} events: add one in "
                        "cli/progress_line.py")

    @show.register
    def _(self, event: StatusChanged) -> None:
        (self._print if event.lasting else self._line)(event.message)

    @show.register
    def _(self, event: RunStarted) -> None:
        self._previous_window = None  # a new run (repeats share the line): its first window has no pace before it
        for note in event.notes:
            self._print(f"note: {note}")
        processes = f" × {event.world_size} processes" if event.world_size > 1 else ""
        self._print(
            f"{event.config.model} on {event.device.name} [{event.device.type}]{processes}, {event.dataset_name}: "
            f"{event.train_size:,} train / {event.test_size:,} test images, {event.total_steps:,} steps, "
            f"effective batch {event.effective_batch_size:,}"
        )

    @show.register
    def _(self, event: StepStats) -> None:
        previous, self._previous_window = self._previous_window, event
        if self.tty:
            done = event.step / max(1, event.total_steps)
            bar = "#" * int(done * self.WIDTH)
            eta = event.eta_seconds(previous)
            self._line(
                f"epoch {event.epoch}/{event.epochs} [{bar:<{self.WIDTH}}] {event.step}/{event.total_steps} "
                f"loss {event.loss:.3f} {window_rate_text(event.images_per_sec, 'window')} "
                f"wait {window_share_text(event.data_wait_fraction)} ETA {format_duration(eta)}"
            )

    @show.register
    def _(self, event: ProfileSample) -> None:
        self._print(timeline_report.sample_line(event))

    @show.register
    def _(self, event: EpochStats) -> None:
        self._print(
            f"epoch {event.epoch}/{event.epochs}: train loss {event.train_loss:.3f}, "
            + (f"test accuracy {event.test_accuracy:.1%}, " if event.evaluated else "not evaluated, ")
            + f"{window_rate_text(event.images_per_sec, 'epoch')}, "
            f"data wait {window_share_text(event.data_wait_fraction)} (the whole epoch, its start included: "
            "the run's img/s and data wait leave the first log window out)"
        )

    @show.register
    def _(self, event: RunEnded) -> None:
        pass  # the command prints the run's end and summary itself (run_summary_text.py, a sequence's table)

    def message(self, text: str) -> None:
        self._print(text)

    def _line(self, text: str) -> None:
        if self.tty:
            self._write("\r\033[K" + printable(text))
            self._dirty = True

    def _print(self, text: str) -> None:
        if self._dirty:
            self._write("\r\033[K")
            self._dirty = False
        self._write(printable(text) + "\n")  # a path or a model's error in it cannot drive the terminal

    def close(self) -> None:
        if self._dirty:
            self._write("\n")
            self._dirty = False

    def _write(self, text: str) -> None:
        """Progress is not worth a run: once the stream refuses a write, the run goes on without it."""
        if self.lost:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError:
            self.lost = True

"""A headless run's progress on stderr: one bar on a terminal, one line per epoch in a log."""

from __future__ import annotations

from typing import Any

from workbench.cli import timeline_report
from workbench.engine.events import EpochStats, ProfileSample, RunStarted, StatusChanged, StepStats
from workbench.formatting import format_duration


class ProgressLine:
    """A one-line progress bar on a terminal; one line per epoch otherwise (logs stay readable)."""

    WIDTH = 24

    def __init__(self, stream: Any):
        self.stream = stream
        self.tty = stream.isatty()
        self._dirty = False
        self.lost = False  # the stream refused a write: a terminal that hung up (SIGHUP) fails them with EIO

    def show(self, event: Any) -> None:
        if isinstance(event, StatusChanged):
            self._line(event.message)
        elif isinstance(event, RunStarted):
            for note in event.notes:
                self._print(f"note: {note}")
            processes = f" × {event.world_size} processes" if event.world_size > 1 else ""
            self._print(
                f"{event.config.model} on {event.device.name} [{event.device.type}]{processes}, {event.dataset_name}: "
                f"{event.train_size:,} train / {event.test_size:,} test images, {event.total_steps:,} steps, "
                f"effective batch {event.effective_batch_size:,}"
            )
        elif isinstance(event, StepStats):
            if self.tty:
                done = event.step / max(1, event.total_steps)
                bar = "#" * int(done * self.WIDTH)
                eta = event.elapsed_seconds / done - event.elapsed_seconds if done > 0 else None
                self._line(
                    f"epoch {event.epoch}/{event.epochs} [{bar:<{self.WIDTH}}] {event.step}/{event.total_steps} "
                    f"loss {event.loss:.3f} {event.images_per_sec:,.0f} img/s "
                    f"wait {event.data_wait_fraction:.0%} ETA {format_duration(eta)}"
                )
        elif isinstance(event, ProfileSample):
            self._print(timeline_report.sample_line(event))
        elif isinstance(event, EpochStats):
            self._print(
                f"epoch {event.epoch}/{event.epochs}: train loss {event.train_loss:.3f}, "
                + (f"test accuracy {event.test_accuracy:.1%}, " if event.evaluated else "not evaluated, ")
                + f"{event.images_per_sec:,.0f} img/s, "
                f"data wait {event.data_wait_fraction:.0%}"
            )

    def message(self, text: str) -> None:
        self._print(text)

    def _line(self, text: str) -> None:
        if self.tty:
            self._write("\r\033[K" + text)
            self._dirty = True

    def _print(self, text: str) -> None:
        if self._dirty:
            self._write("\r\033[K")
            self._dirty = False
        self._write(text + "\n")

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

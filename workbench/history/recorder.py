"""Writes one run's engine events to the history as the run goes.

Only runs that started training are history: a run refused for bad settings or data before its
RunStarted is removed again. Step windows are buffered and written together at most ``flush_interval_s`` apart, and at every
other event (a status change, an epoch, the end), so a process that dies loses about a second of
metrics at most. Each write also stores the summary so far, so an interrupted run keeps its figures.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import time
from pathlib import Path
from typing import Optional

from workbench.config import RunConfig
from workbench.engine.events import EpochStats, Event, ProfileSample, RunEnded, RunStarted, StatusChanged, StepStats
from workbench.engine.run_summary import RunSummary
from workbench.engine.summary import SummaryBuilder
from workbench.history.errors import HistoryDamaged, HistoryError, HistoryTooNew
from workbench.history.failure_log import log_failure
from workbench.history.run_writes import RunWrites
from workbench.history.schema import EPOCH_COLUMNS, PROFILE_SAMPLE_COLUMNS, PROFILE_SAMPLE_LISTS, STEP_COLUMNS

# Failures caused by the user's settings or data (the CLI exits 2 for them).
BAD_INPUT_KINDS = ("config", "data")


class UnknownEvent(TypeError):
    """An event of a type the recorder has no handler for: the code's mistake, never the history's (a recorder
    that fails to write is dropped and the run goes on; this one is raised)."""


class RunRecorder:
    def __init__(self, writes: RunWrites, flush_interval_s: float = 1.0, name: str = "",
                 config: Optional[RunConfig] = None, source: Optional[str] = None):
        self._writes = writes
        self.run_id = writes.run_id
        self.name = name  # as the store named it: views show the run as ``label``
        self.config, self.source = config, source
        self.log_path: Optional[Path] = None  # failures.log, once a failure with a traceback was written there
        self.flush_interval_s = flush_interval_s
        self._summary = SummaryBuilder()
        self._steps: list[tuple] = []
        self._epochs: list[tuple] = []
        self._samples: list[tuple] = []
        self._last_flush = time.monotonic()
        self._started = False
        self.ended = False
        self.discarded = False  # True when the run was refused for bad input before it started
        self.write_error: Optional[HistoryError] = None  # the first write the history refused, if any

    @property
    def label(self) -> str:
        """"#7 synthetic: num_workers=0": the run's number and name, as every view shows it (RunRecord.label)."""
        return f"#{self.run_id} {self.name}".rstrip()

    def record(self, event: Event) -> None:
        """Take every engine event, in order, by its type; another type is a TypeError (a new engine event needs its
        handler here)."""
        if self.ended:
            raise RuntimeError(f"run #{self.run_id} has already ended; it takes no more events")
        self._summary.add(event)
        self._take(event)

    @functools.singledispatchmethod
    def _take(self, event: object) -> None:
        raise UnknownEvent(f"the recorder has no handler for {type(event).__name__} events: add one in "
                           "history/recorder.py")

    @_take.register
    def _(self, event: StepStats) -> None:
        self._steps.append(step_row(event))
        if time.monotonic() - self._last_flush >= self.flush_interval_s:
            self.flush()

    @_take.register
    def _(self, event: RunStarted) -> None:
        self._started = True
        with self._noting_refusal():
            self._writes.started(event)
        self.flush()

    @_take.register
    def _(self, event: EpochStats) -> None:
        self._epochs.append(epoch_row(event))
        self.flush()

    @_take.register
    def _(self, event: ProfileSample) -> None:
        self._samples.append(sample_row(event))
        self.flush()

    @_take.register
    def _(self, event: StatusChanged) -> None:
        self.flush()  # a status change ("Evaluating…") may precede a long quiet spell: save what we have

    @_take.register
    def _(self, event: RunEnded) -> None:
        reason = event.reason or event.summary.reason
        kind = event.kind or event.summary.failure_kind
        if event.status == "failed" and kind in BAD_INPUT_KINDS and not self._started:
            # Refused before training for the user's input: nothing ran, so it is not history.
            with self._noting_refusal():
                self._writes.discard_unstarted()
            self.ended = self.discarded = True
            self._checkpoint()
            return
        self._write(_keep_known_figures(event.summary, self._summary.build(event.status, reason, kind)),
                    end=(event.status, reason, kind, event.traceback))
        self._checkpoint()
        if event.traceback:
            self.log_path = log_failure(
                reason or "no reason given", event.traceback, kind=kind, run_id=self.run_id,
                source=self.source, settings=self.config.to_dict() if self.config else None,
                home=self._writes.home,
            )

    def flush(self) -> None:
        """Write buffered metrics now (a GUI may call this on a timer)."""
        if not self.ended:
            self._write(self._summary.build("finished"))

    def fail(self, reason: str, kind: str = "error", traceback: Optional[str] = None) -> None:
        """End the run as failed when the caller's loop died without a RunEnded, or the history stopped taking its
        writes; no-op once ended. Where the history refuses the whole write (a full disk), the end alone is
        written (RunWrites.bare_end); a damaged history is not written to again. Raises HistoryError when even
        the end could not be written: the row stays "running" until this process has gone, and the next open
        then marks it interrupted (mark_interrupted_runs)."""
        if self.ended:
            return
        self.ended = True  # whatever comes of the writes below, this recorder takes nothing more
        if isinstance(self.write_error, (HistoryDamaged, HistoryTooNew)):
            raise self.write_error
        try:
            self._write(self._summary.build("failed", reason), end=("failed", reason, kind, traceback))
        except (HistoryDamaged, HistoryTooNew):
            raise
        except HistoryError:
            self._writes.bare_end("failed", reason, kind)
        self._checkpoint()

    def _write(self, summary, end: Optional[tuple] = None) -> None:
        with self._noting_refusal():
            self._writes.progress(self._steps, self._epochs, summary, end, self._samples)
        self._steps, self._epochs, self._samples = [], [], []
        self._last_flush = time.monotonic()
        if end is not None:
            self.ended = True


    @contextlib.contextmanager
    def _noting_refusal(self):
        try:
            yield
        except HistoryError as error:
            self.write_error = self.write_error or error
            raise

    def _checkpoint(self) -> None:
        with contextlib.suppress(HistoryError):  # the run is recorded; an uncut log costs disk space only
            self._writes.checkpoint()


def _keep_known_figures(ended: RunSummary, seen: RunSummary) -> RunSummary:
    """The summary to store at the end: the RunEnded's — unless it knows fewer steps than this recorder saw
    (it was made without the run's events, e.g. for a crash outside the engine): then every figure it lacks
    comes from the events, so a failed run never erases figures already stored."""
    if ended.steps >= seen.steps:
        return ended
    known = {}
    for item in dataclasses.fields(RunSummary):
        mine, theirs = getattr(seen, item.name), getattr(ended, item.name)
        if theirs is None or (item.name in _PROGRESS and theirs < mine):
            known[item.name] = mine
    return dataclasses.replace(ended, **known) if known else ended


# How far the run got: counts a summary built without the events would leave at 0.
_PROGRESS = ("steps", "samples_seen", "epochs_completed", "skipped_optimizer_steps")


def step_row(stats: StepStats) -> tuple:
    """(step, *STEP_COLUMNS) for one window."""
    memory = stats.memory
    values = {
        "epoch": stats.epoch,
        "samples_seen": stats.samples_seen,
        "elapsed_seconds": stats.elapsed_seconds,
        "loss": stats.loss,
        "lr": stats.lr,
        "images_per_sec": stats.images_per_sec,
        "data_wait_fraction": stats.data_wait_fraction,
        "data_wait_seconds": stats.data_wait_seconds,
        "device_span_seconds": stats.device_span_seconds,
        "window_seconds": stats.window_seconds,
        "torch_allocated": memory.torch_allocated,
        "torch_reserved": memory.torch_reserved,
        "torch_peak_allocated": memory.torch_peak_allocated,
        "torch_peak_reserved": memory.torch_peak_reserved,
        "nvml_device_used": memory.nvml_device_used,
        "gpu_utilization_percent": memory.gpu_utilization_percent,
        "process_rss": memory.process_rss,
        "nvml_process_used": memory.nvml_process_used,
        "skipped_optimizer_steps": stats.skipped_optimizer_steps,
        "loss_scale": stats.loss_scale,
    }
    return (stats.step, *(values[name] for name in STEP_COLUMNS))


def epoch_row(stats: EpochStats) -> tuple:
    """(epoch, *EPOCH_COLUMNS) for one epoch."""
    memory = stats.memory
    values = {
        "step": stats.step,
        "train_loss": stats.train_loss,
        "train_accuracy": stats.train_accuracy,
        "test_loss": stats.test_loss,
        "test_accuracy": stats.test_accuracy,
        "images_per_sec": stats.images_per_sec,
        "data_wait_fraction": stats.data_wait_fraction,
        "train_seconds": stats.train_seconds,
        "eval_seconds": stats.eval_seconds,
        "torch_peak_allocated": memory.torch_peak_allocated,
        "torch_peak_reserved": memory.torch_peak_reserved,
        "nvml_device_used": memory.nvml_device_used,
    }
    return (stats.epoch, *(values[name] for name in EPOCH_COLUMNS))


def sample_row(sample: ProfileSample) -> tuple:
    """(first_step, *PROFILE_SAMPLE_COLUMNS, *lists as JSON) for one profiler sample."""
    values = [getattr(sample, name) for name in PROFILE_SAMPLE_COLUMNS]
    lists = [
        json.dumps([{"name": item.name, "seconds": item.seconds, "count": item.count} for item in getattr(sample, name)])
        for name in PROFILE_SAMPLE_LISTS
    ]
    return (sample.first_step, *values, *lists)

"""Fold a run's events into its RunSummary (pure Python: the engine, tests and history share it)."""

from __future__ import annotations

import statistics
import time
from typing import Optional

from workbench.engine.events import (
    EndStatus,
    EpochStats,
    Event,
    FailureKind,
    MemorySnapshot,
    RunStarted,
    RunSummary,
    StepStats,
)


class SummaryBuilder:
    def __init__(self) -> None:
        self._began = time.perf_counter()
        self._started: Optional[RunStarted] = None
        # Figures are over the steady state: the first log window holds one-off costs (cuDNN
        # autotuning, worker start-up, compilation) unless it is the only one.
        self._warmup: Optional[StepStats] = None
        self._warmup_samples = 0
        self._steady = _Windows()
        self._previous_samples = 0
        self._last_step: Optional[StepStats] = None
        self._last_epoch: Optional[EpochStats] = None
        self._peaks: dict[str, Optional[int]] = {"allocated": None, "reserved": None, "nvml": None}

    def add(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._started = event
        elif isinstance(event, StepStats):
            self._last_step = event
            samples, self._previous_samples = event.samples_seen - self._previous_samples, event.samples_seen
            if self._warmup is None:
                self._warmup = event
                self._warmup_samples = samples
            else:
                self._steady.add(event, samples)
            self._track_peaks(event.memory)
        elif isinstance(event, EpochStats):
            self._last_epoch = event
            self._track_peaks(event.memory)

    def _track_peaks(self, memory: MemorySnapshot) -> None:
        for key, value in (
            ("allocated", memory.torch_peak_allocated),
            ("reserved", memory.torch_peak_reserved),
            ("nvml", memory.nvml_used),
        ):
            if value is not None:
                current = self._peaks[key]
                self._peaks[key] = value if current is None else max(current, value)

    def build(
        self, status: EndStatus, reason: Optional[str] = None, kind: Optional[FailureKind] = None
    ) -> RunSummary:
        started, step, epoch = self._started, self._last_step, self._last_epoch
        steady = self._steady
        if steady.seconds == 0 and self._warmup is not None:  # a single window: it is all there is
            steady = _Windows()
            steady.add(self._warmup, self._warmup_samples)
        window = steady.seconds
        return RunSummary(
            status=status,
            reason=reason,
            failure_kind=kind,
            test_accuracy=epoch.test_accuracy if epoch else None,
            final_loss=step.loss if step else None,
            images_per_sec=steady.samples / window if window > 0 else None,
            images_per_sec_median=statistics.median(steady.rates) if steady.rates else None,
            data_wait_fraction=steady.data_wait / window if window > 0 else None,
            device_span_fraction=min(1.0, steady.device_span / window) if window > 0 else None,
            peak_allocated_bytes=self._peaks["allocated"],
            peak_reserved_bytes=self._peaks["reserved"],
            peak_nvml_used_bytes=self._peaks["nvml"],
            wall_seconds=time.perf_counter() - self._began,
            steps=step.step if step else 0,
            samples_seen=step.samples_seen if step else 0,
            epochs_completed=epoch.epoch if epoch else 0,
            device=started.device.type if started else None,
            device_name=started.device.name if started else None,
            torch_version=started.device.torch_version if started else None,
        )


class _Windows:
    """Sums over a run of log windows, all on the windows' own wall clock."""

    def __init__(self) -> None:
        self.samples = 0
        self.seconds = 0.0
        self.data_wait = 0.0
        self.device_span = 0.0
        self.rates: list[float] = []

    def add(self, stats: StepStats, samples: int) -> None:
        self.samples += samples
        self.seconds += stats.window_seconds
        self.data_wait += stats.data_wait_seconds
        self.device_span += stats.device_span_seconds
        self.rates.append(stats.images_per_sec)

"""Fold a run's events into its RunSummary (pure Python: the engine, tests and history share it)."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from typing import Iterable, Optional

from workbench.engine.events import EpochStats, Event, MemorySnapshot, ProfileSample, RunStarted, StepStats
from workbench.engine.findings import find
from workbench.engine.run_facts import RunFacts
from workbench.engine.run_summary import EndStatus, FailureKind, NamedTime, RunSummary
from workbench.engine.spread import median_of_known, rate_interval
from workbench.engine.telemetry import run_figures
from workbench.engine.step_shares import step_shares

TOP_COUNT = 10


class SummaryBuilder:
    def __init__(self, world_size: int = 1) -> None:
        """``world_size``: the processes the run was started with, its figure until RunStarted says it (a run of
        several that ends before it read 1)."""
        self._world_size = world_size
        self._began = time.perf_counter()
        self._started: Optional[RunStarted] = None
        # Figures are over the steady state: the first log window holds one-off costs (cuDNN
        # autotuning, worker start-up, compilation), and is left out even where it is the only one. Windows that
        # hold a profiler sample are left out too (the profiler slows them), unless nothing else is left.
        # The first log window, the warm-up, is never steady: a run of one window has no img/s, data wait or
        # verdict (NO_STEADY_WINDOW). Read as steady, a 5-step run read 11× too slow and input-bound on its
        # workers' start-up.
        self._warmup_seen = False
        self._windows: list[tuple[int, int, StepStats, int]] = []  # (first step, last step, stats, samples)
        self._previous_samples = 0
        self._previous_step = 0
        self._last_step: Optional[StepStats] = None
        self._last_epoch: Optional[EpochStats] = None
        self._peaks: dict[str, Optional[int]] = {"allocated": None, "reserved": None, "nvml": None, "nvml_process": None, "rss": None}
        self._training_peak: Optional[int] = None  # torch's peak before the first evaluation
        self._samples: list[ProfileSample] = []
        self._rank_peaks: list[dict[str, Optional[int]]] = []  # multi-process runs: one per rank
        self._skipped_optimizer_steps = 0
        self._compile_seconds: Optional[float] = None
        self._cuda_graphs: Optional[str] = None
        self._trained: Optional[tuple[int, int]] = None  # (steps, samples) done past the last log point

    def trained_to(self, steps: int, samples: int) -> None:
        """The steps and images done where a failure ended the run mid-window: that window is never reported, and
        the counts would stop at the last log point (a run failing in step 25 read 20 steps)."""
        self._trained = (steps, samples)

    def add(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._started = event
        elif isinstance(event, StepStats):
            self._last_step = event
            self._skipped_optimizer_steps += event.skipped_optimizer_steps
            if event.compile_seconds is not None:
                self._compile_seconds = event.compile_seconds
            if event.cuda_graphs is not None:  # the first window's report, and a later window's change to it
                self._cuda_graphs = event.cuda_graphs
            samples, self._previous_samples = event.samples_seen - self._previous_samples, event.samples_seen
            first, self._previous_step = self._previous_step + 1, event.step
            if self._warmup_seen:
                self._windows.append((first, event.step, event, samples))
            self._warmup_seen = True
            self._track_peaks(self._peaks, event.memory)
            self._track_rank_peaks([rank.memory for rank in event.ranks])
            if self._last_epoch is None and event.memory.torch_peak_allocated is not None:
                self._training_peak = event.memory.torch_peak_allocated  # a running peak: the last is the max
        elif isinstance(event, EpochStats):
            self._last_epoch = event
            self._track_peaks(self._peaks, event.memory)
            self._track_rank_peaks(list(event.rank_memory))
        elif isinstance(event, ProfileSample):
            self._samples.append(event)

    def _track_rank_peaks(self, memories: list[MemorySnapshot]) -> None:
        while len(self._rank_peaks) < len(memories):
            self._rank_peaks.append({"allocated": None, "reserved": None, "nvml": None, "nvml_process": None, "rss": None})
        for peaks, memory in zip(self._rank_peaks, memories):
            self._track_peaks(peaks, memory)

    @staticmethod
    def _track_peaks(peaks: dict[str, Optional[int]], memory: MemorySnapshot) -> None:
        for key, value in (
            ("allocated", memory.torch_peak_allocated),
            ("reserved", memory.torch_peak_reserved),
            ("nvml", memory.nvml_device_used),
            ("nvml_process", memory.nvml_process_used),
            ("rss", memory.process_rss),
        ):
            if value is not None:
                current = peaks[key]
                peaks[key] = value if current is None else max(current, value)

    def _steady(self) -> _Windows:
        # A sample slows its steps, and writing it out lands in the window of the step after it.
        spans = [(sample.first_step, sample.last_step + 1) for sample in self._samples]
        steady = _Windows()
        kept = [w for w in self._windows if not any(first <= w[1] and w[0] <= last for first, last in spans)]
        for first, last, stats, samples in kept or self._windows:
            steady.add(stats, samples, last - first + 1)
        steady.unprofiled = bool(kept) or not spans
        return steady

    def build(
        self, status: EndStatus, reason: Optional[str] = None, kind: Optional[FailureKind] = None
    ) -> RunSummary:
        started, step, epoch = self._started, self._last_step, self._last_epoch
        steady = self._steady()
        window = steady.seconds
        images_per_sec = steady.samples / window if window > 0 else None
        interval = rate_interval(steady.window_samples, steady.window_seconds)
        ceiling = started.ceiling_images_per_sec if started is not None else None
        summary = RunSummary(
            status=status,
            reason=reason,
            failure_kind=kind,
            test_accuracy=epoch.test_accuracy if epoch and epoch.evaluated else None,
            final_loss=step.loss if step and math.isfinite(step.loss) else None,  # a diverged run's reason says why
            images_per_sec=images_per_sec,
            images_per_sec_low=interval[0] if interval else None,
            images_per_sec_high=interval[1] if interval else None,
            data_wait_fraction=steady.data_wait / window if window > 0 else None,
            device_span_fraction=min(1.0, steady.device_span / window) if window > 0 else None,
            peak_allocated_bytes=self._peaks["allocated"],
            peak_reserved_bytes=self._peaks["reserved"],
            peak_nvml_device_used_bytes=self._peaks["nvml"],
            peak_nvml_process_used_bytes=self._peaks["nvml_process"],
            peak_process_rss_bytes=self._peaks["rss"],
            skipped_optimizer_steps=self._skipped_optimizer_steps,
            wall_seconds=time.perf_counter() - self._began,
            steps=max(step.step if step else 0, self._trained[0] if self._trained else 0),
            samples_seen=max(step.samples_seen if step else 0, self._trained[1] if self._trained else 0),
            skipped_bad_images=started.skipped_bad_images if started else 0,
            epochs_completed=epoch.epoch if epoch else 0,
            device_type=started.device.type if started else None,
            device_name=started.device.name if started else None,
            torch_version=started.device.torch_version if started else None,
            compile_seconds=self._compile_seconds,
            cuda_graphs=self._cuda_graphs,
            ceiling_images_per_sec=ceiling,
            pipeline_efficiency=images_per_sec / ceiling if images_per_sec and ceiling else None,
            **run_figures(steady.stats),
            **profile_figures(self._samples, profiled=started is not None and started.config.profile,
                              step_seconds=steady.step_seconds(), data_wait_seconds=steady.data_wait_per_step()),
            world_size=started.world_size if started else self._world_size,
            rank_peak_allocated_bytes=tuple(peaks["allocated"] for peaks in self._rank_peaks),
            rank_peak_reserved_bytes=tuple(peaks["reserved"] for peaks in self._rank_peaks),
            rank_peak_nvml_device_used_bytes=tuple(peaks["nvml"] for peaks in self._rank_peaks),
        )
        if started is None or images_per_sec is None:
            return summary
        facts = RunFacts.of(summary, started.config, started.device, started, self._training_peak)
        return _replace(summary, findings=find(facts))


def profile_figures(
    samples: Iterable[ProfileSample],
    profiled: bool = True,
    step_seconds: Optional[float] = None,
    data_wait_seconds: Optional[float] = None,
) -> dict:
    """The RunSummary fields of a run's profiler samples: shares per step of the run as it runs unprofiled
    (step_shares.step_shares; ``step_seconds``/``data_wait_seconds`` per step from the run's steady state,
    each sample's own figures where those are None), weighted by the samples' steps."""
    samples = list(samples)
    usable = [s for s in samples if s.steps > 0 and s.window_seconds > 0]
    figures: dict = {"profile_samples": len(usable)}
    if not usable:
        reasons = [s.gpu_unavailable_reason for s in samples if s.gpu_unavailable_reason]
        if reasons:
            figures["gpu_timeline_unavailable_reason"] = reasons[-1]
        elif profiled:
            figures["gpu_timeline_unavailable_reason"] = (
                "no profile sample was taken: the run ended before a sample fit in an epoch"
            )
        return figures
    figures["top_ops"] = merge_times((s.top_ops for s in usable), TOP_COUNT)
    figures["trace_paths"] = tuple(s.trace_path for s in usable if s.trace_path)
    gpu = [s for s in usable if s.kernel_busy_seconds is not None]
    if not gpu:
        figures["gpu_timeline_unavailable_reason"] = next(
            (s.gpu_unavailable_reason for s in usable if s.gpu_unavailable_reason), "no GPU timeline was recorded"
        )
        return figures
    steps = sum(s.steps for s in gpu)
    shares = [(s.steps, step_shares(s, step_seconds, data_wait_seconds)) for s in gpu]

    def share(name: str) -> float:
        return sum(getattr(part, name) * weight for weight, part in shares if part is not None) / steps

    flagged = [part for _, part in shares if part is not None and part.base_shorter_than_gpu_work]
    if flagged:
        figures["timeline_flag"] = f"{len(flagged)} of {len(shares)} samples: {flagged[0].flag_text()}"

    figures.update(
        kernel_busy_fraction=share("compute"),
        memcpy_fraction=share("memcpy"),
        memset_fraction=share("memset"),
        communication_fraction=share("communication"),
        idle_waiting_for_data_fraction=share("waiting_for_data"),
        idle_waiting_for_host_fraction=share("waiting_for_host"),
        idle_other_fraction=share("other"),
        kernels_per_step=_per_step([(s.kernels, s.steps) for s in gpu]),
        launches_per_step=_per_step([(s.launches, s.steps) for s in gpu]),
        median_kernel_seconds=median_of_known(s.median_kernel_seconds for s in gpu),
        top_kernels=merge_times((s.top_kernels for s in gpu), TOP_COUNT),
    )
    return figures


def _per_step(counts: list[tuple[Optional[int], int]]) -> Optional[float]:
    """A count per step over the samples that read it (a sample without it is unknown there, not 0); None if none."""
    known = [(count, steps) for count, steps in counts if count is not None]
    steps = sum(steps for _, steps in known)
    return sum(count for count, _ in known) / steps if steps else None


def merge_times(lists: Iterable[Iterable[NamedTime]], top: int) -> tuple[NamedTime, ...]:
    seconds: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for items in lists:
        for item in items:
            seconds[item.name] += item.seconds
            counts[item.name] += item.count
    ranked = sorted(seconds, key=lambda name: (-seconds[name], name))[:top]
    return tuple(NamedTime(name=name, seconds=seconds[name], count=counts[name]) for name in ranked)


def _replace(summary: RunSummary, **changes) -> RunSummary:
    import dataclasses

    return dataclasses.replace(summary, **changes)


class _Windows:
    """Sums over a run of log windows, all on the windows' own wall clock."""

    def __init__(self) -> None:
        self.samples = 0
        self.steps = 0
        self.seconds = 0.0
        self.data_wait = 0.0
        self.device_span = 0.0
        self.window_samples: list[int] = []
        self.window_seconds: list[float] = []
        self.stats: list[StepStats] = []
        self.unprofiled = True  # False when every window held a profiler sample

    def step_seconds(self) -> Optional[float]:
        """A step's wall time outside samples: the time base of the profile figures (None if unknown)."""
        return self.seconds / self.steps if self.unprofiled and self.steps and self.seconds > 0 else None

    def data_wait_per_step(self) -> Optional[float]:
        return self.data_wait / self.steps if self.unprofiled and self.steps else None

    def add(self, stats: StepStats, samples: int, steps: int) -> None:
        self.samples += samples
        self.steps += max(0, steps)
        self.seconds += stats.window_seconds
        self.data_wait += stats.data_wait_seconds
        self.device_span += stats.device_span_seconds
        self.window_samples.append(samples)
        self.window_seconds.append(stats.window_seconds)
        self.stats.append(stats)

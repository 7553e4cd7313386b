"""Profiler-sampled windows in a training run: a few steps after warm-up, every N steps, and on request.

The training loop calls ``at_step`` only when ``step >= sampler.next_step``: outside a sample that is
its whole cost, one integer comparison per step (no record_function, no flag to read). A sample on a
CUDA device is three short phases at step boundaries, all inside one epoch:

1. warm-up (1 step): Kineto prepared, CUPTI on, nothing kept, so its buffer set-up stays out of
   the figures;
2. timeline window: the device's kernels, copies and fills, the runtime calls that launched them,
   and only the *annotations* on the host (each step, each wait for the next batch): recording every
   host op would slow the host by a microsecond or two per op, and a host slowed down makes the GPU
   look like it waits for the host. The device is synchronised before and after it, so the window
   starts with an idle queue and ends when the GPU is done;
3. ops window (2 steps): every host op, for the top ops by host time.

On a CPU one window records every host op. Each window's Chrome trace is kept (``*.trace.json.gz``,
opens in Perfetto). The loop's own figures for these steps are slower than usual; the run summary
leaves the log windows that hold a sample out of its steady state.

One recording (Kineto through torch's own entry points) is kineto_recording.py's.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, Iterator, Optional

import torch

from workbench.engine import kineto, timeline
from workbench.engine.events import ProfileSample
from workbench.engine.kineto_recording import KinetoRecording, save_trace
from workbench.engine.requests import ProfileRequests

# Kineto logs every start and stop on stderr (and on a CPU-only machine an error about the missing GPU),
# which would interleave with the CLI's progress. Level 6 silences it; a sample that records no GPU
# activity on a GPU says so itself. A user's own setting wins (KINETO_LOG_LEVEL=0 shows everything).
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

NEVER = sys.maxsize
# cuDNN autotuning, the allocator's growth and torch.compile settle within the first steps; 20 clears
# them and is reached within seconds on any device.
FIRST_SAMPLE_STEP = 20
WARMUP_STEPS = 1
# Enough steps that one step's start-up (an empty queue after the sync) is a small part of the window,
# few enough that the trace stays small (a few hundred KB for resnet18).
TIMELINE_STEPS = 8
OPS_STEPS = 2  # host ops repeat step after step; two steps rank them
CPU_STEPS = 3  # a CPU step is long: three show its ops and data waits
# The run's own pace, the time base of a sample's shares, is over the last few log windows no sample touched:
# one window is one draw of the run's noise (a sample's shares moved with it), a handful averages it out and
# still follows a run whose pace changes.
PACE_WINDOWS = 4

DATA_WAIT = kineto.DATA_WAIT_ANNOTATION


class ProfileSampler:
    """Takes the samples of one run; every call comes from the training loop's thread."""

    def __init__(
        self,
        device: torch.device,
        batch_size: int,
        steps_per_epoch: int,
        total_steps: int,
        every: Optional[int],
        trace_dir: Path,
        requests: Optional[ProfileRequests] = None,
    ):
        self.device = device
        self.cuda = device.type == "cuda"
        self.batch_size = batch_size
        self.steps_per_epoch = max(1, steps_per_epoch)
        self.total_steps = total_steps
        self.every = every
        self.trace_dir = trace_dir
        self.requests = requests
        self.phases = _phase_lengths(self.cuda, self.steps_per_epoch)
        self.length = sum(steps for _, steps in self.phases)
        self.next_step = NEVER
        self._planned = NEVER
        if every is not None:
            self._planned = self._next_fit(max(1, min(FIRST_SAMPLE_STEP, total_steps - self.length - 1)))
            self.next_step = self._planned
        self._sample: Optional[_Sample] = None
        self._broken = False
        # The last steady log windows no sample touched: (seconds, steps, data wait seconds) each.
        self._steady_windows: deque[tuple[float, int, float]] = deque(maxlen=PACE_WINDOWS)
        self._windows_seen = 0
        self._window_touched = False  # a sample ran during the log window now open
        if requests is not None:
            requests.attach(self._wake)

    # -- the loop's hooks --------------------------------------------------------------------------------
    def note_window(self, window_seconds: float, steps: int, data_wait_seconds: float) -> None:
        """At each log point: a window no sample touched, after the first (cuDNN autotuning, worker
        start-up), is the run's own pace, the time base of the next sample's shares."""
        self._windows_seen += 1
        if self._windows_seen > 1 and not self._window_touched and steps > 0 and window_seconds > 0:
            self._steady_windows.append((window_seconds, steps, data_wait_seconds))
        self._window_touched = self._sample is not None

    def pace(self) -> Optional[tuple[float, float, int]]:
        """The run's own step outside samples: (seconds per step, data wait seconds per step, windows it is
        over), summed over the last PACE_WINDOWS steady windows; None before the first."""
        if not self._steady_windows:
            return None
        steps = sum(steps for _, steps, _ in self._steady_windows)
        seconds = sum(seconds for seconds, _, _ in self._steady_windows)
        wait = sum(wait for _, _, wait in self._steady_windows)
        return seconds / steps, wait / steps, len(self._steady_windows)

    def at_step(self, step: int, batches: Iterator) -> tuple[Iterator, Optional[ProfileSample]]:
        """At the boundary before step ``step + 1``: start, advance or finish a sample.

        Returns the batch iterator the loop should use (wrapped so each fetch is annotated while a
        window records) and a finished sample, if one just ended.
        """
        inner = batches.inner if isinstance(batches, _AnnotatedBatches) else batches
        sample = self._sample
        if sample is None:
            sample = None if self._broken else self._idle_start(step)
            if sample is None:
                return inner, None
        began = time.perf_counter()
        self._window_touched = True
        try:
            done = sample.advance(step)
            sample.overhead += time.perf_counter() - began
            result = sample.result() if done else None
        except Exception as error:  # the profiler failed: training goes on, without samples
            sample.abandon()
            self._sample, self._broken = None, True
            self.next_step = NEVER
            return inner, sample.failed(f"the profiler failed: {type(error).__name__}: {error}")
        if done:
            self._sample = None
            self._schedule_after(step, sample.start)
            return inner, result
        self.next_step = sample.next_call(step)
        return (_AnnotatedBatches(inner, sample) if sample.recording else inner), None

    def close(self) -> None:
        """The run ended (or failed) mid-sample: stop the profiler, keep nothing."""
        if self._sample is not None:
            self._sample.abandon()
            self._sample = None
        if self.requests is not None:
            self.requests.detach()

    # -- scheduling ----------------------------------------------------------------------------------------
    def _wake(self) -> None:  # a request, from any thread, under requests.lock
        self.next_step = 0

    def _lock(self):
        return self.requests.lock if self.requests is not None else contextlib.nullcontext()

    def _idle_start(self, step: int) -> Optional[_Sample]:
        """Start a sample at this boundary if one is due (or asked for) and fits (it, or None); else plan the next."""
        requests = self.requests
        with self._lock():
            requested = requests is not None and requests.pending
            start = self._next_fit(step if requested else max(step, self._planned))
            if start != step:
                self.next_step = start
                return None
            if requests is not None and requested:
                requests.clear()
            self.next_step = step + 1
        self._sample = _Sample(self, step)
        return self._sample

    def _schedule_after(self, step: int, started: int) -> None:
        self._planned = started + self.every if self.every is not None else NEVER
        with self._lock():
            if self.requests is not None:
                self.requests.clear()  # asked for while this sample ran: this sample answers it
            self.next_step = self._next_fit(max(step, self._planned))

    def _next_fit(self, step: int) -> int:
        """The first boundary at or after ``step`` where a whole sample fits in one epoch and in the run.

        The loop reaches a boundary only before a step it is about to take: the boundary after an
        epoch's last step comes after the evaluation, so a sample must end one step before that.
        """
        if step >= NEVER:
            return NEVER
        for candidate in (step, (step // self.steps_per_epoch + 1) * self.steps_per_epoch):
            in_epoch = candidate % self.steps_per_epoch + self.length < self.steps_per_epoch
            if in_epoch and candidate + self.length < self.total_steps:
                return candidate
        return NEVER


class _Sample:
    """One sample's phases; ``advance`` runs at each of its step boundaries."""

    def __init__(self, sampler: ProfileSampler, start: int):
        self.sampler = sampler
        self.start = start
        self.boundaries: list[tuple[str, int, int]] = []  # (phase, first boundary, end boundary)
        at = start
        for name, steps in sampler.phases:
            self.boundaries.append((name, at, at + steps))
            at += steps
        self.phase_index = -1
        self.recording = False
        self.overhead = 0.0
        self._session: Optional[KinetoRecording] = None
        self._step_mark: Optional[Any] = None
        self.results: dict[str, tuple[Any, int, bool]] = {}  # phase → (profiler result, steps, all host ops?)
        self.timeline_first_step: Optional[int] = None
        self.timed_data_wait_seconds = 0.0  # the current recording phase's waits for data, by the loop's clock
        self.timeline_data_wait_seconds: Optional[float] = None

    @property
    def end(self) -> int:
        return self.boundaries[-1][2]

    def next_call(self, step: int) -> int:
        # Recording phases mark every step; a warm-up only needs its end.
        return step + 1 if self.recording else self.boundaries[self.phase_index][2]

    def advance(self, step: int) -> bool:
        """Do what this boundary needs; True when the sample is complete."""
        phase = self.boundaries[self.phase_index] if self.phase_index >= 0 else None
        if phase is not None and step < phase[2]:  # inside a phase: mark the next step
            if self.recording:
                self._mark_step(step)
            return False
        if phase is not None:
            self._end_phase(phase[0])
        self.phase_index += 1
        if self.phase_index == len(self.boundaries):
            return True
        self._begin_phase(self.boundaries[self.phase_index][0], step)
        return False

    def _begin_phase(self, name: str, step: int) -> None:
        sampler = self.sampler
        if name == "warmup":
            self._session = KinetoRecording(timeline_mode=True, cuda=True)
            self._session.prepare()
            return
        if name == "timeline":
            _synchronize(sampler.device)  # an empty queue: the window's launches are all its own
            session = self._session or KinetoRecording(timeline_mode=True, cuda=True)
            if self._session is None:
                session.prepare()
            session.start()
            self.timeline_first_step = step + 1
        else:  # "ops" on a GPU, "cpu" on a CPU: every host op
            session = KinetoRecording(timeline_mode=False, cuda=sampler.cuda)
            session.prepare()
            session.start()
        self._session = session
        self.recording = True
        self._mark_step(step)

    def _end_phase(self, name: str) -> None:
        if name == "warmup":
            return
        _synchronize(self.sampler.device)  # the window ends when the GPU is done
        self._close_step_mark()
        session, self._session = self._session, None
        self.recording = False
        phase = next(b for b in self.boundaries if b[0] == name)
        assert session is not None  # _begin_phase started this phase's recording
        self.results[name] = (session.stop(), phase[2] - phase[1], session.all_host_ops)
        if name == "timeline":
            self.timeline_data_wait_seconds = self.timed_data_wait_seconds
        self.timed_data_wait_seconds = 0.0

    def _mark_step(self, step: int) -> None:
        self._close_step_mark()
        # HTA and Perfetto find steps by this name, as torch.profiler's schedule writes it.
        self._step_mark = torch.profiler.record_function(f"{kineto.STEP_PREFIX}{step + 1}")
        self._step_mark.__enter__()

    def _close_step_mark(self) -> None:
        if self._step_mark is not None:
            mark, self._step_mark = self._step_mark, None
            mark.__exit__(None, None, None)

    def abandon(self) -> None:
        try:
            self._close_step_mark()
        finally:
            if self._session is not None:
                self._session.abandon()
                self._session = None
            self.recording = False

    # -- the result ------------------------------------------------------------------------------------------
    def result(self) -> ProfileSample:
        sampler = self.sampler
        began = time.perf_counter()
        device_index = sampler.device.index if sampler.device.index is not None else (
            torch.cuda.current_device() if sampler.cuda else None)
        main_phase = "timeline" if sampler.cuda else "cpu"
        main, steps, all_host_ops = self.results[main_phase]
        main_activities = kineto.activities((kineto.record(e) for e in main.events()), device_index)
        breakdown = timeline.analyse(main_activities, gpu=sampler.cuda)
        if sampler.cuda and not all_host_ops and self.timeline_data_wait_seconds is not None:
            breakdown = timeline.with_timed_data_wait(breakdown, self.timeline_data_wait_seconds)
        steps = breakdown.steps or steps
        if sampler.cuda and "ops" in self.results:
            ops, ops_steps, _ = self.results["ops"]
            ops_activities = kineto.activities((kineto.record(e) for e in ops.events()), device_index)
            top_ops = timeline.analyse(ops_activities, gpu=False).top_ops
        else:
            ops, ops_steps, top_ops = None, steps, breakdown.top_ops
        trace_path = ops_trace_path = reason = None
        try:
            first = self.timeline_first_step or self.start + 1
            trace_path = save_trace(main, sampler.trace_dir / f"step-{first:07d}.trace.json.gz")
            if ops is not None:
                ops_trace_path = save_trace(ops, sampler.trace_dir / f"step-{first:07d}-ops.trace.json.gz")
        except OSError as error:
            reason = f"could not write the trace to {sampler.trace_dir}: {error.strerror or error}"
        gpu_reason = None if sampler.cuda else "a CPU run has no GPU timeline"
        if sampler.cuda and not breakdown.kernels:
            # CUPTI gave nothing (no permission to profile, another profiler holds it): no figures, not zeros.
            gpu_reason = ("the profiler recorded no GPU activity (CUPTI unavailable?); run with KINETO_LOG_LEVEL=0 "
                          "to see its messages")
            breakdown = timeline.TimelineBreakdown(breakdown.window_seconds, breakdown.steps,
                                                   breakdown.host_data_wait_seconds, breakdown.top_ops)
        overhead = self.overhead + (time.perf_counter() - began)
        pace = sampler.pace()
        return timeline.to_sample(
            breakdown, self.start + 1, self.end, sampler.device.type, sampler.batch_size,
            steps=steps,
            top_ops=top_ops,
            ops_steps=ops_steps,
            gpu_unavailable_reason=gpu_reason,
            trace_path=trace_path,
            ops_trace_path=ops_trace_path,
            trace_unavailable_reason=reason,
            overhead_seconds=overhead,
            timeline_host_ops_recorded=all_host_ops,
            unprofiled_step_seconds=pace[0] if pace else None,
            unprofiled_data_wait_seconds=pace[1] if pace else None,
            unprofiled_windows=pace[2] if pace else 0,
        )

    def failed(self, reason: str) -> ProfileSample:
        return ProfileSample(
            first_step=self.start + 1, last_step=self.start + 1, device_type=self.sampler.device.type, steps=0,
            window_seconds=0.0, images_per_sec=0.0, host_data_wait_seconds=0.0,
            gpu_unavailable_reason=reason, trace_unavailable_reason=reason, overhead_seconds=self.overhead,
        )


class _AnnotatedBatches:
    """The loop's batch iterator while a window records: each fetch marked as a wait for data."""

    def __init__(self, inner: Iterator, sample: "_Sample"):
        self.inner = inner
        self.sample = sample

    def __iter__(self) -> "_AnnotatedBatches":
        return self

    def __next__(self):
        # Timed here as well: a GPU timeline window records no host annotations (see KinetoRecording).
        began = time.perf_counter()
        try:
            with torch.profiler.record_function(DATA_WAIT):
                return next(self.inner)
        finally:
            self.sample.timed_data_wait_seconds += time.perf_counter() - began


def _phase_lengths(cuda: bool, steps_per_epoch: int) -> list[tuple[str, int]]:
    """The phases of one sample, shortened where an epoch is too short for a whole sample (which must
    end one step before the epoch does)."""
    room = steps_per_epoch - 1
    if not cuda:
        return [("cpu", max(1, min(CPU_STEPS, room)))]
    warmup, window, ops = WARMUP_STEPS, TIMELINE_STEPS, OPS_STEPS
    while warmup + window + ops > room:
        if ops > 1:
            ops -= 1
        elif window > 1:
            window -= 1
        elif warmup:
            warmup = 0
        else:
            return [("timeline", 1)]  # one-step epochs: the timeline alone
    phases = [("warmup", warmup)] if warmup else []
    return phases + [("timeline", window), ("ops", ops)]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def default_trace_dir(home: Path) -> Path:
    """A folder of the run's own for its traces: start time, process id and a random tag (the history's run id is
    not known here). Time and pid alone were shared by two runs of one process within a second: the second's
    traces overwrote the first's (the same step numbers), and deleting either deleted both."""
    return home / "traces" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{secrets.token_hex(4)}"


def sampler_for_run(
    config: Any, device: torch.device, steps_per_epoch: int, total_steps: int,
    requests: Optional[ProfileRequests] = None,
) -> ProfileSampler:
    """The run's sampler: periodic samples when ``config.profile``, samples on request always."""
    from workbench.paths import workbench_home

    return ProfileSampler(
        device, config.batch_size, steps_per_epoch, total_steps,
        every=config.profile_every if config.profile else None,
        trace_dir=default_trace_dir(workbench_home()),
        requests=requests,
    )

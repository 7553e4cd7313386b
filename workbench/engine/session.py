"""One run's training session: the pieces it trains with, and the step loop that yields its events.

The hot loop never syncs the device: the loss and correct counts accumulate as device tensors and
CUDA events time each step; all of it is read once per ``log_every`` steps (``_step_stats``).

Stop is checked before every step and between evaluation batches. The calls that can block for
seconds without looking at it — the first batch of an epoch (DataLoader workers start there) and
torch.compile's first step — run on a helper thread the loop polls (interruptible.py).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Generator, Iterator, Optional

import torch
from torch import nn

from workbench.config import RunConfig
from workbench.engine.data import DevicePreparer
from workbench.engine.datasets import TrainingData
from workbench.engine.folder_data import decode_on_device
from workbench.folder_layout import FolderLayout
from workbench.engine.pipelines import build_pipeline
from workbench.engine.ceiling_cache import cached_ceiling
from workbench.engine.compiling import CudaGraphWatch
from workbench.engine.device import on_device, resolve
from workbench.engine.events import (
    DeviceInfo, EpochStats, Event, RunStarted, StatusChanged, StepStats, per_clock_second,
)
from workbench.engine.divergence import DivergenceWatch
from workbench.engine import phases
from workbench.engine.interruptible import HelperCall, Stopped, call_interruptibly
from workbench.engine.memory import MemoryProbe, reset_peaks_for_a_new_run
from workbench.engine.models import check_batch_logits, main_output, parameter_count
from workbench.engine.profiling import sampler_for_run
from workbench.engine.requests import ProfileRequests
from workbench.engine.setting_notes import accumulation_notes, inactive_setting_notes
from workbench.engine.step_timer import StepTimer
from workbench.engine.telemetry import TelemetryProbe
from workbench.engine.train_step import build_training

# Evaluation batches of at most twice the training batch: a forward pass of 2b costs about as much as
# a training step of b (forward + backward ≈ 3 forwards), so a stop during evaluation waits no longer
# than one during training, and memory stays below the training step's.
EVAL_BATCH_SIZE = 1000


class _Window:
    """What one log window accumulates; the loss stays a device tensor until the log point."""

    def __init__(self, device: torch.device):
        self.loss = torch.zeros((), device=device)
        self.steps = 0
        self.samples = 0
        self.data_wait = 0.0
        self.began = time.perf_counter()


class _EpochTotals:
    """What one epoch accumulates (from its windows, and the correct count per step on the device)."""

    def __init__(self, device: torch.device):
        self.loss = torch.zeros((), device=device)
        self.correct = torch.zeros((), device=device, dtype=torch.int64)
        self.samples = 0
        self.data_wait = 0.0
        self.began = time.perf_counter()

    def add(self, window: _Window) -> None:
        self.loss += window.loss
        self.samples += window.samples
        self.data_wait += window.data_wait


class TrainingSession:
    """Builds the model, optimizer and pipeline for one run; ``events(stop)`` trains and reports."""

    def __init__(
        self, config: RunConfig, device_info: DeviceInfo, data: TrainingData,
        profile_requests: Optional[ProfileRequests] = None, world: Optional[Any] = None,
        phase_stop: Optional[Callable[[], bool]] = None, evaluation_stop: Optional[Callable[[], bool]] = None,
    ):
        """``evaluation_stop``: what ends the evaluation between its batches (``phase_stop`` when None). A rank of
        several gets its own stop flag here, before the ranks agree on it: only rank 0 evaluates, while the others
        wait for it in their next collective, so its evaluation is not one of the phases the ranks must agree to
        cut short."""
        self.config = config
        self.world = world  # None: the one process; else this rank's RankWorld (DDP, its data shard)
        shard = (world.rank, world.world_size) if world is not None else None
        self.device_info = device_info
        self.device = resolve(device_info)
        self.data = data
        self.stopped_at: Optional[int] = None
        self.notes = inactive_setting_notes(config, device_info) + list(data.notes)
        on_cuda = self.device.type == "cuda"
        torch.manual_seed(config.seed)
        reset_peaks_for_a_new_run(self.device)

        self.batches, self.test_set = build_pipeline(data, config, self.device, shard, self.notes)
        self.prepare = DevicePreparer(
            config, self.device, non_blocking=config.non_blocking and on_cuda, rank=shard[0] if shard else 0,
            decode_batch=decode_on_device if config.decode == "gpu" else None,
        )

        self.steps_per_epoch = self.batches.steps_per_epoch
        # max_steps, when set, is the run's length: as many epochs as it takes (the last may be partial).
        self.total_steps = config.max_steps if config.max_steps is not None else config.epochs * self.steps_per_epoch
        self.epochs = math.ceil(self.total_steps / self.steps_per_epoch)
        # As one rank of several, the step calls the model wrapped in DDP.
        wrap = (lambda model: world.wrap_model(model, self.device)) if world is not None else None
        training = build_training(config, data.num_classes, self.device, self.total_steps, wrap)
        self.model, self.train_step = training.model, training.step
        self.parameter_count = parameter_count(self.model)
        # Only rank 0 evaluates, with the bare model: a DDP forward on one rank alone would wait for the others.
        self.evaluates = config.evaluate and (world is None or world.rank == 0)
        # Eagerly, also when compiled: eval mode and no-grad would make torch.compile compile a second
        # graph, for a pass that is a small part of the run (and a stop could not end that compilation).
        self.eval_forward = self.model
        self.notes += accumulation_notes(config, self.total_steps)
        self.memory = MemoryProbe(self.device)
        self.telemetry = TelemetryProbe(self.memory.gpu, self.memory.nvml_unavailable_reason if on_cuda else None)
        self.timer = StepTimer(self.device)
        self.sampler = sampler_for_run(config, self.device, self.steps_per_epoch, self.total_steps, profile_requests)
        self.step = 0  # micro-batches done
        self.samples = 0  # images in the windows reported so far
        self._open_window: Optional[_Window] = None  # the window being trained (None between windows)
        self._training_began = 0.0
        # What ends the phases that block (first batch, compile, evaluation); the run's stop when None.
        self._phase_stop = phase_stop
        self._evaluation_stop = evaluation_stop
        self.evaluation_stopped = False  # a rank of several whose evaluation a stop cut short (no test figures)
        self._skipped_steps_read = 0
        self.divergence = DivergenceWatch(config, data.num_classes)
        self._batches_abandoned = False  # a helper thread still starting workers owns their shutdown
        # What compiling cost and did, said once, with the window of the step that compiled (StepStats).
        self._compile_report: Optional[tuple[float, Optional[str]]] = None
        # Listens from the first compiled step to close(): torch can skip CUDA graphs at any later call too.
        self._graph_watch = CudaGraphWatch(config.compile, self.device.type)
        self._graphs_said: Optional[str] = None  # the last cuda_graphs a StepStats carried

    # -- the run -------------------------------------------------------------------------------
    def events(self, stop: Callable[[], bool]) -> Generator[Event, None, None]:
        """Raises Stopped when a stop ends a phase the loop had to wait on (see interruptible.py)."""
        if self._phase_stop is None:
            self._phase_stop = stop
        yield self._run_started()
        if self.config.compile != "off":
            yield StatusChanged(message="Compiling the model: the first steps are slow")
        self._training_began = time.perf_counter()
        for epoch in range(1, self.epochs + 1):
            totals = _EpochTotals(self.device)
            yield from self._train_epoch(epoch, totals, stop)
            if self.stopped_at is not None or totals.samples == 0:
                break
            train_seconds = time.perf_counter() - totals.began
            if self.evaluates:
                yield StatusChanged(message=f"Evaluating epoch {epoch}…")
            yield self._epoch_stats(epoch, totals, train_seconds)
            if self.evaluation_stopped and epoch == self.epochs:
                # The other ranks have taken their last step: nothing is left to agree on, and the run ends here.
                raise Stopped(phases.EVALUATION)

    def _train_epoch(self, epoch: int, totals: _EpochTotals, stop: Callable[[], bool]) -> Iterator[Event]:
        """Steps until the epoch's batches or the run's steps run out, or ``stop()``; a StepStats per window
        and a ProfileSample per profiler sample."""
        self.model.train()
        window = self._new_window()
        batches = self.batches.epoch()
        next_batch = self._first_batch  # workers start on an epoch's first batch: on a helper thread
        while self.step < self.total_steps:
            if stop():
                self.stopped_at = self.step
                break
            if self.step >= self.sampler.next_step:  # one int compare per step: all sampling happens in here
                batches, sample = self.sampler.at_step(self.step, batches)
                if sample is not None:
                    yield sample
            waited_from = time.perf_counter()
            batch = next_batch(batches)
            next_batch = _next_or_none
            waited = time.perf_counter() - waited_from
            if batch is None:
                break
            self._train_on(batch, window, totals)
            window.data_wait += waited
            at_epoch_end = self.step % self.steps_per_epoch == 0 or self.step == self.total_steps
            if self.step % self.config.log_every == 0 or at_epoch_end:
                yield self._close_window(window, totals, epoch)
                window = self._new_window()
        if window.steps:  # stopped mid-window: report the steps done, so every count of them agrees
            yield self._close_window(window, totals, epoch)

    def _first_batch(self, batches: Iterator) -> Optional[tuple[torch.Tensor, torch.Tensor]]:
        if not self.batches.starts_workers:
            return next(batches, None)
        def start_workers():
            with on_device(self.device):  # the pin-memory thread pins for this thread's current device
                self.batches.prepare_worker_start()
                return next(batches, None)

        start = HelperCall(start_workers, phases.WORKER_START_UP, on_abandoned=self._close_batches)
        try:
            return start.wait(self._stop_phases())
        finally:
            self._batches_abandoned = start.abandoned

    def _train_on(self, batch: tuple[torch.Tensor, torch.Tensor], window: _Window, totals: _EpochTotals) -> None:
        """One step on one batch, timed on the device; its figures stay on the device (no sync here)."""
        self.timer.start()
        images, labels = self.prepare(*batch)
        if self.step == 0 and self.config.compile != "off":
            loss, logits = self._compiling_step(images, labels)
        else:
            loss, logits = self.train_step(images, labels)
        window.loss += loss.float()
        totals.correct += (logits.argmax(dim=1) == labels).sum()
        self.timer.stop()
        self.step += 1
        window.steps += 1
        window.samples += len(labels)

    def _compiling_step(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """torch.compile compiles in the first call, for tens of seconds: on a helper thread the loop polls.
        Abandoned by a stop, the compilation runs to its end in the background; then its step's memory goes."""
        watch = self._graph_watch.listen()  # until close()

        def first_step():
            with on_device(self.device):
                began = time.perf_counter()
                result = self.train_step(images, labels)
                self._synchronize()  # the compiled kernels' first run belongs to the compile's time
                self._compile_report = (time.perf_counter() - began, watch.report())
                return result

        return call_interruptibly(first_step, self._stop_phases(), phases.COMPILE)

    def _stop_phases(self) -> Callable[[], bool]:
        """What ends the phases that block: phase_stop, else the run's stop (events() sets it)."""
        assert self._phase_stop is not None, "the blocking phases run inside events()"
        return self._phase_stop

    def _new_window(self) -> _Window:
        self.telemetry.window_started()  # GPM measures over the window: its first sample
        self._open_window = _Window(self.device)
        return self._open_window

    @property
    def samples_trained(self) -> int:
        """Images of the steps done, the window being trained included: where a failure ended the run, that window
        is never reported, and the run's counts would stop at the last log point."""
        return self.samples + (self._open_window.samples if self._open_window is not None else 0)

    def _close_window(self, window: _Window, totals: _EpochTotals, epoch: int) -> StepStats:
        stats = self._step_stats(window, epoch)
        self.sampler.note_window(stats.window_seconds, window.steps, stats.data_wait_seconds)
        totals.add(window)
        self.samples += window.samples
        self._open_window = None
        return stats

    # -- figures, read at log points -----------------------------------------------------------
    def _run_started(self) -> RunStarted:
        return RunStarted(
            config=self.config,
            device=self.device_info,
            dataset_name=self.data.name,
            train_size=self.data.train_size,
            test_size=self.data.test_size,
            num_classes=self.data.num_classes,
            steps_per_epoch=self.steps_per_epoch,
            total_steps=self.total_steps,
            parameter_count=self.parameter_count,
            started_at=time.time(),
            notes=tuple(self.notes),
            ceiling_images_per_sec=_known_ceiling(self.config, self.device_info, self.data.num_classes),
            world_size=self.world.world_size if self.world is not None else 1,
            skipped_bad_images=self.data.skipped_bad_images if isinstance(self.data, FolderLayout) else 0,
        )

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _step_stats(self, window: _Window, epoch: int) -> StepStats:
        # Before the sync, while the GPU works through the queued steps: after it no copy is in flight (PCIe
        # reads ~0) and the clocks' reasons say "idle".
        telemetry = self.telemetry.read()
        self._synchronize()  # the one sync of the window: the loss and events become readable
        now = time.perf_counter()
        loss = window.loss.item() / window.steps
        skipped_total = self.train_step.read_skipped_steps()
        skipped, self._skipped_steps_read = skipped_total - self._skipped_steps_read, skipped_total
        loss_scale = self.train_step.read_loss_scale()
        self.divergence.check(loss, loss_scale, self.step, self._skipped_steps_read, self.train_step.optimizer_steps)
        window_seconds = now - window.began
        compile_seconds, cuda_graphs = self._compile_report or (None, None)
        self._compile_report = None
        if compile_seconds is None and self._graphs_said is not None:
            # Read again at every log point, so the run's last window says what held to its end.
            now_said = self._graph_watch.report()
            cuda_graphs = now_said if now_said != self._graphs_said else None
        self._graphs_said = cuda_graphs if cuda_graphs is not None else self._graphs_said
        return StepStats(
            step=self.step,
            total_steps=self.total_steps,
            epoch=epoch,
            epochs=self.epochs,
            samples_seen=self.samples + window.samples,
            loss=loss,
            lr=self.train_step.lr,
            images_per_sec=per_clock_second(window.samples, window_seconds),
            data_wait_seconds=window.data_wait,
            device_span_seconds=self.timer.read_seconds(),
            window_seconds=window_seconds,
            elapsed_seconds=now - self._training_began,
            memory=self.memory.snapshot(),
            telemetry=telemetry,
            skipped_optimizer_steps=skipped,
            loss_scale=loss_scale,
            compile_seconds=compile_seconds,
            cuda_graphs=cuda_graphs,
        )

    def _epoch_stats(self, epoch: int, totals: _EpochTotals, train_seconds: float) -> EpochStats:
        steps_done = totals.samples // self.config.batch_size
        train_loss = totals.loss.item() / max(1, steps_done)
        train_accuracy = totals.correct.item() / totals.samples
        eval_began = time.perf_counter()
        # Other ranks leave the test figures to rank 0 (NaN here, never shown: the ranks' epochs are merged);
        # evaluate=false leaves them NaN in every rank (EpochStats.evaluated).
        try:
            test_loss, test_accuracy = self.evaluate() if self.evaluates else (math.nan, math.nan)
        except Stopped:
            if self.world is None:
                raise
            # A rank reports its epoch all the same (under torchrun every rank gathers every epoch's figures), with
            # no test figures (a part of the test split is not its figure), and stops where the ranks agree to: at
            # the next step, or right after this epoch where it was the last.
            self.evaluation_stopped = True
            test_loss, test_accuracy = math.nan, math.nan
        return EpochStats(
            epoch=epoch,
            epochs=self.epochs,
            step=self.step,
            train_loss=train_loss,
            train_accuracy=train_accuracy,
            test_loss=test_loss,
            test_accuracy=test_accuracy,
            images_per_sec=per_clock_second(totals.samples, train_seconds),
            data_wait_fraction=per_clock_second(totals.data_wait, train_seconds),
            train_seconds=train_seconds,
            eval_seconds=time.perf_counter() - eval_began,
            memory=self.memory.snapshot(),
        )

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float]:
        """Loss and accuracy on the test split (plain cross-entropy, no label smoothing); NaN, as without
        evaluation, where the split holds no image (a folder too small to hold any back): it read 0.0 %."""
        if self.test_set.size == 0:
            return math.nan, math.nan
        self.model.eval()
        loss_sum = torch.zeros((), device=self.device)
        correct = torch.zeros((), device=self.device, dtype=torch.int64)
        batch_size = min(EVAL_BATCH_SIZE, 2 * self.config.batch_size)
        stop = self._evaluation_stop or self._stop_phases()
        for batch in self.test_set.batches(batch_size):
            if stop():
                raise Stopped(phases.EVALUATION)
            images, labels = self.prepare(*batch, train=False)
            with self.train_step.autocast():
                logits = main_output(self.eval_forward(images))
                check_batch_logits(logits, images, self.data.num_classes)
            loss_sum += nn.functional.cross_entropy(logits.float(), labels, reduction="sum")
            correct += (logits.argmax(dim=1) == labels).sum()
        self.model.train()
        count = max(1, self.test_set.size)
        return loss_sum.item() / count, correct.item() / count

    def _close_batches(self, _first_batch: object = None) -> None:
        self.batches.close()

    def close(self) -> None:
        self._graph_watch.stop_listening()
        self.sampler.close()
        if not self._batches_abandoned:  # else the helper still starting the workers shuts them down
            self.batches.close()
        self.test_set.close()
        self.telemetry.close()
        self.memory.close()


def _known_ceiling(config: RunConfig, device: DeviceInfo, num_classes: int) -> Optional[float]:
    ceiling = cached_ceiling(config, device, num_classes)
    return ceiling.images_per_sec if ceiling is not None else None


def _next_or_none(batches: Iterator) -> Optional[tuple[torch.Tensor, torch.Tensor]]:
    return next(batches, None)

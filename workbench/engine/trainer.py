"""run(config, stop): train, measure each step truthfully, and yield what happened.

The hot loop never syncs the device: the loss and correct counts accumulate as device
tensors and CUDA events time each step; all of it is read once per ``log_every`` steps.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
from typing import Callable, Iterator, Optional

import torch
from torch import nn

from workbench.config import RunConfig
from workbench.engine.data import DataError, DevicePreparer, ImageArrays, LoaderBatches, ResidentBatches, load_arrays
from workbench.engine.device import probe_device, resolve
from workbench.engine.events import (
    DeviceInfo,
    EpochStats,
    Event,
    RunEnded,
    RunStarted,
    StatusChanged,
    StepStats,
)
from workbench.engine.memory import MemoryProbe
from workbench.engine.models import build_model, parameter_count, to_memory_format
from workbench.engine.summary import SummaryBuilder

EVAL_BATCH_SIZE = 1000
WARMUP_FRACTION = 0.1


class Diverged(RuntimeError):
    pass


def _never() -> bool:
    return False


def run(config: RunConfig, stop: Callable[[], bool] = _never) -> Iterator[Event]:
    """Train as ``config`` says; yield StatusChanged*, RunStarted, StepStats/EpochStats*, RunEnded.

    Every outcome ends in exactly one RunEnded: bad settings and data are failures of kind
    "config"/"data", anything else raised in training a failure with its reason.
    """
    summary = SummaryBuilder()

    def ended(status, reason=None, kind=None) -> RunEnded:
        return RunEnded(status, summary.build(status, reason, kind), reason, kind)

    try:
        device_info = probe_device(config.device)
    except Exception as error:
        yield ended("failed", f"could not query the device: {type(error).__name__}: {error}", "error")
        return
    problems = config.validate(device_info)
    if problems:
        yield ended("failed", "; ".join(problems), "config")
        return

    session: Optional[_TrainingSession] = None
    try:
        yield StatusChanged(f"Loading {config.dataset} data…")
        arrays = load_arrays(config)
        if len(arrays.train_labels) < config.batch_size:
            raise DataError(
                f"batch_size {config.batch_size} is larger than the training set ({len(arrays.train_labels)} images)"
            )
        yield StatusChanged(f"Building {config.model} on {device_info.type}…")
        session = _TrainingSession(config, device_info, arrays)
        with contextlib.closing(session.events(stop)) as events:
            for event in events:
                summary.add(event)
                yield event
        if session.stopped_at is not None:
            yield ended("stopped", f"stopped by the user at step {session.stopped_at}")
        else:
            yield ended("finished")
    except DataError as error:
        yield ended("failed", str(error), "data")
    except torch.cuda.OutOfMemoryError:
        # Drop the model, optimizer and data before reporting, so the cache can really be returned.
        if session is not None:
            session.close()
            session = None
        gc.collect()
        torch.cuda.empty_cache()
        yield ended(
            "failed",
            f"CUDA out of memory with {config.model} at batch_size={config.batch_size}, {config.precision}: "
            "try a smaller batch with accumulation_steps, or fp16/bf16",
            "out_of_memory",
        )
    except Diverged as error:
        yield ended("failed", str(error), "diverged")
    except Exception as error:
        yield ended("failed", f"{type(error).__name__}: {error}", "error")
    finally:
        if session is not None:
            session.close()


class TrainStep:
    """One micro-batch: forward under autocast, scaled backward, an optimizer step every k micro-batches.

    The loss is divided by k, so k micro-batches of b give the gradient of one batch of k·b.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        criterion: nn.Module,
        device_type: str,
        precision: str = "fp32",
        accumulation_steps: int = 1,
        lr_at: Optional[Callable[[int], float]] = None,
    ):
        self.model, self.optimizer, self.criterion = model, optimizer, criterion
        self.accumulation_steps = accumulation_steps
        self.lr_at = lr_at
        amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
        self.autocast = (
            (lambda: torch.autocast(device_type, dtype=amp_dtype)) if amp_dtype else contextlib.nullcontext
        )
        self.scaler = torch.amp.GradScaler(device_type, enabled=amp_dtype is torch.float16)
        self.micro_batches = 0
        self.optimizer_steps = 0
        self._set_lr()

    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def _set_lr(self) -> None:
        if self.lr_at is not None:
            for group in self.optimizer.param_groups:
                group["lr"] = self.lr_at(self.optimizer_steps)

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with self.autocast():
            logits = self.model(images)
            loss = self.criterion(logits, labels)
        self.scaler.scale(loss / self.accumulation_steps).backward()
        self.micro_batches += 1
        if self.micro_batches % self.accumulation_steps == 0:
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad(set_to_none=True)
            self.optimizer_steps += 1
            self._set_lr()
        return loss.detach(), logits.detach()


def warmup_linear_decay(base_lr: float, total_optimizer_steps: int) -> Callable[[int], float]:
    """Linear warm-up over the first tenth of the optimizer steps, then linear decay towards 0."""
    total = max(1, total_optimizer_steps)
    warmup = max(1, int(total * WARMUP_FRACTION))

    def lr_at(optimizer_step: int) -> float:
        if optimizer_step < warmup:
            return base_lr * (optimizer_step + 1) / warmup
        return base_lr * max(0.0, (total - optimizer_step) / max(1, total - warmup))

    return lr_at


def build_optimizer(config: RunConfig, model: nn.Module) -> torch.optim.Optimizer:
    if config.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    return torch.optim.SGD(
        model.parameters(), lr=config.lr, momentum=0.9, nesterov=True, weight_decay=config.weight_decay
    )


class _StepTimer:
    """Device time of each step: CUDA events on a GPU (no sync until read), the host clock on a CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self._pairs: list = []
        self._host_seconds = 0.0
        self._began = 0.0

    def start(self) -> None:
        if self.cuda:
            begin = torch.cuda.Event(enable_timing=True)
            begin.record()
            self._pairs.append((begin, None))
        else:
            self._began = time.perf_counter()

    def stop(self) -> None:
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self._pairs[-1] = (self._pairs[-1][0], end)
        else:
            self._host_seconds += time.perf_counter() - self._began

    def read_seconds(self) -> float:
        """Total since the last read; call after synchronising."""
        if self.cuda:
            seconds = sum(begin.elapsed_time(end) for begin, end in self._pairs) / 1000.0
            self._pairs.clear()
            return seconds
        seconds, self._host_seconds = self._host_seconds, 0.0
        return seconds


class _TrainingSession:
    def __init__(self, config: RunConfig, device_info: DeviceInfo, arrays: ImageArrays):
        self.config = config
        self.device_info = device_info
        self.device = resolve(device_info)
        self.arrays = arrays
        self.stopped_at: Optional[int] = None
        self.notes = _ineffective_settings(config, device_info)
        on_cuda = self.device.type == "cuda"
        torch.manual_seed(config.seed)
        if on_cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
            torch.backends.cudnn.benchmark = True

        if config.pipeline == "gpu-resident":
            self.batches = ResidentBatches(arrays, config, self.device)
        else:
            self.batches = LoaderBatches(arrays, config, pin_memory=config.pin_memory and on_cuda)
        self.prepare = DevicePreparer(config, self.device, non_blocking=config.non_blocking and on_cuda)
        self.test_images = arrays.test_images.to(self.device)
        self.test_labels = arrays.test_labels.to(self.device)

        model = build_model(config.model, arrays.num_classes).to(self.device)
        self.model = to_memory_format(model, config.channels_last)
        self.parameter_count = parameter_count(self.model)
        self.forward = torch.compile(self.model) if config.compile else self.model
        self.steps_per_epoch = self.batches.steps_per_epoch
        # max_steps, when set, is the run's length: as many epochs as it takes (the last may be partial).
        self.total_steps = config.max_steps if config.max_steps is not None else config.epochs * self.steps_per_epoch
        self.train_step = TrainStep(
            self.forward,
            build_optimizer(config, self.model),
            nn.CrossEntropyLoss(label_smoothing=config.label_smoothing),
            self.device.type,
            config.precision,
            config.accumulation_steps,
            warmup_linear_decay(config.lr, self.total_steps // config.accumulation_steps),
        )
        self.memory = MemoryProbe(self.device)
        self.timer = _StepTimer(self.device)

    def events(self, stop: Callable[[], bool]) -> Iterator[Event]:
        config, device = self.config, self.device
        epochs = math.ceil(self.total_steps / self.steps_per_epoch)
        yield RunStarted(
            config=config,
            device=self.device_info,
            dataset_name=self.arrays.name,
            train_size=len(self.arrays.train_labels),
            test_size=len(self.arrays.test_labels),
            num_classes=self.arrays.num_classes,
            steps_per_epoch=self.steps_per_epoch,
            total_steps=self.total_steps,
            parameter_count=self.parameter_count,
            started_at=time.time(),
            notes=tuple(self.notes),
        )
        if config.compile:
            yield StatusChanged("Compiling the model: the first steps are slow")
        step = samples = 0
        training_began = time.perf_counter()
        for epoch in range(1, epochs + 1):
            self.model.train()
            epoch_began = window_began = time.perf_counter()
            epoch_loss = torch.zeros((), device=device)
            epoch_correct = torch.zeros((), device=device, dtype=torch.int64)
            window_loss = torch.zeros((), device=device)
            epoch_samples = window_samples = window_steps = 0
            epoch_wait = window_wait = 0.0
            batches = self.batches.epoch()
            while step < self.total_steps:
                if stop():
                    self.stopped_at = step
                    break
                waited_from = time.perf_counter()
                batch = next(batches, None)
                waited = time.perf_counter() - waited_from
                if batch is None:
                    break
                self.timer.start()
                images, labels = self.prepare(*batch)
                loss, logits = self.train_step(images, labels)
                window_loss += loss.float()
                epoch_correct += (logits.argmax(dim=1) == labels).sum()
                self.timer.stop()
                step += 1
                window_steps += 1
                window_samples += len(labels)
                window_wait += waited
                at_epoch_end = step % self.steps_per_epoch == 0 or step == self.total_steps
                if step % config.log_every == 0 or at_epoch_end:
                    stats = self._step_stats(
                        step, epoch, epochs, samples + window_samples, window_loss, window_steps,
                        window_samples, window_wait, window_began, training_began,
                    )
                    yield stats
                    epoch_loss += window_loss
                    epoch_samples += window_samples
                    epoch_wait += window_wait
                    samples += window_samples
                    window_loss = torch.zeros((), device=device)
                    window_samples = window_steps = 0
                    window_wait = 0.0
                    window_began = time.perf_counter()
            if window_steps:  # stopped mid-window: report the steps done, so every count of them agrees
                yield self._step_stats(
                    step, epoch, epochs, samples + window_samples, window_loss, window_steps,
                    window_samples, window_wait, window_began, training_began,
                )
                epoch_loss += window_loss
                epoch_samples += window_samples
                samples += window_samples
            if self.stopped_at is not None or epoch_samples == 0:
                break
            train_seconds = time.perf_counter() - epoch_began
            yield StatusChanged(f"Evaluating epoch {epoch}…")
            yield self._epoch_stats(
                epoch, epochs, step, epoch_loss, epoch_correct, epoch_samples, epoch_wait, train_seconds
            )

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _step_stats(
        self, step, epoch, epochs, samples, window_loss, window_steps, window_samples, window_wait,
        window_began, training_began,
    ) -> StepStats:
        self._synchronize()  # the one sync of the window: the loss and events become readable
        now = time.perf_counter()
        loss = window_loss.item() / window_steps
        if not math.isfinite(loss):
            raise Diverged(
                f"loss became {loss} at step {step}: try a lower lr (now {self.config.lr:g})"
                + (" or bf16/fp32 instead of fp16" if self.config.precision == "fp16" else "")
            )
        window_seconds = now - window_began
        return StepStats(
            step=step,
            total_steps=self.total_steps,
            epoch=epoch,
            epochs=epochs,
            samples_seen=samples,
            loss=loss,
            lr=self.train_step.lr,
            images_per_sec=window_samples / window_seconds if window_seconds > 0 else 0.0,
            data_wait_seconds=window_wait,
            device_span_seconds=self.timer.read_seconds(),
            window_seconds=window_seconds,
            elapsed_seconds=now - training_began,
            memory=self.memory.snapshot(),
        )

    def _epoch_stats(
        self, epoch, epochs, step, epoch_loss, epoch_correct, epoch_samples, epoch_wait, train_seconds
    ) -> EpochStats:
        steps_done = epoch_samples // self.config.batch_size
        train_loss = epoch_loss.item() / max(1, steps_done)
        train_accuracy = epoch_correct.item() / epoch_samples
        eval_began = time.perf_counter()
        test_loss, test_accuracy = self.evaluate()
        return EpochStats(
            epoch=epoch,
            epochs=epochs,
            step=step,
            train_loss=train_loss,
            train_accuracy=train_accuracy,
            test_loss=test_loss,
            test_accuracy=test_accuracy,
            images_per_sec=epoch_samples / train_seconds if train_seconds > 0 else 0.0,
            data_wait_fraction=epoch_wait / train_seconds if train_seconds > 0 else 0.0,
            train_seconds=train_seconds,
            eval_seconds=time.perf_counter() - eval_began,
            memory=self.memory.snapshot(),
        )

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float]:
        """Loss and accuracy on the test split (plain cross-entropy, no label smoothing)."""
        self.model.eval()
        loss_sum = torch.zeros((), device=self.device)
        correct = torch.zeros((), device=self.device, dtype=torch.int64)
        for begin in range(0, len(self.test_labels), EVAL_BATCH_SIZE):
            images = self.prepare.normalise(self.test_images[begin : begin + EVAL_BATCH_SIZE])
            labels = self.test_labels[begin : begin + EVAL_BATCH_SIZE]
            with self.train_step.autocast():
                logits = self.forward(images)
            loss_sum += nn.functional.cross_entropy(logits.float(), labels, reduction="sum")
            correct += (logits.argmax(dim=1) == labels).sum()
        self.model.train()
        count = len(self.test_labels)
        return loss_sum.item() / count, correct.item() / count

    def close(self) -> None:
        self.batches.close()
        self.memory.close()


def _ineffective_settings(config: RunConfig, device: DeviceInfo) -> list[str]:
    """Settings that do nothing in this run, said once instead of silently ignored."""
    notes = []
    if device.type == "cpu":
        notes.append(f"CPU mode: {device.cpu_fallback_reason}")
        if config.pipeline == "dataloader" and (config.pin_memory or config.non_blocking):
            notes.append("pin_memory and non_blocking have no effect without a CUDA device")
    if config.pipeline == "gpu-resident":
        notes.append("num_workers, pin_memory, prefetch_factor and persistent_workers have no effect "
                     "with pipeline=gpu-resident (no DataLoader)")
    elif config.num_workers == 0:
        notes.append("persistent_workers and prefetch_factor need num_workers ≥ 1: batches load in the "
                     "training thread")
    return notes

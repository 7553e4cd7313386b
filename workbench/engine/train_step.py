"""One training step: forward under autocast, scaled backward, an optimizer step every k micro-batches.

Also the optimizer and the learning-rate schedule the step applies, and ``build_training``: the model and its step
as a run builds them, for the run and the ceiling probe alike. Nothing here reads a figure back from the device:
the step stays free of host syncs.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Callable, ContextManager, Optional, cast

import torch
from torch import nn

from workbench.config import RunConfig
from workbench.engine.models import build_model, check_batch_logits, check_model, main_output, to_memory_format

WARMUP_FRACTION = 0.1


class TrainStep:
    """One micro-batch per call; an optimizer step every ``accumulation_steps`` micro-batches.

    The loss is divided by k, so k micro-batches of b give the gradient of one batch of k·b. When
    ``total_micro_batches`` is not a multiple of k, the r micro-batches left at the end form a
    smaller last group: their loss is divided by r and the run ends with their optimizer step, so
    every micro-batch computed also trains the model (instead of being silently dropped).

    ``max_grad_norm`` clips the gradients' total norm before each optimizer step, after
    ``scaler.unscale_`` so fp16's scale does not enter the norm (as nanoGPT does).
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
        no_sync: Optional[Callable[[], ContextManager]] = None,
        total_micro_batches: Optional[int] = None,
        max_grad_norm: Optional[float] = None,
        num_classes: Optional[int] = None,
    ):
        self.model, self.optimizer, self.criterion = model, optimizer, criterion
        self.num_classes = num_classes  # the logits' width each batch is checked against (None: not checked)
        self.accumulation_steps = accumulation_steps
        self.lr_at = lr_at
        self.no_sync = no_sync  # DistributedDataParallel's: micro-batches that do not step skip the all-reduce
        self.max_grad_norm = max_grad_norm
        # Micro-batches in full groups of k; those after it form the smaller last group.
        self._full_groups_end = (
            total_micro_batches - total_micro_batches % accumulation_steps if total_micro_batches else None
        )
        self._total_micro_batches = total_micro_batches
        amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
        self.autocast = (
            (lambda: torch.autocast(device_type, dtype=amp_dtype)) if amp_dtype else contextlib.nullcontext
        )
        self.scaler = torch.amp.GradScaler(device_type, enabled=amp_dtype is torch.float16)
        self.micro_batches = 0
        self.optimizer_steps = 0
        # fp16: optimizer steps the GradScaler asked for, and those the optimizer took (a step hook counts them, on
        # the host: the scaler has already read its inf/NaN check back to decide). The difference is the skips.
        self._scaled_steps = 0
        self._taken_steps = 0
        self._skips_inside_kernel = amp_dtype is torch.float16 and getattr(optimizer, "_step_supports_amp_scaling",
                                                                           False)
        self._kernel_skips = 0
        self._scale_at_read = float(self.scaler.get_scale()) if self._skips_inside_kernel else 0.0  # the initial scale
        if amp_dtype is torch.float16:
            optimizer.register_step_post_hook(self._count_taken_step)
        self._set_lr()

    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def _set_lr(self) -> None:
        if self.lr_at is not None:
            for group in self.optimizer.param_groups:
                group["lr"] = self.lr_at(self.optimizer_steps)

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        group_size, steps_after = self._group_of(self.micro_batches)
        # DistributedDataParallel's no_sync: micro-batches that do not step skip the gradient all-reduce.
        with self.no_sync() if self.no_sync is not None and not steps_after else contextlib.nullcontext():
            with self.autocast():
                logits = main_output(self.model(images))
                check_batch_logits(logits, images, self.num_classes)
                loss = self.criterion(logits, labels)
            self.scaler.scale(loss / group_size).backward()
        self.micro_batches += 1
        if steps_after:
            self._optimizer_step()
        return loss.detach(), logits.detach()

    def _group_of(self, index: int) -> tuple[int, bool]:
        """(size of the accumulation group micro-batch ``index`` belongs to, whether the step follows it)."""
        k = self.accumulation_steps
        full_groups_end, total = self._full_groups_end, self._total_micro_batches
        if full_groups_end is None or total is None or index < full_groups_end:  # (both None or neither)
            return k, (index + 1) % k == 0
        return total - full_groups_end, index + 1 == total

    def _optimizer_step(self) -> None:
        if self.max_grad_norm is not None:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients, not fp16's scaled ones
            nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        if self.scaler.is_enabled():
            self.scaler.step(self.optimizer)  # does not call optimizer.step when the gradients hold inf/NaN
            self.scaler.update()
            self._scaled_steps += 1
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.optimizer_steps += 1
        self._set_lr()

    def _count_taken_step(self, optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        self._taken_steps += 1

    def read_skipped_steps(self) -> int:
        """Optimizer steps the fp16 scaler has skipped so far (call at log points)."""
        if not self._skips_inside_kernel:
            return self._scaled_steps - self._taken_steps
        # A fused optimizer takes every step and skips an overflowing one inside its kernel, so no hook can see the
        # skip; the scale halves at each, so count the halvings since the last read (a growth, every 2,000 clean
        # steps, in the same window would hide one: the count is then one low).
        scale = float(self.scaler.get_scale())
        if scale < self._scale_at_read:
            self._kernel_skips += round(math.log2(self._scale_at_read / scale))
        self._scale_at_read = scale
        return self._kernel_skips

    def read_loss_scale(self) -> Optional[float]:
        """The fp16 scaler's current scale (a device read: call at log points); None without a scaler."""
        return float(self.scaler.get_scale()) if self.scaler.is_enabled() else None


def optimizer_steps_in(total_micro_batches: int, accumulation_steps: int) -> int:
    """Optimizer steps a run of this many micro-batches takes (a smaller last group steps too)."""
    return -(-total_micro_batches // accumulation_steps)


def warmup_linear_decay(base_lr: float, total_optimizer_steps: int) -> Callable[[int], float]:
    """Linear warm-up over the first tenth of the optimizer steps, then linear decay towards 0."""
    total = max(1, total_optimizer_steps)
    warmup = max(1, int(total * WARMUP_FRACTION))

    def lr_at(optimizer_step: int) -> float:
        if optimizer_step < warmup:
            return base_lr * (optimizer_step + 1) / warmup
        return base_lr * max(0.0, (total - optimizer_step) / max(1, total - warmup))

    return lr_at


def build_optimizer(config: RunConfig, model: nn.Module, device_type: str = "cpu") -> torch.optim.Optimizer:
    """SGD with Nesterov momentum, or AdamW; fused (one kernel for the whole update) when asked for on CUDA."""
    fused = True if config.fused_optimizer and device_type == "cuda" else None  # None: the optimizers' default
    if config.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, fused=fused)
    return torch.optim.SGD(
        model.parameters(), lr=config.lr, momentum=0.9, nesterov=True, weight_decay=config.weight_decay, fused=fused
    )


def compiled(model: nn.Module, mode: str) -> nn.Module:
    """``model`` under torch.compile in ``mode`` (RunConfig.compile), or itself when the mode is off."""
    if mode == "off":
        return model
    # A module compiles to an OptimizedModule, itself a Module: torch.compile's stub says only "a callable like it".
    return cast(nn.Module, torch.compile(model, mode=None if mode == "default" else mode))


@dataclass(frozen=True)
class Training:
    """A run's model and the step that trains it."""

    model: nn.Module  # the bare model in its memory format: evaluation and the parameter count use it
    step: TrainStep  # calls the model as trained: wrapped for data parallel where asked, compiled where asked


def build_training(config: RunConfig, num_classes: int, device: torch.device, total_micro_batches: Optional[int] = None,
                   wrap: Optional[Callable[[nn.Module], nn.Module]] = None) -> Training:
    """The model and its train step for ``config``: built, checked on a dummy batch (ModelError in words), in its
    memory format, wrapped (``wrap``: one rank's DistributedDataParallel), compiled, with the run's optimizer, loss,
    precision, accumulation and gradient clipping. The run (session.py) and the ceiling probe (ceiling.py) both build
    theirs here, so the probe times the kernels the run's steps run. ``total_micro_batches``: the run's length, for
    the learning-rate schedule and a last smaller accumulation group (None: an open-ended loop at the base rate)."""
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = config.cudnn_benchmark
    model = build_model(config.model, num_classes, config.image_size, config.model_kwargs).to(device)
    check_model(model, num_classes, config.image_size, device, config.model)
    model = to_memory_format(model, config.channels_last)
    trained = wrap(model) if wrap is not None else model
    lr_at = (warmup_linear_decay(config.lr, optimizer_steps_in(total_micro_batches, config.accumulation_steps))
             if total_micro_batches is not None else None)
    step = TrainStep(
        compiled(trained, config.compile),
        build_optimizer(config, model, device.type),
        nn.CrossEntropyLoss(label_smoothing=config.label_smoothing),
        device.type,
        config.precision,
        config.accumulation_steps,
        lr_at,
        no_sync=getattr(trained, "no_sync", None),
        total_micro_batches=total_micro_batches,
        max_grad_norm=config.max_grad_norm,
        num_classes=num_classes,
    )
    return Training(model, step)

"""One training step: forward under autocast, scaled backward, an optimizer step every k micro-batches.

Also the optimizer and the learning-rate schedule the step applies. Nothing here reads a figure
back from the device: the step stays free of host syncs.
"""

from __future__ import annotations

import contextlib
from typing import Callable, ContextManager, Optional

import torch
from torch import nn

from workbench.config import RunConfig

WARMUP_FRACTION = 0.1


class TrainStep:
    """One micro-batch per call; an optimizer step every ``accumulation_steps`` micro-batches.

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
        no_sync: Optional[Callable[[], ContextManager]] = None,
    ):
        self.model, self.optimizer, self.criterion = model, optimizer, criterion
        self.accumulation_steps = accumulation_steps
        self.lr_at = lr_at
        # DistributedDataParallel's no_sync: micro-batches that do not step skip the gradient all-reduce.
        self.no_sync = no_sync
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
        steps = (self.micro_batches + 1) % self.accumulation_steps == 0
        with self.no_sync() if self.no_sync is not None and not steps else contextlib.nullcontext():
            with self.autocast():
                logits = self.model(images)
                loss = self.criterion(logits, labels)
            self.scaler.scale(loss / self.accumulation_steps).backward()
        self.micro_batches += 1
        if self.micro_batches % self.accumulation_steps == 0:
            self._optimizer_step()
        return loss.detach(), logits.detach()

    def _optimizer_step(self) -> None:
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.optimizer_steps += 1
        self._set_lr()


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

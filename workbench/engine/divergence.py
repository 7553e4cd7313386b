"""When a run has diverged: read at each log point, it raises ``Diverged`` (the run ends failed, kind "diverged",
keeping its figures; findings.py then names lr as the setting to change).

Three ways a run breaks:
- its loss is non-finite at several log points in a row: the weights themselves are inf/NaN;
- fp16's loss scale collapsed: gradients overflow at nearly every step;
- its loss rose far above where it started and stayed there, finite: the weights blew up without overflowing
  (an MLP at lr 0.3 went from 2.1 to 20,000 and "finished" at 125, with a throughput finding as its verdict).
"""

from __future__ import annotations

import math
from typing import Optional

from workbench.config import RunConfig
from workbench.engine.failures import Diverged

# A run has diverged when its loss is non-finite at this many log points in a row. One non-finite
# window can be a single overflowing fp16 batch the scaler skipped, with the weights still finite;
# three in a row means the weights themselves are inf/NaN, which no later step undoes.
NONFINITE_WINDOWS_TO_DIVERGE = 3
# fp16's GradScaler halves its scale (from 65,536) at every step whose gradients overflow. Below this
# floor (fairseq's --min-loss-scale default) gradients overflow at nearly every step: the run has broken.
MIN_LOSS_SCALE = 1e-4
# A loss this many times where it started, at this many log points in a row, has diverged. Where it started: the
# first log point's loss, or chance (ln classes: a fresh classifier's loss) if that is higher, so a run that starts
# low (a tiny first window) is not held to a hair trigger. 10× chance is a model confidently wrong on nearly every
# image (10 classes: 23, probability e^-23 on the right one); a noisy start spikes once, not three log points
# running (small-cnn at lr 10 peaked at 15× its first window for one log point, then settled).
ROSE_FACTOR = 10.0
HIGH_WINDOWS_TO_DIVERGE = 3


class DivergenceWatch:
    """One run's divergence rules, fed each log point's loss and loss scale."""

    def __init__(self, config: RunConfig, num_classes: int):
        self.config = config
        self.chance_loss = math.log(max(1, num_classes))
        self.start_loss: Optional[float] = None  # the loss a "rise" is measured from
        self._nonfinite_windows = 0
        self._high_losses: list[float] = []  # the log points in a row at ROSE_FACTOR × start_loss or more

    def check(self, loss: float, loss_scale: Optional[float], step: int, skipped_steps: int,
              optimizer_steps: int) -> None:
        """Raise ``Diverged`` with what broke and what to try, or return."""
        self._nonfinite_windows = 0 if math.isfinite(loss) else self._nonfinite_windows + 1
        if self._nonfinite_windows >= NONFINITE_WINDOWS_TO_DIVERGE:
            raise Diverged(
                f"loss was {loss} at {self._nonfinite_windows} log points in a row (up to step {step}): "
                f"the weights are no longer finite; {self.advice()}"
            )
        if loss_scale is not None and loss_scale < MIN_LOSS_SCALE:
            raise Diverged(
                f"the fp16 loss scale fell to {loss_scale:.2g} (floor {MIN_LOSS_SCALE:g}) by step {step}: "
                f"gradients overflow at nearly every step ({skipped_steps:,} of "
                f"{optimizer_steps:,} optimizer steps skipped); {self.advice()}"
            )
        self._check_rise(loss, step)

    def _check_rise(self, loss: float, step: int) -> None:
        if math.isnan(loss):
            return  # the non-finite rule's case
        if self.start_loss is None:
            if not math.isfinite(loss):
                return
            self.start_loss = max(loss, self.chance_loss)
        if loss < ROSE_FACTOR * self.start_loss:
            self._high_losses.clear()
            return
        self._high_losses.append(loss)
        if len(self._high_losses) >= HIGH_WINDOWS_TO_DIVERGE:
            losses = ", ".join(f"{value:.3g}" for value in self._high_losses)
            raise Diverged(
                f"training diverged: the loss rose to {losses} at {len(self._high_losses)} log points in a row "
                f"(up to step {step}), over {ROSE_FACTOR:g}× where it started ({self.start_loss:.3g}); "
                f"{self.advice()}"
            )

    def advice(self) -> str:
        advice = f"try a lower lr (now {self.config.lr:g})"
        if self.config.max_grad_norm is None:
            advice += " or max_grad_norm=1.0"
        if self.config.precision == "fp16":
            advice += ", or bf16 (fp32's range, no scaler) or fp32 instead of fp16"
        return advice

"""fp16 skipped steps are counted (on the device), a broken run ends as diverged with its figure, clipping clips.

fp16 needs CUDA in a real run; on this CPU the tests let the run use CPU autocast fp16 with a CPU
GradScaler (hardware check waived) and inject inf/NaN through an autograd function in the model's output.
"""

import math

import pytest
import torch
from engine_helpers import run_to_end, tiny_config
from torch import nn

from workbench.config import RunConfig
from workbench.engine import train_step as train_step_module
from workbench.engine.divergence import MIN_LOSS_SCALE, NONFINITE_WINDOWS_TO_DIVERGE
from workbench.engine.events import StepStats
from workbench.engine.train_step import TrainStep


class _Poison(torch.autograd.Function):
    """Forward: the logits, or NaN logits (a non-finite loss). Backward: the gradient, or inf (an overflow)."""

    @staticmethod
    def forward(ctx, logits, nan_forward: bool, inf_backward: bool):
        ctx.inf_backward = inf_backward
        return logits * float("nan") if nan_forward else logits.clone()

    @staticmethod
    def backward(ctx, grad):
        return (grad * float("inf") if ctx.inf_backward else grad), None, None


class Poisoned(nn.Module):
    """The run's model; training steps (1-based) in ``inf_grads`` overflow, those in ``nan_loss`` give NaN."""

    def __init__(self, model, inf_grads=(), nan_loss=()):
        super().__init__()
        self.model, self.inf_grads, self.nan_loss = model, set(inf_grads), set(nan_loss)
        self.calls = 0

    def forward(self, images):
        logits = self.model(images)
        if not self.training:
            return logits
        self.calls += 1
        return _Poison.apply(logits, self.calls in self.nan_loss, self.calls in self.inf_grads)


@pytest.fixture
def poison(monkeypatch):
    def install(**steps):
        # A linear model: CPU fp16 convolutions are emulated and slow, and the poison does not need them.
        monkeypatch.setattr(train_step_module, "build_model", lambda name, classes, *rest: Poisoned(
            nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, classes)), **steps))

    return install


@pytest.fixture
def fp16_on_cpu(monkeypatch):
    """CPU autocast fp16 with a CPU GradScaler: the engine's own fp16 path, without a GPU."""
    monkeypatch.setattr(RunConfig, "hardware_problems", lambda self, device: [])


def test_skipped_fp16_steps_are_counted_per_window_and_in_the_summary(poison, fp16_on_cpu):
    poison(inf_grads={3, 4, 9})
    events = run_to_end(tiny_config(precision="fp16", max_steps=12, log_every=4, lr=0.01))
    ended = events[-1]
    assert ended.status == "finished", ended.reason
    windows = [event for event in events if isinstance(event, StepStats)]
    assert [(window.step, window.skipped_optimizer_steps) for window in windows] == [(4, 2), (8, 0), (12, 1)]
    assert [window.loss_scale for window in windows] == [65536 / 4, 65536 / 4, 65536 / 8]  # halved at each skip
    assert all(math.isfinite(window.loss) for window in windows)
    assert ended.summary.skipped_optimizer_steps == 3


def test_fp32_has_no_scaler_and_skips_nothing():
    events = run_to_end(tiny_config(precision="fp32"))
    windows = [event for event in events if isinstance(event, StepStats)]
    assert all(window.skipped_optimizer_steps == 0 and window.loss_scale is None for window in windows)
    assert events[-1].summary.skipped_optimizer_steps == 0


def test_one_overflowing_window_is_not_divergence(poison, fp16_on_cpu):
    """fp16: the scaler skips the step of a NaN batch and the weights stay finite; the run goes on."""
    poison(nan_loss={3}, inf_grads={3})
    events = run_to_end(tiny_config(precision="fp16", max_steps=8, log_every=2, lr=0.01))
    assert events[-1].status == "finished", events[-1].reason
    losses = [event.loss for event in events if isinstance(event, StepStats)]
    assert math.isnan(losses[1]) and all(math.isfinite(loss) for loss in losses[2:])


def test_a_loss_non_finite_at_three_log_points_in_a_row_is_divergence(poison):
    poison(nan_loss=set(range(5, 100)))
    events = run_to_end(tiny_config(max_steps=40, log_every=2, lr=0.01))
    ended = events[-1]
    assert NONFINITE_WINDOWS_TO_DIVERGE == 3
    assert ended.status == "failed" and ended.kind == "diverged"
    assert ended.reason == ("loss was nan at 3 log points in a row (up to step 10): the weights are no longer finite; "
                            "try a lower lr (now 0.01) or max_grad_norm=1.0")
    assert [event.step for event in events if isinstance(event, StepStats)] == [2, 4, 6, 8]
    assert ended.summary.final_loss is None  # a NaN is not a figure: the reason says what happened
    assert ended.summary.steps == 10  # the steps trained, as the reason says: the last window ended in the failure


def test_a_collapsed_fp16_loss_scale_is_divergence(poison, fp16_on_cpu):
    poison(inf_grads=set(range(1, 200)))  # every step overflows: the scale halves from 65,536 each time
    events = run_to_end(tiny_config(precision="fp16", max_steps=100, log_every=5, lr=0.01, synthetic_size=512))
    ended = events[-1]
    assert ended.status == "failed" and ended.kind == "diverged"
    assert ended.reason.startswith("the fp16 loss scale fell to ")
    # 65,536 / 2**30 = 6.1e-05 is the first scale below the floor of 1e-04
    assert ended.reason == (f"the fp16 loss scale fell to 6.1e-05 (floor {MIN_LOSS_SCALE:g}) by step 30: gradients "
                            "overflow at nearly every step (30 of 30 optimizer steps skipped); try a lower lr (now "
                            "0.01) or max_grad_norm=1.0, or bf16 (fp32's range, no scaler) or fp32 instead of fp16")
    windows = [event for event in events if isinstance(event, StepStats)]
    assert [window.step for window in windows] == [5, 10, 15, 16, 20, 25]  # 16: the first epoch's end
    assert [window.loss_scale for window in windows] == [65536 / 2**window.step for window in windows]
    assert [window.skipped_optimizer_steps for window in windows] == [5, 5, 5, 1, 4, 5]


def linear_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10))


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_max_grad_norm_clips_the_true_gradient(precision):
    """SGD with lr 1 and no momentum moves the weights by the gradient: its norm is at most max_grad_norm."""
    images = torch.randn(16, 3, 8, 8, generator=torch.Generator().manual_seed(1)) * 50
    labels = torch.randint(0, 10, (16,), generator=torch.Generator().manual_seed(2))

    def update_norm(max_grad_norm):
        model = linear_model()
        before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
        step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=1.0), nn.CrossEntropyLoss(), "cpu", precision,
                         max_grad_norm=max_grad_norm)
        if precision == "fp16":  # a scale whose gradients fit in fp16 here (65,536 would overflow: a skipped step)
            step.scaler = torch.amp.GradScaler("cpu", init_scale=16.0)
        step(images, labels)
        assert step.read_skipped_steps() == 0
        after = torch.cat([p.detach().flatten() for p in model.parameters()])
        return float((after - before).norm())

    assert update_norm(None) > 1.0
    assert update_norm(0.5) == pytest.approx(0.5, rel=1e-2)  # clipped after unscaling: fp16's 16 is not in it


def test_max_grad_norm_is_a_setting_with_a_range():
    assert RunConfig().max_grad_norm is None
    assert RunConfig(max_grad_norm=1.0).validate() == []
    assert RunConfig(max_grad_norm=0.0).validate() == ["max_grad_norm must be between 1e-06 and 1e+06 (got 0)"]
    assert RunConfig.from_dict({"max_grad_norm": 2}).max_grad_norm == 2.0


def mlp(name, classes, *rest):
    """No normalization anywhere: at a high lr its weights blow up without overflowing (the issue's 2 → 2e17)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 256), nn.ReLU(), nn.Linear(256, classes))


def test_a_loss_that_rises_far_above_its_start_and_stays_there_is_divergence(monkeypatch):
    # Before: this run went 2.1 → 20,000 → 125 and "finished", its one finding about speed.
    monkeypatch.setattr(train_step_module, "build_model", mlp)
    events = run_to_end(tiny_config(synthetic_size=1024, max_steps=120, log_every=4, lr=0.3))
    ended = events[-1]
    losses = [event.loss for event in events if isinstance(event, StepStats)]
    assert ended.status == "failed" and ended.kind == "diverged", ended.reason
    assert ended.reason.startswith("training diverged: the loss rose to ") and ended.reason.endswith(
        "at 3 log points in a row (up to step 24), over 10× where it started (2.3); try a lower lr (now 0.3) or "
        "max_grad_norm=1.0"), ended.reason
    assert losses[0] < 2.3 and all(loss > 23 for loss in losses[-2:])  # the third high point ended the run
    first = ended.summary.findings[0]
    assert (first.kind, first.field, first.value) == ("diverged", "lr", 0.03)
    assert first.figure == ended.summary.final_loss == losses[-1]  # the run keeps its figures


def test_a_learning_run_is_not_divergence(monkeypatch):
    monkeypatch.setattr(train_step_module, "build_model", mlp)
    events = run_to_end(tiny_config(synthetic_size=1024, max_steps=40, log_every=4, lr=0.05))
    assert events[-1].status == "finished", events[-1].reason
    assert all(finding.kind != "diverged" for finding in events[-1].summary.findings)


# Noisy starts as log points' losses, fed to the rule itself: a real run's trajectory at a high lr depends on the
# CPU's float rounding (small-cnn at lr 5 gave the first on an AMD EPYC; on an Intel Xeon, 20.6, 106, 31.5, 8.4).
NOISY_STARTS = {
    "spikes twice": [16.5, 88.0, 138.0, 30.0, 2.4, 2.3, 2.3, 2.3, 2.3, 2.3],
    "starts high": [25.0, 180.0, 240.0, 60.0, 3.0, 2.3, 2.3, 2.3, 2.3, 2.3],
}


@pytest.mark.parametrize("name", list(NOISY_STARTS))
def test_a_noisy_start_is_not_divergence(name):
    from workbench.engine.divergence import DivergenceWatch

    losses = NOISY_STARTS[name]
    high = [loss > 10 * math.log(10) for loss in losses]  # a rule held to chance alone would fire
    assert any(all(high[i:i + 3]) for i in range(len(high) - 2))
    watch = DivergenceWatch(RunConfig(lr=5.0), num_classes=10)
    for step, loss in enumerate(losses, start=1):
        watch.check(loss, None, 4 * step, 0, 4 * step)  # raises Diverged if the rule fires
    assert watch.start_loss == losses[0]  # held to the first log point, not to chance


@pytest.mark.parametrize("losses, diverged", [
    ([2.3, 30, 30, 30], True),
    ([2.3, 30, 30, 2.0, 30, 30], False),  # not in a row
    ([50, 60, 70, 80], False),  # a high start is where it started
    ([0.01, 0.5, 0.5, 0.5], False),  # a low start is held to chance (ln 10), not to a hair trigger
    ([0.01, 30, 30, 30], True),
    ([2.3, float("inf"), 30, 30], True),  # an overflowing window counts as high
])
def test_the_rise_rule_on_its_own(losses, diverged):
    from workbench.engine.divergence import DivergenceWatch
    from workbench.engine.failures import Diverged

    watch = DivergenceWatch(RunConfig(), num_classes=10)
    try:
        for step, loss in enumerate(losses, start=1):
            watch.check(loss, None, step, 0, step)
    except Diverged:
        assert diverged
    else:
        assert not diverged

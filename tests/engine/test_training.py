"""The training loop: accumulation, events, stop, every CPU combination, real learning."""

import multiprocessing
import threading
from typing import Callable, Optional

import pytest
import torch
from engine_helpers import run_to_end, tiny_config
from torch import nn

from workbench.config import CHOICES
from workbench.engine import run
from workbench.engine.events import EpochStats, RunStarted, StatusChanged, StepStats
from workbench.engine.train_step import TrainStep, warmup_linear_decay


def linear_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 16), nn.Tanh(), nn.Linear(16, 10))  # no batch-norm


@pytest.mark.parametrize("optimizer_name", ["sgd", "adamw"])
def test_k_micro_batches_make_the_same_update_as_one_big_batch(optimizer_name):
    images = torch.randn(32, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    labels = torch.randint(0, 10, (32,), generator=torch.Generator().manual_seed(2))

    def trained(micro_batch: int, k: int) -> nn.Module:
        model = linear_model()
        if optimizer_name == "sgd":
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        else:
            optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
        step = TrainStep(model, optimizer, nn.CrossEntropyLoss(), "cpu", "fp32", accumulation_steps=k)
        for _ in range(2):  # two optimizer steps: momentum / Adam state must agree too
            for start in range(0, 32, micro_batch):
                step(images[start : start + micro_batch], labels[start : start + micro_batch])
        assert step.optimizer_steps == 2
        return model

    one_batch = trained(micro_batch=32, k=1)
    accumulated = trained(micro_batch=8, k=4)
    for big, small in zip(one_batch.parameters(), accumulated.parameters()):
        torch.testing.assert_close(small, big, rtol=1e-5, atol=1e-6)


def test_no_optimizer_step_before_k_micro_batches():
    model = linear_model()
    before = [p.detach().clone() for p in model.parameters()]
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), "cpu",
                     accumulation_steps=3)
    batch = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
    step(*batch)
    step(*batch)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    step(*batch)
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert all(p.grad is None for p in model.parameters())  # zero_grad(set_to_none=True)


def test_lr_schedule_warms_up_then_decays():
    lr_at = warmup_linear_decay(0.1, 100)
    assert lr_at(0) == pytest.approx(0.01)
    assert lr_at(9) == pytest.approx(0.1)
    assert lr_at(55) == pytest.approx(0.05)
    assert lr_at(99) < 0.002


def test_event_stream_of_a_finished_run():
    events = run_to_end(tiny_config(epochs=2, max_steps=None, synthetic_size=128, log_every=2))
    kinds = [type(event) for event in events]
    assert kinds[0] is StatusChanged
    started = next(e for e in events if isinstance(e, RunStarted))
    assert started.device.type == "cpu" and started.steps_per_epoch == 4 and started.total_steps == 8
    assert started.train_size == 128 and started.test_size == 25 and started.num_classes == 10
    steps = [e for e in events if isinstance(e, StepStats)]
    assert [s.step for s in steps] == [2, 4, 6, 8]
    assert [s.epoch for s in steps] == [1, 1, 2, 2]
    assert steps[-1].samples_seen == 8 * 32
    for stats in steps:
        assert stats.images_per_sec > 0 and stats.window_seconds > 0 and stats.loss > 0
        assert 0 <= stats.data_wait_seconds <= stats.window_seconds
        assert 0 < stats.device_span_seconds <= stats.window_seconds
        assert stats.memory.torch_allocated is None and stats.memory.nvml_unavailable_reason
    epochs = [e for e in events if isinstance(e, EpochStats)]
    assert [e.epoch for e in epochs] == [1, 2]
    assert all(0 <= e.test_accuracy <= 1 for e in epochs)
    ended = events[-1]
    assert ended.status == "finished" and ended.summary.steps == 8 and ended.summary.epochs_completed == 2
    assert ended.summary.final_loss == steps[-1].loss
    assert ended.summary.test_accuracy == epochs[-1].test_accuracy
    # frozen and plain: safe to hand across threads
    with pytest.raises(Exception):
        ended.status = "failed"  # type: ignore[misc]


def test_accumulation_counts_micro_batches_as_steps():
    events = run_to_end(tiny_config(accumulation_steps=2, max_steps=4))
    assert [e.step for e in events if isinstance(e, StepStats)] == [2, 4]
    assert events[-1].status == "finished"


SUPPORTED_ON_CPU = [
    (pipeline, augment, precision)
    for pipeline in CHOICES["pipeline"]
    for augment in CHOICES["augment"]
    for precision in CHOICES["precision"]
]


@pytest.mark.parametrize("pipeline, augment, precision", SUPPORTED_ON_CPU)
def test_every_combination_runs_or_says_why_not(pipeline, augment, precision):
    config = tiny_config(pipeline=pipeline, augment=augment, precision=precision, num_workers=1, device="auto",
                         persistent_workers=False, max_steps=2)
    ended = run_to_end(config)[-1]
    refusals = []
    if augment == "cpu" and pipeline == "gpu-resident":
        refusals.append("augment=cpu needs pipeline=dataloader")
    if precision in ("fp16", "bf16") and not torch.cuda.is_available():
        refusals.append(f"{precision} needs a CUDA GPU")
    if refusals:
        assert ended.status == "failed" and ended.kind == "config"
        assert all(reason in ended.reason for reason in refusals)
    else:
        assert ended.status == "finished", ended.reason
        assert ended.summary.steps == 2


def test_stop_ends_within_one_step_and_leaves_no_workers():
    stop = threading.Event()
    config = tiny_config(num_workers=2, persistent_workers=True, synthetic_size=2048, epochs=5,
                         max_steps=None, log_every=1)
    steps_after_stop = 0
    events = []
    for event in run(config, stop.is_set):
        events.append(event)
        if isinstance(event, StepStats):
            if stop.is_set():
                steps_after_stop += 1
            if event.step == 3:
                stop.set()
    assert events[-1].status == "stopped"
    assert events[-1].reason == "stopped by the user at step 3"
    assert steps_after_stop == 0
    assert multiprocessing.active_children() == []


def test_closing_the_generator_mid_run_shuts_the_workers_down():
    config = tiny_config(num_workers=2, persistent_workers=True, synthetic_size=2048, max_steps=None, epochs=5)
    events = run(config)
    for event in events:
        if isinstance(event, StepStats):
            assert multiprocessing.active_children()  # the workers are up
            break
    events.close()
    assert multiprocessing.active_children() == []


def test_divergence_fails_the_run_with_advice():
    ended = run_to_end(tiny_config(lr=10.0, optimizer="sgd", max_steps=8, log_every=8))[-1]
    if ended.status == "failed":
        assert ended.kind == "diverged" and "try a lower lr" in ended.reason
    else:  # a lucky run: then its loss must still be finite
        assert ended.summary.final_loss is not None and ended.summary.final_loss == ended.summary.final_loss


def test_an_exception_in_training_is_a_failed_run_with_its_reason(monkeypatch):
    from workbench.engine import train_step as train_step_module

    def explode(*args, **kwargs):
        raise RuntimeError("model exploded")

    monkeypatch.setattr(train_step_module, "build_model", explode)
    ended = run_to_end(tiny_config())[-1]
    assert ended.status == "failed" and ended.kind == "error"
    assert ended.reason == "RuntimeError: model exploded"


def counted_steps(monkeypatch, fail_at: Optional[int] = None) -> Callable[[], int]:
    """TrainStep.__call__ counted (raising in step ``fail_at``): the steps taken so far."""
    from workbench.engine import train_step

    taken = 0
    original = train_step.TrainStep.__call__

    def counting(self, images, labels):
        nonlocal taken
        taken += 1
        if taken == fail_at:
            raise RuntimeError(f"boom in step {fail_at}")
        return original(self, images, labels)

    monkeypatch.setattr(train_step.TrainStep, "__call__", counting)
    return lambda: taken


def test_a_stop_mid_window_reports_the_steps_done_once(monkeypatch):
    """"stopped by the user at step 5" and the summary's steps are the same count (log points every 4)."""
    config = tiny_config(synthetic_size=512, epochs=2, max_steps=None, log_every=4)
    steps_taken = counted_steps(monkeypatch)
    events = run_to_end(config, lambda: steps_taken() >= 5)  # the loop asks before each step: steps 1-5 run
    ended = events[-1]
    steps = [event for event in events if isinstance(event, StepStats)]
    assert ended.status == "stopped" and ended.reason == "stopped by the user at step 5"
    assert ended.summary.steps == 5 and steps[-1].step == 5
    assert ended.summary.samples_seen == 5 * config.batch_size


def test_a_failure_mid_window_keeps_the_steps_done_in_the_runs_counts(monkeypatch):
    """A model failing in step 7 with log points every 4: steps 1-6 trained, not the 4 of the last log point."""
    config = tiny_config(synthetic_size=512, epochs=2, max_steps=None, log_every=4)
    counted_steps(monkeypatch, fail_at=7)
    ended = run_to_end(config)[-1]
    assert ended.status == "failed" and ended.reason == "RuntimeError: boom in step 7"
    assert ended.summary.steps == 6 and ended.summary.samples_seen == 6 * config.batch_size


def test_a_stop_a_signal_asked_for_names_the_signal_in_the_reason():
    from workbench.engine.requests import StopRequest

    stop = StopRequest()
    events = []
    for event in run(tiny_config(synthetic_size=512, epochs=2, max_steps=None, log_every=1), stop):
        events.append(event)
        if isinstance(event, StepStats) and event.step == 2:
            stop.set("SIGTERM")  # as the CLI's SIGTERM handler does
    assert (events[-1].status, events[-1].reason) == ("stopped", "stopped by SIGTERM at step 2")


def test_max_steps_is_the_runs_length_even_past_the_epochs():
    """`--max-steps 12` runs 12 steps although one epoch is only 8 (README examples do what they say)."""
    events = run_to_end(tiny_config(synthetic_size=256, batch_size=32, epochs=1, max_steps=12, log_every=4))
    started = next(event for event in events if isinstance(event, RunStarted))
    ended = events[-1]
    assert started.total_steps == 12 and started.steps_per_epoch == 8
    assert ended.status == "finished" and ended.summary.steps == 12
    assert ended.summary.epochs_completed == 2  # the second, partial epoch ends with its evaluation too


def test_a_short_last_accumulation_group_is_applied_as_the_mean_of_its_micro_batches():
    """6 micro-batches with k=4: one step over the first 4, then one over the last 2 (not dropped)."""
    images = torch.randn(24, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    labels = torch.randint(0, 10, (24,), generator=torch.Generator().manual_seed(2))

    def sgd(model):
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    accumulated = linear_model()
    step = TrainStep(accumulated, sgd(accumulated), nn.CrossEntropyLoss(), "cpu", accumulation_steps=4,
                     total_micro_batches=6)
    for start in range(0, 24, 4):
        step(images[start : start + 4], labels[start : start + 4])
    assert step.optimizer_steps == 2

    reference = linear_model()  # the same two updates, each from one batch
    one_batch = TrainStep(reference, sgd(reference), nn.CrossEntropyLoss(), "cpu")
    one_batch(images[:16], labels[:16])
    one_batch(images[16:], labels[16:])
    for expected, got in zip(reference.parameters(), accumulated.parameters()):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_a_run_that_is_not_a_multiple_of_accumulation_steps_says_how_it_ends():
    events = run_to_end(tiny_config(max_steps=6, accumulation_steps=4))
    started = next(event for event in events if isinstance(event, RunStarted))
    assert ("6 steps are not a multiple of accumulation_steps=4: the last 2 micro-batches make a smaller final "
            "optimizer step (the mean gradient of those), so none is computed in vain") in started.notes
    assert events[-1].status == "finished"
    assert not any("multiple of" in note for note in next(
        event for event in run_to_end(tiny_config(max_steps=8, accumulation_steps=4)) if isinstance(event, RunStarted)
    ).notes)


def test_a_run_shorter_than_one_accumulation_group_is_refused_before_it_starts(tmp_path):
    from engine_helpers import write_npz

    from workbench.data_check import data_problems

    config = tiny_config(max_steps=3, accumulation_steps=4)
    assert config.validate() == ["max_steps 3 is fewer steps than accumulation_steps=4: the run would end before its "
                                 "first optimizer step; lower accumulation_steps or train longer"]
    by_epochs = tiny_config(max_steps=None, epochs=1, synthetic_size=96, batch_size=32, accumulation_steps=4)
    assert by_epochs.validate() == []  # the length comes from the data: the data check knows it
    assert data_problems(by_epochs) == ["1 epoch of 3 steps make fewer steps than accumulation_steps=4: the run "
                                        "would end before its first optimizer step; lower accumulation_steps or "
                                        "train longer"]
    # An npz whose size only the loaded arrays tell the engine: refused there, before RunStarted.
    path = write_npz(tmp_path / "small.npz", train=64)
    events = run_to_end(tiny_config(dataset="npz", data_path=str(path), max_steps=None, epochs=1, batch_size=32,
                                    accumulation_steps=4))
    assert not any(isinstance(event, RunStarted) for event in events)
    assert events[-1].kind == "data" and "1 epoch of 2 steps make fewer steps than accumulation_steps=4" in \
        events[-1].reason


def test_evaluate_false_trains_without_the_evaluation_pass(monkeypatch, capsys):
    from workbench.cli import main
    from workbench.engine.session import TrainingSession

    evaluations = []
    real = TrainingSession.evaluate
    monkeypatch.setattr(TrainingSession, "evaluate", lambda self: evaluations.append(1) or real(self))
    events = run_to_end(tiny_config(evaluate=False, epochs=2, max_steps=None, synthetic_size=64))
    epochs = [event for event in events if isinstance(event, EpochStats)]
    assert len(epochs) == 2 and evaluations == []
    assert not any(epoch.evaluated for epoch in epochs)
    assert not any(isinstance(e, StatusChanged) and e.message.startswith("Evaluating") for e in events)
    assert events[-1].status == "finished" and events[-1].summary.test_accuracy is None  # not measured: no figure
    run_to_end(tiny_config(epochs=1, max_steps=None, synthetic_size=64))
    assert evaluations == [1]  # the default evaluates, through the same spy
    assert main(["run", "--synthetic-size", "64", "--batch-size", "32", "--epochs", "1", "--device", "cpu",
                 "--num-workers", "0", "--no-history", "--no-evaluate"]) == 0
    printed = capsys.readouterr()
    assert evaluations == [1] and "not evaluated" in printed.err and "test accuracy  n/a" in printed.out

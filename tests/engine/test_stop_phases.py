"""Stop ends every phase of a run without waiting for it, recorded as stopped — also the phases that block in
one call.

Each test holds one phase on purpose (fault injection: the phase waits until the test releases it), asks
for a stop while the run is in it, and checks that the run ended while the phase was still held: the
thing itself, not a wall-clock bound a loaded machine could break. Work abandoned by the stop ends in the
background once released, and leaves no worker processes behind.
"""

import math
import multiprocessing
import shutil
import threading
import time
from typing import Any, Callable

import pytest
import torch
from engine_helpers import tiny_config, write_cifar10_archive
from torch import nn

from workbench.engine import run
from workbench.engine import train_step as train_step_module
from workbench.engine import one_process
from workbench.engine.data import UInt8ImageDataset, load_arrays
from workbench.engine.events import EpochStats, RunEnded, StatusChanged, StepStats
from workbench.engine.interruptible import wait_for_abandoned

# A held phase gives up after this long: a stop that waited for it would end the run only then, with the
# phase finished, and the test fails on that (never on how long a loaded machine took).
HELD_AT_MOST_S = 60.0
FORK = pytest.mark.filterwarnings(  # these tests fork on purpose, so workers inherit the injected slowness
    "ignore:This process .* is multi-threaded, use of fork\\(\\) may lead to deadlocks:DeprecationWarning")


class HeldPhase:
    """A phase that waits until the test releases it. A file, not an Event: forked workers see it too."""

    def __init__(self, folder):
        self.release_file = folder / "release"
        self.finished = folder / "finished"

    def hold(self) -> None:
        deadline = time.monotonic() + HELD_AT_MOST_S
        while not self.release_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        self.finished.touch()

    def release(self) -> None:
        self.release_file.touch()

    def still_held(self) -> bool:
        return not self.finished.exists()


@pytest.fixture
def phase(tmp_path):
    held = HeldPhase(tmp_path)
    yield held
    held.release()  # then no_leftovers waits for the abandoned work to end


def stop_during(config, starts_phase, delay_s: float = 0.3, on_stop=lambda: None, events_of=None):
    """Run ``config``; once ``starts_phase(event)``, stop after ``delay_s`` (then call ``on_stop``). Returns the
    RunEnded. ``events_of(config, stop)``: the run's events (``run``'s when None)."""
    stop = threading.Event()
    asked_at = None

    def ask() -> None:
        nonlocal asked_at
        asked_at = time.perf_counter()
        stop.set()
        on_stop()

    timer = None
    ended = None
    for event in (events_of or run)(config, stop.is_set):
        if timer is None and starts_phase(event):
            timer = threading.Timer(delay_s, ask)
            timer.start()
        if isinstance(event, RunEnded):
            ended = event
    assert timer is not None, "the phase never started"
    timer.join()
    assert asked_at is not None, f"the run ended before the stop: {ended}"
    return ended


def status(words):
    return lambda event: isinstance(event, StatusChanged) and event.message.startswith(words)


@pytest.fixture(autouse=True)
def no_leftovers():  # set up before ``phase``, so torn down after it released the held phase
    yield
    assert wait_for_abandoned(30.0), "abandoned work did not finish"
    assert multiprocessing.active_children() == []


def test_stop_while_loading_the_data(monkeypatch, phase):
    def slow_load(config):
        phase.hold()
        return load_arrays(config)

    monkeypatch.setattr(one_process, "load_data", slow_load)
    ended = stop_during(tiny_config(), status("Loading"))
    assert phase.still_held()  # the run ended without waiting for the phase
    assert ended.status == "stopped" and ended.reason == "stopped by the user while loading the data"


def test_stop_during_a_cifar_download(tmp_path, monkeypatch, phase):
    """torchvision's own CIFAR-10 code path, with a download that takes its time."""
    from torchvision.datasets import cifar

    made = tmp_path / "made"
    made.mkdir()
    archive, _, _ = write_cifar10_archive(made)
    root = tmp_path / "datasets"

    def slow_download(url, download_root, filename=None, md5=None, **kwargs):
        phase.hold()
        shutil.copy(archive, download_root)

    monkeypatch.setattr(cifar, "download_and_extract_archive", slow_download)
    monkeypatch.setattr(cifar.CIFAR10, "_check_integrity", lambda self: False)
    ended = stop_during(tiny_config(dataset="cifar10", data_path=str(root)), status("Loading"))
    assert phase.still_held()  # the run ended without waiting for the phase
    assert ended.status == "stopped" and ended.reason == "stopped by the user while loading the data"


def test_stop_while_building_the_model(monkeypatch, phase):
    real_build = train_step_module.build_model

    def slow_build(*args):
        phase.hold()
        return real_build(*args)

    monkeypatch.setattr(train_step_module, "build_model", slow_build)
    ended = stop_during(tiny_config(), status("Building"))
    assert phase.still_held()  # the run ended without waiting for the phase
    assert ended.status == "stopped" and ended.reason == "stopped by the user while building the model"


@FORK
def test_stop_while_dataloader_workers_start(monkeypatch, phase):
    """The first batch waits for the workers (spawned ones import torch first): made slow in the workers."""
    real_getitem = UInt8ImageDataset.__getitem__

    def slow_getitem(self, index):
        phase.hold()
        return real_getitem(self, index)

    monkeypatch.setattr(UInt8ImageDataset, "__getitem__", slow_getitem)  # inherited by forked workers
    config = tiny_config(num_workers=2, worker_start_method="fork", persistent_workers=True, batch_size=1)
    ended = stop_during(config, lambda event: type(event).__name__ == "RunStarted")
    assert phase.still_held()  # the run ended without waiting for the phase
    assert ended.status == "stopped"
    assert ended.reason == "stopped by the user while the DataLoader workers started"
    # the fixture checks that the abandoned start-up shut its workers down once it finished


def test_stop_while_torch_compile_compiles(monkeypatch, phase):
    class SlowToCompile(nn.Module):
        """What torch.compile returns, with a first call as slow as a real compilation."""

        def __init__(self, model, **options):
            super().__init__()
            self.model = model
            self.compiled = False

        def forward(self, images):
            if not self.compiled:
                phase.hold()
                self.compiled = True
            return self.model(images)

    monkeypatch.setattr(torch, "compile", SlowToCompile)
    ended = stop_during(tiny_config(compile=True), status("Compiling"))
    assert phase.still_held()  # the run ended without waiting for the phase
    assert ended.status == "stopped" and ended.reason == "stopped by the user while torch.compile compiled the model"


def held_evaluation(monkeypatch, phase) -> tuple[list[int], Callable[[Any], bool]]:
    """The model's first evaluation batch waits for the stop: the batches evaluated, and the test of an event
    that says the evaluation has started."""
    real_build = train_step_module.build_model

    class SlowToEvaluate(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, images):
            if evaluating:  # (the model check's dummy batch before the run is in eval mode too)
                evaluated.append(len(images))
                phase.hold()  # the first evaluation batch waits for the stop
            return self.model(images)

    evaluated: list[int] = []
    evaluating: list[bool] = []

    def evaluation_starts(event) -> bool:
        if status("Evaluating")(event):
            evaluating.append(True)
        return bool(evaluating)

    monkeypatch.setattr(train_step_module, "build_model", lambda *args: SlowToEvaluate(real_build(*args)))
    return evaluated, evaluation_starts


def test_stop_during_evaluation(monkeypatch, phase):
    evaluated, evaluation_starts = held_evaluation(monkeypatch, phase)
    config = tiny_config(synthetic_size=1024, batch_size=32, max_steps=4, log_every=2)
    ended = stop_during(config, evaluation_starts, delay_s=0.2, on_stop=phase.release)
    assert len(evaluated) == 1  # evaluation ended at the batch after the stop, not after all four
    assert ended.status == "stopped" and ended.reason == "stopped by the user at step 4, during evaluation"
    assert ended.summary.steps == 4 and ended.summary.epochs_completed == 0


class RankZeroOfTwo:
    """Rank 0 of a two-process run as its session sees it, without a process group (the model left bare)."""

    rank, world_size, local_rank = 0, 2, 0

    def wrap_model(self, model, device):
        return model


@pytest.mark.parametrize("epochs", [1, 2])
def test_a_stop_ends_rank_0s_evaluation_at_its_next_batch(monkeypatch, phase, epochs):
    """A multi-process run's stop waited for rank 0's whole evaluation (the other ranks waiting for it in their
    next collective, and the launcher ending them after its grace): only the stop the ranks agree on reached it.
    Rank 0's own stop now ends it at its next batch; the epoch is reported all the same (under torchrun every rank
    gathers every epoch's figures), without test figures, and the run stops where the ranks agree (here a rank
    alone, so its own stop: at the next step, or at once after the last epoch)."""
    evaluated, evaluation_starts = held_evaluation(monkeypatch, phase)

    epochs_seen: list[EpochStats] = []

    def rank_0_events(config, stop):
        for event in one_process.run_one(config, stop, world=RankZeroOfTwo(), local_stop=stop):
            if isinstance(event, EpochStats):
                epochs_seen.append(event)
            yield event

    config = tiny_config(synthetic_size=1024, batch_size=32, epochs=epochs, max_steps=None, log_every=2)
    ended = stop_during(config, evaluation_starts, delay_s=0.2, on_stop=phase.release, events_of=rank_0_events)
    assert len(evaluated) <= 1  # evaluation ended at the batch after the stop, not after all four
    (epoch,) = epochs_seen
    assert math.isnan(epoch.test_accuracy) and math.isnan(epoch.test_loss)
    assert ended.status == "stopped"
    where = ", during evaluation" if epochs == 1 else ""  # the next epoch's first step is where it stops
    assert ended.reason == f"stopped by the user at step {epoch.step}{where}"


def test_a_stop_between_steps_still_reports_every_step_done():
    config = tiny_config(num_workers=2, persistent_workers=True, synthetic_size=2048, epochs=5, max_steps=None,
                         log_every=1)
    ended = stop_during(config, lambda event: isinstance(event, StepStats) and event.step == 3, 0.0)
    # 5 epochs of 64 steps were planned: the stop ended it at the next step, not at an epoch's end
    assert ended.status == "stopped" and ended.reason.startswith("stopped by the user at step ")
    assert ended.summary.steps < 64

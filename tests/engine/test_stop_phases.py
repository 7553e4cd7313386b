"""Stop ends every phase of a run within 2 s, recorded as stopped — also the phases that block in one call.

Each test makes one phase slow on purpose (fault injection), asks for a stop while the run is in it, and
measures from the stop to the RunEnded. Work abandoned by the stop ends in the background and leaves no
worker processes behind.
"""

import multiprocessing
import shutil
import threading
import time

import pytest
import torch
from engine_helpers import tiny_config, write_cifar10_archive
from torch import nn

from workbench.engine import run
from workbench.engine import session as session_module
from workbench.engine import one_process
from workbench.engine.data import UInt8ImageDataset, load_arrays
from workbench.engine.events import RunEnded, StatusChanged, StepStats
from workbench.engine.interruptible import wait_for_abandoned

STOP_WITHIN_S = 2.0
FORK = pytest.mark.filterwarnings(  # these tests fork on purpose, so workers inherit the injected slowness
    "ignore:This process .* is multi-threaded, use of fork\\(\\) may lead to deadlocks:DeprecationWarning")


def stop_during(config, starts_phase, delay_s: float = 0.3):
    """Run ``config``; once ``starts_phase(event)``, stop after ``delay_s``. Returns (RunEnded, seconds stop → end)."""
    stop = threading.Event()
    asked_at = None

    def ask() -> None:
        nonlocal asked_at
        asked_at = time.perf_counter()
        stop.set()

    timer = None
    ended = None
    for event in run(config, stop.is_set):
        if timer is None and starts_phase(event):
            timer = threading.Timer(delay_s, ask)
            timer.start()
        if isinstance(event, RunEnded):
            ended = event
    assert timer is not None, "the phase never started"
    timer.join()
    assert asked_at is not None, f"the run ended before the stop: {ended}"
    return ended, time.perf_counter() - asked_at


def status(words):
    return lambda event: isinstance(event, StatusChanged) and event.message.startswith(words)


@pytest.fixture(autouse=True)
def no_leftovers():
    yield
    assert wait_for_abandoned(30.0), "abandoned work did not finish"
    assert multiprocessing.active_children() == []


def test_stop_while_loading_the_data(monkeypatch):
    def slow_load(config):
        time.sleep(4)
        return load_arrays(config)

    monkeypatch.setattr(one_process, "load_data", slow_load)
    ended, seconds = stop_during(tiny_config(), status("Loading"))
    assert seconds < STOP_WITHIN_S
    assert ended.status == "stopped" and ended.reason == "stopped by the user while loading the data"


def test_stop_during_a_cifar_download(tmp_path, monkeypatch):
    """torchvision's own CIFAR-10 code path, with a download that takes its time."""
    from torchvision.datasets import cifar

    made = tmp_path / "made"
    made.mkdir()
    archive, _, _ = write_cifar10_archive(made)
    root = tmp_path / "datasets"

    def slow_download(url, download_root, filename=None, md5=None, **kwargs):
        time.sleep(4)
        shutil.copy(archive, download_root)

    monkeypatch.setattr(cifar, "download_and_extract_archive", slow_download)
    monkeypatch.setattr(cifar.CIFAR10, "_check_integrity", lambda self: False)
    ended, seconds = stop_during(tiny_config(dataset="cifar10", data_path=str(root)), status("Loading"))
    assert seconds < STOP_WITHIN_S
    assert ended.status == "stopped" and ended.reason == "stopped by the user while loading the data"


def test_stop_while_building_the_model(monkeypatch):
    real_build = session_module.build_model

    def slow_build(*args):
        time.sleep(4)
        return real_build(*args)

    monkeypatch.setattr(session_module, "build_model", slow_build)
    ended, seconds = stop_during(tiny_config(), status("Building"))
    assert seconds < STOP_WITHIN_S
    assert ended.status == "stopped" and ended.reason == "stopped by the user while building the model"


@FORK
def test_stop_while_dataloader_workers_start(monkeypatch):
    """The first batch waits for the workers (spawned ones import torch first): made slow in the workers."""
    real_getitem = UInt8ImageDataset.__getitem__

    def slow_getitem(self, index):
        time.sleep(4)
        return real_getitem(self, index)

    monkeypatch.setattr(UInt8ImageDataset, "__getitem__", slow_getitem)  # inherited by forked workers
    config = tiny_config(num_workers=2, worker_start_method="fork", persistent_workers=True, batch_size=1)
    ended, seconds = stop_during(config, lambda event: type(event).__name__ == "RunStarted")
    assert seconds < STOP_WITHIN_S
    assert ended.status == "stopped"
    assert ended.reason == "stopped by the user while the DataLoader workers started"
    # the fixture checks that the abandoned start-up shut its workers down once it finished


def test_stop_while_torch_compile_compiles(monkeypatch):
    class SlowToCompile(nn.Module):
        """What torch.compile returns, with a first call as slow as a real compilation."""

        def __init__(self, model, **options):
            super().__init__()
            self.model = model
            self.compiled = False

        def forward(self, images):
            if not self.compiled:
                time.sleep(4)
                self.compiled = True
            return self.model(images)

    monkeypatch.setattr(torch, "compile", SlowToCompile)
    ended, seconds = stop_during(tiny_config(compile=True), status("Compiling"))
    assert seconds < STOP_WITHIN_S
    assert ended.status == "stopped" and ended.reason == "stopped by the user while torch.compile compiled the model"


def test_stop_during_evaluation(monkeypatch):
    real_build = session_module.build_model

    class SlowToEvaluate(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, images):
            if not self.training:
                time.sleep(1.0)  # each evaluation batch; the test split has four
            return self.model(images)

    monkeypatch.setattr(session_module, "build_model", lambda *args: SlowToEvaluate(real_build(*args)))
    config = tiny_config(synthetic_size=1024, batch_size=32, max_steps=4, log_every=2)
    ended, seconds = stop_during(config, status("Evaluating"), delay_s=0.2)
    assert seconds < STOP_WITHIN_S
    assert ended.status == "stopped" and ended.reason == "stopped by the user at step 4, during evaluation"
    assert ended.summary.steps == 4 and ended.summary.epochs_completed == 0


def test_a_stop_between_steps_still_reports_every_step_done():
    config = tiny_config(num_workers=2, persistent_workers=True, synthetic_size=2048, epochs=5, max_steps=None,
                         log_every=1)
    ended, seconds = stop_during(config, lambda event: isinstance(event, StepStats) and event.step == 3, 0.0)
    assert seconds < STOP_WITHIN_S
    assert ended.status == "stopped" and ended.reason.startswith("stopped by the user at step ")

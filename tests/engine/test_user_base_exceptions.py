"""The user's model code raising a BaseException that is neither an Exception nor sys.exit's (asyncio's
CancelledError, a library's own class): as it was imported, in the model's function, in the model check or mid-run.
Before: the CLI ended in a traceback (exit 1) and the window's training thread ended without a RunEnded (the run
never recorded, the window waiting for it). Now the run fails with one line saying what their code raised."""

from __future__ import annotations

import threading

import pytest
from engine_helpers import user_modules_in

from workbench.cli import main
from workbench.config import RunConfig
from workbench.engine import run
from workbench.engine.events import RunEnded
from workbench.history.store import HistoryStore

TINY = ["run", "--dataset", "synthetic", "--synthetic-size", "128", "--batch-size", "16", "--max-steps", "4",
        "--log-every", "2", "--num-workers", "0", "--device", "cpu"]

MODULES = {
    "cancelled_at_import": "import asyncio\nraise asyncio.CancelledError('the event loop went away')\n",
    "own_base_in_factory": """
        class Abort(BaseException):
            pass
        def net(num_classes):
            raise Abort("no width given")
        """,
    "own_base_in_forward": """
        from torch import nn
        class Abort(BaseException):
            pass
        class Net(nn.Module):
            def __init__(self, num_classes, in_check):
                super().__init__()
                self.linear = nn.Linear(3 * 32 * 32, num_classes)
                self.in_check = in_check
            def forward(self, images):
                if self.in_check or (self.training and images.shape[0] > 2):  # the check's batch is 2 images
                    raise Abort("forward gave up")
                return self.linear(images.flatten(1))
        def in_check(num_classes):
            return Net(num_classes, True)
        def mid_run(num_classes):
            return Net(num_classes, False)
        """,
}


@pytest.fixture
def modules(tmp_path, monkeypatch):
    yield from user_modules_in(tmp_path, monkeypatch, MODULES)


@pytest.mark.parametrize("spec, words", [
    ("cancelled_at_import:net", "model cancelled_at_import:net: importing cancelled_at_import raised CancelledError: "
                                "the event loop went away"),
    ("own_base_in_factory:net", "model own_base_in_factory:net: net(num_classes=10) raised Abort: no width given"),
    ("own_base_in_forward:in_check", "model own_base_in_forward:in_check failed on a batch of 2 images of 3×32×32: "
                                     "Abort: forward gave up"),
])
def test_a_base_exception_of_the_users_code_as_the_model_is_built_is_one_line_exit_2(modules, capsys, spec, words):
    home = modules / "home"
    code = main(["--home", str(home), *TINY, "--model", spec])
    err = capsys.readouterr().err
    assert code == 2 and err == f"workbench run: {words}\n", err
    with HistoryStore.open(home) as store:
        assert store.list_runs() == []


def test_a_base_exception_of_the_users_code_mid_run_fails_the_run_with_its_reason(modules, capsys):
    home = modules / "home"
    code = main(["--home", str(home), *TINY, "--model", "own_base_in_forward:mid_run"])
    err = capsys.readouterr().err
    assert code == 1 and "workbench run: Abort: forward gave up" in err and "Traceback" not in err, err
    with HistoryStore.open(home) as store:
        (record,) = store.list_runs()
    assert record.status == "failed" and "Abort: forward gave up" in record.reason


@pytest.mark.parametrize("spec, words", [("cancelled_at_import:net", "raised CancelledError"),
                                         ("own_base_in_forward:mid_run", "Abort: forward gave up")])
def test_the_window_gets_a_failed_run_with_the_reason(modules, spec, words):
    # The window iterates engine.run on its training thread: a BaseException escaping it ended that thread unheard.
    outcome: list = []
    config = RunConfig(dataset="synthetic", synthetic_size=128, batch_size=16, max_steps=4, log_every=2,
                       num_workers=0, device="cpu", model=spec)
    thread = threading.Thread(target=lambda: outcome.extend(run(config)))
    thread.start()
    thread.join(120)
    assert not thread.is_alive() and isinstance(outcome[-1], RunEnded)
    assert outcome[-1].status == "failed" and words in outcome[-1].reason

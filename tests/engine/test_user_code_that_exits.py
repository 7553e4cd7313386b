"""The user's model code calling sys.exit (argparse at import), raising KeyboardInterrupt, or starting processes
(issue 28 items 5 and 6): the run fails with one line saying what their code did, and a process it started can be
killed. Before: SystemExit ended the window's training thread unheard (Start disabled for good, the window deaf to
close and SIGTERM), the CLI exited silently with the module's code, and a child inherited the build thread's mask
with SIGINT, SIGTERM and SIGHUP blocked: an orphan plain `kill` could not end."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import threading

import pytest
from engine_helpers import user_modules_in

from workbench.cli import main
from workbench.engine import run
from workbench.engine.events import RunEnded
from workbench.engine.interruptible import call_interruptibly
from workbench.engine.models import build_model
from workbench.engine.requests import never
from workbench.engine.worker_lifetime import STOP_SIGNALS
from workbench.history.store import HistoryStore

TINY = ["run", "--dataset", "synthetic", "--synthetic-size", "128", "--batch-size", "16", "--max-steps", "4",
        "--log-every", "2", "--num-workers", "0", "--device", "cpu"]

MODULES = {
    "exits_at_import": "import sys\nsys.exit(3)\n",
    "argparse_at_import": "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--width', "
                          "type=int, required=True)\nparser.parse_args()\n",
    "interrupts_at_import": "raise KeyboardInterrupt\n",
    "exits_in_factory": """
        import sys
        def net(num_classes):
            sys.exit(3)
        """,
    "exits_in_forward": """
        import sys
        from torch import nn
        class Net(nn.Module):
            def __init__(self, num_classes):
                super().__init__()
                self.linear = nn.Linear(3 * 32 * 32, num_classes)
            def forward(self, images):
                if self.training and images.shape[0] > 2:  # the model check's dummy batch passes
                    sys.exit(4)
                return self.linear(images.flatten(1))
        def net(num_classes):
            return Net(num_classes)
        """,
}


@pytest.fixture
def modules(tmp_path, monkeypatch):
    yield from user_modules_in(tmp_path, monkeypatch, MODULES)


@pytest.mark.parametrize("spec, words", [
    ("exits_at_import:net", "model exits_at_import:net: your module exits_at_import called sys.exit(3) while being "
                            "imported"),
    ("argparse_at_import:net", "your module argparse_at_import called sys.exit(2) while being imported"),
    ("interrupts_at_import:net", "your module interrupts_at_import raised KeyboardInterrupt while being imported"),
    ("exits_in_factory:net", "model exits_in_factory:net: net(num_classes=10) called sys.exit(3)"),
])
def test_user_code_that_exits_while_the_model_is_built_is_one_line_exit_2_nothing_recorded(modules, capsys, spec,
                                                                                          words):
    home = modules / "home"
    code = main(["--home", str(home), *TINY, "--model", spec])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and words in err[-1] and "Traceback" not in "\n".join(err), err
    if not spec.startswith("argparse"):  # (argparse prints its own usage lines first)
        assert len(err) == 1, err
    with HistoryStore.open(home) as store:
        assert store.list_runs() == []


def test_the_window_gets_a_failed_run_with_the_reason_from_an_exiting_module(modules):
    # The window iterates engine.run on its training thread: a SystemExit escaping it ended that thread unheard.
    outcome: list = []
    thread = threading.Thread(target=lambda: outcome.extend(run(_config("exits_at_import:net"))))
    thread.start()
    thread.join(60)
    assert not thread.is_alive() and isinstance(outcome[-1], RunEnded)
    assert (outcome[-1].status, outcome[-1].kind) == ("failed", "config")
    assert "your module exits_at_import called sys.exit(3) while being imported" in outcome[-1].reason


def test_user_code_that_exits_mid_run_fails_the_run_with_one_line(modules, capsys):
    code = main(["--home", str(modules / "home"), *TINY, "--model", "exits_in_forward:net"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "workbench run: the model's code called sys.exit(4) during the run" in err and "Traceback" not in err


def _config(model):
    from workbench.config import RunConfig

    return RunConfig(dataset="synthetic", synthetic_size=128, batch_size=16, max_steps=4, log_every=2, num_workers=0,
                     device="cpu", model=model)


def _blocked_signals(pid: int) -> set[int]:
    with open(f"/proc/{pid}/status") as status:
        mask = int(next(line for line in status if line.startswith("SigBlk:")).split()[1], 16)
    return {signum for signum in range(1, 65) if mask & (1 << (signum - 1))}


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads a process's signal mask from /proc")
def test_a_process_the_model_factory_starts_can_be_killed(tmp_path, monkeypatch):
    (tmp_path / "starts_a_child.py").write_text(textwrap.dedent("""
        import subprocess
        from torch import nn
        children = []
        def net(num_classes):
            children.append(subprocess.Popen(["sleep", "600"]))
            return nn.Linear(4, num_classes)
        """))
    monkeypatch.chdir(tmp_path)
    try:
        # As the run builds its model: on a helper thread that blocks the stop signals for DataLoader workers.
        call_interruptibly(lambda: build_model("starts_a_child:net", 10), never, "build")
        (child,) = sys.modules["starts_a_child"].children
        try:
            assert not _blocked_signals(child.pid) & set(STOP_SIGNALS)
            child.send_signal(signal.SIGTERM)  # what plain `kill`, a service manager or a closed terminal sends
            assert child.wait(timeout=30) == -signal.SIGTERM
        finally:
            child.kill()
            child.wait()
    finally:
        sys.modules.pop("starts_a_child", None)


def test_the_build_thread_blocks_the_stop_signals_again_after_the_users_code(tmp_path, monkeypatch):
    (tmp_path / "plain.py").write_text(
        "from torch import nn\ndef net(num_classes):\n    return nn.Linear(4, num_classes)\n")
    monkeypatch.chdir(tmp_path)

    def build_then_read_mask():
        build_model("plain:net", 10)
        return signal.pthread_sigmask(signal.SIG_BLOCK, set())

    try:
        assert set(STOP_SIGNALS) <= call_interruptibly(build_then_read_mask, never, "build")  # workers start later
    finally:
        sys.modules.pop("plain", None)

"""The first-hour CLI messages from the real `python -m workbench` process, as a user's shell sees them:
exit codes, the one line on stderr, what the history keeps, and README examples that do what they say."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from engine_helpers import write_npz

TINY = ["--synthetic-size", "256", "--batch-size", "32", "--device", "cpu", "--num-workers", "0"]


def workbench(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WORKBENCH_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def recorded_runs(home: Path) -> list:
    from workbench.history.store import HistoryStore

    with HistoryStore.open(home) as store:
        return store.list_runs()


@pytest.mark.slow  # a CLI process that trains
def test_max_steps_runs_that_many_steps_past_the_epochs_and_json_says_what_ran(tmp_path):
    """README: `workbench run --dataset synthetic --max-steps 200` runs 200 steps (it used to stop when the
    default epochs ended); here 12 steps where one epoch is 8."""
    result = workbench(tmp_path, "run", "--dataset", "synthetic", "--max-steps", "12", "--epochs", "1",
                       "--log-every", "4", "--json", *TINY)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 12 and summary["epochs_completed"] == 2
    [record] = recorded_runs(tmp_path)
    assert summary["run_id"] == record.id and summary["config"]["max_steps"] == 12
    assert summary["config"] == record.config.to_dict()


@pytest.mark.parametrize("make, line", [
    (lambda path: path.write_text("not numbers"), "{path} is not a valid npz archive"),
    (lambda path: np.savez(path, x_train=np.zeros((4, 32, 32, 3), np.uint8), y_train=np.zeros(4, np.uint8)),
     "npz file {path} has x_train, y_train; it needs train_images"),
])
def test_a_bad_npz_is_one_line_exit_2_and_nothing_recorded(tmp_path, make, line):
    path = tmp_path / "data.npz"
    make(path)
    result = workbench(tmp_path, "run", "--dataset", "npz", "--data-path", str(path), *TINY)
    assert result.returncode == 2 and result.stdout == ""
    [message] = result.stderr.strip().splitlines()
    assert message.startswith("workbench run: " + line.format(path=path))
    assert "pickle" not in message
    assert recorded_runs(tmp_path) == []


def test_batch_larger_than_the_data_starts_and_stores_nothing(tmp_path):
    result = workbench(tmp_path, "run", "--max-steps", "2", *TINY[:2], "--batch-size", "512", *TINY[4:])
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == "workbench run: batch_size 512 is larger than the training set (256 images)"
    assert recorded_runs(tmp_path) == []


@pytest.mark.slow  # a CLI process that trains
def test_an_npz_data_path_implies_dataset_npz_and_says_so(tmp_path):
    path = write_npz(tmp_path / "mine.npz", train=64, test=16)
    result = workbench(tmp_path, "run", "--data-path", str(path), "--max-steps", "2", "--json", *TINY[2:])
    assert result.returncode == 0, result.stderr
    assert f"workbench run: {path} is an .npz file: training on it (--dataset npz)" in result.stderr.splitlines()
    assert json.loads(result.stdout.strip().splitlines()[-1])["config"]["dataset"] == "npz"
    [record] = recorded_runs(tmp_path)
    assert record.name == "mine: small-cnn, batch 32, fp32"  # named by its data


def test_help_gives_the_forms_one_line_for_every_flag(tmp_path):
    from workbench.config import SETTINGS

    result = workbench(tmp_path, "run", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "default: X" not in text
    for name in ("batch_size", "num_workers", "pin_memory", "precision"):
        assert " ".join(SETTINGS[name].help.split()) in text, name


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_device_cuda_without_a_gpu_is_said_once_with_what_to_do(tmp_path):
    result = workbench(tmp_path, "run", "--device", "cuda", "--max-steps", "1")
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.count("no CUDA GPU") == 1 and "choose device=auto or device=cpu" in line


@pytest.mark.parametrize("command", [("models",), ("runs",)])
def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path, command):
    """`workbench runs | head` ended in a BrokenPipeError traceback; now quietly, with SIGPIPE's shell code."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line is written
    try:
        result = subprocess.run([sys.executable, "-m", "workbench", *command], stdout=write_end,
                                stderr=subprocess.PIPE, text=True, timeout=120,
                                env={**os.environ, "WORKBENCH_HOME": str(tmp_path)})
    finally:
        os.close(write_end)
    assert result.stderr == "" and result.returncode == 141

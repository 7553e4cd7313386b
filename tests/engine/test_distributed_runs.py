"""Data-parallel runs on this CPU: two gloo processes spawned on localhost, as PyTorch's own
test_c10d_spawn_gloo.py tests DDP. Each spawned rank imports torch (a few seconds here), so the runs
are tiny; every test checks that no process outlives its run."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from engine_helpers import run_to_end, tiny_config
from own_images import make_folder, write_user_models
from process_tree import descendants, leftovers

import distributed_entries
from workbench.engine import models, run
from workbench.engine.distributed.launcher import spawn_run
from workbench.engine.events import EpochStats, RunEnded, RunStarted, StatusChanged, StepStats

REPO = Path(__file__).resolve().parents[2]
# Each test spawns two ranks that import torch: seconds each, minutes under load (the slow tier).
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def no_process_outlives_its_run():
    before = descendants()
    yield
    left = leftovers(before)
    assert not left, f"processes outlived the run: {left}"


def two_process_config(**changes):
    return tiny_config(devices=2, **changes)


def test_two_processes_train_as_one_process_on_the_global_batch(tmp_path, monkeypatch):
    # small-cnn-gn: GroupNorm does not depend on how the batch is split (BatchNorm would normalise
    # each rank's half on its own). gpu-resident: each rank takes every second index of the same
    # permutation, so the ranks' micro-batches together are the one process's. Two micro-batches per
    # optimiser step: the first runs under no_sync.
    common = dict(model="small-cnn-gn", pipeline="gpu-resident", augment="none", synthetic_size=256,
                  accumulation_steps=2, max_steps=6, log_every=2, epochs=1)
    built = []
    build = models.BUILDERS["small-cnn-gn"]
    monkeypatch.setitem(models.BUILDERS, "small-cnn-gn",
                        lambda classes, size: built.append(build(classes, size)) or built[-1])
    one = run_to_end(tiny_config(batch_size=32, **common))
    assert one[-1].status == "finished", one[-1].reason

    entry = functools.partial(distributed_entries.instrumented, folder=str(tmp_path))
    two = list(spawn_run(tiny_config(batch_size=16, devices=2, **common), lambda: False, 2, rank_entry=entry))
    assert two[-1].status == "finished", two[-1].reason

    expected = built[0].state_dict()
    for rank in (0, 1):
        trained = torch.load(tmp_path / f"rank{rank}.pt")
        for name, value in expected.items():
            torch.testing.assert_close(trained[name], value, rtol=1e-4, atol=1e-5, msg=f"rank {rank}: {name}")
        # 6 micro-batches, 3 optimiser steps: the micro-batches that do not step skip the all-reduce.
        assert (tmp_path / f"rank{rank}.txt").read_text() == "3"
    # The same losses too: each window's mean over both ranks is the one process's mean.
    one_losses = [event.loss for event in one if isinstance(event, StepStats)]
    two_losses = [event.loss for event in two if isinstance(event, StepStats)]
    assert two_losses == pytest.approx(one_losses, rel=1e-5)


def test_batch_norm_buffers_are_not_broadcast_each_step_and_nothing_reported_changes(tmp_path):
    # DDP by default copies rank 0's BatchNorm running statistics to every rank before each forward:
    # ~60 kernels a step for resnet18. Rank 0 (the one that evaluates) never reads another rank's, so
    # without the broadcast its weights, its running statistics and its test figures are the same.
    common = dict(model="small-cnn", pipeline="gpu-resident", augment="none", synthetic_size=256, batch_size=16,
                  max_steps=6, log_every=2, epochs=1, devices=2)
    results = {}
    for ddp_defaults in (True, False):
        folder = tmp_path / ("defaults" if ddp_defaults else "product")
        folder.mkdir()
        entry = functools.partial(distributed_entries.saving_state, folder=str(folder), ddp_defaults=ddp_defaults)
        events = list(spawn_run(tiny_config(**common), lambda: False, 2, rank_entry=entry))
        assert events[-1].status == "finished", events[-1].reason
        epoch = [event for event in events if isinstance(event, EpochStats)][-1]
        results[ddp_defaults] = (folder, epoch)
    assert (results[True][0] / "rank0-syncs-buffers.txt").read_text() == "[True]"
    for rank in (0, 1):
        assert (results[False][0] / f"rank{rank}-syncs-buffers.txt").read_text() == "[False]"
    with_broadcast = torch.load(results[True][0] / "rank0.pt")
    without = torch.load(results[False][0] / "rank0.pt")
    assert any("running_mean" in name for name in without)
    for name, value in with_broadcast.items():
        torch.testing.assert_close(without[name], value, rtol=0, atol=0, msg=name)
    assert results[False][1].test_loss == results[True][1].test_loss
    assert results[False][1].test_accuracy == results[True][1].test_accuracy


def test_events_arrive_merged_in_order_with_each_ranks_figures():
    # The dataloader pipeline (DistributedSampler), with a worker per rank. Batched augmentation: the per-sample
    # path's torchvision import (seconds of CPU in each rank and each worker) shows nothing about merging; the
    # per-sample path in ranks' workers is test_two_processes_train_the_users_own_model_on_an_image_folder's.
    config = two_process_config(synthetic_size=256, batch_size=16, max_steps=None, epochs=2, log_every=3,
                                num_workers=1, augment="gpu")
    events = run_to_end(config)
    kinds = [type(event) for event in events]
    assert kinds[0] is StatusChanged and kinds.count(RunStarted) == 1 and kinds[-1] is RunEnded
    started = next(event for event in events if isinstance(event, RunStarted))
    assert started.world_size == 2 and started.effective_batch_size == 32
    assert started.steps_per_epoch == 8  # 256 images / 2 ranks / 16 per batch
    assert any("2 processes, data-parallel" in note for note in started.notes)

    steps = [event for event in events if isinstance(event, StepStats)]
    assert [event.step for event in steps] == [3, 6, 8, 9, 12, 15, 16]  # every log_every steps, and epoch ends
    previous = 0
    for event in steps:
        assert [rank.rank for rank in event.ranks] == [0, 1] and event.world_size == 2
        assert sum(rank.samples for rank in event.ranks) == event.samples_seen - previous
        assert event.ranks[0].samples == event.ranks[1].samples
        assert event.window_seconds == max(rank.window_seconds for rank in event.ranks)
        assert event.images_per_sec == pytest.approx((event.samples_seen - previous) / event.window_seconds)
        assert event.data_wait_seconds == max(rank.data_wait_seconds for rank in event.ranks)
        previous = event.samples_seen
    assert steps[-1].samples_seen == 16 * 16 * 2  # 16 steps of 16 images on each of 2 ranks

    epochs = [event for event in events if isinstance(event, EpochStats)]
    assert [event.epoch for event in epochs] == [1, 2]
    assert all(len(event.rank_memory) == 2 and 0 <= event.test_accuracy <= 1 for event in epochs)
    # Each epoch's figures follow its last window, never precede it.
    assert events.index(steps[2]) < events.index(epochs[0]) < events.index(steps[3])

    end = events[-1]
    assert end.status == "finished", end.reason
    assert end.summary.world_size == 2 and end.summary.steps == 16 and end.summary.samples_seen == 512
    assert end.summary.test_accuracy == epochs[-1].test_accuracy
    assert len(end.summary.rank_peak_allocated_bytes) == 2  # None on a CPU, one per rank


@pytest.mark.parametrize("pipeline, augment, workers", [("dataloader", "cpu", 1), ("dataloader", "gpu", 0),
                                                       ("gpu-resident", "gpu", 0)])
def test_two_processes_train_the_users_own_model_on_an_image_folder(tmp_path, monkeypatch, pipeline, augment,
                                                                     workers):
    # Each rank scans the folder, decodes at 48×48 (not 32) and imports mymodels itself (spawned: nothing of
    # the parent's imports is inherited), from the working directory and PYTHONPATH as a user's script would.
    root = make_folder(tmp_path / "pets")
    code = tmp_path / "code"
    code.mkdir()
    write_user_models(code)
    monkeypatch.chdir(code)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(code), str(REPO)]))
    monkeypatch.delitem(sys.modules, "mymodels", raising=False)
    config = two_process_config(dataset="folder", data_path=str(root), model="mymodels:tiny_net",
                                model_kwargs='{"width": 4}', image_size=48, batch_size=4, max_steps=2, log_every=1,
                                pipeline=pipeline, augment=augment, num_workers=workers)
    events = run_to_end(config)
    sys.modules.pop("mymodels", None)
    end = events[-1]
    assert end.status == "finished", end.reason
    (started,) = [event for event in events if isinstance(event, RunStarted)]
    assert (started.world_size, started.dataset_name, started.num_classes) == (2, "pets", 3)
    assert started.parameter_count == (4 * 3 * 3 * 3 + 4) + (4 * 3 + 3)  # tiny_net(3, width=4): conv + linear
    assert end.summary.steps == 2 and end.summary.samples_seen == 2 * 4 * 2
    assert end.summary.test_accuracy is not None


def test_stop_mid_run_ends_both_ranks_at_the_same_step():
    config = two_process_config(synthetic_size=512, batch_size=16, max_steps=100_000, log_every=1)
    seen = []
    asked = []

    def stop() -> bool:
        if len(seen) >= 3 and not asked:
            asked.append(seen[-1].step)
        return bool(asked)

    events = []
    for event in run(config, stop):
        events.append(event)
        if isinstance(event, StepStats):
            seen.append(event)
    end = events[-1]
    assert end.status == "stopped", end.reason
    assert end.summary.steps <= asked[0] + 3  # the ranks agree on the step after the one the stop was seen at
    assert "stopped by the user at step" in end.reason
    # Both ranks reported the last window (it was merged), so they stopped at the same step.
    assert end.summary.steps == seen[-1].step and len(seen[-1].ranks) == 2
    assert end.summary.steps < 100


def test_stop_while_the_processes_start_ends_at_once():
    events = list(run(two_process_config(max_steps=100_000), lambda: True))
    assert events[-1].status == "stopped" and "before training started" in events[-1].reason
    assert not any(isinstance(event, StepStats) for event in events)  # no rank trained a step
    assert events[-1].summary.world_size == 2  # the processes it was started with (it read 1 without RunStarted)


@pytest.mark.parametrize("how, words", [("raise", "RuntimeError: injected fault in forward pass 3"),
                                        ("die", "the process died: killed by SIGKILL")])
def test_a_failing_rank_fails_the_run_naming_the_rank(how, words):
    entry = functools.partial(distributed_entries.fail_on_rank, rank=1, at_forward=3, how=how)
    config = two_process_config(synthetic_size=512, batch_size=16, max_steps=100_000, log_every=1)
    began = time.monotonic()
    events = list(spawn_run(config, lambda: False, 2, rank_entry=entry))
    end = events[-1]
    assert isinstance(end, RunEnded) and end.status == "failed"
    assert end.reason.startswith(f"rank 1: {words}"), end.reason
    if how == "raise":
        assert end.summary.steps == 2  # the windows both ranks finished are kept
    else:  # SIGKILL: its last window may still sit in the queue's feeder thread, lost with the process
        assert end.summary.steps in (1, 2)
    # Ended by the failure, not by a collective's 30-minute timeout (a bound no load comes near: it takes ~10 s)
    assert time.monotonic() - began < 600.0


def test_torchrun_runs_the_same_engine_and_rank_0_records_one_run(tmp_path, isolated_workbench_home):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "-m", "workbench", "run", "--device", "cpu", "--synthetic-size", "256", "--batch-size", "16",
               "--max-steps", "6", "--log-every", "2", "--num-workers", "0", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=REPO)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1  # only rank 0 writes --json
    summary = json.loads(lines[0])
    assert summary["status"] == "finished" and summary["world_size"] == 2 and summary["steps"] == 6
    assert summary["config"]["devices"] == 2
    assert done.stderr.count("epoch 1/1:") == 1  # only rank 0 prints progress

    from workbench.history.store import HistoryStore

    with HistoryStore.open(isolated_workbench_home) as store:
        records = store.list_runs()
    assert len(records) == 1 and records[0].id == summary["run_id"]
    assert records[0].status == "finished" and records[0].summary.world_size == 2 and records[0].config.devices == 2


def test_a_script_without_the_main_guard_is_told_what_to_add(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from workbench.config import RunConfig\n"
        "from workbench.engine import run\n"
        "for event in run(RunConfig(synthetic_size=256, batch_size=16, num_workers=0, device='cpu', max_steps=4,"
        " devices=2)):\n"
        "    if type(event).__name__ == 'RunEnded':\n"
        "        print('ENDED', event.status, event.reason, flush=True)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    ended = [line for line in done.stdout.splitlines() if line.startswith("ENDED")]
    assert len(ended) == 1 and ended[0].startswith("ENDED failed rank "), done.stdout + done.stderr
    assert 'must do so under `if __name__ == "__main__":`' in ended[0]

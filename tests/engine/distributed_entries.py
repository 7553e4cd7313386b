"""Rank entries for tests: the product's spawned_rank_main, with a test's hook set up inside the rank.

The launcher spawns whatever entry it is given (``spawn_run(..., rank_entry=...)``); these wrap the
real one in functools.partial-friendly functions, so faults are provoked inside the spawned process
without anything in the product reading a test switch. Each hook wraps the model the rank builds
(``models.BUILDERS``), which is where a real fault (a bad layer, a dying GPU) would strike.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import torch

from workbench.engine import models
from workbench.engine.distributed.rank import spawned_rank_main


def _wrap_builder(name: str, on_model) -> None:
    build = models.BUILDERS[name]

    def built(num_classes: int, image_size: int):
        model = build(num_classes, image_size)
        on_model(model)
        return model

    models.BUILDERS[name] = built


def fail_on_rank(index, world, config, events, stop_requested, *, rank: int, at_forward: int, how: str) -> None:
    """On ``rank``, the ``at_forward``-th training forward pass raises (how="raise") or kills the process ("die")."""

    def arm(model):
        calls = [0]

        def before_forward(module, inputs):
            if not module.training:  # the model check before the run (models.check_model) is not a step
                return
            calls[0] += 1
            if index == rank and calls[0] == at_forward:
                if how == "die":
                    os.kill(os.getpid(), signal.SIGKILL)
                raise RuntimeError(f"injected fault in forward pass {at_forward}")

        model.register_forward_pre_hook(before_forward)

    _wrap_builder(config.model, arm)
    spawned_rank_main(index, world, config, events, stop_requested)


def _train_and_save(index, world, config, events, stop_requested, folder: str, rewrap) -> None:
    """Train as the product does, with ``RankWorld.wrap_model`` replaced by ``rewrap(wrap, self, model,
    device)`` (``wrap``: the product's); then save this rank's model state, buffers included
    (folder/rank{index}.pt)."""
    from workbench.engine.distributed.rank import RankWorld

    built = []
    _wrap_builder(config.model, built.append)
    wrap = RankWorld.wrap_model
    RankWorld.wrap_model = lambda self, model, device: rewrap(wrap, self, model, device)
    try:
        spawned_rank_main(index, world, config, events, stop_requested)
    finally:
        if built:
            torch.save(built[0].state_dict(), Path(folder) / f"rank{index}.pt")


def instrumented(index, world, config, events, stop_requested, *, folder: str) -> None:
    """Train as the product does; then save this rank's parameters (folder/rank{index}.pt) and how many
    backward passes all-reduced gradients (folder/rank{index}.txt): a comm hook around DDP's default
    all-reduce counts the all-reduces of bucket 0, which every synchronising backward pass has (DDP
    may regroup the other buckets after the first step). Under no_sync a backward pass has none."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    calls = [0]

    def wrap_and_count(wrap, self, model, device):
        wrapped = wrap(self, model, device)

        def counting(state, bucket):
            calls[0] += bucket.index() == 0
            return allreduce_hook(state, bucket)

        wrapped.register_comm_hook(None, counting)
        return wrapped

    try:
        _train_and_save(index, world, config, events, stop_requested, folder, wrap_and_count)
    finally:
        (Path(folder) / f"rank{index}.txt").write_text(str(calls[0]))


def saving_state(index, world, config, events, stop_requested, *, folder: str, ddp_defaults: bool) -> None:
    """Train as the product does (or with DDP's default options when ``ddp_defaults``); then save this
    rank's state (folder/rank{index}.pt) and whether its DDP synchronised the buffers before each
    forward (folder/rank{index}-syncs-buffers.txt)."""
    from torch.nn.parallel import DistributedDataParallel

    syncs = []

    def wrap_and_note(wrap, self, model, device):
        wrapped = DistributedDataParallel(model) if ddp_defaults else wrap(self, model, device)
        syncs.append(wrapped.will_sync_module_buffers())
        return wrapped

    try:
        _train_and_save(index, world, config, events, stop_requested, folder, wrap_and_note)
    finally:
        (Path(folder) / f"rank{index}-syncs-buffers.txt").write_text(str(syncs))


"""Under torchrun (or another env:// launcher): this process is one rank; rank 0 reports the run.

torchrun starts the processes, on this machine or several (`--nnodes`, `--rdzv-endpoint`), and sets
RANK / WORLD_SIZE / LOCAL_RANK; the process group meets at ``env://``. There is no parent process
to send events to, so at each log point the ranks gather their figures to rank 0 (one small
gather_object on the gloo control group, at a point where the GPU is synchronised anyway). Rank 0
yields the merged events and a RunEnded built from them; the other ranks yield their own events
(the CLI shows none of them, but their RunEnded gives their exit status).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterator, Optional

import torch.distributed as dist

from workbench.config import RunConfig
from workbench.engine.distributed.aggregate import RankEventMerger
from workbench.engine.distributed.rank import RankRun
from workbench.engine.distributed.world import World, distributed_notes, lost_a_peer, lost_peer_reason
from workbench.engine.events import EpochStats, Event, RunEnded, RunStarted, StepStats
from workbench.engine.summary import SummaryBuilder


def run_launched(config: RunConfig, stop: Callable[[], bool], world: World) -> Iterator[Event]:
    rank_run = RankRun(config, world, stop)
    summary = SummaryBuilder(world.world_size)
    merger = None
    for event in rank_run.events():
        # Every rank takes part in the gather of every window and epoch (they log at the same steps).
        gathered = _gathered(event, rank_run) if isinstance(event, (StepStats, EpochStats)) else []
        if world.rank != 0:
            yield event
            continue
        if isinstance(event, RunEnded):
            # The run's end, with a summary over every rank's figures.
            reason = event.reason
            if event.status == "failed" and reason and lost_a_peer(reason):
                reason = lost_peer_reason(reason)
            yield RunEnded(status=event.status, summary=summary.build(event.status, reason, event.kind), reason=reason,
                           kind=event.kind, traceback=event.traceback)
            return
        if merger is None:
            merger = RankEventMerger(world.world_size, started=lambda started: _with_notes(started, rank_run))
        for merged in merger.add(0, event):
            summary.add(merged)
            yield merged
        for rank, theirs in enumerate(gathered[1:], start=1):
            for merged in merger.add(rank, theirs):
                summary.add(merged)
                yield merged


def _gathered(event: Event, rank_run: RankRun) -> list:
    group = rank_run.rank_world.control_group if rank_run.rank_world is not None else None
    if group is None:
        return [event]
    gathered: Optional[list] = [None] * rank_run.world.world_size if rank_run.world.rank == 0 else None
    dist.gather_object(event, gathered, dst=0, group=group)
    return gathered if gathered is not None else []  # the other ranks receive nothing


def _with_notes(event: RunStarted, rank_run: RankRun) -> RunStarted:
    world = rank_run.world
    notes = distributed_notes(event.config, event.device, world.world_size, world.backend, world.wraps_model)
    if world.world_size != (world.local_world_size or world.world_size):
        notes.append(f"{world.world_size // max(1, world.local_world_size)} machines × {world.local_world_size} "
                     "processes (torchrun); the device shown is rank 0's")
    return dataclasses.replace(event, notes=(*notes, *event.notes))

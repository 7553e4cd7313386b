"""The ranks' events → one run's events: the figures over all ranks, each rank's own inside.

Pure Python (no torch): the launcher's parent process and rank 0 under torchrun share it, and tests
feed it by hand. Ranks log at the same steps (their loops are in lockstep: same steps per epoch,
same log points, one agreed stop step), so windows and epochs match one to one.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Callable, Optional, Sequence

from workbench.engine.events import (
    EpochStats,
    Event,
    MemorySnapshot,
    RankStepStats,
    RunEnded,
    RunStarted,
    StepStats,
    per_clock_second,
)

# Every figure of a snapshot (the fields that are not the reasons a figure is missing).
_MEMORY_FIGURES = tuple(
    field.name for field in dataclasses.fields(MemorySnapshot) if not field.name.endswith("_reason")
)


def highest_memory(snapshots: Sequence[MemorySnapshot]) -> MemorySnapshot:
    """Each figure the highest rank's (the GPU closest to running out); reasons from the first rank."""
    first = snapshots[0]
    values = {}
    for name in _MEMORY_FIGURES:
        readings = [getattr(snapshot, name) for snapshot in snapshots if getattr(snapshot, name) is not None]
        values[name] = max(readings) if readings else None
    return dataclasses.replace(first, **values)


def combine_steps(per_rank: Sequence[StepStats], previous_samples: Sequence[int]) -> StepStats:
    """One window over all ranks (``per_rank`` by rank; ``previous_samples``: each rank's samples_seen at
    its previous window). Samples add up; the window's wall time is the slowest rank's."""
    steps = {stats.step for stats in per_rank}
    if len(steps) != 1:
        raise ValueError(f"the ranks logged different steps: {sorted(steps)}")
    first = per_rank[0]
    window_samples = [stats.samples_seen - before for stats, before in zip(per_rank, previous_samples)]
    window_seconds = max(stats.window_seconds for stats in per_rank)
    return dataclasses.replace(
        first,
        samples_seen=sum(stats.samples_seen for stats in per_rank),
        loss=sum(stats.loss for stats in per_rank) / len(per_rank),  # equal micro-batches on every rank
        images_per_sec=per_clock_second(sum(window_samples), window_seconds),
        data_wait_seconds=max(stats.data_wait_seconds for stats in per_rank),
        device_span_seconds=max(stats.device_span_seconds for stats in per_rank),
        window_seconds=window_seconds,
        elapsed_seconds=max(stats.elapsed_seconds for stats in per_rank),
        memory=highest_memory([stats.memory for stats in per_rank]),
        ranks=tuple(
            RankStepStats(
                rank=rank,
                samples=samples,
                images_per_sec=stats.images_per_sec,
                data_wait_seconds=stats.data_wait_seconds,
                device_span_seconds=stats.device_span_seconds,
                window_seconds=stats.window_seconds,
                memory=stats.memory,
            )
            for rank, (stats, samples) in enumerate(zip(per_rank, window_samples))
        ),
    )


def combine_epochs(per_rank: Sequence[EpochStats]) -> EpochStats:
    """One epoch over all ranks: training figures over every rank, test figures rank 0's (it evaluates)."""
    first = per_rank[0]
    train_seconds = max(stats.train_seconds for stats in per_rank)
    rates = [(stats.images_per_sec, stats.train_seconds) for stats in per_rank]
    # A rank whose epoch lasted 0 s on its clock read no rate, so its images, and the sum, are not known.
    known = all(rate is not None for rate, _ in rates)
    samples = sum(rate * seconds for rate, seconds in rates if rate is not None)
    return dataclasses.replace(
        first,
        train_loss=sum(stats.train_loss for stats in per_rank) / len(per_rank),
        train_accuracy=sum(stats.train_accuracy for stats in per_rank) / len(per_rank),  # equal shards
        images_per_sec=per_clock_second(samples, train_seconds) if known else None,
        data_wait_fraction=_highest_known([stats.data_wait_fraction for stats in per_rank]),
        train_seconds=train_seconds,
        memory=highest_memory([stats.memory for stats in per_rank]),
        rank_memory=tuple(stats.memory for stats in per_rank),
    )


def _highest_known(values: Sequence[Optional[float]]) -> Optional[float]:
    """The highest rank's figure; None where a rank read none (its epoch lasted 0 s on its clock): it may be the
    highest."""
    return None if any(value is None for value in values) else max(value for value in values if value is not None)


class RankEventMerger:
    """Takes each rank's events as they come; gives back the run's events, in rank 0's order.

    Rank 0's other events (RunStarted, status lines, profiler samples) pass through; a StepStats or
    EpochStats waits until every rank's counterpart has come and leaves as their combination;
    RunEnded is the caller's business (it builds the run's own from the merged events). The other
    ranks' own events of those kinds are dropped: rank 0 speaks for the run.
    """

    def __init__(self, world_size: int, started: Optional[Callable[[RunStarted], RunStarted]] = None):
        self.world_size = world_size
        self._started = started or (lambda event: event)
        self._order: deque = deque()  # rank 0's events and the keys of the windows/epochs it waits for
        self._steps: dict[int, dict[int, StepStats]] = {}
        self._epochs: dict[int, dict[int, EpochStats]] = {}
        self._samples = [0] * world_size  # each rank's samples_seen at its last merged window

    def add(self, rank: int, event: Event) -> list[Event]:
        """Take one event of ``rank``; return the merged events now complete, oldest first."""
        if isinstance(event, StepStats):
            self._steps.setdefault(event.step, {})[rank] = event
            if rank == 0:
                self._order.append(("step", event.step))
        elif isinstance(event, EpochStats):
            self._epochs.setdefault(event.epoch, {})[rank] = event
            if rank == 0:
                self._order.append(("epoch", event.epoch))
        elif rank == 0 and isinstance(event, RunStarted):
            self._order.append(("event", self._started(event)))
        elif rank == 0 and not isinstance(event, RunEnded):  # its status lines, profiler samples, …
            self._order.append(("event", event))
        return self._release()

    def _release(self) -> list[Event]:
        released: list[Event] = []
        while self._order:
            kind, item = self._order[0]
            if kind == "event":
                released.append(item)
            elif kind == "step":
                step_ranks = self._steps[item]
                if len(step_ranks) < self.world_size:
                    break
                per_rank = [step_ranks[rank] for rank in range(self.world_size)]
                released.append(combine_steps(per_rank, self._samples))
                self._samples = [stats.samples_seen for stats in per_rank]
                del self._steps[item]
            else:
                epoch_ranks = self._epochs[item]
                if len(epoch_ranks) < self.world_size:
                    break
                released.append(combine_epochs([epoch_ranks[rank] for rank in range(self.world_size)]))
                del self._epochs[item]
            self._order.popleft()
        return released
